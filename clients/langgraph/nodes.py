"""What a graph's nodes call to record their choices: a decision, the route a conditional
edge takes, a tool call. Each records under the state's pointer and returns the update
that moves it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from clients.building import Artifact, Context, snapshot
from clients.langgraph.state import LEDGER_KEY, checkpoint_ref, pointer, state_hash_input
from clients.recorder import DecisionRecorder
from contracts.corrections.resume_points import ResumePoint
from contracts.decisions.context import ContextSnapshot, ResourceRef
from contracts.decisions.tools import ToolCall
from contracts.decisions.types import DecisionType


class NodeRecording:
    """The recording half of `GraphLedger` (clients.langgraph.ledger), for its nodes."""

    recorder: DecisionRecorder
    _confirm: bool
    _confirm_timeout: float

    async def decide(self, state: Mapping[str, Any], config: RunnableConfig, *,
                     decision_type: DecisionType | str, question: str, chosen_option: str,
                     alternatives: Sequence[str] = (), confidence: float | None = None,
                     rationale: str | None = None, actor_reasoning: str | None = None,
                     artifacts: Sequence[Artifact] = (),
                     resources: Sequence[ResourceRef | str] = (),
                     downstream_plan_ids: Sequence[str] = (),
                     context: Context | None = None,
                     tool: ToolCall | None = None) -> dict[str, Any]:
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
            context=self._context(context, state, ref, resources), tool=tool)
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
        tool_invocation before running it, naming the tool and its arguments (what
        checked invariants read: a gate after it may then wait for a person)."""
        args = json.dumps(call.get("args", {}), sort_keys=True, default=repr)
        question = f"Call tool {call['name']}" + (f" (call {call['id']})" if call.get("id")
                                                  else "")
        return await self.decide(state, config, decision_type=DecisionType.TOOL_INVOCATION,
                                 question=question, chosen_option=f"{call['name']}({args})",
                                 tool=ToolCall(name=call["name"], arguments=json.loads(args)),
                                 **details)

    def _context(self, context: Context | None, state: Mapping[str, Any], ref: str,
                 resources: Sequence[ResourceRef | str]) -> ContextSnapshot:
        if isinstance(context, ContextSnapshot):
            if context.actor_state_ref is not None:
                return context
            return context.model_copy(update={"actor_state_ref": ref})
        window = state_hash_input(state) if context is None else context
        return snapshot(window, ref if context is None else None, resources=resources,
                        actor_state_ref=ref)
