"""Partitioned recording, the pure part: which partition a plan is stored in (as
nats-server computes it), the durables and the stream's transform a count gives, and
the shares the replicas agree on (contracts.shared.partitions, contracts.shared.balance)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bootstrap.settings import Settings
from contracts.families import STREAMS, partitioned
from contracts.recording.families import DECISIONS, RECORDED
from contracts.shared.balance import moves, shares
from contracts.shared.partitions import (
    MAX_PARTITIONS,
    count_of,
    every_partition,
    partition_of,
    partitions,
    transform,
    unpartitioned,
)
from contracts.shared.roles import Role
from deploy.grants import Holder, denied, grants, workers_durables
from tests.properties import examples
from workers.durables import consumer_config
from workers.streams import stream_configs

pytestmark = pytest.mark.unit


def test_a_plan_lands_where_nats_server_puts_it() -> None:
    # Stored by nats-server 2.15 through the transform below, published to
    # decisions.recorded.<plan> (the subjects it stored them under).
    seen = {"01ARZ3NDEKTSV4RRFFQ69G5FAV": 0, "01BX5ZZKBKACTAV9WEVGEMMVRZ": 1,
            "01H00000000000000000000000": 4}
    assert {p: partition_of(p, 6) for p in seen} == seen
    assert transform("decisions.recorded", 6) == (
        "decisions.recorded.*", "decisions.recorded.{{partition(6,1)}}.{{wildcard(1)}}")
    assert count_of(transform("decisions.recorded", 6)[1]) == 6  # type: ignore[index]
    assert transform("decisions.recorded", 1) is None and count_of(None) == 1


def test_one_partition_is_the_durable_as_it_always_was() -> None:
    [one] = partitions("decisions.recorded", "recorder", 1)
    assert (one.durable, one.filter_subject, one.lease) == (
        "recorder", "decisions.recorded.*", "role:recorder")
    six = partitions("decisions.recorded", "recorder", 6)
    assert [(p.durable, p.filter_subject) for p in six[:2]] == [
        ("recorder-0", "decisions.recorded.0.*"), ("recorder-1", "decisions.recorded.1.*")]
    assert len(every_partition("decisions.recorded", "recorder")) == MAX_PARTITIONS + 1
    for bad in (0, MAX_PARTITIONS + 1):
        with pytest.raises(ValueError, match="partitions"):
            partitions("decisions.recorded", "recorder", bad)
        with pytest.raises(ValueError, match="RECORDER_PARTITIONS"):
            Settings(recorder_partitions=bad)


def test_the_stored_subject_reads_as_the_published_one() -> None:
    plan = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    name = "decisions.recorded"
    assert unpartitioned(name, f"{name}.3.{plan}") == f"{name}.{plan}"
    assert unpartitioned(name, f"{name}.{plan}") == f"{name}.{plan}"
    # A plan token made of digits is a plan, not a partition; other shapes stay as they are.
    digits = "01234567890123456789012345"
    assert unpartitioned(name, f"{name}.{digits}") == f"{name}.{digits}"
    for other in (f"{name}.3.{plan}.x", f"{name}.x.{plan}", f"decisions.persisted.3.{plan}"):
        assert unpartitioned(name, other) == other


def test_the_declaration_gives_the_stream_its_transform_and_the_durables_their_names() -> None:
    assert partitioned(DECISIONS) is RECORDED
    assert all(partitioned(s) is None for s in STREAMS if s is not DECISIONS)
    configs = {c.name: c for c in stream_configs(partitions=lambda f: 6)}
    t = configs["DECISIONS"].subject_transform
    assert t is not None and (t.src, t.dest) == transform(RECORDED.name, 6)
    assert configs["CORRECTIONS"].subject_transform is None
    [reader] = RECORDED.worker_consumers()
    part = partitions(RECORDED.name, "recorder", 6)[5]
    config = consumer_config(RECORDED, reader, Settings(), part)
    assert (config.durable_name, config.filter_subject) == ("recorder-5",
                                                            "decisions.recorded.5.*")
    # Every name any count could give is the workers' own, denied to everyone else.
    refused, _ = denied(workers_durables())
    assert "$JS.API.CONSUMER.*.DECISIONS.recorder-31" in refused
    assert "$JS.API.CONSUMER.*.DECISIONS.recorder" in refused
    for role in (Role.AGENT, Role.OPERATOR, Role.SUBSCRIBER):
        assert "$JS.ACK.DECISIONS.recorder-5.>" in grants(Holder.of_role(role)).deny_publish
    worker = grants(Holder.of_role(Role.WORKER))  # and the workers may acknowledge on every one
    assert {"$JS.ACK.DECISIONS.recorder.>", "$JS.ACK.DECISIONS.recorder-0.>",
            "$JS.ACK.DECISIONS.recorder-31.>"} <= set(worker.publish)
    assert "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.DECISIONS.recorder-7" in \
        worker.subscribe


@given(st.integers(1, 32), st.integers(1, 12), st.data())
def test_shares_add_up_and_differ_by_one_at_most(count: int, workers: int,
                                                 data: st.DataObject) -> None:
    live = [f"w{i}" for i in range(workers)]
    held = {w: data.draw(st.integers(0, count)) for w in live}
    got = shares(count, live, held)
    assert sum(got.values()) == count
    assert max(got.values()) - min(got.values()) <= 1


def rounds(parts: list[str], live: list[str], holders: dict[str, str], rng: random.Random,
           limit: int = 30) -> int:
    """Every live worker does its moves, in a random order each round, until none moves;
    the rounds it took. A take succeeds only on a free partition (the lease)."""
    for n in range(1, limit + 1):
        moved = False
        for me in rng.sample(live, len(live)):
            mine = {p for p, w in holders.items() if w == me}
            todo = moves(me, parts, mine, holders, live)
            for p in todo.release:
                del holders[p]
                moved = True
            for p in todo.take[:todo.wanted]:
                assert p not in holders  # never taken from a holder
                holders[p] = me
                moved = True
        if not moved:
            return n
    raise AssertionError(f"still moving after {limit} rounds: {holders}")


@settings(max_examples=examples(200))
@given(st.integers(1, 32), st.integers(1, 8), st.integers(0, 2**32))
def test_replicas_settle_on_an_even_spread_from_any_start(count: int, workers: int,
                                                          seed: int) -> None:
    rng = random.Random(seed)
    parts = [f"role:recorder-{k}" for k in range(count)]
    live = [f"w{i}" for i in range(workers)]
    gone = ["dead"]  # a holder no longer alive whose leases have expired
    holders = {p: rng.choice(live + gone) for p in parts if rng.random() < 0.7}
    holders = {p: w for p, w in holders.items() if w in live}
    took = rounds(parts, live, holders, rng)
    spread = Counter(holders.values())
    assert len(holders) == count  # every partition held
    assert max(spread.get(w, 0) for w in live) - min(spread.get(w, 0) for w in live) <= 1
    assert took <= 4


def test_an_even_spread_does_not_move_when_nothing_changes() -> None:
    parts = [f"p{k}" for k in range(6)]
    holders = {p: w for p, w in zip(parts, ["a", "a", "b", "b", "c", "c"], strict=True)}
    for me in "abc":
        todo = moves(me, parts, {p for p, w in holders.items() if w == me}, holders, "abc")
        assert todo.release == () and todo.wanted == 0
    # One partition over two replicas stays with the one holding it, whatever the IDs.
    assert moves("z", ["p"], {"p"}, {"p": "z"}, ["a", "z"]).release == ()
    assert moves("a", ["p"], set(), {"p": "z"}, ["a", "z"]).wanted == 0
