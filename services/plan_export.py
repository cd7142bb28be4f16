"""A plan as one JSON document (`agents plan export`, the console's Export): its record,
every decision (superseded ones too, with context and reasoning), its corrections with
their attempts, the comments, its child plans' records and its violations.

A whole plan, read on purpose: an export is asked for one plan at a time. Reads only,
through the read port (services/read_ports.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.record import Correction
from contracts.decisions.comments import Comment
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.invariants.violations import InvariantViolation
from contracts.shared.timestamps import utc_now
from services.read_model import plan_corrections, plan_records
from services.read_ports import LedgerReads

FORMAT = "decision-ledger/plan-export/v1"


@dataclass(frozen=True, slots=True)
class PlanExport:
    plan_id: str
    exported_at: datetime
    record: PlanRecord | None
    decisions: list[Decision]
    corrections: list[Correction]
    attempts: list[CorrectionAttemptRecord]
    comments: list[Comment]
    child_plans: list[PlanRecord]
    violations: list[InvariantViolation]

    def as_json(self) -> dict[str, Any]:
        def dump(items: list[Any]) -> list[Any]:
            return [i.model_dump(mode="json") for i in items]

        return {"format": FORMAT, "plan_id": self.plan_id,
                "exported_at": self.exported_at.isoformat(),
                "record": self.record.model_dump(mode="json") if self.record else None,
                "decisions": dump(self.decisions), "corrections": dump(self.corrections),
                "attempts": dump(self.attempts), "comments": dump(self.comments),
                "child_plans": dump(self.child_plans), "violations": dump(self.violations)}


async def export_plan(reads: LedgerReads, plan_id: str) -> PlanExport | None:
    """The plan whole; None when nothing is recorded under `plan_id`."""
    decisions = await reads.decisions.full_tree(plan_id)
    record = await reads.plans.get(plan_id)
    if not decisions and record is None:
        return None
    children = await plan_records(reads, [p for d in decisions for p in d.downstream_plan_ids])
    corrections = await plan_corrections(reads, plan_id)
    attempts = [a for c in corrections
                for a in await reads.attempts.list_by_correction(c.correction_id)]
    return PlanExport(
        plan_id=plan_id, exported_at=utc_now(), record=record, decisions=decisions,
        corrections=corrections, attempts=attempts,
        comments=await reads.views.plan_comments(plan_id),
        child_plans=list(children.values()),
        violations=await reads.violations.find(plan_id))
