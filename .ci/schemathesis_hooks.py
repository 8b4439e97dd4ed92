"""Hooks for .ci/schemathesis: a share of the requests it generates names what the test server
can serve (the simulator's post, the library's entry, the simulator's creator), so that those
calls succeed and the stateful phase walks on along the document's links from their answers.
The other requests keep their generated values, so every field is still fuzzed.
"""

import schemathesis

# The post the script collects before the run (12 comments on cova-sim), in the library.
LIBRARY_REF = "tiktok:7000000000000000012"
# cova-sim's TikTok posts 7000000000000000001 to …040 have 1 to 40 comments: a request names one
# of them, so that some are collected anew (202) and some again within minutes (200).
SIM_POSTS = 40
# The creator the script registers on cova-sim (the document's example).
SIM_CREATOR = "https://www.tiktok.com/@brand"


def _label(ctx):
    return f"{ctx.operation.method.upper()} {ctx.operation.path}"


def _sim_post(value):
    """One of the simulator's small posts, the same for the same value."""
    n = sum(map(ord, repr(value))) % SIM_POSTS + 1
    return f"https://www.tiktok.com/@someone/video/{7000000000000000000 + n}"


def _half(value):
    """True for about half of the generated values, the same for the same value."""
    return len(repr(value)) % 2 == 0


@schemathesis.hook
def map_body(ctx, body):
    if not isinstance(body, dict):
        return body
    label = _label(ctx)
    if label == "POST /api/v1/analyze" and isinstance(body.get("url"), str) and _half(body["url"]):
        body["url"] = _sim_post(body["url"])
    elif label == "POST /api/v1/analyze/batch" and isinstance(body.get("urls"), list) and _half(body["urls"]):
        body["urls"] = [_sim_post(url) for url in body["urls"][:3]] or [_sim_post(body["urls"])]
    elif label == "POST /api/v1/creators" and isinstance(body.get("url"), str) and _half(body["url"]):
        body["url"] = SIM_CREATOR
    elif label == "POST /api/v1/ai/quote" and isinstance(body.get("ref"), str) and _half(body["ref"]):
        body["ref"] = LIBRARY_REF
    return body
