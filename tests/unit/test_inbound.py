"""The inbound pipeline's pure parts: the read guard, bounded reports, retry delays, the
parent wait in seconds, and which consumer fields need an update."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from contracts.recording.message import Invalid
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.unreadable import ERROR_TEXT_LIMIT, describe, guarded, unreadable
from services.recorder_batch import read_guarded
from services.recorder_policy import RecorderPolicy
from store.deliveries import Attempt
from tests.factories import encode, headers, root, subject
from workers.durables import config_changes
from workers.exhaustion import exhausted_violations
from workers.inbound import Batch, FailureLog, Retry, read_batch

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_guard_turns_any_exception_into_a_bounded_unreadable_violation() -> None:
    def deep() -> None:
        raise RecursionError("maximum recursion depth exceeded" + "!" * 10_000)

    v = guarded(deep)
    assert isinstance(v, RuleViolation) and v.rule is Rule.UNREADABLE
    assert "RecursionError" in v.message
    assert len(v.message) < ERROR_TEXT_LIMIT + 100
    assert guarded(lambda: 5) == 5


def test_describe_survives_an_exception_whose_str_raises() -> None:
    class Hostile(Exception):
        def __str__(self) -> str:
            raise ValueError("no")

    assert describe(Hostile()) == "Hostile: <unprintable>"


@pytest.mark.parametrize("data", [b"[" * 5000, b'{"created_at": "9999-12-31T23:00:00-05:00"'
                                  b', "decision_type": "prompt_definition"}'])
def test_recorder_read_never_raises(data: bytes) -> None:
    r = read_guarded(Inbound("decisions.recorded.01J0000000000000000000000A", {}, data, 7), NOW)
    assert isinstance(r, Invalid) and r.stream_sequence == 7


def test_far_created_at_is_unreadable_not_a_crash() -> None:
    d = root()
    d["created_at"] = "9999-12-31T23:00:00-05:00"
    r = read_guarded(Inbound(subject(d), headers(d), encode(d), 3), NOW)
    assert isinstance(r, Invalid)
    assert r.plan_id == d["plan_id"]
    assert r.violations[0].rule in {Rule.UNREADABLE, Rule.SCHEMA}


class _Family:
    """Reads "ok" bodies, raises on anything else."""

    trust = None

    def read(self, msg: Msg, now: datetime) -> str:
        if msg.data != b"ok":
            raise OverflowError("date value out of range")
        return "read"

    def unreadable(self, msg: Msg, why: RuleViolation) -> str:
        return f"unreadable: {why.message}"


async def test_read_batch_isolates_the_message_that_raises() -> None:
    msgs = [Msg(None, subject="s", data=d) for d in (b"ok", b"[[[", b"ok")]  # type: ignore[arg-type]
    batch: Batch[str] = await read_batch(_Family(), msgs, stream="S",  # type: ignore[arg-type]
                                         retry=Retry(3, (1.0,)),
                                         failures=FailureLog(None, "c"))
    assert batch.reads[0] == batch.reads[2] == "read"
    assert batch.reads[1].startswith("unreadable:") and "OverflowError" in batch.reads[1]


class _Recorded:
    """The recorder's single-message rules (read_guarded) on each message of a batch."""

    trust = None

    def read(self, msg: Msg, now: datetime) -> object:
        return read_guarded(Inbound(msg.subject, dict(msg.headers or {}), msg.data, 1), now)

    def unreadable(self, msg: Msg, why: RuleViolation) -> object:
        return why


async def test_a_long_batch_of_garbage_among_decisions_is_read_whole_while_others_get_turns(
        ) -> None:
    """Hostile bodies among valid ones in one batch long enough to take turns
    (services.turns): every message gets its own read, in order, and a task that became
    ready during the read ran before the read ended."""
    garbage = [b"\xff\xfe" * 1000, b"[" * 5000, b"[" + b"1," * 100_000 + b"1]",
               encode({**root(), "created_at": "9999-12-31T23:00:00-05:00"})]
    valid = [root() for _ in range(200)]
    msgs: list[Msg] = []
    for i, d in enumerate(valid):
        msgs.append(Msg(None, subject=subject(d), data=encode(d),  # type: ignore[arg-type]
                        headers=headers(d)))
        if i % 50 == 0:
            msgs += [Msg(None, subject=subject(d), data=g)  # type: ignore[arg-type]
                     for g in garbage]
    ran: list[bool] = []

    async def other() -> None:
        ran.append(reading.done())

    reading = asyncio.create_task(read_batch(_Recorded(), msgs, stream="S",  # type: ignore[arg-type]
                                             retry=Retry(3, (1.0,)),
                                             failures=FailureLog(None, "c")))
    asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(other()))
    batch = await reading
    assert ran == [False], "the other task waited for the whole read"
    assert len(batch.reads) == len(msgs)
    for m, r in zip(msgs, batch.reads, strict=True):
        if m.data in garbage:
            assert isinstance(r, Invalid), m.data[:20]
        else:
            assert not isinstance(r, Invalid), r


def test_retry_delays_follow_the_backoff_and_repeat_the_last() -> None:
    r = Retry(5, (1.0, 2.0, 5.0))
    assert [r.delay(n) for n in range(1, 7)] == [1.0, 2.0, 5.0, 5.0, 5.0, 5.0]
    # JetStream takes BackOff[0] as the ack wait, and wants fewer values than MaxDeliver.
    assert r.consumer_backoff(30.0) == [30.0, 30.0, 30.0]
    assert Retry(2, (1.0, 60.0, 90.0)).consumer_backoff(30.0) == [30.0]
    with pytest.raises(ValueError):
        Retry(0, (1.0,))


def test_parent_wait_is_counted_in_seconds_and_fits_in_the_deliveries_it_adds() -> None:
    policy = RecorderPolicy(parent_wait_seconds=60.0)
    assert policy.backoff(0.0) == 0.25
    assert policy.backoff(1.5) == 1.5
    assert policy.backoff(100.0) == 5.0
    # Waiting only the backoff delays, the wait is over within the deliveries it adds.
    waited, deliveries = 0.0, 1
    while waited < policy.parent_wait_seconds:
        waited += policy.backoff(waited)
        deliveries += 1
    assert deliveries <= policy.deliveries_to_wait() < 30


def test_failure_log_keeps_attempts_in_memory_bounded() -> None:
    log = FailureLog(None, "recorder")
    for n in range(1, 40):
        log.add("S:1", n, "boom")
    attempts = asyncio.run(log.attempts("S:1"))
    assert len(attempts) == 25 and attempts[-1].delivered == 39


def test_a_failure_after_waits_backs_off_by_failures_not_deliveries() -> None:
    """A message delivered nine times (eight of them waits for its parent, which are
    not failures) that fails once is retried after the first backoff, not the ninth."""
    log = FailureLog(None, "recorder")
    retry = Retry(30, (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0))
    log.add("S:1", 9, "no response from stream")
    assert retry.delay(log.count("S:1")) == 1.0
    log.add("S:1", 10, "no response from stream")
    assert retry.delay(log.count("S:1")) == 2.0
    assert log.count("S:2") == 0


def test_exhausted_report_names_every_attempt() -> None:
    attempts = [Attempt(n, f"OperationFailure: down {n}", NOW) for n in (1, 2, 3)]
    vs = exhausted_violations("recorder", 3, 3, attempts)
    assert [v.rule for v in vs] == [Rule.MAX_DELIVERIES] * 4
    assert "3 failed attempt(s)" in vs[0].message
    assert vs[3].message.startswith("delivery 3 at 2026-01-01T00:00:00Z: OperationFailure")
    assert "no failure was recorded" in exhausted_violations("r", 3, 3, [])[0].message


def test_config_changes_name_what_differs() -> None:
    have = ConsumerConfig(durable_name="d", ack_wait=30.0, max_deliver=-1,
                          deliver_policy=DeliverPolicy.ALL, max_ack_pending=1000)
    want = ConsumerConfig(durable_name="d", ack_wait=30.0, max_deliver=20, backoff=[30.0],
                          deliver_policy=DeliverPolicy.NEW, max_ack_pending=1000)
    assert set(config_changes(have, want)) == {"max_deliver", "backoff", "deliver_policy"}
    assert config_changes(want, want) == {}


def test_unreadable_is_the_shared_rule() -> None:
    assert unreadable(ValueError("x")).rule is Rule.UNREADABLE
