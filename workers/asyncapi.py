"""The AsyncAPI 3 document, written from the declared message families:
`python -m workers.asyncapi` (`--check`: fail when docs/asyncapi.json differs).

Each family is a channel (its subject pattern, tokens as parameters), an operation
(`receive` for what the workers consume, `send` for what they announce; a request-reply
family with its reply) and a message whose payload is the body model's JSON Schema.
Written from the same declaration the workers, the streams and the permissions come
from, so the published contract cannot drift from the code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from contracts.families import FAMILIES
from contracts.shared.families import TOKENS, Direction, MessageFamily

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "asyncapi.json"
TITLE = "Decision ledger"
VERSION = "0.1.0"
DESCRIPTION = "Agents record decisions; operators correct them; subscribers react."
SERVER = {"development": {"host": "localhost:4222", "protocol": "nats"}}
"""A fixed server, so the document does not depend on the machine it was built on."""
REF = "#/components/schemas/{model}"


def _message(key: str, body: type[BaseModel], family: MessageFamily) -> dict[str, Any]:
    message: dict[str, Any] = {"name": body.__name__, "title": key,
                               "payload": {"$ref": REF.format(model=body.__name__)}}
    if family.msg_id is not None and key == family.name:
        message["headers"] = {"type": "object", "properties": {"Nats-Msg-Id": {
            "type": "string", "description": family.msg_id}}}
    return message


def _description(family: MessageFamily) -> str:
    msg_id = f" Nats-Msg-Id: {family.msg_id}." if family.msg_id else ""
    stream = f" Stream {family.stream.name}." if family.stream else ""
    return family.description + msg_id + stream


def _channel(family: MessageFamily) -> dict[str, Any]:
    return {
        "address": family.subject, "description": _description(family),
        "parameters": {t: {"description": TOKENS[t]} for t in family.tokens},
        "messages": {family.body.__name__: {"$ref": f"#/components/messages/{family.name}"}},
        "servers": [{"$ref": "#/servers/development"}],
        "x-publishers": sorted({p.role.value for p in family.publishers}),
        "x-readers": sorted({f"{r.role.value} ({r.via.value})" for r in family.readers}),
    }


def _operation(family: MessageFamily) -> dict[str, Any]:
    channel = f"#/channels/{family.name}"
    operation: dict[str, Any] = {
        "action": "receive" if family.direction is Direction.INBOUND else "send",
        "channel": {"$ref": channel},
        "messages": [{"$ref": f"{channel}/messages/{family.body.__name__}"}]}
    if family.replies:
        reply = f"#/channels/{family.name}.reply"
        operation["reply"] = {"channel": {"$ref": reply}, "messages": [
            {"$ref": f"{reply}/messages/{r.__name__}"} for r in family.replies]}
    return operation


def _reply_channel(family: MessageFamily) -> dict[str, Any]:
    return {"address": None, "description": f"The reply to a request on {family.name}: "
            "the requester's inbox.",
            "messages": {r.__name__: {"$ref": f"#/components/messages/{family.name}.reply:"
                                              f"{r.__name__}"} for r in family.replies}}


def document() -> dict[str, Any]:
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    models: list[type[BaseModel]] = []
    for f in FAMILIES:
        channels[f.name] = _channel(f)
        operations[f.name] = _operation(f)
        messages[f.name] = _message(f.name, f.body, f)
        models.append(f.body)
        if f.replies:
            channels[f"{f.name}.reply"] = _reply_channel(f)
            for r in f.replies:
                key = f"{f.name}.reply:{r.__name__}"
                messages[key] = _message(key, r, f)
                models.append(r)
    unique = list(dict.fromkeys(models))
    _, schemas = models_json_schema([(m, "validation") for m in unique], ref_template=REF)
    return {
        "asyncapi": "3.0.0", "defaultContentType": "application/json",
        "info": {"title": TITLE, "version": VERSION, "description": DESCRIPTION},
        "servers": SERVER, "channels": channels, "operations": operations,
        "components": {"messages": messages, "schemas": schemas.get("$defs", {})},
    }


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
