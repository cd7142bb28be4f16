"""LangGraph integration: a graph records its choices, and resumes where an operator corrected it.

    pip install 'decision-ledger[langgraph]'

    class State(LedgerState, total=False):
        task: str
        strategy: str

    async def choose_strategy(state: State, config: RunnableConfig) -> dict[str, Any]:
        chosen = "redis" if "redis" in guidance(state).lower() else "in-memory cache"
        return await ledger.route(state, config, key="strategy", options=OPTIONS,
                                  chosen=chosen, question="Where do cached values live?")

    ledger = GraphLedger(recorder)                 # nodes close over it
    ledger.bind(builder.compile(checkpointer=MongoDBSaver(client)))
    run = await ledger.start("Cache the pricing API", {"task": "..."})
    async with await ledger.on_resume(plan_id=run.plan_id):
        ...                                        # each correction forks the thread

How the two trees map onto each other (docs/langgraph.md):

- The decision pointer lives in the graph state (`state["ledger"]`, a `LedgerPointer`), so
  it is checkpointed with everything else: a thread forked from a checkpoint goes on under
  the decision that was current at that checkpoint, with no bookkeeping in the runtime.
- Each decision's `actor_state_ref` is `langgraph:<thread_id>:<checkpoint_id>`: the
  checkpoint the recording node ran from (its `next` holds that node). Going back to it
  re-runs that node and everything after it, and nothing before.
- A revert forks the thread from the corrected decision's checkpoint with the pointer at
  the replacement and the operator's guidance in the state, then runs the fork: the
  corrected node itself runs again (it is the one that must choose differently) and
  records its new choice under the replacement. An append runs the child plan as a new
  thread (`thread_id` = the child plan's ID) starting under the child plan's root.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Required, Self, TypedDict

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.errors import InvalidUpdateError
    from langgraph.pregel import Pregel
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "clients.langgraph needs LangGraph: install the extra with "
        "pip install 'decision-ledger[langgraph]'") from exc

from clients.building import Artifact, Context, snapshot
from clients.recorder import DecisionRecorder, StaleBranchError
from clients.resume import ResumeSubscription
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.resume_points import ResumePoint
from contracts.corrections.states import CorrectionMode
from contracts.decisions.context import ContextSnapshot, ResourceRef
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id

__all__ = [
    "LEDGER_KEY",
    "REF_PREFIX",
    "GraphLedger",
    "LedgerPointer",
    "LedgerState",
    "ResumeStatus",
    "Resumed",
    "Run",
    "UnresumableInstruction",
    "checkpoint_ref",
    "guidance",
    "parse_checkpoint_ref",
    "pointer",
]

log = logging.getLogger(__name__)

Graph = Pregel[Any, Any, Any, Any]
"""A compiled graph (StateGraph.compile() gives a CompiledStateGraph, a Pregel)."""

LEDGER_KEY = "ledger"
"""The state key holding the LedgerPointer."""

REF_PREFIX = "langgraph:"
"""actor_state_ref = `langgraph:<thread_id>:<checkpoint_id>`."""

RESUME_MARK = "ledger_correction"
"""Checkpoint metadata key naming the correction a fork was made for: a redelivered
instruction finds its fork instead of forking twice."""


class LedgerPointer(TypedDict, total=False):
    """Where the graph's next decision goes, and what the operator said (if anything)."""

    plan_id: Required[str]
    decision_id: Required[str]
    guidance: str
    """The guidance of the correction this branch was resumed by."""
    correction_id: str
    """That correction."""


class LedgerState(TypedDict, total=False):
    """Mix into the graph's state schema: `class State(LedgerState, total=False): ...`."""

    ledger: LedgerPointer


class ResumeStatus(StrEnum):
    RESUMED = "resumed"
    """The fork (revert) or the child thread (append) ran to its end."""
    CONTINUED = "continued"
    """A redelivered instruction whose run had stopped midway: it was run on to the end."""
    ALREADY_DONE = "already_done"
    """A redelivered instruction whose run had finished: nothing ran."""
    UNRESUMABLE = "unresumable"
    """Nothing to go back to (no or foreign actor_state_ref, checkpoint gone): logged."""
    STALE = "stale"
    """A later correction superseded the branch while it ran; its own instruction resumes."""


@dataclass(frozen=True)
class Run:
    """A plan started by `GraphLedger.start`: its root and the thread's final state."""

    root: Decision
    thread_id: str
    config: RunnableConfig
    values: dict[str, Any]

    @property
    def plan_id(self) -> str:
        return self.root.plan_id


@dataclass(frozen=True)
class Resumed:
    """What `GraphLedger.resume` did with one instruction."""

    instruction: ResumeInstruction
    status: ResumeStatus
    thread_id: str | None = None
    config: RunnableConfig | None = None
    values: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None


class UnresumableInstruction(Exception):
    """The instruction names no checkpoint this runtime can go back to; retrying won't help."""


def pointer(state: Mapping[str, Any]) -> LedgerPointer:
    """The state's ledger pointer; a KeyError naming the fix when the state has none."""
    try:
        value: LedgerPointer = state[LEDGER_KEY]
    except KeyError:
        raise KeyError(f"the graph state has no {LEDGER_KEY!r}: start the thread with "
                       "GraphLedger.start, or put a LedgerPointer in its input") from None
    return value


def guidance(state: Mapping[str, Any]) -> str:
    """The operator's guidance this branch was resumed with ('' when none)."""
    return str(state.get(LEDGER_KEY, {}).get("guidance", ""))


def checkpoint_ref(config: RunnableConfig) -> str:
    """`langgraph:<thread_id>:<checkpoint_id>` of the checkpoint the calling node runs from.

    Inside a node LangGraph 1.x gives `checkpoint_id` as None and the checkpoint the task
    was prepared from in `checkpoint_map` (namespace -> id); the root graph's entry ('')
    is the one a fork of the thread starts from, also for a node of a subgraph.
    """
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    checkpoint_id = (configurable.get("checkpoint_map") or {}).get("") \
        or configurable.get("checkpoint_id")
    if thread_id is None or checkpoint_id is None:
        raise ValueError("no thread checkpoint in this config: compile the graph with a "
                         "checkpointer, run it with a thread_id, and pass the node's config")
    return f"{REF_PREFIX}{thread_id}:{checkpoint_id}"


def parse_checkpoint_ref(ref: str | None) -> tuple[str, str]:
    """(thread_id, checkpoint_id) of an actor_state_ref written by `checkpoint_ref`.

    The thread ID may hold ':'; a checkpoint ID (a UUID) does not, so the last ':' splits.
    """
    if not ref or not ref.startswith(REF_PREFIX):
        raise UnresumableInstruction(f"actor_state_ref {ref!r} is not a LangGraph checkpoint "
                                     f"({REF_PREFIX}<thread_id>:<checkpoint_id>)")
    thread_id, sep, checkpoint_id = ref[len(REF_PREFIX):].rpartition(":")
    if not sep or not thread_id or not checkpoint_id:
        raise UnresumableInstruction(f"actor_state_ref {ref!r} names no thread and checkpoint")
    return thread_id, checkpoint_id


def _thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _state_hash_input(state: Mapping[str, Any]) -> str:
    """The state as the node saw it, serialised to hash (the checkpoint keeps the state)."""
    return json.dumps(state, sort_keys=True, default=repr)


class _ThreadLocks:
    """One asyncio.Lock per thread ID while anyone holds or waits for it (then dropped, so
    a long-lived runtime does not keep one per thread it ever ran)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(thread_id, (asyncio.Lock(), 0))
        self._locks[thread_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[thread_id]
            if users == 1:
                del self._locks[thread_id]
            else:
                self._locks[thread_id] = (lock, users - 1)


class GraphLedger:
    """Records a compiled LangGraph graph's choices into the ledger, and resumes it.

    `graph` must be compiled with a checkpointer (MongoDBSaver keeps the checkpoints in the
    ledger's MongoDB; any BaseCheckpointSaver works) and have a `ledger` state key (mix
    `LedgerState` into its schema). With `confirm=True` (default) each decision waits for
    the recorder's write, so a refused one stops the graph right there with its typed
    error (StaleBranchError after a correction superseded the branch); `confirm=False`
    only waits for JetStream's ack and leaves refusals to `recorder.wait_persisted`.
    """

    def __init__(self, recorder: DecisionRecorder, graph: Graph | None = None, *,
                 confirm: bool = True, confirm_timeout: float = 30.0,
                 child_thread: Callable[[ResumeInstruction], str] | None = None,
                 child_input: Callable[[ResumeInstruction], Mapping[str, Any]] | None = None,
                 ) -> None:
        self.recorder = recorder
        self._graph: Graph | None = None
        self._confirm = confirm
        self._confirm_timeout = confirm_timeout
        self._child_thread = child_thread or (lambda i: i.resume_plan_id)
        self._child_input = child_input or (lambda i: {})
        self._threads = _ThreadLocks()
        if graph is not None:
            self.bind(graph)

    def bind(self, graph: Graph) -> Self:
        """The graph to start and resume, when its nodes needed this ledger to be built."""
        if not isinstance(graph.checkpointer, BaseCheckpointSaver):
            raise TypeError("the graph needs a checkpointer to be resumed: "
                            "builder.compile(checkpointer=MongoDBSaver(...))")
        if LEDGER_KEY not in graph.channels:
            raise TypeError(f"the graph's state has no {LEDGER_KEY!r} key: mix LedgerState "
                            "into its state schema")
        self._graph = graph
        return self

    @property
    def graph(self) -> Graph:
        if self._graph is None:
            raise RuntimeError("no graph yet: GraphLedger(recorder, graph) or ledger.bind(graph)")
        return self._graph

    @property
    def _checkpointer(self) -> BaseCheckpointSaver[Any]:
        saver = self.graph.checkpointer
        assert isinstance(saver, BaseCheckpointSaver)  # bind checked it
        return saver

    # --- inside nodes -----------------------------------------------------------------

    async def decide(self, state: Mapping[str, Any], config: RunnableConfig, *,
                     decision_type: DecisionType | str, question: str, chosen_option: str,
                     alternatives: Sequence[str] = (), confidence: float | None = None,
                     rationale: str | None = None, actor_reasoning: str | None = None,
                     artifacts: Sequence[Artifact] = (),
                     resources: Sequence[ResourceRef | str] = (),
                     downstream_plan_ids: Sequence[str] = (),
                     context: Context | None = None) -> dict[str, Any]:
        """Record a choice under the state's pointer; return the update that moves it.

        Call it from the node that makes the choice, with the node's `config`, and return
        (or merge) its result: `return {**await ledger.decide(...), "plan": ...}`.
        `context` defaults to the node's view of the state, hashed, with the checkpoint
        as the place it is kept (the checkpointer stores exactly that state).
        """
        parent = pointer(state)
        ref = checkpoint_ref(config)
        decision = await self.recorder.record(
            parent=ResumePoint(plan_id=parent["plan_id"], decision_id=parent["decision_id"]),
            decision_type=decision_type, question=question, chosen_option=chosen_option,
            alternatives=alternatives, confidence=confidence, rationale=rationale,
            actor_reasoning=actor_reasoning, artifacts=artifacts,
            downstream_plan_ids=downstream_plan_ids,
            context=self._context(context, state, ref, resources))
        if self._confirm:
            await self.recorder.wait_persisted(decision, timeout=self._confirm_timeout)
        return {LEDGER_KEY: {**parent, "plan_id": decision.plan_id,
                             "decision_id": decision.decision_id}}

    async def route(self, state: Mapping[str, Any], config: RunnableConfig, *, key: str,
                    options: Sequence[str], chosen: str, question: str,
                    decision_type: DecisionType | str = DecisionType.STRATEGY_CHOICE,
                    **details: Any) -> dict[str, Any]:
        """Record the route a conditional edge will take, and set `state[key]` to it.

        A routing function cannot write state, so the node before the edge chooses and
        records; the edge then reads the choice: `add_conditional_edges(node,
        GraphLedger.follow(key), {option: next_node, ...})`.
        """
        if chosen not in options:
            raise ValueError(f"route {chosen!r} is not one of {list(options)}")
        update = await self.decide(state, config, decision_type=decision_type,
                                   question=question, chosen_option=chosen,
                                   alternatives=[o for o in options if o != chosen], **details)
        return {**update, key: chosen}

    @staticmethod
    def follow(key: str) -> Callable[[Mapping[str, Any]], str]:
        """The routing function of an edge whose route a node chose with `route`."""
        def routing(state: Mapping[str, Any]) -> str:
            return str(state[key])
        return routing

    async def tool_call(self, state: Mapping[str, Any], config: RunnableConfig,
                        call: Mapping[str, Any], **details: Any) -> dict[str, Any]:
        """Record a tool call (a LangChain ToolCall: `name`, `args`, optional `id`) as a
        tool_invocation before running it."""
        args = json.dumps(call.get("args", {}), sort_keys=True, default=repr)
        question = f"Call tool {call['name']}" + (f" (call {call['id']})" if call.get("id")
                                                  else "")
        return await self.decide(state, config, decision_type=DecisionType.TOOL_INVOCATION,
                                 question=question, chosen_option=f"{call['name']}({args})",
                                 **details)

    def _context(self, context: Context | None, state: Mapping[str, Any], ref: str,
                 resources: Sequence[ResourceRef | str]) -> ContextSnapshot:
        if isinstance(context, ContextSnapshot):
            if context.actor_state_ref is not None:
                return context
            return context.model_copy(update={"actor_state_ref": ref})
        window = _state_hash_input(state) if context is None else context
        return snapshot(window, ref if context is None else None, resources=resources,
                        actor_state_ref=ref)

    # --- running threads --------------------------------------------------------------

    async def start(self, prompt: str, inputs: Mapping[str, Any] | None = None, *,
                    plan_id: str | None = None, thread_id: str | None = None,
                    chosen_option: str | None = None, project: str | None = None,
                    action_template: str | None = None,
                    context: Context | None = None) -> Run:
        """Start a plan: record its root prompt_definition, then run a thread under it.

        The thread ID defaults to the plan ID, so either names the other.
        """
        plan_id = plan_id or new_id()
        thread_id = thread_id or plan_id
        root = await self.recorder.root(
            prompt, plan_id=plan_id, chosen_option=chosen_option, project=project,
            action_template=action_template,
            context=snapshot(prompt) if context is None else context)
        if self._confirm:
            await self.recorder.wait_persisted(root, timeout=self._confirm_timeout)
        config = _thread(thread_id)
        start: LedgerPointer = {"plan_id": root.plan_id, "decision_id": root.decision_id}
        async with self._threads.hold(thread_id):
            values = await self.graph.ainvoke({**(inputs or {}), LEDGER_KEY: start}, config)
        return Run(root=root, thread_id=thread_id, config=config, values=dict(values))

    async def resume(self, instruction: ResumeInstruction) -> Resumed:
        """Carry out one instruction: fork the thread (revert) or run the child (append).

        Safe to call again with the same instruction (a redelivery): a fork already made
        for the correction is found by its checkpoint metadata and run on if it stopped
        midway, never made twice. Waits for a run of the same thread that this ledger
        started to end first (a run on the reverted branch ends at its next decision,
        with StaleBranchError), so two runs never write one thread's checkpoints at once.
        Raises UnresumableInstruction when there is nothing to go back to,
        StaleBranchError when a later correction superseded the branch.
        """
        if instruction.mode is CorrectionMode.REVERT:
            thread_id, checkpoint_id = parse_checkpoint_ref(instruction.target.actor_state_ref)
            async with self._threads.hold(thread_id):
                return await self._fork(instruction, thread_id, checkpoint_id)
        thread_id = self._child_thread(instruction)
        async with self._threads.hold(thread_id):
            return await self._child(instruction, thread_id)

    async def _fork(self, instruction: ResumeInstruction, thread_id: str,
                    checkpoint_id: str) -> Resumed:
        thread = _thread(thread_id)
        cid = instruction.correction_id
        async for _made in self.graph.aget_state_history(thread, filter={RESUME_MARK: cid},
                                                         limit=1):
            return await self._run_on(instruction, thread_id)
        source: RunnableConfig = {"configurable": {
            "thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        if await self._checkpointer.aget_tuple(source) is None:
            raise UnresumableInstruction(
                f"checkpoint {checkpoint_id} of thread {thread_id} is not in this runtime's "
                "checkpointer")
        at = instruction.resume_at
        moved: LedgerPointer = {"plan_id": at.plan_id, "decision_id": at.decision_id,
                                "guidance": instruction.guidance, "correction_id": cid}
        try:
            # as_node left out: LangGraph replays the writers of the node that produced the
            # checkpoint, so the fork's next tasks are the checkpoint's own, the corrected
            # node among them.
            forked = await self.graph.aupdate_state(
                {**source, "metadata": {RESUME_MARK: cid}}, {LEDGER_KEY: moved})
        except InvalidUpdateError as exc:
            raise UnresumableInstruction(
                f"cannot fork thread {thread_id} at {checkpoint_id}: {exc}") from exc
        values = await self.graph.ainvoke(None, forked)
        return Resumed(instruction, ResumeStatus.RESUMED, thread_id, forked, dict(values))

    async def _child(self, instruction: ResumeInstruction, thread_id: str) -> Resumed:
        existing = await self._checkpointer.aget_tuple(_thread(thread_id))
        if existing is not None:
            return await self._run_on(instruction, thread_id)
        at = instruction.resume_at
        start: LedgerPointer = {"plan_id": at.plan_id, "decision_id": at.decision_id,
                                "guidance": instruction.guidance,
                                "correction_id": instruction.correction_id}
        config = _thread(thread_id)
        values = await self.graph.ainvoke(
            {**self._child_input(instruction), LEDGER_KEY: start}, config)
        return Resumed(instruction, ResumeStatus.RESUMED, thread_id, config, dict(values))

    async def _run_on(self, instruction: ResumeInstruction, thread_id: str) -> Resumed:
        """A redelivery: run the thread on if the resumed run stopped before its end."""
        config = _thread(thread_id)
        head = await self.graph.aget_state(config)
        mine = head.values.get(LEDGER_KEY, {}).get("correction_id") \
            == instruction.correction_id
        if mine and head.next:
            values = await self.graph.ainvoke(None, config)
            return Resumed(instruction, ResumeStatus.CONTINUED, thread_id, config,
                           dict(values))
        return Resumed(instruction, ResumeStatus.ALREADY_DONE, thread_id, config,
                       dict(head.values))

    # --- subscribing ------------------------------------------------------------------

    async def on_resume(self, *, plan_id: str | None = None, durable: str | None = None,
                        then: Callable[[Resumed], Awaitable[None]] | None = None,
                        **options: Any) -> ResumeSubscription:
        """Resume the graph on every instruction for `plan_id` (or every plan, with a
        `durable` name): `DecisionRecorder.on_resume` with `resume` as the callback, so an
        instruction is acked only after its fork ran. `then` sees each outcome.

        An instruction that cannot be resumed (UnresumableInstruction) or whose branch a
        later correction superseded (StaleBranchError) is logged and acked: delivering it
        again cannot help. Anything else raises, and the instruction comes again later.
        Returns the recorder's ResumeSubscription (`await sub.stop()`, `async with`);
        `options` go to `DecisionRecorder.on_resume` (`plan_ids`, `ack_wait`, ...).
        """
        async def handle(instruction: ResumeInstruction) -> None:
            try:
                outcome = await self.resume(instruction)
            except UnresumableInstruction as exc:
                log.error("correction %s of plan %s: cannot resume: %s",
                          instruction.correction_id, instruction.plan_id, exc)
                outcome = Resumed(instruction, ResumeStatus.UNRESUMABLE, reason=str(exc))
            except StaleBranchError as exc:
                log.warning("correction %s of plan %s: its branch was superseded while it "
                            "ran (%s); the later correction resumes it",
                            instruction.correction_id, instruction.plan_id, exc)
                outcome = Resumed(instruction, ResumeStatus.STALE, reason=str(exc))
            if then is not None:
                await then(outcome)

        return await self.recorder.on_resume(handle, plan_id=plan_id, durable=durable, **options)
