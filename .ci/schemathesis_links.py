"""The document's links that a schemathesis run walked (.ci/schemathesis): reads the OpenAPI
document and the run's NDJSON events, prints "<walked> <declared>", and names each link not
walked on stderr. Links schemathesis inferred from the answers are not counted."""

import json, sys
doc = json.load(open(sys.argv[1]))
declared = set()
for path, item in doc["paths"].items():
    for method, op in item.items():
        if not isinstance(op, dict):
            continue
        for status, response in op.get("responses", {}).items():
            if "$ref" in response:
                response = doc["components"]["responses"][response["$ref"].split("/")[-1]]
            for name in response.get("links") or {}:
                declared.add(f"{method.upper()} {path} -> [{status}] {name}")
walked = set()
for line in open(sys.argv[2]):
    recorder = json.loads(line).get("ScenarioFinished", {}).get("recorder", {})
    for case in recorder.get("cases", {}).values():
        transition = case.get("transition") or {}
        if not transition.get("is_inferred", True):
            walked.add(" -> ".join(transition["id"].split(" -> ")[:2]))
covered = declared & walked
for link in sorted(declared - covered):
    print(f"  not walked: {link}", file=sys.stderr)
print(f"{len(covered)} {len(declared)}")
