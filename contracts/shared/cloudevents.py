"""CloudEvents 1.0 attributes of an event, as NATS headers (binary content mode).

Every event the ledger publishes carries its CloudEvents attributes in `ce-*` headers
and keeps its body as the contract says, so a consumer that knows CloudEvents (an SDK,
a router, a webhook receiver) reads type, source, subject, time and schema without
knowing the ledger's subjects, and an existing reader of the body sees no change.

The attributes come from the family's declaration (contracts.shared.families):
`ce-type` is `io.decision-ledger.<event_type>.v<version>`, `ce-subject` fills the
family's `about` template, `ce-dataschema` names the JSON Schema written beside the
AsyncAPI document (docs/schemas/<family>.json), and `ce-id` is the Nats-Msg-Id, so a
republished copy is the same event to a CloudEvents reader as it is to JetStream.
Values are percent-encoded as the NATS binding says (space, `"`, `%` and anything
outside printable ASCII). Pure: no I/O, the time is given.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from contracts.shared.families import MessageFamily

SPECVERSION = "1.0"
TYPE_PREFIX = "io.decision-ledger."
SOURCE_PREFIX = "/decision-ledger/"
"""`ce-source` is this and the family's stream namespace: `/decision-ledger/corrections`."""
DEFAULT_SCHEMA_BASE = "http://127.0.0.1:8090/schemas/"
"""Where the schemas are served when CLOUDEVENTS_SCHEMA_BASE is unset: the console that
`agents up` starts (console/routes/schemas.py serves docs/schemas/)."""
CONTENT_TYPE = "application/json"
ABOUT_MAX = 200
"""Characters of `ce-subject` kept: a body field could be long."""
PREFIX = "ce-"
ATTRIBUTES = ("specversion", "id", "source", "type", "subject", "time", "datacontenttype",
              "dataschema")


def schema_file(family: MessageFamily) -> str:
    """The file name of the family's body schema under docs/schemas/."""
    return f"{family.name}.json"


def dataschema(family: MessageFamily, base: str = DEFAULT_SCHEMA_BASE) -> str:
    return base.rstrip("/") + "/" + schema_file(family)


def subject_tokens(family: MessageFamily, subject: str) -> dict[str, str] | None:
    """The values of the family's `{token}`s in a concrete subject, or None if the
    subject is not one of the family's."""
    pattern, parts = family.subject.split("."), subject.split(".")
    if len(pattern) != len(parts):
        return None
    out: dict[str, str] = {}
    for p, s in zip(pattern, parts, strict=True):
        if p.startswith("{"):
            out[p[1:-1]] = s
        elif p != s:
            return None
    return out


def event_type(family: MessageFamily, tokens: dict[str, str]) -> str:
    """`io.decision-ledger.correction.applied.v1` for a correction's APPLIED event."""
    stem = family.event_type or family.name
    fields = _fields(stem)
    if any(f not in tokens for f in fields):
        stem = family.name
    else:
        stem = stem.format(**{f: tokens[f] for f in fields})
    return f"{TYPE_PREFIX}{stem}.v{family.version}"


def about(family: MessageFamily, tokens: dict[str, str], payload: bytes,
          known: Mapping[str, str] | None = None) -> str | None:
    """The event's subject: the `about` template from the subject's tokens, else from
    `known` (fields its producer has at hand), else the body's fields; the plan alone
    when a field is missing; None when not even that."""
    fields = _fields(family.about)
    values: dict[str, str] = {f: tokens[f] for f in fields if f in tokens}
    if known:
        values.update((f, known[f]) for f in fields if f not in values and f in known)
    missing = [f for f in fields if f not in values]
    if missing:
        body = _body(payload)
        for f in missing:
            value = _lookup(body, f)
            if value is not None:
                values[f] = value
    if all(f in values for f in fields):
        return _fill(family.about, values)[:ABOUT_MAX]
    plan = tokens.get("plan_id")
    return f"plan/{plan}" if plan else None


def headers(family: MessageFamily, subject: str, msg_id: str, payload: bytes, at: datetime, *,
            schema_base: str = DEFAULT_SCHEMA_BASE,
            known: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `ce-*` headers of one event, or {} when `subject` is not the family's.
    `known`: values of the `about` fields its producer has at hand, so the body is not
    read again for them (the recorder's persisted events: one per decision)."""
    tokens = subject_tokens(family, subject)
    if tokens is None or family.stream is None:
        return {}
    out = dict(_fixed(family.stream.namespace, event_type(family, tokens),
                      dataschema(family, schema_base)))
    for name, value in (("id", msg_id), ("subject", about(family, tokens, payload, known)),
                        ("time", rfc3339(at))):
        if value:
            out[PREFIX + name] = encode(value)
    return out


@lru_cache(maxsize=1024)
def _fixed(namespace: str, type_: str, schema: str) -> tuple[tuple[str, str], ...]:
    """The attributes every event of a family and type has alike, encoded: made once,
    as they would otherwise cost as much as the rest of an event's headers (one event
    per recorded decision). A type stem may hold a subject token: hence the bound."""
    attributes = {"specversion": SPECVERSION, "source": SOURCE_PREFIX + namespace,
                  "type": type_, "datacontenttype": CONTENT_TYPE, "dataschema": schema}
    return tuple((PREFIX + k, encode(v)) for k, v in attributes.items() if v)


@lru_cache(maxsize=64)
def rfc3339(at: datetime) -> str:
    """UTC with milliseconds and a `Z`: `2026-01-02T03:04:05.678Z` (a naive time is UTC).
    Cached: the events published together share their time, written once."""
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


_VERBATIM = re.compile(r"[!#$&-~]*")
"""Printable ASCII but space, `"` and `%`: what `encode` keeps as it is."""


def encode(value: str) -> str:
    """Percent-encoding as the NATS binding requires: space, `"`, `%`, and every
    character outside printable ASCII, as UTF-8 bytes in upper-case hex."""
    if _VERBATIM.fullmatch(value):  # most values: nothing to escape, no loop in Python
        return value
    out: list[str] = []
    for ch in value:
        if "!" <= ch <= "~" and ch not in '"%':
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "replace"))
    return "".join(out)


@lru_cache(maxsize=256)
def _fields(template: str) -> tuple[str, ...]:
    """The `{field}`s of a template (a family's constant: parsed once, not per event)."""
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


def _fill(template: str, values: dict[str, str]) -> str:
    out = template
    for name, value in values.items():
        out = out.replace("{" + name + "}", value)
    return out


def _body(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        return None


def _lookup(body: Any, path: str) -> str | None:
    """A string or number at a dotted path of a JSON body, else None."""
    for key in path.split("."):
        if not isinstance(body, dict):
            return None
        body = body.get(key)
    if isinstance(body, bool) or not isinstance(body, str | int):
        return None
    return str(body)
