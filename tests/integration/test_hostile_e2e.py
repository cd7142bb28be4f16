"""Hostile bodies among valid ones, through the real servers and workers: the valid ones
are recorded, each bad one is dead-lettered once with a rejection event within its bound,
and nothing is left pending (ADR 0011: a RecursionError, an OverflowError and a 1.7 MB
report were seen before)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import bson
import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections import subjects as correction_subjects
from contracts.decisions.subjects import DECISIONS_STREAM, RECORDER_DURABLE
from contracts.invariants import subjects as invariant_subjects
from contracts.shared.bounds import (
    DEAD_LETTER_MAX_BYTES,
    DEAD_LETTER_PAYLOAD_BYTES,
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_ERRORS,
    REJECTION_EVENT_MAX_BYTES,
)
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule, RuleViolation
from store.database import Document
from store.dead_letters import DeadLetterRepository
from tests.factories import decision, encode, plan_tree, root, subject
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, assert_one_line_error
from tests.integration.wire import drained, events, publish_all, wait_for_count

__all__ = ["agents"]

pytestmark = pytest.mark.e2e


def hostile(plan: dict[str, Any], child_plan: str
            ) -> dict[str, tuple[str, bytes, dict[str, str], Rule]]:
    """Bad messages for the plan whose root is `plan`, by name: (subject, body, headers,
    the rule their dead letter names first). `child_plan` is claimed by a valid decision
    sent before them."""
    p, parent = plan["plan_id"], plan["decision_id"]

    def child(**fields: Any) -> tuple[str, bytes, dict[str, str]]:
        d = decision(p, parent, **fields)
        return subject(d), encode(d), {"Nats-Msg-Id": d["decision_id"]}

    on_plan = f"decisions.recorded.{p}"
    # Valid alone, refused against the store (after the batch's write): kept in part too.
    second_root = root(p, rationale="y" * 200_000)
    return {
        "brackets": (on_plan, b"[" * 5000, {"Nats-Msg-Id": new_id()}, Rule.UNREADABLE),
        "late": (*child(created_at="9999-12-31T23:00:00-05:00"), Rule.SCHEMA),
        "early": (*child(created_at="0001-01-01T00:00:00+05:00"), Rule.SCHEMA),
        "bad_ids": (*child(downstream_decision_ids=["bad"] * 12_000), Rule.VALID_ULID),
        "too_large": (*child(rationale="x" * DEFAULT_MAX_PAYLOAD_BYTES),
                      Rule.PAYLOAD_TOO_LARGE),
        "big_and_bad": (*child(rationale="x" * 100_000, confidence_score=2.0),
                        Rule.CONFIDENCE_RANGE),
        "second_root": (subject(second_root), encode(second_root),
                        {"Nats-Msg-Id": second_root["decision_id"]}, Rule.ONE_ROOT_PER_PLAN),
        # A second claim of a plan already claimed, checked against the stored claim.
        "reclaim": (*child(downstream_plan_ids=[child_plan]), Rule.CHILD_PLAN_CLAIM),
        "request": (f"{correction_subjects.REQUESTED_PREFIX}.{p}", b"[" * 5000, {},
                    Rule.UNREADABLE),
        "cancel": (f"{correction_subjects.CANCEL_PREFIX}.{p}", b'{"a":' * 2000, {},
                   Rule.UNREADABLE),
        "report": (f"{invariant_subjects.VIOLATIONS_PREFIX}.{p}", b"[" * 5000,
                   {"Nats-Msg-Id": new_id()}, Rule.UNREADABLE),
    }


async def test_hostile_bodies_are_dead_lettered_within_bounds_and_valid_ones_recorded(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    tree = plan_tree(60, seed=17)
    await publish_all(js, tree[:1])
    assert await wait_for_count(db, "decisions", 1) == 1
    # A claim of a child plan and that plan's root among the valid ones: the claim
    # rules are asked again in the batches' transactions, beside the bad messages.
    child_plan = new_id()
    claim = decision(tree[0]["plan_id"], tree[0]["decision_id"],
                     downstream_plan_ids=[child_plan])
    tree = [*tree[:3], claim, *tree[3:8], root(child_plan), *tree[8:]]
    bad = hostile(tree[0], child_plan)
    # Each bad message between valid ones, so they share the recorder's batches.
    rest = iter(tree[1:])
    for subj, body, headers, _ in bad.values():
        await publish_all(js, [next(rest) for _ in range(5)])
        await js.publish(subj, body, headers=headers or None)
    await publish_all(js, list(rest))

    assert await wait_for_count(db, "decisions", len(tree), timeout=60) == len(tree)
    assert await wait_for_count(db, "dead_letters", len(bad), timeout=60) == len(bad)
    letters = {(dl["subject"], dl["payload_sha256"]): dl
               async for dl in db["dead_letters"].find()}
    by_name = {name: letters[subj, hashlib.sha256(body).hexdigest()]
               for name, (subj, body, _, _) in bad.items()}
    for name, (_, body, _, rule) in bad.items():
        dl = by_name[name]
        assert dl["errors"][0]["rule"] == rule, (name, dl["errors"])
        assert dl["payload_size"] == len(body)
        assert len(bson.encode(dl)) <= DEAD_LETTER_MAX_BYTES, name
        assert (dl["truncated"] == ["payload"]) is (len(body) > DEAD_LETTER_PAYLOAD_BYTES)
        assert dl["payload"] == body[:DEAD_LETTER_PAYLOAD_BYTES]
    assert by_name["late"]["errors"][0]["field"] == "created_at"
    assert "out of range" in by_name["early"]["errors"][0]["message"]
    assert len(by_name["bad_ids"]["errors"]) == MAX_ERRORS + 1
    assert by_name["bad_ids"]["errors"][-1]["rule"] == Rule.MORE_ERRORS

    rejected = [size for stream in ("decisions", "corrections", "invariants")
                for size in await event_sizes(nc, f"{stream}.rejected.>")]
    assert len(rejected) == len(bad)
    assert max(rejected) <= REJECTION_EVENT_MAX_BYTES
    assert len(await events(nc, "decisions.persisted.>")) == len(tree)  # once each
    child = await db.plans.find_one({"_id": child_plan})
    assert child is not None and child["parent_plan_id"] == tree[0]["plan_id"]
    assert child["spawned_from_decision_id"] == claim["decision_id"]
    assert child["root_created_at"] is not None
    await drained(js, DECISIONS_STREAM, RECORDER_DURABLE, timeout=10)
    assert workers.alive


async def event_sizes(nc: nats.NATS, filter_subject: str) -> list[int]:
    """The size of every message the stream holds on `filter_subject`."""
    sub = await nc.jetstream().subscribe(filter_subject, ordered_consumer=True)
    sizes = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=1.0)
            except (TimeoutError, nats.errors.TimeoutError):
                return sizes
            sizes.append(len(msg.data))
    finally:
        await sub.unsubscribe()


async def test_a_dead_letter_kept_in_part_is_shown_so_and_never_retried(
        agents: Agents, db: AsyncDatabase[Document]) -> None:
    body = json.dumps({"rationale": "x" * 100_000}).encode()
    letter = DeadLetter.of_message(
        id="DECISIONS:41", subject=f"decisions.recorded.{new_id()}",
        headers={"Nats-Msg-Id": new_id()}, data=body, plan_id=None, decision_id=None,
        errors=[RuleViolation(rule=Rule.SCHEMA, field="plan_id", message="Field required")],
        rejected_at=datetime.now(UTC), delivered=1)
    await DeadLetterRepository(db).keep([letter])

    shown = " ".join((await agents.ok("dead-letters", "show", "DECISIONS:41")).out.split())
    assert f"first {DEAD_LETTER_PAYLOAD_BYTES} of {len(body)} bytes" in shown
    assert "cannot be retried" in shown and letter.payload_sha256 in shown
    as_json = (await agents.ok("dead-letters", "show", "DECISIONS:41", "--json")).json
    assert as_json["truncated"] == ["payload"] and as_json["payload_size"] == len(body)

    assert_one_line_error(await agents("dead-letters", "retry", "DECISIONS:41"), 1,
                          "DECISIONS:41 cannot be retried", "republish the original")
    assert await db.dead_letters.count_documents({"_id": "DECISIONS:41"}) == 1
