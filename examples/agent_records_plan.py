"""An agent records a realistic plan: what it was asked, how it chose to do it, what it ran.

Run it against `agents up` (or scripts/up):

    .venv/bin/python examples/agent_records_plan.py

It prints the plan ID and every decision ID, and the command that reverts the strategy.
NATS_URL defaults to what `agents up` listens on; against a server with access control,
set the agent's credentials (NATS_USER/NATS_PASSWORD, ...: docs/operations.md).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

# Run from a clone without installing: make the repository importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients import DecisionRecorder, DecisionType, NatsCredentials, new_plan_id, snapshot

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


async def main() -> None:
    async with DecisionRecorder.connect(NATS_URL,
                                        credentials=NatsCredentials.from_env()) as rec:
        # A real agent hashes its serialised context window before each choice and
        # stores the window somewhere replayable; `snapshot` does the hashing.
        window = "system: you are a coding agent\nuser: add rate limiting to the public API"
        ctx = snapshot(window, "s3://contexts/demo/0.json", resources=["repo:api"])

        # 1. The root: what the plan is for. It starts a new plan (a new plan_id).
        root = await rec.root("Add rate limiting to the public API",
                              chosen_option="Per-client limits on every public endpoint",
                              project="api", context=ctx)

        # 2. Strategy: every later choice hangs under this one, so reverting it
        #    supersedes all of them (that is what examples/operator_reverts.py shows).
        strategy = await rec.record(
            parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
            question="Where should the request counters live?",
            chosen_option="Redis INCR with a TTL per window",
            alternatives=["in-process token bucket", "a database table"], confidence=0.8,
            rationale="Shared across API replicas; expiry is free.", context=ctx)

        # 3. Implementation choices and the resource they touch, with their artifacts.
        middleware = await rec.record(
            parent=strategy, decision_type=DecisionType.IMPLEMENTATION_CHOICE,
            question="Where is the limit enforced?", chosen_option="An ASGI middleware",
            alternatives=["a decorator per route"], confidence=0.7, context=ctx,
            artifacts=["src/api/limits.py", "src/api/middleware.py"])
        resource = await rec.record(
            parent=middleware, decision_type=DecisionType.RESOURCE_SELECTION,
            question="Which Redis instance?", chosen_option="the shared cache cluster",
            alternatives=["a new dedicated instance"], confidence=0.6, context=ctx)

        # 4. Tool calls: the first test run fails, the agent recovers.
        tests = await rec.record(
            parent=resource, decision_type=DecisionType.TOOL_INVOCATION,
            question="Run the API tests", chosen_option="pytest tests/api -q", context=ctx)
        recovery = await rec.record(
            parent=tests, decision_type=DecisionType.ERROR_RECOVERY,
            question="tests/api/test_limits.py failed: Redis refused the connection",
            chosen_option="Start a Redis container in the test fixture and rerun",
            alternatives=["mock Redis"], confidence=0.9, context=ctx,
            artifacts=["tests/api/conftest.py"])

        # 5. A subplan: the docs are another plan, named before it starts, so the
        #    spawn can point at it (and a revert of the strategy rolls it back too).
        docs_plan = new_plan_id()
        spawn = await rec.record(
            parent=strategy, decision_type=DecisionType.SUBPLAN_SPAWN,
            question="Who documents the limits?", chosen_option="a docs subplan",
            downstream_plan_ids=[docs_plan], context=ctx)
        docs_root = await rec.root("Document the API rate limits", plan_id=docs_plan,
                                   project="api", context=ctx)
        docs_page = await rec.record(
            parent=docs_root, decision_type=DecisionType.IMPLEMENTATION_CHOICE,
            question="Where do the docs go?", chosen_option="docs/limits.md", context=ctx,
            artifacts=["docs/limits.md"])

        recorded = [root, strategy, middleware, resource, tests, recovery, spawn,
                    docs_root, docs_page]
        # Recording is asynchronous: wait until the recorder has stored everything,
        # so the operator example can find it straight away.
        persisted = await rec.wait_all_persisted(recorded, timeout=30)

    print(f"plan_id {root.plan_id}  (child plan {docs_plan})")
    for d, p in zip(recorded, persisted, strict=True):
        print(f"  {d.decision_type.value:<22} {d.decision_id}  seq {p.sequence_number:<2} "
              f"{d.chosen_option}")
    print(f"Look at it with:\n  .venv/bin/agents plan tree {root.plan_id}")
    print("Revert the strategy with:")
    print(f"  .venv/bin/python examples/operator_reverts.py {root.plan_id} "
          f"{strategy.decision_id}")


if __name__ == "__main__":
    asyncio.run(main())
