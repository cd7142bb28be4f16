"""The recorder through its public subjects, with the worker running as its own process."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.shared.ids import new_id
from store.database import Document
from store.decisions import from_document
from tests.factories import decision, encode, plan_tree, root, subject
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import events, publish_all, publish_raw, wait_for_count

pytestmark = pytest.mark.e2e


def bad(rule: str, plan: dict[str, Any]) -> tuple[str, bytes, dict[str, str]]:
    """A message breaking one rule, for the plan whose root is `plan`."""
    p, parent = plan["plan_id"], plan["decision_id"]
    d = decision(p, parent)
    cases: dict[str, dict[str, Any]] = {
        "valid_ulid": {"parent_decision_id": "not-a-ulid"},
        "confidence_range": {"confidence_score": 1.5},
        "root_has_no_parent": {"decision_type": "prompt_definition"},
        "correction_needs_target": {"is_correction": True},
        "target_needs_correction_flag": {"corrects_decision_id": new_id()},
        "only_root_lacks_parent": {"parent_decision_id": None},
        "non_empty": {"question": ""},
        "hash_format": {"context_snapshot": {"hot_context_hash": "abc", "hot_context_ref": "r"}},
        "sequence_assigned_by_recorder": {"sequence_number": 5},
        "parent_in_same_plan": {},
        "one_root_per_plan": {},
    }
    if rule == "parent_in_same_plan":
        other = new_id()
        d = decision(other, parent)
        return subject(d), encode(d), {"Nats-Msg-Id": d["decision_id"]}
    if rule == "one_root_per_plan":
        d = root(p)
        return subject(d), encode(d), {"Nats-Msg-Id": d["decision_id"]}
    if rule == "not_json":
        return subject(d), b"{not json", {"Nats-Msg-Id": new_id()}
    if rule == "not_utf8":
        return subject(d), b"\xff\xfe\x00", {}
    if rule == "msg_id_matches_decision":
        return subject(d), encode(d), {"Nats-Msg-Id": new_id()}
    if rule == "subject_matches_plan":
        return f"decisions.recorded.{new_id()}", encode(d), {"Nats-Msg-Id": d["decision_id"]}
    if rule == "parent_exists":
        d = decision(p, new_id())
        return subject(d), encode(d), {"Nats-Msg-Id": d["decision_id"]}
    d.update(cases[rule])
    return subject(d), encode(d), {"Nats-Msg-Id": d["decision_id"]}


RULES = ["valid_ulid", "confidence_range", "root_has_no_parent", "correction_needs_target",
         "target_needs_correction_flag", "only_root_lacks_parent", "non_empty", "hash_format",
         "sequence_assigned_by_recorder", "parent_in_same_plan", "one_root_per_plan", "not_json",
         "not_utf8", "msg_id_matches_decision", "subject_matches_plan", "parent_exists"]


async def test_each_broken_rule_is_dead_lettered_and_valid_ones_go_through(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    tree = plan_tree(30, seed=7)
    await publish_all(js, tree[:1])
    assert await wait_for_count(db, "decisions", 1) == 1
    # Bad messages interleaved with the valid ones.
    for i, rule in enumerate(RULES):
        await publish_all(js, tree[1 + i * 1: 2 + i * 1])
        await publish_raw(js, *bad(rule, tree[0]))
    await publish_all(js, tree[1 + len(RULES):])

    assert await wait_for_count(db, "decisions", len(tree)) == len(tree)
    assert await wait_for_count(db, "dead_letters", len(RULES), timeout=30) == len(RULES)
    letters = [d async for d in db["dead_letters"].find()]
    named = Counter(e["rule"] for dl in letters for e in dl["errors"])
    for rule in RULES:
        assert named[rule] >= 1, (rule, named)
    for dl in letters:
        assert dl["payload"] and dl["subject"].startswith("decisions.recorded.")

    rejected = await events(nc, "decisions.rejected.>")
    assert len(rejected) == len(RULES)
    assert {ev["dead_letter_id"] for _, ev, _ in rejected} == {dl["_id"] for dl in letters}
    assert all(ev["errors"] and ev["errors"][0]["rule"] for _, ev, _ in rejected)
    assert workers.alive


async def test_children_published_before_parents_are_all_recorded(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    tree = plan_tree(40, seed=11)
    await publish_all(nc.jetstream(), reversed(tree))
    assert await wait_for_count(db, "decisions", 40, timeout=30) == 40
    seqs = sorted([d["sequence_number"] async for d in db["decisions"].find()])
    assert seqs == list(range(40))
    assert await db["dead_letters"].count_documents({}) == 0


async def test_same_decision_again_writes_and_publishes_nothing_new(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    r = root()
    await publish_all(js, [r])
    await wait_for_count(db, "decisions", 1)
    # A retry after JetStream's duplicate window looks like a new stream message; the
    # lower-case Msg-Id gets it past the window here, and the recorder must still
    # recognise the decision.
    await js.publish(subject(r), encode(r), headers={"Nats-Msg-Id": r["decision_id"].lower()})
    changed = {**r, "chosen_option": "something else entirely"}
    mixed_case = r["decision_id"][:5].lower() + r["decision_id"][5:]
    await js.publish(subject(r), encode(changed), headers={"Nats-Msg-Id": mixed_case})
    assert await wait_for_count(db, "dead_letters", 1, timeout=20) == 1
    stored = [d async for d in db["decisions"].find()]
    assert len(stored) == 1 and stored[0]["chosen_option"] == r["chosen_option"]
    dl = await db["dead_letters"].find_one()
    assert dl is not None and dl["errors"][0]["rule"] == "decision_id_conflict"
    persisted = await events(nc, "decisions.persisted.>")
    assert len(persisted) == 1


async def test_a_plans_root_is_announced_once_more_on_decisions_began_for_the_reconciler(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    # The reconciler reads decisions.began.* only: one event per plan, not per decision.
    tree = plan_tree(5, seed=6)
    await publish_all(nc.jetstream(), tree)
    await wait_for_count(db, "decisions", 5)
    [r] = [d for d in tree if d["parent_decision_id"] is None]
    persisted = {ev["decision_id"]: ev for _, ev, _ in await events(nc, "decisions.persisted.>")}
    began = await events(nc, "decisions.began.>")
    assert len(persisted) == 5 and len(began) == 1
    subj, ev, h = began[0]
    assert subj == f"decisions.began.{r['plan_id']}"
    assert h["Nats-Msg-Id"] == f"began:{r['decision_id']}"
    assert ev == persisted[r["decision_id"]]
    assert h["ce-type"].startswith("io.decision-ledger.plan.began.")


async def test_persisted_event_carries_what_was_recorded(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    tree = plan_tree(5, seed=5)
    await publish_all(nc.jetstream(), tree)
    await wait_for_count(db, "decisions", 5)
    persisted = await events(nc, "decisions.persisted.>")
    assert len(persisted) == 5
    by_id = {ev["decision_id"]: (subj, ev, h) for subj, ev, h in persisted}
    for d in tree:
        subj, ev, h = by_id[d["decision_id"]]
        assert subj == f"decisions.persisted.{d['plan_id']}"
        assert h["Nats-Msg-Id"] == f"persisted:{d['decision_id']}"
        assert ev["parent_decision_id"] == d["parent_decision_id"]
        assert ev["decision_type"] == d["decision_type"]
    stored = {doc["_id"]: doc async for doc in db["decisions"].find()}
    for d in tree:
        model = from_document(stored[d["decision_id"]])
        sent = json.loads(json.dumps(d))
        assert model.model_dump(mode="json", include=set(sent)) == \
            Decision.model_validate(sent).model_dump(mode="json", include=set(sent))
