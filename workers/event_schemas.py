"""The JSON Schema of every family's body, one file each in docs/schemas/ beside the
AsyncAPI document: `python -m workers.event_schemas` (`--check`: fail when a file
differs or is missing, or a file is there for no family).

An event's `ce-dataschema` header names its file (contracts.shared.cloudevents), so a
CloudEvents consumer finds the body's schema from the event alone. Written from the
same declarations as the AsyncAPI document, so the two cannot disagree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from contracts.families import FAMILIES
from contracts.shared.cloudevents import DEFAULT_SCHEMA_BASE, dataschema, schema_file
from contracts.shared.families import MessageFamily

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "docs" / "schemas"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema(family: MessageFamily) -> dict[str, Any]:
    """The body's JSON Schema, with its `$id` (the default dataschema URL), version and
    subject pattern."""
    body = family.body.model_json_schema(mode="validation")
    return {"$schema": DIALECT, "$id": dataschema(family, DEFAULT_SCHEMA_BASE),
            "x-family": family.name, "x-subject": family.subject,
            "x-version": family.version, **body}


def rendered() -> dict[str, str]:
    """File name -> its text, for every family."""
    return {schema_file(f): json.dumps(schema(f), indent=2, sort_keys=True) + "\n"
            for f in FAMILIES}


def stale() -> list[str]:
    want = rendered()
    have = {p.name: p.read_text() for p in SCHEMA_DIR.glob("*.json")} \
        if SCHEMA_DIR.is_dir() else {}
    return sorted(n for n in want.keys() | have.keys() if want.get(n) != have.get(n))


def main() -> None:
    if "--check" in sys.argv:
        if bad := stale():
            sys.exit(f"{SCHEMA_DIR} is stale ({', '.join(bad)}): run "
                     "python -m workers.event_schemas")
        return
    SCHEMA_DIR.mkdir(exist_ok=True)
    want = rendered()
    for old in SCHEMA_DIR.glob("*.json"):
        if old.name not in want:
            old.unlink()
    for name, text in want.items():
        (SCHEMA_DIR / name).write_text(text)
    print(f"wrote {len(want)} schemas to {SCHEMA_DIR}")


if __name__ == "__main__":
    main()
