"""Recovery in seconds: a worker SIGKILLed mid-correction or mid-recording, restarted at
once, finishes what the dead one held without waiting for a broker timer, and loses
and doubles nothing. Times are printed, not asserted (bench/bench_recovery.py runs 20+
kills of each kind and prints p50 and max); the test asserts the work finishes."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from deploy.embedded import ManagedServer
from store.database import Document
from tests.integration.recovery_support import (
    CRASH_STEPS,
    correction_kills,
    recording_kills,
    table,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_corrections_interrupted_at_every_step_finish_after_a_restart(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    t = await correction_kills(nats_server.url, mongo_uri, db_name, db, nc, tmp_path,
                               CRASH_STEPS, reps=1)
    print("\n" + table("corrections", t))
    assert t.problems == []
    assert len(t.seconds) == len(CRASH_STEPS)


async def test_recording_interrupted_at_random_points_finishes_after_a_restart(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    t = await recording_kills(nats_server.url, mongo_uri, db_name, db, nc, tmp_path,
                              kills=3, burst=600)
    print("\n" + table("recording", t))
    assert t.problems == []
    assert len(t.seconds) == 3
