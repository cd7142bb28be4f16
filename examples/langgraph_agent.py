"""A LangGraph agent that records its choices, then resumes from wherever an operator corrects it.

    .venv/bin/python examples/langgraph_agent.py [--count N | --once] [--timeout S]

No model: the graph routes by rules over its state, so every run is the same. It is asked
to cache the pricing API's responses and

    strategy        in-memory cache | redis       (the first, unless guidance names the other)
      in_memory     or redis: an implementation choice
        write_files "implements" it: writes files under ARTIFACTS_ROOT (recorded as a
                    tool call with its artifacts)

Each choice is a decision in the ledger whose actor_state_ref is the LangGraph checkpoint
it was made from; checkpoints go to MongoDB (database LANGGRAPH_DB, default
`langgraph_checkpoints`; `--checkpoints memory` keeps them in the process). After the
first run it waits for resume instructions: revert the strategy from the CLI with
guidance "use redis" and the thread forks from the strategy checkpoint, takes the redis
route, and records the new branch under the replacement (README, "A LangGraph agent
resumes after a correction"). `--count N` exits after N instructions (`--once`: 1),
`--timeout S` after S seconds without one (exit 1 if fewer than N came);
`--plan PLAN_ID` only listens, for a plan an earlier run started (MongoDB checkpoints).
NATS_URL, MONGODB_URI default to what `agents up` uses.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run from a clone without installing: make the repository importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pymongo import MongoClient

from clients import DecisionRecorder, DecisionType

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.mongodb import MongoDBSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.state import CompiledStateGraph

    from clients.langgraph.ledger import GraphLedger
    from clients.langgraph.outcomes import Resumed
    from clients.langgraph.state import LedgerState, guidance, pointer
except ImportError as exc:
    sys.exit(f"{exc}\nInstall the LangGraph extra: .venv/bin/pip install -e '.[langgraph]'")

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
MONGODB_URI = os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017/?directConnection=true")
LANGGRAPH_DB = os.environ.get("LANGGRAPH_DB", "langgraph_checkpoints")

TASK = "Cache the responses of the pricing API"
STRATEGIES = ["in-memory cache", "redis"]
IMPLEMENTATIONS = {
    "in-memory cache": ("in_memory", "functools.lru_cache behind a 60 s TTL wrapper",
                        ["cachetools.TTLCache"]),
    "redis": ("redis", "redis-py with SETEX per request key", ["redis hashes per endpoint"]),
}


class AgentState(LedgerState, total=False):
    task: str
    strategy: str
    implementation: str
    files: list[str]


def pick(options: list[str], said: str) -> str:
    """The first option the operator's guidance names, else the first option."""
    return next((o for o in options if o.lower() in said.lower()), options[0])


def build(ledger: GraphLedger, checkpointer: BaseCheckpointSaver[Any],
          artifacts: Path) -> CompiledStateGraph[Any]:
    """The graph; its nodes record through `ledger`."""

    def say(update: dict[str, Any], what: str) -> None:
        print(f"  {pointer(update)['decision_id']}  {what}", flush=True)

    async def strategy(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        chosen = pick(STRATEGIES, guidance(state))
        update = await ledger.route(
            state, config, key="strategy", options=STRATEGIES, chosen=chosen,
            question="Where should cached pricing responses live?",
            rationale=f"guidance: {guidance(state)}" if guidance(state) else "simplest first")
        say(update, f"strategy_choice        {chosen}")
        return update

    def implementation(strategy: str) -> Any:
        name, chosen, alternatives = IMPLEMENTATIONS[strategy]

        async def node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            update = await ledger.decide(
                state, config, decision_type=DecisionType.IMPLEMENTATION_CHOICE,
                question=f"How is the {strategy} built?", chosen_option=chosen,
                alternatives=alternatives, confidence=0.8)
            say(update, f"implementation_choice  {chosen}")
            return {**update, "implementation": chosen}
        node.__name__ = name
        return node

    async def write_files(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        slug = IMPLEMENTATIONS[state["strategy"]][0]
        files = {f"pricing/cache_{slug}.py": f"# {state['implementation']}\n",
                 f"tests/test_cache_{slug}.py": f"# tests for {state['strategy']}\n"}
        update = await ledger.tool_call(
            state, config, {"name": "write_files", "args": {"paths": sorted(files)}},
            artifacts=sorted(files))
        for path, text in files.items():
            (artifacts / path).parent.mkdir(parents=True, exist_ok=True)
            (artifacts / path).write_text(text)
        say(update, f"tool_invocation        write {', '.join(sorted(files))}")
        return {**update, "files": sorted(files)}

    builder = StateGraph(AgentState)
    builder.add_node("strategy", strategy)
    builder.add_node("in_memory", implementation("in-memory cache"))
    builder.add_node("redis", implementation("redis"))
    builder.add_node("write_files", write_files)
    builder.add_edge(START, "strategy")
    builder.add_conditional_edges("strategy", GraphLedger.follow("strategy"),
                                  {"in-memory cache": "in_memory", "redis": "redis"})
    builder.add_edge("in_memory", "write_files")
    builder.add_edge("redis", "write_files")
    builder.add_edge("write_files", END)
    return builder.compile(checkpointer=checkpointer)


async def main(args: argparse.Namespace) -> int:
    artifacts = Path(os.environ.get("ARTIFACTS_ROOT") or tempfile.mkdtemp(prefix="agent-"))
    mongo: MongoClient[Any] | None = (MongoClient(MONGODB_URI)
                                      if args.checkpoints == "mongodb" else None)
    saver: BaseCheckpointSaver[Any] = (MongoDBSaver(mongo, db_name=LANGGRAPH_DB)
                                       if mongo is not None else InMemorySaver())
    try:
        async with DecisionRecorder.connect(NATS_URL) as rec:
            ledger = GraphLedger(rec)
            ledger.bind(build(ledger, saver, artifacts))
            plan_id = args.plan
            if plan_id is None:
                print(f"plan: {TASK} (files under {artifacts})", flush=True)
                run = await ledger.start(TASK, {"task": TASK})
                plan_id = run.plan_id
                print(f"plan_id {plan_id}  thread {run.thread_id}")
                print("Look at it, then revert the strategy:")
                # Spelled as a clone runs them: `agents` is on the PATH only in an
                # activated venv.
                print(f"  .venv/bin/agents plan tree {plan_id}")
                print("  .venv/bin/agents plan correct --mode=revert STRATEGY_ID "
                      "--guidance 'use redis'")
            return await listen(ledger, plan_id, args.count, args.timeout)
    finally:
        if mongo is not None:
            mongo.close()


async def listen(ledger: GraphLedger, plan_id: str, count: int | None,
                 timeout: float | None) -> int:
    """Resume on each instruction for the plan until `count` came (or forever)."""
    handled: asyncio.Queue[Resumed] = asyncio.Queue()

    async def report(outcome: Resumed) -> None:
        i = outcome.instruction
        print(f"{outcome.status.value}: {i.mode.value} {i.correction_id} "
              f"of {i.target.decision_type.value} {i.target.decision_id}; thread "
              f"{outcome.thread_id}, decisions now under {i.resume_at.decision_id} "
              f"(plan {i.resume_at.plan_id})"
              + (f": {outcome.reason}" if outcome.reason else ""), flush=True)
        await handled.put(outcome)

    print(f"waiting for resume instructions of plan {plan_id} (Ctrl-C stops)", flush=True)
    async with await ledger.on_resume(plan_id=plan_id, then=report):
        seen = 0
        while count is None or seen < count:
            try:
                await asyncio.wait_for(handled.get(), timeout)
            except TimeoutError:
                print(f"no resume instruction within {timeout}s", flush=True)
                return 1 if count else 0
            seen += 1
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, help="exit after this many instructions")
    parser.add_argument("--once", dest="count", action="store_const", const=1,
                        help="exit after the first instruction (--count 1)")
    parser.add_argument("--timeout", type=float,
                        help="give up after this many seconds without an instruction")
    parser.add_argument("--plan", help="only listen: resume a plan an earlier run started")
    parser.add_argument("--checkpoints", choices=["mongodb", "memory"], default="mongodb")
    try:
        sys.exit(asyncio.run(main(parser.parse_args())))
    except KeyboardInterrupt:
        sys.exit(130)
