"""The record chain in the store: the recorder links each batch without a round trip of
its own (a batch of one plan reads and writes its counter in one command), another
writer of the plan between two batches costs the recorder a read, never a fork, and the
chain verifies across batches, a violation report and the recorder's guess missing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo import AsyncMongoClient, monitoring
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.corrections.refusals import RetryRefused
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionStatus
from contracts.invariants.violations import InvariantViolation, Severity
from contracts.invariants.wire import ViolationEventType
from contracts.shared.ids import new_id
from contracts.shared.inbound import Inbound
from contracts.shared.timestamps import utc_now
from contracts.trust.audit import verify_export
from contracts.trust.audit_lines import header
from services.recorder import RecorderService
from services.recorder_policy import Verdict
from services.violation_reports import violation_event
from store.audit import AuditReader
from store.database import Document, connect
from store.dead_letters import DeadLetterRepository
from store.recorder import RecorderRepository
from store.violations import ViolationRepository
from tests.factories import decision, encode, headers, root, subject
from tests.integration.conftest import MakeService
from workers.streams import ensure_streams

pytestmark = pytest.mark.store


class PlanCommands(monitoring.CommandListener):
    """The commands sent to the `plans` collection."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command.get(event.command_name) == "plans":
            self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
async def watched(mongo_uri: str, db: AsyncDatabase[Document]
                  ) -> AsyncIterator[tuple[AsyncDatabase[Document], PlanCommands]]:
    listener = PlanCommands()
    client: AsyncMongoClient[Document] = connect(mongo_uri, event_listeners=[listener])
    try:
        yield client[db.name], listener
    finally:
        await client.close()


def inbound(d: dict[str, Any], seq: int) -> Inbound:
    return Inbound(subject(d), headers(d), encode(d), stream_sequence=seq, delivered=1)


async def test_a_batch_of_one_plan_links_its_records_in_one_command(
        watched: tuple[AsyncDatabase[Document], PlanCommands], db: AsyncDatabase[Document],
        nc: nats.NATS) -> None:
    wdb, commands = watched
    await ensure_streams(nc.jetstream())
    recorder = RecorderService(RecorderRepository(wdb), DeadLetterRepository(wdb),
                               JetStreamPublisher(nc))
    r = root()
    plan = r["plan_id"]
    kids = [decision(plan, r["decision_id"], question=f"{i}?") for i in range(6)]
    seq = iter(range(1, 100))
    first = await recorder.record([inbound(d, next(seq)) for d in [r, *kids[:2]]])
    assert {v.verdict for v in first.values()} == {Verdict.ACK}

    commands.names.clear()
    await recorder.record([inbound(d, next(seq)) for d in kids[2:4]])
    # The counter guessed from the batch before: read and written in one command (the
    # batch's facts read the plan's document once more, as before the chain).
    assert commands.names.count("findAndModify") == 1
    assert "update" not in commands.names

    # Another writer of the plan in between: the guess misses, the counter is read.
    await ViolationRepository(db).record(
        InvariantViolation(invariant_id=new_id(), plan_id=plan, severity=Severity.INFO,
                           details="noted"),
        violation_event(ViolationEventType.INVARIANT_VIOLATED, None), utc_now())
    await recorder.record([inbound(d, next(seq)) for d in kids[4:]])

    entry_lines = await AuditReader(db).export([plan])
    report = verify_export(header(exported_at="", parameters={}, principals=[],
                                  plans=entry_lines[0]), entry_lines[1])
    assert report.ok, report.findings
    assert report.records == 1 + 6 + 1
    counter = await db.plans.find_one({"_id": plan})
    assert counter is not None and counter["chain_length"] == 8
    assert counter["next_sequence"] == 7



async def test_a_failed_correction_retried_chains_each_end_and_the_retry(
        make: MakeService, db: AsyncDatabase[Document], nc: nats.NATS,
        tmp_path: Path) -> None:
    await ensure_streams(nc.jetstream())
    recorder = RecorderService(RecorderRepository(db), DeadLetterRepository(db),
                               JetStreamPublisher(nc))
    r = root()
    plan = r["plan_id"]
    (tmp_path / "artifacts" / "out.txt").write_text("made by the step")
    step = decision(plan, r["decision_id"], "tool_invocation",
                    artifacts_produced=[{"artifact_path": "out.txt", "artifact_type": "file"}])
    await recorder.record([inbound(r, 1), inbound(step, 2)])
    # The archive root lies under a regular file: the revert ends FAILED.
    (tmp_path / "a-file").write_text("not a folder")
    broken = make(tmp_path / "a-file" / "archive")
    req = CorrectionRequest.model_validate({"plan_id": plan, "mode": "revert",
                                           "decision_id": step["decision_id"]})
    await broken.request_correction(req)
    await broken.run_plan(plan)
    fixed = make()
    again = await fixed.retry_correction(req.correction_id, new_id(), plan_id=plan)
    assert not isinstance(again, RetryRefused), again
    await fixed.run_plan(plan)
    done = await fixed.get_correction(req.correction_id)
    assert done is not None and done.status is CorrectionStatus.APPLIED

    entries, lines = await AuditReader(db).export([plan])
    assert [ln["kind"] for ln in lines] == [
        "decision", "decision", "correction.request", "correction.end",
        "correction.retry", "decision", "correction.end"]
    report = verify_export(header(exported_at="", parameters={}, principals=[],
                                  plans=entries), lines)
    assert report.ok, report.findings
    # Its status set back by hand is not where its chained events end.
    await db.corrections.update_one({"_id": req.correction_id},
                                    {"$set": {"status": "failed"}})
    entries, lines = await AuditReader(db).export([plan])
    report = verify_export(header(exported_at="", parameters={}, principals=[],
                                  plans=entries), lines)
    assert [f.rule for f in report.findings] == ["unexplained"], report.findings
