"""The record chain and its audit, without servers: a link's digest is computed the same
from the document about to be written as from what is read back; the audit of a chain
of signed decisions names each tampering, and the standalone verifier
(examples/verify_audit.py) names the same."""

from __future__ import annotations

import copy
import importlib.util
import json
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.decisions.model import Decision
from contracts.recording.families import RECORDED
from contracts.shared.roles import Role
from contracts.trust.audit import verify_export
from contracts.trust.audit_lines import decision_lines, header, plan_entry, principals_json
from contracts.trust.chain import DECISION, Head, decision_content, field_digests, plain
from contracts.trust.policy import TrustPolicy, provenance
from contracts.trust.signing import field_digest
from store.decisions import to_document
from tests.factories import encode, plan_tree, subject
from tests.properties import examples
from tests.trust_support import directory, member

pytestmark = pytest.mark.unit

AGENT = member("billing-agent", Role.AGENT)
OTHER = member("other-agent", Role.AGENT)
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "verify_audit.py"


class Colour(StrEnum):
    RED = "red"


SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text()
           | st.datetimes(timezones=st.just(UTC)) | st.datetimes() | st.sampled_from(Colour))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.tuples(inner, inner)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


@settings(max_examples=examples(200))
@given(st.dictionaries(st.text(min_size=1, max_size=8), VALUES, max_size=6))
def test_a_digest_is_the_same_before_the_write_and_read_back(record: dict[str, Any]) -> None:
    as_read = plain(record)
    assert plain(as_read) == as_read
    assert field_digests(record) == field_digests(as_read) == {
        name: field_digest(b"", name, value) for name, value in as_read.items()}
    json.dumps(as_read, allow_nan=False)  # what an export writes


def test_a_date_is_digested_at_the_precision_mongodb_keeps() -> None:
    at = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert plain(at) == "2026-01-01T12:00:00.123Z"
    assert plain(at.replace(microsecond=123000, tzinfo=None)) == plain(at)


def _signed_docs(size: int = 6) -> tuple[str, list[dict[str, Any]]]:
    """A plan recorded as the recorder records it: signed, numbered, chained."""
    trust = TrustPolicy(directory(AGENT, OTHER)).for_family(RECORDED)
    assert trust is not None
    docs, head = [], Head()
    tree = plan_tree(size, seed=7)
    for seq, d in enumerate(tree):
        data, headers = AGENT.signed(RECORDED.name, subject(d), d["decision_id"], encode(d))
        who = trust.identify(headers, subject(d), data, datetime.now(UTC))
        decision = Decision.model_validate({**d, "sequence_number": seq})
        doc = to_document(decision, "sha256:x", seq) | provenance(who, "recorded_by")  # type: ignore[arg-type]
        link = head.link(decision.plan_id, DECISION, decision.decision_id,
                         decision_content(plain(doc)))
        docs.append(doc | {"chain": link.as_document()})
        head = head.after(link)
    counter = {"chain_length": head.length, "chain_head": head.digest, "status": "active"}
    return tree[0]["plan_id"], [counter, *docs]


def _export(plan: str, docs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    counter, *records = docs
    lines = [ln for d in records for ln in decision_lines(d)]
    lines.sort(key=lambda ln: ln["chain"]["seq"] if ln["chain"] else 1 << 40)
    head = header(exported_at="2026-01-01T00:00:00.000Z", parameters={},
                  principals=principals_json(directory(AGENT, OTHER)),
                  plans={plan: plan_entry(counter)})
    return head, lines


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_audit", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _changed(docs: list[dict[str, Any]]) -> None:
    docs[2]["chosen_option"] = "Something else"


def _removed(docs: list[dict[str, Any]]) -> None:
    del docs[3]


def _removed_last(docs: list[dict[str, Any]]) -> None:
    del docs[-1]


def _swapped(docs: list[dict[str, Any]]) -> None:
    docs[2]["chain"]["seq"], docs[3]["chain"]["seq"] = 2, 1


def _flipped(docs: list[dict[str, Any]]) -> None:
    sig = docs[2]["signature"]["sig"]
    docs[2]["signature"]["sig"] = sig[:5] + ("A" if sig[5] != "A" else "B") + sig[6:]


def _renamed(docs: list[dict[str, Any]]) -> None:
    docs[2]["recorded_by"] = docs[2]["signature"]["principal"] = OTHER.name


def _superseded(docs: list[dict[str, Any]]) -> None:
    docs[2]["superseded_by"] = docs[1]["_id"]


def _unlinked(docs: list[dict[str, Any]]) -> None:
    del docs[2]["chain"]


@pytest.mark.parametrize(("tamper", "rule", "seq"), [
    (_changed, "changed", 1), (_removed, "removed", 3), (_removed_last, "removed", 5),
    (_swapped, "reordered", 1), (_flipped, "bad_signature", 1),
    (_renamed, "wrong_principal", 1), (_superseded, "unexplained", 1),
    (_unlinked, "removed", 2)])
def test_each_tampering_is_named_alike_by_both_verifiers(
        tamper: Any, rule: str, seq: int) -> None:
    plan, docs = _signed_docs()
    head, lines = _export(plan, docs)
    report = verify_export(head, lines)
    assert report.ok and report.signed == 6, report.findings
    broken = copy.deepcopy(docs)
    tamper(broken)
    head, lines = _export(plan, broken)
    report = verify_export(head, json.loads(json.dumps(lines)))
    assert not report.ok
    first = report.findings[0]
    assert (first.rule, first.seq) == (rule, seq), report.findings
    script = _script()
    found: list[tuple[Any, ...]] = []
    for plan_id, entry in head["plans"].items():
        script.check_plan(plan_id, entry, lines, found)
    for ln in lines:
        got = script.check_signature(ln, {k["public"]: (p["name"], k)
                                          for p in head["principals"] for k in p["keys"]})
        if isinstance(got, tuple):
            found.append((got[0], ln, got[1]))
    script.explained(head["plans"], lines, lines, found)
    found.sort(key=lambda b: ((b[1].get("chain") or {}).get("seq", 1 << 62),
                              script.ORDER.index(b[0])))
    assert found[0][0] == rule and (found[0][1].get("chain") or {}).get("seq") == seq


def test_a_key_revoked_before_it_signed_is_named() -> None:
    plan, docs = _signed_docs(2)
    head, lines = _export(plan, docs)
    revoked = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    for p in head["principals"]:
        for k in p["keys"]:
            k["revoked_at"] = revoked
    report = verify_export(head, lines)
    assert report.findings[0].rule == "key_revoked"


def test_unsigned_records_are_reported_unverified_not_broken() -> None:
    d = plan_tree(1, seed=3)[0]
    doc = to_document(Decision.model_validate({**d, "sequence_number": 0})) \
        | provenance(None, "recorded_by")
    link = Head().link(d["plan_id"], DECISION, d["decision_id"], decision_content(plain(doc)))
    head, lines = _export(d["plan_id"], [{"chain_length": 1, "chain_head": link.digest},
                                         doc | {"chain": link.as_document()}])
    report = verify_export(head, lines)
    assert report.ok and report.unsigned == [f"decision {d['decision_id']}"]
