#!/usr/bin/env python3
"""Generates the Python client with openapi-python-client and judges what the generator said.

    generate.py DOCUMENT OUTPUT_DIR ALLOW_LIST

The generator is driven through its library entry point (the one its CLI calls, with the CLI's
defaults), so that each warning arrives as one structured record rather than as coloured text.
Every warning is printed in full. Each is then reduced to one line, its header and the first
line of its detail, which ALLOW_LIST must hold (as `<line>  # <why>`). Exit status: 0 when the
client was generated and every warning is allowed; 1 otherwise.
"""

import re
import sys
from pathlib import Path

from openapi_python_client import generate
from openapi_python_client.config import Config, ConfigFile, MetaType
from openapi_python_client.parser.errors import ErrorLevel

# 0.29 prints a response's status code as the repr of its UntrustedString wrapper, an address
# that changes on every run; the line keeps its place with a fixed word.
ADDRESS = re.compile(r"<openapi_python_client\.[\w.]+ object at 0x[0-9a-f]+>")


def one_line(error) -> str:
    header = " ".join((error.header or "").split())
    detail = (error.detail or "").strip().splitlines()
    line = f"{header} | {' '.join(detail[0].split())}" if detail else header
    return ADDRESS.sub("<status>", line)


def read_allow_list(path: Path) -> tuple[dict[str, str], list[str]]:
    allowed, problems = {}, []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        warning, sep, why = text.partition("  # ")
        if not sep or not why.strip():
            problems.append(f"{path.name}:{number}: no `  # why` justification: {text}")
            continue
        allowed[warning.strip()] = why.strip()
    return allowed, problems


def main() -> int:
    document, output, allow_path = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    # Downloads are files: an export (CSV, JSON Lines or XLSX) and an image are read as bytes,
    # the way an integrator configures the generator for them (it types only JSON, text/* and
    # application/octet-stream bodies, and the first of several by their order).
    binary = "application/octet-stream"
    downloads = [
        "text/csv",
        "application/x-ndjson",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "image/jpeg",
        "image/png",
        "image/gif",
        "image/webp",
        "image/avif",
    ]
    settings = ConfigFile(content_type_overrides={media: binary for media in downloads})
    config = Config.from_sources(settings, MetaType.POETRY, document, "utf-8", False, output_path=output)
    errors = list(generate(config=config))

    failed = False
    for error in errors:
        level = "error" if error.level == ErrorLevel.ERROR else "warning"
        print(f"--- generator {level}: {(error.header or '').strip()}")
        if error.detail:
            print(error.detail.strip())
        data = getattr(error, "data", None)
        if data is not None:
            # The part of the document concerned, cut short: a response lists every header.
            lines = data.model_dump_json(indent=2, exclude_unset=True, by_alias=True).splitlines()
            print("\n".join(lines[:12] + (["  …"] if len(lines) > 12 else [])))
    hard = [e for e in errors if e.level == ErrorLevel.ERROR]
    for error in hard:
        print(f"clients: FAIL: generator error: {one_line(error)}")
        failed = True
    if not (output / "pyproject.toml").is_file():
        print(f"clients: FAIL: openapi-python-client wrote no project to {output}")
        failed = True

    allowed, problems = read_allow_list(allow_path)
    for problem in problems:
        print(f"clients: FAIL: {problem}")
        failed = True
    warnings = sorted({one_line(e) for e in errors if e.level != ErrorLevel.ERROR})
    print(f"clients: {len(warnings)} distinct generator warnings:")
    for line in warnings:
        if line in allowed:
            print(f"  allowed: {line}  # {allowed[line]}")
        else:
            print(f"  NOT ALLOWED: {line}")
            failed = True
    for line in sorted(set(allowed) - set(warnings)):
        print(f"  note: allowed but no longer produced (remove it from {allow_path.name}): {line}")
    unlisted = [w for w in warnings if w not in allowed]
    if unlisted:
        print(f"clients: FAIL: {len(unlisted)} generator warnings are not in {allow_path.name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
