"""Carrying out a resume instruction on a graph: fork the thread (revert), run the child
plan's thread (append), or run on a resumed thread a redelivery finds stopped midway. One
run per thread at a time (`ThreadLocks`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import InvalidUpdateError
from langgraph.pregel import Pregel

from clients.langgraph.outcomes import Resumed, ResumeStatus
from clients.langgraph.state import (
    LEDGER_KEY,
    RESUME_MARK,
    LedgerPointer,
    UnresumableInstruction,
    thread_config,
)
from contracts.corrections.resume import ResumeInstruction

Graph = Pregel[Any, Any, Any, Any]
"""A compiled graph (StateGraph.compile() gives a CompiledStateGraph, a Pregel)."""


class ThreadLocks:
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


async def fork(graph: Graph, checkpointer: BaseCheckpointSaver[Any],
               instruction: ResumeInstruction, thread_id: str, checkpoint_id: str) -> Resumed:
    """A revert: fork the thread at the corrected decision's checkpoint, with the pointer
    at the replacement and the guidance in the state, and run the fork."""
    thread = thread_config(thread_id)
    cid = instruction.correction_id
    async for _made in graph.aget_state_history(thread, filter={RESUME_MARK: cid}, limit=1):
        return await run_on(graph, instruction, thread_id)
    source: RunnableConfig = {"configurable": {
        "thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
    if await checkpointer.aget_tuple(source) is None:
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
        forked = await graph.aupdate_state(
            {**source, "metadata": {RESUME_MARK: cid}}, {LEDGER_KEY: moved})
    except InvalidUpdateError as exc:
        raise UnresumableInstruction(
            f"cannot fork thread {thread_id} at {checkpoint_id}: {exc}") from exc
    values = await graph.ainvoke(None, forked)
    return Resumed(instruction, ResumeStatus.RESUMED, thread_id, forked, dict(values))


async def child(graph: Graph, checkpointer: BaseCheckpointSaver[Any],
                instruction: ResumeInstruction, thread_id: str,
                child_input: Callable[[ResumeInstruction], Mapping[str, Any]]) -> Resumed:
    """An append: run the child plan as a new thread under the child plan's root."""
    existing = await checkpointer.aget_tuple(thread_config(thread_id))
    if existing is not None:
        return await run_on(graph, instruction, thread_id)
    at = instruction.resume_at
    start: LedgerPointer = {"plan_id": at.plan_id, "decision_id": at.decision_id,
                            "guidance": instruction.guidance,
                            "correction_id": instruction.correction_id}
    config = thread_config(thread_id)
    values = await graph.ainvoke(
        {**child_input(instruction), LEDGER_KEY: start}, config)
    return Resumed(instruction, ResumeStatus.RESUMED, thread_id, config, dict(values))


async def run_on(graph: Graph, instruction: ResumeInstruction, thread_id: str) -> Resumed:
    """A redelivery: run the thread on if the resumed run stopped before its end."""
    config = thread_config(thread_id)
    head = await graph.aget_state(config)
    mine = head.values.get(LEDGER_KEY, {}).get("correction_id") \
        == instruction.correction_id
    if mine and head.next:
        values = await graph.ainvoke(None, config)
        return Resumed(instruction, ResumeStatus.CONTINUED, thread_id, config,
                       dict(values))
    return Resumed(instruction, ResumeStatus.ALREADY_DONE, thread_id, config,
                   dict(head.values))
