"""Approvals in a graph: a node that must not go on before a person approved the
decision just recorded pauses the graph with LangGraph's `interrupt()`, and the runtime
resumes it with the verdict.

    async def deploy(state, config):                       # records the tool call
        return await ledger.tool_call(state, config, {"name": "write_file", "args": ...})

    async def approval(state, config):                     # the gate, a node of its own
        return await ledger.gate(state, config)

    builder.add_edge("deploy", "approval")
    builder.add_conditional_edges("approval", GraphLedger.verdict(),
                                  {"approved": "write", "denied": "replan",
                                   "expired": END, "changed": END, "refused": END})

`gate` looks at the decision under the state's pointer: not held by any invariant, it
is approved at once; held, the node calls `interrupt({"approval": ...})` and the graph
stops there, its checkpoint saved. `GraphLedger.start` (and `resume_gated`) then waits
for the verdict with `DecisionRecorder.gate` and resumes the thread with
`Command(resume=verdict)`: the gate node runs again, `interrupt()` returns the verdict,
and it lands in `state["approval"]` (status approved, denied, expired, changed, or
refused by the judge; a denial's reason and guidance). The gate is a node of its own
because LangGraph runs an interrupted node again from its start: the decision is
recorded once, by the node before it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, interrupt

from clients.approvals import GateVerdict
from clients.langgraph.state import pointer
from clients.recorder import DecisionRecorder
from contracts.corrections.resume_points import ResumePoint

APPROVAL_KEY = "approval"
INTERRUPTED = "__interrupt__"


class ApprovalVerdict(TypedDict, total=False):
    """`state["approval"]` after a gate: the verdict on the decision it gated."""

    status: str
    """approved, denied, expired, changed or refused (by the judge)."""
    decision_id: str
    plan_id: str
    held: bool
    reason: str | None
    guidance: str | None
    decided_by: str | None
    append_correction_id: str | None


def as_state(v: GateVerdict, plan_id: str) -> ApprovalVerdict:
    return {"status": v.status.value, "decision_id": v.decision_id, "plan_id": plan_id,
            "held": v.held, "reason": v.reason, "guidance": v.guidance,
            "decided_by": v.decided_by, "append_correction_id": v.append_correction_id}


def asked(values: Mapping[str, Any]) -> dict[str, str] | None:
    """The approval a run stopped at (its interrupt's value), or None."""
    for item in values.get(INTERRUPTED) or ():
        value = getattr(item, "value", None)
        if isinstance(value, dict) and isinstance(value.get(APPROVAL_KEY), dict):
            return dict(value[APPROVAL_KEY])
    return None


class ApprovalGating:
    """The approvals half of `GraphLedger` (clients.langgraph.ledger)."""

    recorder: DecisionRecorder
    _confirm_timeout: float
    approval_timeout: float | None = None
    """Seconds `start` waits for a verdict (None: until the approval expires)."""

    async def gate(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """The gate node's body: approved at once when nothing held the decision under
        the pointer; otherwise the graph is interrupted until the verdict comes."""
        p = pointer(state)
        ref = ResumePoint(plan_id=p["plan_id"], decision_id=p["decision_id"])
        persisted = await self.recorder.held_as(ref, self._confirm_timeout)
        if persisted.hold is None:
            verdict: ApprovalVerdict = {"status": "approved", "decision_id": ref.decision_id,
                                        "plan_id": ref.plan_id, "held": False}
        else:
            verdict = interrupt({APPROVAL_KEY: {"plan_id": ref.plan_id,
                                                "decision_id": ref.decision_id,
                                                "hold": persisted.hold}})
        return {APPROVAL_KEY: verdict}

    @staticmethod
    def verdict(key: str = APPROVAL_KEY) -> Callable[[Mapping[str, Any]], str]:
        """The routing function after a gate: the verdict's status."""
        def routing(state: Mapping[str, Any]) -> str:
            return str((state.get(key) or {}).get("status", "denied"))
        return routing

    async def until_decided(self, graph: Any, values: Mapping[str, Any],
                            config: RunnableConfig) -> dict[str, Any]:
        """Resume the thread with each verdict its gates wait for, until a run ends
        without stopping at a gate; the run's final values."""
        out = dict(values)
        while (approval := asked(out)) is not None:
            ref = ResumePoint(plan_id=approval["plan_id"], decision_id=approval["decision_id"])
            v = await self.recorder.gate(ref, timeout=self.approval_timeout)
            out = dict(await graph.ainvoke(Command(resume=as_state(v, ref.plan_id)), config))
        return out
