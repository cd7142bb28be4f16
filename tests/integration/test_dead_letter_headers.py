"""A message refused by the workers with credentials in its headers: the dead letter the
CLI shows names those headers and holds none of their values, in MongoDB or on screen."""

from __future__ import annotations

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.ids import new_id
from store.database import Document
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, cli_workers
from tests.integration.wire import wait_for_count

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e

SECRETS = {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig",
           "baggage": "userId=alice,session=tok-7f3a9c",
           "Cookie": "ledger_session=s3ss10n"}


async def test_a_dead_letter_keeps_no_credential_header(
        cli_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    plan_id, msg_id = new_id(), new_id()
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    await nc.jetstream().publish(
        f"decisions.recorded.{plan_id}", b'{"plan_id": "not a ulid"}',
        headers={"Nats-Msg-Id": msg_id, "traceparent": trace, **SECRETS})
    assert await wait_for_count(db, "dead_letters", 1, timeout=30) == 1

    stored = await db.dead_letters.find_one({})
    assert stored is not None
    assert stored["headers"] == {"Nats-Msg-Id": msg_id, "traceparent": trace}
    assert sorted(stored["dropped_headers"]) == sorted(SECRETS)
    letter_id = stored["_id"]
    shown = (await agents.ok("dead-letters", "show", letter_id, "--json")).json
    assert shown["headers"] == stored["headers"]
    text = (await agents.ok("dead-letters", "show", letter_id)).out
    assert "traceparent" in text
    for value in SECRETS.values():
        assert value not in repr(stored) + repr(shown) + text
