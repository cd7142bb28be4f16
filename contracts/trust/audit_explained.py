"""The later changes a record shows, each held to the chained record that explains it.

A decision's `superseded_by`, a plan's `rolled_back` status and a correction's `status`
are written after the record they change, so no digest covers them. Each is explained
by a chained correction record instead: a decision is superseded only as an APPLIED
revert's end lists it (with the same replacement), a plan rolled back only as the
APPLIED end of the correction its `rolled_back_by` names lists it, and a correction's
status is that of the last of its chained events (an end, once it ended). Conversely an
APPLIED end's supersessions must all be there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts.trust.audit_findings import Finding, Line, finding
from contracts.trust.audit_signatures import event_of
from contracts.trust.chain import (
    CORRECTION_END,
    CORRECTION_REQUEST,
    CORRECTION_RETRY,
    DECISION,
    TERMINAL,
    Link,
)

Results = Mapping[str, Any]
"""correction_id -> the results its chained APPLIED end lists (its digest checked)."""


def applied_results(lines: Sequence[Line], sound: set[int]) -> dict[str, Results]:
    """The results of every APPLIED end among `lines` whose digest holds (`sound`: the
    id() of those lines)."""
    found: dict[str, Results] = {}
    for line in lines:
        if line.get("kind") != CORRECTION_END or id(line) not in sound:
            continue
        event = event_of(line) or {}
        if event.get("to_status") == "applied":
            found[str(line.get("record_id"))] = line["record"]
    return found


def supersessions(lines: Sequence[Line], applied: Mapping[str, Results]) -> list[Finding]:
    decisions = {str(ln.get("record_id")): ln for ln in lines if ln.get("kind") == DECISION}
    found = []
    for decision_id, line in decisions.items():
        by = line["record"].get("superseded_by")
        if by is not None and not any(
                r.get("new_decision_id") == by and decision_id in (r.get("superseded_ids") or [])
                for r in applied.values()):
            found.append(finding("unexplained", line, f"superseded by {str(by)[:40]}, but no "
                                 "applied correction in the chain lists it"))
    for cid, r in applied.items():
        for decision_id in r.get("superseded_ids") or []:
            marked = decisions.get(decision_id)
            if marked is not None and marked["record"].get("superseded_by") != r.get(
                    "new_decision_id"):
                found.append(finding("unexplained", marked, f"correction {cid} superseded it "
                                     f"by {r.get('new_decision_id')}, but it does not say so"))
    return found


def rollback(plan_id: str, entry: Mapping[str, Any], applied: Mapping[str, Results]
             ) -> list[Finding]:
    if entry.get("status") != "rolled_back":
        return []
    by = str(entry.get("rolled_back_by"))
    if plan_id in (applied.get(by, {}).get("child_plans_rolled_back") or []):
        return []
    return [Finding("unexplained", plan_id, None, "plan", plan_id,
                    f"rolled back by {by[:40]}, but no applied correction in the export "
                    "lists it among the child plans it rolled back")]


def statuses(lines: Sequence[Line]) -> list[Finding]:
    """Each correction's status against the last of its chained events."""
    last: dict[str, tuple[int, Line]] = {}
    for line in lines:
        link = Link.of(line.get("chain"))
        if link is not None and line.get("kind") in (CORRECTION_REQUEST, CORRECTION_RETRY,
                                                     CORRECTION_END):
            cid = str(line.get("record_id"))
            if cid not in last or link.seq > last[cid][0]:
                last[cid] = (link.seq, line)
    found = []
    for _, line in last.values():
        status = line["record"].get("status")
        chained = (event_of(line) or {}).get("to_status")
        ended = line.get("kind") == CORRECTION_END
        if (status in TERMINAL or ended) and status != chained:
            found.append(finding("unexplained", line, f"its status is {str(status)[:20]}, "
                                 f"but its last chained event ends {chained}"))
    return found
