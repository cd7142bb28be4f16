"""The ledger's place in a graph's state (`state["ledger"]`, a `LedgerPointer`) and in its
checkpoints (`actor_state_ref` = `langgraph:<thread_id>:<checkpoint_id>`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Required, TypedDict

from langchain_core.runnables import RunnableConfig

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
    approval: dict[str, Any]
    """The verdict of the last gate (clients.langgraph.approvals.ApprovalVerdict)."""


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


def thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def state_hash_input(state: Mapping[str, Any]) -> str:
    """The state as the node saw it, serialised to hash (the checkpoint keeps the state)."""
    return json.dumps(state, sort_keys=True, default=repr)
