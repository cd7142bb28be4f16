"""Verifying an audit export (contracts.trust.audit_lines): each plan's chain, each
record's signature, and that every later change a record shows is one a chained record
explains. Pure: `agents audit verify` runs it on the lines it reads from the store, and
scripts/verify-audit does the same from a file with no project code.

What is broken, by rule (the first, in chain order, is "the first broken link"):

    changed        a record's content does not match its digest (a field changed)
    removed        no record at a seq the chain passes, or fewer records than the plan's
                   counter holds (removed from the end)
    reordered      a record's prev is not the digest of the record before it, or two
                   records claim one seq
    unchained      a record that should be chained carries no link
    bad_signature, unknown_key, key_revoked, wrong_principal
                   the record's signature, checked again (contracts.trust.audit_signatures)
    unexplained    a decision superseded, a plan rolled back, a correction's status that
                   no chained correction record explains (or one not carried out)

A record accepted unsigned (development) names no principal and is reported as
unverified, not broken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts.trust import audit_explained as explained
from contracts.trust.audit_findings import Finding, Line, Report, finding
from contracts.trust.audit_signatures import (
    LEDGER,
    SIGNED,
    UNCHECKED,
    UNSIGNED,
    Broken,
    KeyBook,
    check,
    event_of,
)
from contracts.trust.chain import (
    CORRECTION_END,
    CORRECTION_REQUEST,
    CORRECTION_RETRY,
    DECISION,
    VIOLATION_REPORT,
    VIOLATION_RESOLUTION,
    Link,
    correction_content,
    decision_content,
    link_digest,
    violation_content,
)

RULES = ("removed", "reordered", "bad_signature", "unknown_key", "key_revoked",
         "wrong_principal", "changed", "unchained", "unexplained")
"""At one seq, the more specific finding first: a flipped signature byte also changes the
record's content, and is named `bad_signature`."""


def content_of(line: Line) -> dict[str, Any] | None:
    """The content a line's record has now (None: the event it is about is gone)."""
    kind, record = line.get("kind"), line.get("record") or {}
    if kind == DECISION:
        return decision_content(record)
    if kind in (CORRECTION_REQUEST, CORRECTION_RETRY, CORRECTION_END):
        event = event_of(line)
        return correction_content(record, event) if event is not None else None
    if kind in (VIOLATION_REPORT, VIOLATION_RESOLUTION):
        return violation_content(record, str(kind))
    return None


def digest_holds(line: Line, link: Link) -> bool:
    content = content_of(line)
    return content is not None and link.digest == link_digest(
        str(line.get("plan_id")), seq=link.seq, prev=link.prev, kind=str(line.get("kind")),
        record_id=str(line.get("record_id")), content=content)


def check_chain(plan_id: str, entry: Mapping[str, Any], lines: Sequence[Line]
                ) -> list[Finding]:
    """One plan's links: dense seqs from `from_seq`, each prev the digest before it,
    each digest its record's content, and the end where the plan's counter says."""
    found: list[Finding] = []
    expected = int(entry.get("from_seq") or 0)
    prev: str | None = None
    last: Line | None = None
    for line in lines:
        link = Link.of(line.get("chain"))
        if link is None:
            found.append(finding("unchained", line, "the record carries no chain link "
                                  "(written before the chain, or its link removed)"))
            continue
        found += _place(line, link, expected, prev, first=last is None)
        expected, prev, last = link.seq + 1, link.digest, line
        if not digest_holds(line, link):
            found.append(finding("changed", line, "its content does not match its "
                                  "digest: a field was changed after it was written"))
    found += _end(plan_id, entry, expected, prev, last)
    return found


def _place(line: Line, link: Link, expected: int, prev: str | None, *, first: bool
           ) -> list[Finding]:
    if link.seq > expected:
        return [finding("removed", line, f"no record at seq {expected}"
                         + (f" to {link.seq - 1}" if link.seq - 1 > expected else "")
                         + " (removed)")]
    if link.seq < expected:
        return [finding("reordered", line, f"a second record at seq {link.seq}")]
    if (not first or expected == 0) and link.prev != prev:
        return [finding("reordered", line, "its prev is not the digest of the record "
                         f"before it (seq {link.seq - 1}): moved or reordered")]
    return []


def _end(plan_id: str, entry: Mapping[str, Any], expected: int, prev: str | None,
         last: Line | None) -> list[Finding]:
    length, head = entry.get("chain_length"), entry.get("chain_head")
    if length is None and last is None:
        return []
    if length == expected and head == prev:
        return []
    if isinstance(length, int) and length > expected:
        message = (f"the plan's counter holds {length} records, the chain found ends at "
                   f"seq {expected - 1}: the last {length - expected} removed")
        return [Finding("removed", plan_id, expected, "plan", plan_id, message)]
    return [Finding("reordered", plan_id, expected, "plan", plan_id,
                    f"the plan's counter (length {length}, head {str(head)[:20]}…) does not "
                    f"end where the chain found does (length {expected})")]


def check_signatures(lines: Sequence[Line], keys: KeyBook, report: Report) -> None:
    for line in lines:
        got = check(line, keys)
        name = f"{line.get('kind')} {line.get('record_id')}"
        if isinstance(got, Broken):
            report.findings.append(finding(got.rule, line, got.message))
        elif got == SIGNED:
            report.signed += 1
        elif got == LEDGER:
            report.ledger += 1
        elif got == UNSIGNED:
            report.unsigned.append(name)
        elif got == UNCHECKED:
            report.unchecked.append(name)


def verify_export(head: Mapping[str, Any], lines: Sequence[Line]) -> Report:
    """Everything the module's docstring lists, for every plan the header names."""
    given = head.get("plans")
    plans: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    keys = KeyBook(head.get("principals"))
    report = Report(plans=len(plans), keys_checked=bool(keys))
    own = [ln for ln in lines if not ln.get("witness")]
    report.records = len(own)
    by_plan: dict[str, list[Line]] = {p: [] for p in plans}
    for line in own:
        by_plan.setdefault(str(line.get("plan_id")), []).append(line)
    for plan_id, plan_lines in by_plan.items():
        report.findings += check_chain(plan_id, plans.get(plan_id) or {}, plan_lines)
    check_signatures(own, keys, report)
    report.erased = sorted({f"{ln.get('kind')} {ln.get('record_id')}" for ln in own
                            if isinstance((ln.get("record") or {}).get("erased"), Mapping)})
    sound = {id(ln) for ln in lines
             if (link := Link.of(ln.get("chain"))) is not None and digest_holds(ln, link)}
    applied = explained.applied_results(lines, sound)
    for plan_id, plan_lines in by_plan.items():
        mine = explained.applied_results(plan_lines, sound)
        report.findings += explained.supersessions(plan_lines, mine)
        report.findings += explained.rollback(plan_id, plans.get(plan_id) or {}, applied)
        report.findings += explained.statuses(plan_lines)
    rank = {p: i for i, p in enumerate(by_plan)}
    report.findings.sort(key=lambda f: (rank.get(f.plan_id, len(rank)),
                                        f.seq if f.seq is not None else 1 << 62,
                                        RULES.index(f.rule) if f.rule in RULES else 99))
    return report
