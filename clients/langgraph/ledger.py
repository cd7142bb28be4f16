"""`GraphLedger`: a compiled graph bound to the ledger. Its nodes record through it
(clients.langgraph.nodes); it starts plans as threads, and resumes them on the ledger's
instructions (clients.langgraph.resuming)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Self

from langgraph.checkpoint.base import BaseCheckpointSaver

from clients.building import Context, snapshot
from clients.langgraph.approvals import ApprovalGating
from clients.langgraph.nodes import NodeRecording
from clients.langgraph.outcomes import Resumed, ResumeStatus, Run
from clients.langgraph.resuming import Graph, ThreadLocks, child, fork
from clients.langgraph.state import (
    LEDGER_KEY,
    LedgerPointer,
    UnresumableInstruction,
    parse_checkpoint_ref,
    thread_config,
)
from clients.recorder import DecisionRecorder
from clients.recording_errors import StaleBranchError
from clients.resume import ResumeSubscription
from clients.telemetry import invoke_agent
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.states import CorrectionMode
from contracts.shared.ids import new_id

log = logging.getLogger(__name__)


class GraphLedger(NodeRecording, ApprovalGating):
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
                 approval_timeout: float | None = None) -> None:
        """`approval_timeout`: seconds `start` waits for each verdict a gate asks for
        (clients.langgraph.approvals; None: until the approval expires)."""
        self.recorder = recorder
        self._graph: Graph | None = None
        self._confirm = confirm
        self._confirm_timeout = confirm_timeout
        self._child_thread = child_thread or (lambda i: i.resume_plan_id)
        self._child_input = child_input or (lambda i: {})
        self._threads = ThreadLocks()
        self.approval_timeout = approval_timeout
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
        # The run is the plan's invoke_agent span (clients.telemetry), the graph its agent.
        with invoke_agent(plan_id, agent={"name": self.graph.name}):
            root = await self.recorder.root(
                prompt, plan_id=plan_id, chosen_option=chosen_option, project=project,
                action_template=action_template,
                context=snapshot(prompt) if context is None else context)
            if self._confirm:
                await self.recorder.wait_persisted(root, timeout=self._confirm_timeout)
            config = thread_config(thread_id)
            start: LedgerPointer = {"plan_id": root.plan_id, "decision_id": root.decision_id}
            async with self._threads.hold(thread_id):
                values = await self.until_decided(self.graph, await self.graph.ainvoke(
                    {**(inputs or {}), LEDGER_KEY: start}, config), config)
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
        # A resumed run is an invoke_agent of the plan it records into (the corrected
        # plan, or the child plan of an append), in the corrected plan's conversation.
        at = instruction.resume_at.plan_id
        seen = getattr(self.recorder, "conversation_of", None)  # none in a unit test's stub
        with invoke_agent(at, conversation_id=seen(instruction.plan_id) if seen else None,
                          agent={"name": self.graph.name}):
            if instruction.mode is CorrectionMode.REVERT:
                thread_id, checkpoint_id = parse_checkpoint_ref(
                    instruction.target.actor_state_ref)
                async with self._threads.hold(thread_id):
                    return await fork(self.graph, self._checkpointer, instruction,
                                      thread_id, checkpoint_id)
            thread_id = self._child_thread(instruction)
            async with self._threads.hold(thread_id):
                return await child(self.graph, self._checkpointer, instruction, thread_id,
                                   self._child_input)

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
