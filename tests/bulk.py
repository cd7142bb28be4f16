"""Load whole plans straight into MongoDB, bypassing the recorder (test and bench code).

For test fixtures and benchmarks that need a 100,000-decision plan in seconds rather
than through NATS; the decisions must already be a valid tree (nothing is checked).
Sequence numbers are given in list order and the plan's counter is set past them, as
the recorder would leave it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.shared.timestamps import utc_now
from store.database import DECISIONS, PLANS, Document
from store.decisions import to_document

INSERT_CHUNK = 5000


async def load_plan(db: AsyncDatabase[Document], decisions: Sequence[Decision],
                    now: datetime | None = None) -> list[Decision]:
    """Insert one plan's decisions (parents before children) numbered 0, 1, 2, ..."""
    if not decisions:
        return []
    plan_id = decisions[0].plan_id
    numbered = [d.model_copy(update={"sequence_number": i}) for i, d in enumerate(decisions)]
    for i in range(0, len(numbered), INSERT_CHUNK):
        await db[DECISIONS].insert_many(
            [to_document(d) for d in numbered[i:i + INSERT_CHUNK]], ordered=False)
    root = next((d for d in numbered if d.is_root), None)
    await db[PLANS].update_one(
        {"_id": plan_id},
        {"$set": {"next_sequence": len(numbered),
                  "root_decision_id": root.decision_id if root else None,
                  "project": root.project if root else None,
                  "action_template": root.action_template if root else None},
         "$setOnInsert": {"created_at": now or utc_now(),
                          "status": PlanStatus.ACTIVE.value}},
        upsert=True)
    return numbered
