"""Generate the AsyncAPI document from the worker app: `python -m workers.asyncapi`.

The committed copy (docs/asyncapi.json) is checked against this output by a test, so
the published wire contract cannot drift from the code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bootstrap.settings import Settings
from workers.app import build_app

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "asyncapi.json"


def document() -> dict[str, Any]:
    # Fixed server URL so the document does not depend on the machine it was built on.
    app = build_app(Settings(nats_url="nats://localhost:4222"), for_docs=True)
    spec: dict[str, Any] = app.schema.to_specification().to_jsonable()
    return spec


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    if "--check" in sys.argv:
        if DOC_PATH.read_text() != render():
            sys.exit(f"{DOC_PATH} is stale: run python -m workers.asyncapi")
        return
    DOC_PATH.write_text(render())
    print(f"wrote {DOC_PATH}")


if __name__ == "__main__":
    main()
