"""An audit export's lines, built from the stored records (docs/security.md, the audit).

An export is JSON Lines: a header, then one line per chained record in chain order:

    {"format": "decision-ledger-audit/v1", "exported_at": ..., "parameters": {...},
     "principals": [{"name", "role", "keys": [{"public", "valid_from", "valid_until",
                                                "revoked_at"}]}],
     "plans": {plan_id: {"chain_length", "chain_head", "status", "rolled_back_by",
                         "from_seq"}}}
    {"plan_id", "kind", "record_id", "event_id"?, "chain": {seq, prev, digest} | null,
     "record": {the stored record, plain JSON, without its links}, "witness"?: true}

A correction has one line per chained event (its request, retries and end: `event_id`
names the transition), a violation one for its report and one for its resolution. A
record without its link still gets a line (`chain: null`), so the verifier names it. A
`witness` line is a record of another plan that explains this plan's state (the
correction that rolled it back): checked for its own digest, not for its place.
`agents audit verify` checks these very lines (contracts.trust.audit), and so does the
standalone verifier (scripts/verify-audit), from the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contracts.trust.chain import (
    CORRECTION_REQUEST,
    DECISION,
    VIOLATION_REPORT,
    VIOLATION_RESOLUTION,
    correction_kind,
    plain,
)
from contracts.trust.principals import Directory

FORMAT = "decision-ledger-audit/v1"

Line = dict[str, Any]


def _record(doc: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = plain({k: v for k, v in doc.items() if k != "chain"})
    return record


def _line(plan_id: str, kind: str, record_id: str, link: object, record: dict[str, Any], *,
          event_id: str | None = None) -> Line:
    chain = None
    if isinstance(link, Mapping):
        chain = plain({k: link.get(k) for k in ("seq", "prev", "digest")})
    line: Line = {"plan_id": plan_id, "kind": kind, "record_id": record_id, "chain": chain,
                  "record": record}
    if event_id is not None:
        line["event_id"] = event_id
    return line


def decision_lines(doc: Mapping[str, Any]) -> list[Line]:
    """The decision's line, without its search tokens: derived from its chained fields,
    they are an index's input, not evidence (contracts.decisions.search)."""
    record = _record({k: v for k, v in doc.items() if k != "search_tokens"})
    return [_line(str(doc.get("plan_id")), DECISION, str(doc["_id"]), doc.get("chain"),
                  record)]


def correction_lines(doc: Mapping[str, Any]) -> list[Line]:
    """One line per chained event of the correction; an event that should be chained
    and is not (its link removed, or written before the chain) gets one without."""
    record = _record(doc)
    plan_id, cid = str(doc.get("plan_id")), str(doc["_id"])
    links = {str(link.get("event_id")): link for link in doc.get("chain") or []
             if isinstance(link, Mapping)}
    lines = []
    history = record.get("history")
    for event in history if isinstance(history, list) else []:
        if not isinstance(event, dict):
            continue
        kind = correction_kind(event)
        event_id = str(event.get("event_id"))
        link = links.pop(event_id, None)
        if kind is not None or link is not None:
            kind = str(link.get("kind")) if link is not None and link.get("kind") else kind
            lines.append(_line(plan_id, kind or CORRECTION_REQUEST, cid, link, record,
                               event_id=event_id))
    for event_id, link in links.items():  # a link whose event is gone from the history
        lines.append(_line(plan_id, str(link.get("kind") or CORRECTION_REQUEST), cid, link,
                           record, event_id=event_id))
    return lines


def violation_lines(doc: Mapping[str, Any]) -> list[Line]:
    record = _record(doc)
    plan_id, vid = str(doc.get("plan_id")), str(doc["_id"])
    links = {str(link.get("kind")): link for link in doc.get("chain") or []
             if isinstance(link, Mapping)}
    lines = [_line(plan_id, VIOLATION_REPORT, vid, links.get(VIOLATION_REPORT), record)]
    if record.get("resolved_at") is not None or VIOLATION_RESOLUTION in links:
        lines.append(_line(plan_id, VIOLATION_RESOLUTION, vid,
                           links.get(VIOLATION_RESOLUTION), record))
    return lines


def in_chain_order(lines: Iterable[Line], plans: Iterable[str]) -> list[Line]:
    """Plan by plan (in `plans`' order), each in chain order; records without a link
    after the chained ones."""
    rank = {p: i for i, p in enumerate(plans)}

    def key(line: Line) -> tuple[int, int, int, str, str]:
        chain = line.get("chain")
        seq = chain.get("seq") if isinstance(chain, Mapping) else None
        return (rank.get(line["plan_id"], len(rank)), 0 if isinstance(seq, int) else 1,
                seq if isinstance(seq, int) else 0, line["kind"], line["record_id"])

    return sorted(lines, key=key)


def plan_entry(counter: Mapping[str, Any] | None, from_seq: int = 0) -> dict[str, Any]:
    """What the header says of one plan: its counter's chain and its status."""
    c = counter or {}
    entry: dict[str, Any] = plain({
        "chain_length": c.get("chain_length"), "chain_head": c.get("chain_head"),
        "status": c.get("status"), "rolled_back_by": c.get("rolled_back_by"),
        "from_seq": from_seq})
    return entry


def principals_json(directory: Directory | None) -> list[dict[str, Any]]:
    """The principals' public keys, with their validity, for the header."""
    if directory is None:
        return []
    return [plain({"name": p.name, "role": p.role.value,
                   "keys": [k.model_dump(mode="python") for k in p.keys]})
            for p in directory.principals]


def header(*, exported_at: str, parameters: Mapping[str, Any],
           principals: list[dict[str, Any]], plans: Mapping[str, dict[str, Any]]) -> Line:
    return {"format": FORMAT, "exported_at": exported_at, "parameters": dict(parameters),
            "principals": principals, "plans": dict(plans)}


def line_time(line: Line) -> str | None:
    """When a line's record was written, as its record says (RFC 3339, milliseconds):
    what `--since` compares. A decision's created_at, a correction event's time, a
    violation's report or resolution time."""
    record, kind = line.get("record") or {}, line.get("kind")
    if kind == DECISION:
        at = record.get("created_at")
    elif kind == VIOLATION_REPORT:
        at = record.get("reported_at")
    elif kind == VIOLATION_RESOLUTION:
        at = record.get("resolved_at")
    else:
        history = record.get("history")
        at = next((e.get("at") for e in history if isinstance(e, Mapping)
                   and e.get("event_id") == line.get("event_id")), None) \
            if isinstance(history, list) else None
    return at if isinstance(at, str) else None


def since(lines: list[Line], cut: str) -> tuple[list[Line], int | None]:
    """A plan's lines (in chain order) from the first chained one written at or after
    `cut` (RFC 3339 UTC, milliseconds), and its seq; ([], None) if none is."""
    for i, line in enumerate(lines):
        at, chain = line_time(line), line.get("chain")
        if at is not None and at >= cut and isinstance(chain, Mapping):
            return lines[i:], int(chain.get("seq") or 0)
    return [], None
