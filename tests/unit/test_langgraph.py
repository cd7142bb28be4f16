"""The LangGraph integration without servers: checkpoint references, and how a revert forks
a thread (an in-memory graph whose nodes record nothing; recording is tested against the
real servers in tests/integration/test_langgraph.py)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from clients.langgraph.ledger import GraphLedger
from clients.langgraph.outcomes import ResumeStatus
from clients.langgraph.state import (
    RESUME_MARK,
    LedgerState,
    UnresumableInstruction,
    checkpoint_ref,
    guidance,
    parse_checkpoint_ref,
)
from clients.recorder import DecisionRecorder
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.states import CorrectionMode
from contracts.decisions.context import ContextSnapshot
from tests.conftest import ROOT
from tests.unit.test_impact import PLAN
from tests.unit.test_resume_contract import applied
from tests.unit.test_write_sets import revert, target

pytestmark = pytest.mark.unit

NO_RECORDER = cast(DecisionRecorder, None)
"""These graphs record nothing, so the ledger never publishes."""


class State(LedgerState, total=False):
    refs: dict[str, str]
    seen_guidance: str


def graph(runs: Counter[str], saver: InMemorySaver | None = None,
          fail_once: set[str] | None = None) -> Any:
    """a -> b -> c; each node counts its runs and notes the checkpoint it ran from."""
    def node(name: str) -> Any:
        def run(state: State, config: RunnableConfig) -> dict[str, Any]:
            runs[name] += 1
            if fail_once and name in fail_once:
                fail_once.discard(name)
                raise RuntimeError(f"{name} crashed")
            return {"refs": {**state.get("refs", {}), name: checkpoint_ref(config)},
                    "seen_guidance": guidance(state)}
        return run
    g = StateGraph(State)
    for name in "abc":
        g.add_node(name, node(name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=saver or InMemorySaver())


def instruction(ref: str | None) -> ResumeInstruction:
    t = target().model_copy(update={"context_snapshot": ContextSnapshot(
        hot_context_hash="sha256:" + "a" * 64, hot_context_ref="s3://ctx/1",
        actor_state_ref=ref)})
    plan = revert()
    return ResumeInstruction.after_revert(applied(CorrectionMode.REVERT, plan), t, plan)


@pytest.mark.parametrize("thread", ["t1", "plan:01J:x", "a b"])
def test_a_checkpoint_ref_names_the_thread_and_the_checkpoint(thread: str) -> None:
    ref = f"langgraph:{thread}:1f0c5d2e-1111-6222-8003-444455556666"
    assert parse_checkpoint_ref(ref) == (thread, "1f0c5d2e-1111-6222-8003-444455556666")


@pytest.mark.parametrize("ref", [None, "", "s3://ctx/1", "langgraph:", "langgraph:cp",
                                 "langgraph::cp", "langgraph:t1:"])
def test_anything_else_is_unresumable(ref: str | None) -> None:
    with pytest.raises(UnresumableInstruction):
        parse_checkpoint_ref(ref)


async def test_a_node_s_ref_is_the_checkpoint_whose_next_task_is_that_node() -> None:
    runs: Counter[str] = Counter()
    g = graph(runs)
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    out = await g.ainvoke({"ledger": {"plan_id": PLAN, "decision_id": PLAN}}, config)
    for name in "abc":
        thread, checkpoint = parse_checkpoint_ref(out["refs"][name])
        snap = await g.aget_state({"configurable": {"thread_id": thread,
                                                    "checkpoint_id": checkpoint}})
        assert thread == "t1" and snap.next == (name,)


def test_a_graph_without_checkpointer_or_ledger_key_is_refused() -> None:
    g = StateGraph(State)
    g.add_node("a", lambda s: {})
    g.add_edge(START, "a")
    with pytest.raises(TypeError, match="checkpointer"):
        GraphLedger(NO_RECORDER, g.compile())
    p = StateGraph(dict)
    p.add_node("a", lambda s: {})
    p.add_edge(START, "a")
    with pytest.raises(TypeError, match="'ledger'"):
        GraphLedger(NO_RECORDER, p.compile(checkpointer=InMemorySaver()))


async def test_a_revert_forks_once_and_a_redelivery_runs_on_or_does_nothing() -> None:
    runs: Counter[str] = Counter()
    saver = InMemorySaver()
    g = graph(runs, saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    out = await g.ainvoke({"ledger": {"plan_id": PLAN, "decision_id": PLAN}}, config)
    assert runs == Counter(a=1, b=1, c=1)

    # Revert the decision b made; its fork crashes in c, the instruction comes again.
    i = instruction(out["refs"]["b"])
    g2 = graph(runs, saver, fail_once={"c"})
    ledger = GraphLedger(NO_RECORDER, g2)
    with pytest.raises(RuntimeError, match="c crashed"):
        await ledger.resume(i)
    assert runs == Counter(a=1, b=2, c=2)
    again = await ledger.resume(i)
    assert again.status is ResumeStatus.CONTINUED
    assert runs == Counter(a=1, b=2, c=3)                 # b not run twice
    assert again.values["seen_guidance"] == i.guidance
    assert again.values["ledger"]["decision_id"] == i.resume_at.decision_id
    assert again.values["ledger"]["correction_id"] == i.correction_id
    done = await ledger.resume(i)
    assert done.status is ResumeStatus.ALREADY_DONE
    assert runs == Counter(a=1, b=2, c=3)
    forks = [s async for s in g2.aget_state_history(config, filter={RESUME_MARK:
                                                                     i.correction_id})]
    assert len(forks) == 1


async def test_a_revert_with_no_checkpoint_to_go_back_to_is_unresumable() -> None:
    ledger = GraphLedger(NO_RECORDER, graph(Counter()))
    with pytest.raises(UnresumableInstruction, match="not a LangGraph checkpoint"):
        await ledger.resume(instruction(None))
    with pytest.raises(UnresumableInstruction, match="not in this runtime's checkpointer"):
        await ledger.resume(instruction(
            "langgraph:t9:1f0c5d2e-1111-6222-8003-444455556666"))


def test_without_the_extra_the_import_error_names_it() -> None:
    code = ("import sys; sys.modules['langgraph'] = None\n"
            "try:\n    import clients.langgraph\n"
            "except ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "pip install 'decision-ledger[langgraph]'" in out
