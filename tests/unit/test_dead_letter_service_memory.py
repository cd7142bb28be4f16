"""The dead-letter retry (services/dead_letters.py, behind `agents dead-letters retry` and
the console's Retry) over the in-memory store and a stream that answers as JetStream
does: no servers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.shared.bounds import DEAD_LETTER_PAYLOAD_BYTES
from contracts.shared.dead_letter import DeadLetter, Truncated
from contracts.shared.ids import MSG_ID_HEADER, new_id
from contracts.shared.rules import Rule, RuleViolation
from services.dead_letters import DeadLetterService, RetryRefusal, RetryRefused
from tests.memory_store import MemoryStore
from tests.port_wrappers import Message, Stream

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def letter(sequence: int, data: bytes = b'{"plan_id": "x"}', *,
           headers: dict[str, str] | None = None,
           subject: str = "decisions.recorded.01JD0000000000000000000000") -> DeadLetter:
    return DeadLetter.of_message(
        id=f"DECISIONS:{sequence}", subject=subject,
        headers={MSG_ID_HEADER: new_id()} if headers is None else headers, data=data,
        plan_id=None, decision_id=None,
        errors=[RuleViolation(rule=Rule.MAX_DELIVERIES, message="MongoDB did not answer")],
        rejected_at=NOW, delivered=1)


async def scene(*letters: DeadLetter) -> tuple[MemoryStore, Stream, DeadLetterService]:
    m, stream = MemoryStore(), Stream()
    await m.dead_letters.keep(letters)
    return m, stream, DeadLetterService(m.dead_letters, stream, m, clock=lambda: NOW)


async def refusal(service: DeadLetterService, dead_letter_id: str) -> RetryRefused:
    with pytest.raises(RetryRefused) as caught:
        await service.retry(dead_letter_id)
    return caught.value


async def test_a_retry_republishes_the_message_as_sent_and_deletes_the_letter() -> None:
    dl = letter(7, headers={MSG_ID_HEADER: "01JD0000000000000000000001", "traceparent": "t"})
    m, stream, service = await scene(dl)
    done = await service.retry(dl.id)
    assert stream.stored == [Message(dl.subject, dl.payload, dl.headers)]
    assert (done.stream, done.stream_sequence, done.deleted) == ("DECISIONS", 1, True)
    assert await m.dead_letters.get(dl.id) is None
    # Retried already: there is nothing left to retry, and nothing is sent again.
    assert (await refusal(service, dl.id)).refusal is RetryRefusal.UNKNOWN
    assert len(stream.stored) == 1


async def test_within_the_duplicate_window_the_letter_is_kept() -> None:
    dl = letter(8)
    m, stream, service = await scene(dl)
    stream.window[dl.headers[MSG_ID_HEADER]] = 3  # the original publish, still remembered
    refused = await refusal(service, dl.id)
    assert refused.refusal is RetryRefusal.DUPLICATE
    assert dl.headers[MSG_ID_HEADER] in str(refused) and f"{dl.id} is kept" in str(refused)
    assert stream.stored == [] and await m.dead_letters.get(dl.id) == dl
    stream.window.clear()  # the window has passed
    assert (await service.retry(dl.id)).deleted


async def test_a_letter_kept_in_part_is_never_republished() -> None:
    dl = letter(9, b"x" * (DEAD_LETTER_PAYLOAD_BYTES + 1))
    assert dl.truncated == [Truncated.PAYLOAD]
    m, stream, service = await scene(dl)
    refused = await refusal(service, dl.id)
    assert refused.refusal is RetryRefusal.KEPT_IN_PART
    assert "cannot be retried" in str(refused) and dl.payload_sha256 in str(refused)
    assert stream.stored == [] and await m.dead_letters.get(dl.id) == dl


async def test_a_retry_no_stream_stored_keeps_the_letter() -> None:
    lost, foreign = letter(10), letter(11, subject="elsewhere.x")
    m, stream, service = await scene(lost, foreign)
    stream.down = True
    refused = await refusal(service, lost.id)
    assert refused.refusal is RetryRefusal.NOT_STORED and "no answer" in str(refused)
    stream.down = False
    assert (await refusal(service, foreign.id)).refusal is RetryRefusal.NOT_STORED
    assert {d.id for d in await m.dead_letters.list()} == {lost.id, foreign.id}
    # Sent again once JetStream answers: stored once, the letter gone.
    assert (await service.retry(lost.id)).deleted and len(stream.stored) == 1


async def test_a_message_without_a_msg_id_is_stored_each_time() -> None:
    """No Nats-Msg-Id, no deduplication: each retry is a new stream message (the worker
    refuses it again as a new dead letter, and that one can be retried in turn)."""
    first = letter(12, headers={})
    m, stream, service = await scene(first)
    done = await service.retry(first.id)
    again = letter(20 + done.stream_sequence, headers={})
    await m.dead_letters.keep([again])
    assert (await service.retry(again.id)).stream_sequence == 2
    assert [s.headers for s in stream.stored] == [{}, {}]
