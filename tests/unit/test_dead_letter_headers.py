"""A dead letter keeps only the headers the ledger reads: a sender's credentials
(`Authorization`, `Cookie`, W3C `baggage`) are dropped by name, never shown, never
stored, and a retry sends what was kept."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.shared.dead_letter import DeadLetter, Truncated
from contracts.shared.rules import Rule, RuleViolation
from services.dead_letters import DeadLetterService
from store.dead_letters import _from_doc, _to_doc
from tests.memory_store import MemoryStore
from tests.port_wrappers import Message, Stream

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
SECRETS = {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig",
           "baggage": "userId=alice,session=tok-7f3a9c",
           "Cookie": "ledger_session=s3ss10n"}
KEPT = {"Nats-Msg-Id": "01JD0000000000000000000001",
        "Nats-Expected-Stream": "DECISIONS",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "tracestate": "vendor=x", "Content-Type": "application/json",
        "Ledger-Key": "UAAA", "Ledger-Sig": "c2ln", "Ledger-Salt": "c2FsdA",
        "Ledger-Signed-At": "2026-11-30T12:00:00.000Z"}


def letter(headers: dict[str, str]) -> DeadLetter:
    return DeadLetter.of_message(
        id="DECISIONS:1", subject="decisions.recorded.x", headers=headers, data=b"{}",
        plan_id=None, decision_id=None,
        errors=[RuleViolation(rule=Rule.MAX_DELIVERIES, message="m")],
        rejected_at=NOW, delivered=1)


def test_credential_headers_are_dropped_and_named() -> None:
    dl = letter({**KEPT, **SECRETS, "X-Api-Key": "k3y"})
    assert dl.headers == KEPT
    assert dl.dropped_headers == ["Authorization", "baggage", "Cookie", "X-Api-Key"]
    assert not dl.truncated  # dropping is not cutting: the letter can still be retried
    shown = dl.model_dump_json() + repr(_to_doc(dl))
    for value in [*SECRETS.values(), "k3y"]:
        assert value not in shown


def test_header_names_are_matched_whatever_their_case() -> None:
    dl = letter({"nats-msg-id": "a", "TRACEPARENT": "t", "NATS-EXPECTED-LAST-MSG-ID": "b",
                 "AUTHORIZATION": "Basic YTpi"})
    assert set(dl.headers) == {"nats-msg-id", "TRACEPARENT", "NATS-EXPECTED-LAST-MSG-ID"}
    assert dl.dropped_headers == ["AUTHORIZATION"]


def test_a_flood_of_headers_keeps_a_bounded_list_of_names() -> None:
    dl = letter({f"X-{'n' * 1000}-{i}": "v" for i in range(500)})
    assert dl.headers == {} and len(dl.dropped_headers) == 32
    assert all(len(name.encode()) <= 128 for name in dl.dropped_headers)
    assert Truncated.HEADERS not in dl.truncated


def test_a_letter_kept_before_filtering_loses_its_credentials_when_read() -> None:
    old = {"_id": "DECISIONS:1", "subject": "s", "headers": {**KEPT, **SECRETS},
           "payload": b"{}", "errors": [], "rejected_at": NOW, "delivered": 1}
    dl = _from_doc(old)
    assert dl.headers == KEPT
    assert dl.dropped_headers == list(SECRETS)


async def test_a_retry_sends_the_kept_headers_only() -> None:
    dl = letter({**KEPT, **SECRETS})
    store, stream = MemoryStore(), Stream()
    await store.dead_letters.keep([dl])
    await DeadLetterService(store.dead_letters, stream, store).retry(dl.id)
    assert stream.stored == [Message(dl.subject, dl.payload, KEPT)]
