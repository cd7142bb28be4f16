"""A record laid out ahead of its write (store.batch_insert.lay_out, done by the recorder
worker while the batch before is written) numbers and chains exactly as one laid out
in the write: same documents, same links, and a link that verifies from the document
read back."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from contracts.recording.families import RECORDED
from contracts.recording.message import Candidate, Invalid, read_message
from contracts.redaction.decisions import redact_decision
from contracts.redaction.rules import Rules
from contracts.shared.inbound import Inbound
from contracts.shared.roles import Role
from contracts.trust.chain import DECISION, Head, decision_content, plain
from contracts.trust.policy import TrustPolicy
from store.batch_insert import _number, laid_out
from store.sequences import Counter
from tests.factories import encode, plan_tree, subject
from tests.trust_support import directory, member

pytestmark = pytest.mark.unit

AGENT = member("billing-agent", Role.AGENT)


def _candidates() -> list[Candidate]:
    """A plan's decisions as the recorder collects them: most signed, one not, one with
    redacted free text."""
    trust = TrustPolicy(directory(AGENT)).for_family(RECORDED)
    assert trust is not None
    now = datetime.now(UTC)
    out = []
    tree = plan_tree(8, seed=11)
    tree[3] = {**tree[3], "rationale": "mail ops@example.com, key sk-abcdefghijklmnopqrstuvwx"}
    for seq, d in enumerate(tree):
        data, headers = AGENT.signed(RECORDED.name, subject(d), d["decision_id"], encode(d))
        msg = Inbound(subject=subject(d), headers=headers, data=data, stream_sequence=seq + 1,
                      delivered=1, stream_time=now)
        c = read_message(msg, now, max_skew=timedelta(minutes=5))
        assert isinstance(c, Candidate)
        decision, marks = redact_decision(Rules(), c.decision)
        c = replace(c, decision=decision, redactions=marks)
        if seq != 5:
            c = replace(c, identity=trust.identify(headers, subject(d), data, now))
        out.append(c)
    assert out[3].redactions and out[5].identity is None and out[0].identity is not None
    return out


def _numbered(candidates: list[Candidate], start: int = 4
              ) -> tuple[list[dict[str, Any]], Counter]:
    plan = candidates[0].decision.plan_id
    head = Head(2, "sha256:" + "ab" * 32)
    numbered, after = _number({plan: candidates}, {plan: Counter(start, head)})
    return [doc for _, _, doc in numbered], after[plan]


def test_laid_out_ahead_numbers_and_chains_as_laid_out_in_the_write() -> None:
    candidates = _candidates()
    laid = laid_out(candidates)
    assert all(c.laid is not None for c in laid)
    assert _numbered(laid) == _numbered(candidates)


def test_each_link_verifies_from_the_document_read_back() -> None:
    docs, after = _numbered(laid_out(_candidates()))
    head = Head(2, "sha256:" + "ab" * 32)
    for doc in docs:
        assert doc["sequence_number"] == head.length + 2
        link = head.link(doc["plan_id"], DECISION, doc["_id"], decision_content(plain(doc)))
        assert link.as_document() == doc["chain"]
        head = head.after(link)
    assert head.digest == after.chain.digest


def test_a_retried_numbering_starts_from_the_layout_untouched() -> None:
    laid = laid_out(_candidates())
    first, _ = _numbered(laid, start=4)
    again, _ = _numbered(laid, start=9)  # the transaction ran again, the counter moved
    assert [d["sequence_number"] for d in again] == list(range(9, 17))
    assert all("chain" not in c.laid.document and c.laid.document["sequence_number"] is None
               for c in laid if c.laid is not None)
    assert [d["_id"] for d in first] == [d["_id"] for d in again]
    assert laid_out(laid) == laid  # laid out once


def test_a_candidate_changed_after_its_layout_is_laid_out_again() -> None:
    laid = laid_out(_candidates())
    other = laid[1].decision.model_copy(update={"rationale": "changed after the layout"})
    changed = [laid[0], replace(laid[1], decision=other), *laid[2:]]
    assert changed[1].laid is not None and not changed[1].laid.fits(changed[1])
    docs, _ = _numbered(changed)
    assert docs[1]["rationale"] == "changed after the layout"
    assert _numbered(changed) == _numbered([replace(c, laid=None) for c in changed])


def _odd_batch() -> list[Candidate | Invalid]:
    """One batch as the recorder reads it: garbage, deep nesting and an impossible date
    among valid decisions with odd values (2,000 alternatives, a date in nanoseconds at
    +14:00, a tiny float, text outside the BMP)."""
    now = datetime.now(UTC)
    tree = plan_tree(6, seed=5)
    odd = now.astimezone(timezone(timedelta(hours=14)))
    tree[1] = {**tree[1], "alternatives_considered": [f"alt {i}" for i in range(2000)]}
    tree[2] = {**tree[2], "created_at": odd.strftime("%Y-%m-%dT%H:%M:%S.123456789+14:00")}
    tree[3] = {**tree[3], "confidence_score": 1e-7, "rationale": "\U0001f600 \u00e9t\u00e9"}
    garbage = [b"\xff\xfe{", b"[" * 5000,
               json.dumps({**tree[0], "created_at": "2026-13-45T99:99:99Z"}).encode()]
    sent = [(d, encode(d)) for d in tree[:4]] + [(tree[0], g) for g in garbage] \
        + [(d, encode(d)) for d in tree[4:]]
    out = []
    for seq, (d, body) in enumerate(sent):
        msg = Inbound(subject=subject(d), headers={"Nats-Msg-Id": d["decision_id"]},
                      data=body, stream_sequence=seq + 1, delivered=1, stream_time=now)
        out.append(read_message(msg, now, max_skew=timedelta(minutes=5)))
    return out


def test_odd_but_valid_decisions_lay_out_as_in_the_write_and_garbage_never_gets_there(
        ) -> None:
    read = _odd_batch()
    candidates = [r for r in read if isinstance(r, Candidate)]
    assert len(candidates) == 6 and sum(isinstance(r, Invalid) for r in read) == 3
    assert _numbered(laid_out(candidates)) == _numbered(candidates)
    docs, _ = _numbered(laid_out(candidates))
    head = Head(2, "sha256:" + "ab" * 32)
    for doc in docs:
        link = head.link(doc["plan_id"], DECISION, doc["_id"], decision_content(plain(doc)))
        assert link.as_document() == doc["chain"]
        head = head.after(link)
