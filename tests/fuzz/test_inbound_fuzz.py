"""Hostile input on every inbound subject, mixed among valid messages in the same batches.

The short run of the fuzz suite (the long one: `bench/fuzz_run.py`). The worker must
never crash; every valid decision is recorded once (one document, one persisted
event); every bad message on a durable subject is dead-lettered once, within the size
bound; every dry run is answered; the consumers drain.
"""

from __future__ import annotations

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from tests.fuzz import harness
from tests.fuzz.hostile import Hostile, corpus, hostile_command, hostile_decision
from tests.in_process_workers import InProcessWorkers

pytestmark = [pytest.mark.e2e, pytest.mark.fuzz]


def test_every_hostile_strategy_breaks_a_rule_by_construction() -> None:
    """The corpus is deterministic and every family and kind shows up in it."""
    plan, parent, other = "01JD7X2B5C8N2V5K3M6P1T0AAA", "01JD7X3C9R8N2V5K3M6P1T0BBB", \
        ("01JD7X2B5C8N2V5K3M6P1T0CCC", "01JD7X3C9R8N2V5K3M6P1T0DDD")
    first = corpus(hostile_decision(plan, parent, other, 1000), 40)
    again = corpus(hostile_decision(plan, parent, other, 1000), 40)
    assert [(h.kind, len(h.data)) for h in first] == [(h.kind, len(h.data)) for h in again]
    kinds = {h.kind for h in first}
    assert len(kinds) >= 6, kinds
    commands: list[Hostile] = []
    families = ("requests", "cancels", "fails", "retries", "violations", "templates",
                "verdicts", "dryrun")
    for fam in families:
        commands += corpus(hostile_command(fam, plan, other[0]), 15)
    assert {h.family for h in commands} == set(families)
    assert all(len(h.data) < harness.NATS_MAX for h in [*first, *commands])


async def test_hostile_messages_never_hold_back_valid_ones(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    tally = await harness.run(nc, db, rounds=3, per_round=12, n_plans=3)
    print("\n" + tally.table())
    assert harness.check(tally, workers_alive=workers.alive) == []
