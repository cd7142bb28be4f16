"""An operator dry-runs a revert of one decision, reads the report, then applies it.

    .venv/bin/python examples/operator_reverts.py PLAN_ID [DECISION_ID]

Without DECISION_ID it reverts the plan's first current strategy_choice, found in
MongoDB. Exits 0 when the correction is APPLIED, 1 when it FAILED or was CANCELLED,
2 when the dry run refused (unknown decision, already superseded, ...).
NATS_URL, MONGODB_URI and MONGODB_DB default to what `agents up` uses.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

# Run from a clone without installing: make the repository importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients import (
    CorrectionClient,
    CorrectionStatus,
    DecisionType,
    DryRunRefused,
    NatsCredentials,
)
from store.database import connect
from store.decisions import DecisionRepository

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
MONGODB_URI = os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017/?directConnection=true")
MONGODB_DB = os.environ.get("MONGODB_DB", "decisions")

GUIDANCE = "Keep the counters in Postgres: the team does not run Redis in production."


async def first_strategy(plan_id: str) -> str:
    """Reads are MongoDB's job; the operator client only publishes and listens."""
    client = connect(MONGODB_URI)
    try:
        tree = await DecisionRepository(client[MONGODB_DB]).current_tree(plan_id)
    finally:
        await client.close()
    for d in tree:
        if d.decision_type is DecisionType.STRATEGY_CHOICE:
            return d.decision_id
    sys.exit(f"plan {plan_id} has no current strategy_choice; pass a DECISION_ID")


async def main(plan_id: str, decision_id: str | None) -> int:
    decision_id = decision_id or await first_strategy(plan_id)
    async with CorrectionClient.connect(NATS_URL, requested_by="example-operator",
                                        credentials=NatsCredentials.from_env()) as ops:
        # 1. Dry run: what would this revert touch? Nothing is written.
        try:
            report = await ops.dry_run(plan_id, decision_id, "revert", GUIDANCE)
        except DryRunRefused as refused:
            print(f"dry run refused: {refused}")
            return 2
        impact = report.impact
        print(f"dry run: revert {decision_id} in plan {plan_id}")
        print(f"  risk {impact.risk_level.value}, {impact.affected_count} decision(s), "
              f"about {report.estimated_recompute_time_seconds:.0f}s of work to redo")
        print(f"  files: {', '.join(impact.affected_files) or '-'}")
        print(f"  child plans rolled back: {', '.join(report.child_plans_to_rollback) or '-'}")
        for warning in report.warnings:
            print(f"  warning: {warning}")

        # 2. Apply it, and follow the correction's lifecycle until it ends.
        correction_id = await ops.request(plan_id, decision_id, "revert", GUIDANCE,
                                          chosen_option="Postgres counters table")
        print(f"requested correction {correction_id}")
        async for event in ops.follow(correction_id, plan_id, timeout=120):
            print(f"  {event.to_status.value}")
    if event.to_status is CorrectionStatus.APPLIED:
        print(f"APPLIED: replacement decision {event.new_decision_id}, "
              f"{len(event.superseded_ids)} superseded, "
              f"archive {event.archived_artifacts_path}")
        return 0
    print(f"{event.to_status.value.upper()}: {event.error or event.reason}")
    return 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan_id")
    parser.add_argument("decision_id", nargs="?")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.plan_id, args.decision_id)))
