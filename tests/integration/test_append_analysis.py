"""An append analysed like a revert: the dry run says which child plan it creates, the
invariants that child will run under (its lineage's PLAN invariants, its project's, its
template's, the global ones) and whether its lineage is blocked; the execution computes
it again and records it in the child root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.corrections.states import CorrectionStatus
from contracts.invariants.model import InvariantScope
from contracts.invariants.severity import Severity
from contracts.invariants.violations import InvariantViolation
from services.append_forecast import InvariantForecaster
from services.archive.writer import Archive
from services.corrections.service import CorrectionService
from services.invariants import InvariantService
from store.correction_store import CorrectionStore
from store.database import Document
from store.invariant_store import InvariantStore
from store.invariants import InvariantRepository
from store.plans import PlanRepository
from store.violations import ViolationRepository
from tests.integration.correction_support import chain_plan, request
from workers.streams import ensure_streams

pytestmark = pytest.mark.store


@pytest.fixture
async def svc(db: AsyncDatabase[Document], nc: nats.NATS,
              tmp_path: Path) -> AsyncIterator[CorrectionService]:
    await ensure_streams(nc.jetstream())
    forecaster = InvariantForecaster(invariants=InvariantRepository(db),
                                     violations=ViolationRepository(db),
                                     plans=PlanRepository(db))
    yield CorrectionService(CorrectionStore.open(db, lease_seconds=5), JetStreamPublisher(nc),
                            Archive(tmp_path / "archive", None), forecaster=forecaster)


async def test_dry_run_and_execution_of_an_append_name_the_child_plans_invariants(
        svc: CorrectionService, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    tree = await chain_plan(db, 3)
    plan, target = tree[0].plan_id, tree[1]
    invariants = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    own = await invariants.add_invariant("careful", "Be careful", InvariantScope.PLAN, plan,
                                         check='decision_type != "tool_invocation"')
    glob = await invariants.add_invariant("careful", "Overridden by the plan's")
    words = await invariants.add_invariant("polite", "Be polite", severity=Severity.INFO)

    report = await svc.generate_dry_run_report(request(plan, target.decision_id, "append"))
    child = report.child_plan
    assert child is not None
    assert (child.parent_plan_id, child.spawned_from_decision_id) == (plan, target.decision_id)
    assert [(i.id, i.scope, i.checked) for i in child.invariants] == [
        (own.id, "PLAN", True), (words.id, "GLOBAL", False)]
    assert glob.id not in {i.id for i in child.invariants}
    assert child.blocked_by_plans == []
    assert any("1 checked invariant(s) will evaluate" in w for w in report.warnings)
    assert any("no judge is configured" in w for w in report.warnings)

    v = InvariantViolation(invariant_id=own.id, plan_id=plan, severity=Severity.ERROR,
                           details="dropped a table")
    await invariants.report_violation(v)
    blocked = await svc.generate_dry_run_report(request(plan, target.decision_id, "append"))
    assert blocked.child_plan is not None and blocked.child_plan.blocked_by_plans == [plan]
    assert any("would start blocked" in w for w in blocked.warnings)

    req = request(plan, target.decision_id, "append")
    await svc.request_correction(req, arrival=1)
    assert await svc.run_plan(plan)
    done = await svc.get_correction(req.correction_id)
    assert done is not None and done.status is CorrectionStatus.APPLIED
    [spawned] = done.child_plans_spawned
    child_root = await db["decisions"].find_one({"plan_id": spawned,
                                                 "decision_type": "prompt_definition"})
    assert child_root is not None
    assert "It started under 2 invariant(s): careful (plan, checked), polite (global)" \
        in child_root["rationale"]
    assert "blocked by unresolved error violations" in child_root["rationale"]
