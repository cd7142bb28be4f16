"""The LangGraph integration against real servers and workers, with a real compiled graph:
decisions carry their checkpoint, a revert forks the thread there and re-runs only what
follows, an append runs the child plan as a new thread, an instruction that came while
the runtime was down is handled once, and a run on a superseded branch gets the typed
error. One test runs examples/langgraph_agent.py the way the README walkthrough does."""

from __future__ import annotations

import asyncio
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.mongodb import MongoDBSaver
from langgraph.graph import END, START, StateGraph
from pymongo import MongoClient
from pymongo.asynchronous.database import AsyncDatabase

from clients.building import new_plan_id
from clients.langgraph.ledger import GraphLedger
from clients.langgraph.outcomes import Resumed, ResumeStatus
from clients.langgraph.state import RESUME_MARK, LedgerState, guidance, parse_checkpoint_ref
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.recording_errors import StaleBranchError
from contracts.corrections.events import CorrectionTransitioned
from contracts.corrections.resume_points import ResumePoint
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from deploy.embedded import ManagedServer
from store.database import Document
from store.decisions import DecisionRepository
from tests.conftest import ROOT, worker_env
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import until

pytestmark = pytest.mark.e2e

STRATEGIES = ["in-memory cache", "redis"]


class State(LedgerState, total=False):
    task: str
    strategy: str
    files: list[str]


def build(ledger: GraphLedger, saver: BaseCheckpointSaver[Any], runs: Counter[str],
          gate: asyncio.Event | None = None) -> None:
    """plan (records nothing) -> strategy (a route) -> in_memory | redis -> write (a tool
    call). `runs` counts each node's executions; `gate` holds the implementation nodes."""

    async def plan(state: State) -> dict[str, Any]:
        runs["plan"] += 1
        return {"task": state.get("task", "") + " (planned)"}

    async def strategy(state: State, config: RunnableConfig) -> dict[str, Any]:
        runs["strategy"] += 1
        said = guidance(state).lower()
        chosen = next((o for o in STRATEGIES if o in said), STRATEGIES[0])
        return await ledger.route(state, config, key="strategy", options=STRATEGIES,
                                  chosen=chosen, question="Where does the cache live?")

    def implementation(name: str) -> Any:
        async def node(state: State, config: RunnableConfig) -> dict[str, Any]:
            runs[name] += 1
            if gate is not None:
                await gate.wait()
            return await ledger.decide(
                state, config, decision_type=DecisionType.IMPLEMENTATION_CHOICE,
                question="Which library?", chosen_option=f"{name} v{runs[name]}",
                artifacts=[f"src/{name}.py"])
        return node

    async def write(state: State, config: RunnableConfig) -> dict[str, Any]:
        runs["write"] += 1
        files = [f"src/{state['strategy'].replace(' ', '_')}.py"]
        update = await ledger.tool_call(state, config,
                                        {"name": "write_files", "args": {"paths": files}},
                                        artifacts=files)
        return {**update, "files": files}

    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("strategy", strategy)
    g.add_node("in_memory", implementation("in_memory"))
    g.add_node("redis", implementation("redis"))
    g.add_node("write", write)
    g.add_edge(START, "plan")
    g.add_edge("plan", "strategy")
    g.add_conditional_edges("strategy", GraphLedger.follow("strategy"),
                            {"in-memory cache": "in_memory", "redis": "redis"})
    g.add_edge("in_memory", "write")
    g.add_edge("redis", "write")
    g.add_edge("write", END)
    ledger.bind(g.compile(checkpointer=saver))


@pytest.fixture
async def recorder(workers: InProcessWorkers, nats_server: ManagedServer
                   ) -> AsyncIterator[DecisionRecorder]:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        yield rec


@pytest.fixture
def mongo_saver(mongo_uri: str, db_name: str) -> Any:
    """Checkpoints in the ledger's MongoDB server, in a database of their own."""
    client: MongoClient[Any] = MongoClient(mongo_uri)
    try:
        yield MongoDBSaver(client, db_name=f"{db_name}_checkpoints")
    finally:
        client.close()


async def correct(url: str, plan_id: str, target: str, mode: str,
                  guidance_text: str) -> CorrectionTransitioned:
    async with CorrectionClient.connect(url, requested_by="alice") as ops:
        cid = await ops.request(plan_id, target, mode, guidance_text)
        outcome = await ops.wait_for_outcome(cid, plan_id, timeout=60)
    assert outcome.to_status is CorrectionStatus.APPLIED, outcome
    return outcome


def of_type(tree: list[Decision], t: DecisionType) -> list[Decision]:
    return [d for d in tree if d.decision_type is t]

async def assert_one_new_branch(repo: DecisionRepository, plan_id: str,
                                replacement: str) -> Decision:
    """The current tree is root -> replacement -> strategy (redis) -> implementation ->
    tool call, and nothing else; returns the re-run strategy."""
    tree = await repo.current_tree(plan_id)
    by_id = {d.decision_id: d for d in tree}
    [root] = of_type(tree, DecisionType.PROMPT_DEFINITION)
    strategies = of_type(tree, DecisionType.STRATEGY_CHOICE)
    assert [s.decision_id for s in strategies if s.is_correction] == [replacement]
    [new_strategy] = [s for s in strategies if not s.is_correction]
    [impl] = of_type(tree, DecisionType.IMPLEMENTATION_CHOICE)
    [tool] = of_type(tree, DecisionType.TOOL_INVOCATION)
    assert by_id[replacement].parent_decision_id == root.decision_id
    assert new_strategy.parent_decision_id == replacement
    assert new_strategy.chosen_option == "redis"
    assert (impl.parent_decision_id, impl.chosen_option) == (new_strategy.decision_id,
                                                             "redis v1")
    assert tool.parent_decision_id == impl.decision_id
    assert tool.chosen_option == 'write_files({"paths": ["src/redis.py"]})'
    assert set(by_id) == {root.decision_id, replacement, new_strategy.decision_id,
                          impl.decision_id, tool.decision_id}
    return new_strategy


async def test_a_revert_re_runs_only_the_nodes_after_the_corrected_point(
        recorder: DecisionRecorder, nats_server: ManagedServer,
        db: AsyncDatabase[Document]) -> None:
    runs: Counter[str] = Counter()
    ledger = GraphLedger(recorder)
    build(ledger, InMemorySaver(), runs)
    run = await ledger.start("Cache the pricing API", {"task": "cache"})
    repo = DecisionRepository(db)
    first = await repo.current_tree(run.plan_id)
    [strategy] = of_type(first, DecisionType.STRATEGY_CHOICE)
    assert strategy.chosen_option == "in-memory cache"
    thread, checkpoint = parse_checkpoint_ref(strategy.context_snapshot.actor_state_ref)
    assert thread == run.thread_id == run.plan_id
    # The checkpoint the strategy node ran from: the one whose next task is that node.
    at = await ledger.graph.aget_state({"configurable": {"thread_id": thread,
                                                         "checkpoint_id": checkpoint}})
    assert at.next == ("strategy",)
    assert runs == Counter(plan=1, strategy=1, in_memory=1, write=1)

    outcomes: list[Resumed] = []

    async def seen(outcome: Resumed) -> None:
        outcomes.append(outcome)

    async with await ledger.on_resume(plan_id=run.plan_id, then=seen):
        applied = await correct(nats_server.url, run.plan_id, strategy.decision_id,
                                "revert", "use redis: the API runs on three replicas")
        await until(lambda: _len(outcomes, 1))
    assert outcomes[0].status is ResumeStatus.RESUMED, outcomes[0]
    # plan ran before the corrected point: not again. strategy is the corrected node.
    assert runs == Counter(plan=1, strategy=2, in_memory=1, redis=1, write=2)

    replacement = applied.new_decision_id
    assert replacement is not None
    new_strategy = await assert_one_new_branch(repo, run.plan_id, replacement)
    # The re-run strategy was made from the fork, a child of the original checkpoint.
    _, fork = parse_checkpoint_ref(new_strategy.context_snapshot.actor_state_ref)
    forked = await ledger.graph.aget_state({"configurable": {"thread_id": thread,
                                                             "checkpoint_id": fork}})
    assert forked.metadata is not None
    assert forked.metadata[RESUME_MARK] == applied.correction_id
    assert forked.parent_config is not None
    assert forked.parent_config["configurable"]["checkpoint_id"] == checkpoint
    final = await ledger.graph.aget_state(run.config)
    assert final.values["files"] == ["src/redis.py"]

    # A second revert, deeper: only the implementation and what follows run again.
    [impl] = of_type(await repo.current_tree(run.plan_id), DecisionType.IMPLEMENTATION_CHOICE)
    async with await ledger.on_resume(plan_id=run.plan_id, then=seen):
        again = await correct(nats_server.url, run.plan_id, impl.decision_id, "revert",
                              "pin the redis client version")
        await until(lambda: _len(outcomes, 2))
    assert outcomes[1].status is ResumeStatus.RESUMED
    assert runs == Counter(plan=1, strategy=2, in_memory=1, redis=2, write=3)
    tree = await repo.current_tree(run.plan_id)
    [new_impl] = [d for d in of_type(tree, DecisionType.IMPLEMENTATION_CHOICE)
                  if not d.is_correction]
    assert new_impl.parent_decision_id == again.new_decision_id
    assert new_impl.chosen_option == "redis v2"


async def test_an_instruction_that_came_while_the_runtime_was_down_is_handled_once(
        recorder: DecisionRecorder, nats_server: ManagedServer, mongo_saver: MongoDBSaver,
        db: AsyncDatabase[Document]) -> None:
    """With the MongoDB checkpointer, as a restarted process would find the thread."""
    runs: Counter[str] = Counter()
    ledger = GraphLedger(recorder)
    build(ledger, mongo_saver, runs)
    run = await ledger.start("Cache the pricing API", {"task": "cache"})
    [strategy] = of_type(await DecisionRepository(db).current_tree(run.plan_id),
                         DecisionType.STRATEGY_CHOICE)
    # The runtime subscribes once (its durable exists from now on), then goes down.
    sub = await ledger.on_resume(plan_id=run.plan_id)
    await sub.stop()
    applied = await correct(nats_server.url, run.plan_id, strategy.decision_id, "revert",
                            "use redis")

    # A new runtime: new graph object, same checkpoints in MongoDB.
    runs_after: Counter[str] = Counter()
    restarted = GraphLedger(recorder)
    build(restarted, mongo_saver, runs_after)
    outcomes: list[Resumed] = []

    async def seen(outcome: Resumed) -> None:
        outcomes.append(outcome)

    async with await restarted.on_resume(plan_id=run.plan_id, then=seen) as sub:
        await until(lambda: _len(outcomes, 1))
        await asyncio.sleep(1.5)   # anything more would come now
        assert sub.handled == 1
    assert [(o.status, o.instruction.correction_id) for o in outcomes] \
        == [(ResumeStatus.RESUMED, applied.correction_id)], [o.reason for o in outcomes]
    assert runs_after == Counter(strategy=1, redis=1, write=1)
    forks = [s async for s in restarted.graph.aget_state_history(
        run.config, filter={RESUME_MARK: applied.correction_id})]
    assert len(forks) == 1

    # Handed the same instruction again (a redelivery after a crash past the fork): the
    # fork is found, nothing runs twice.
    again = await restarted.resume(outcomes[0].instruction)
    assert again.status is ResumeStatus.ALREADY_DONE
    assert runs_after == Counter(strategy=1, redis=1, write=1)


async def test_an_append_runs_the_child_plan_as_a_new_thread_with_the_guidance(
        recorder: DecisionRecorder, nats_server: ManagedServer,
        db: AsyncDatabase[Document]) -> None:
    runs: Counter[str] = Counter()
    ledger = GraphLedger(recorder)
    build(ledger, InMemorySaver(), runs)
    run = await ledger.start("Cache the pricing API", {"task": "cache"})
    repo = DecisionRepository(db)
    before = await repo.current_tree(run.plan_id)
    [strategy] = of_type(before, DecisionType.STRATEGY_CHOICE)
    outcomes: list[Resumed] = []

    async def seen(outcome: Resumed) -> None:
        outcomes.append(outcome)

    async with await ledger.on_resume(plan_id=run.plan_id, then=seen):
        await correct(nats_server.url, run.plan_id, strategy.decision_id, "append",
                      "also try redis for the shared rate cards")
        await until(lambda: _len(outcomes, 1))
    [done] = outcomes
    instruction = done.instruction
    assert done.status is ResumeStatus.RESUMED
    child = instruction.child_plan_id
    assert child is not None and done.thread_id == child
    assert done.values["ledger"]["guidance"] == "also try redis for the shared rate cards"

    tree = await repo.current_tree(child)
    [root] = of_type(tree, DecisionType.PROMPT_DEFINITION)
    assert root.decision_id == instruction.child_root_decision_id
    [child_strategy] = of_type(tree, DecisionType.STRATEGY_CHOICE)
    [impl] = of_type(tree, DecisionType.IMPLEMENTATION_CHOICE)
    [tool] = of_type(tree, DecisionType.TOOL_INVOCATION)
    assert child_strategy.parent_decision_id == root.decision_id
    assert child_strategy.chosen_option == "redis"          # the guidance steered it
    assert impl.parent_decision_id == child_strategy.decision_id
    assert tool.parent_decision_id == impl.decision_id
    thread, _ = parse_checkpoint_ref(child_strategy.context_snapshot.actor_state_ref)
    assert thread == child
    # The corrected plan goes on unchanged (plus the operator's intervention).
    after = await repo.current_tree(run.plan_id)
    assert {d.decision_id for d in after} - {d.decision_id for d in before} \
        == {instruction.intervention_decision_id}
    assert runs == Counter(plan=2, strategy=2, in_memory=1, redis=1, write=2)


async def test_a_run_that_keeps_recording_on_the_superseded_branch_gets_stale_branch_error(
        recorder: DecisionRecorder, nats_server: ManagedServer,
        db: AsyncDatabase[Document]) -> None:
    """The run is still going (held before its implementation decision) when the strategy
    is reverted: its next decision is refused with the typed error, and only then does
    the fork run on the same thread."""
    runs: Counter[str] = Counter()
    gate = asyncio.Event()
    ledger = GraphLedger(recorder)
    build(ledger, InMemorySaver(), runs, gate)
    plan_id = new_plan_id()
    outcomes: list[Resumed] = []

    async def seen(outcome: Resumed) -> None:
        outcomes.append(outcome)

    async with await ledger.on_resume(plan_id=plan_id, then=seen):
        running = asyncio.create_task(ledger.start("Cache the pricing API", {"task": "c"},
                                                   plan_id=plan_id))
        repo = DecisionRepository(db)

        async def strategy_recorded() -> list[Decision]:
            return of_type(await repo.current_tree(plan_id), DecisionType.STRATEGY_CHOICE)

        [strategy] = await until(strategy_recorded)

        async def at_the_gate() -> bool:   # about to record under the strategy
            return runs["in_memory"] == 1
        await until(at_the_gate)
        applied = await correct(nats_server.url, plan_id, strategy.decision_id, "revert",
                                "use redis")
        await asyncio.sleep(0.5)           # the instruction is in; its fork waits
        assert runs["strategy"] == 1 and not outcomes
        gate.set()
        with pytest.raises(StaleBranchError) as stale:
            await asyncio.wait_for(running, 30)
        assert stale.value.correction_id == applied.correction_id
        assert stale.value.resume_at == ResumePoint(plan_id=plan_id,
                                                    decision_id=applied.new_decision_id)
        await until(lambda: _len(outcomes, 1))
    assert outcomes[0].status is ResumeStatus.RESUMED
    # The old run stopped at the refused decision (no write); the fork went on to the end.
    assert runs == Counter(plan=1, strategy=2, in_memory=1, redis=1, write=1)
    [new_strategy] = [d for d in of_type(await repo.current_tree(plan_id),
                                         DecisionType.STRATEGY_CHOICE) if not d.is_correction]
    assert new_strategy.parent_decision_id == applied.new_decision_id


async def test_the_example_agent_resumes_after_a_revert_from_the_cli(
        workers: InProcessWorkers, nats_server: ManagedServer, mongo_uri: str, db_name: str,
        tmp_path: Path) -> None:
    env = {**worker_env(nats_server.url, mongo_uri, db_name),
           "LANGGRAPH_DB": f"{db_name}_checkpoints", "ARTIFACTS_ROOT": str(tmp_path)}
    agent = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "examples" / "langgraph_agent.py"), "--once",
        "--timeout", "60", cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    assert agent.stdout is not None
    try:
        lines: list[str] = []
        while not lines or not lines[-1].startswith("waiting for resume instructions"):
            line = await asyncio.wait_for(agent.stdout.readline(), 30)
            assert line, "".join(lines)
            lines.append(line.decode())
        out = "".join(lines)
        plan = re.search(r"^plan_id (\w{26})", out, re.M)
        strategy = re.search(r"(\w{26})  strategy_choice +in-memory cache", out)
        assert plan and strategy, out
        assert (tmp_path / "pricing" / "cache_in_memory.py").exists()

        cli = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli.main", "plan", "correct", "--mode=revert",
            strategy[1], "--guidance", "use redis", "--wait", cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        cli_out, _ = await asyncio.wait_for(cli.communicate(), 60)
        assert cli.returncode == 0, cli_out.decode()

        rest, _ = await asyncio.wait_for(agent.communicate(), 60)
        assert agent.returncode == 0, out + rest.decode()
        assert re.search(r"strategy_choice +redis", rest.decode()), rest.decode()
        assert "resumed: revert" in rest.decode()
        assert (tmp_path / "pricing" / "cache_redis.py").exists()

        tree = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli.main", "plan", "tree", plan[1], cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        tree_out, _ = await asyncio.wait_for(tree.communicate(), 60)
        assert tree.returncode == 0, tree_out.decode()
        assert "redis-py with SETEX" in tree_out.decode()
        assert "lru_cache" not in tree_out.decode()
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()


async def _len(items: list[Any], n: int) -> bool:
    return len(items) >= n
