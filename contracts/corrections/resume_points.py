"""What a resume instruction points at: the decision new decisions go under
(`ResumePoint`) and the corrected decision as the runtime recorded it (`ResumeTarget`)."""

from __future__ import annotations

from typing import Protocol

from pydantic import Field

from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid

TARGET_TEXT_MAX = 2000
"""Characters of the target's question and chosen option carried in an instruction (the
whole text is in the ledger); keeps an instruction far under the payload limit."""


class DecisionRef(Protocol):
    """Anything that names a decision and its plan: a Decision, a ResumePoint. What a new
    decision needs of its parent."""

    @property
    def plan_id(self) -> str: ...

    @property
    def decision_id(self) -> str: ...


class ResumePoint(Frozen):
    """The decision new decisions hang under, and its plan: pass it as `parent`."""

    plan_id: Ulid = Field(description="Plan new decisions are recorded into.")
    decision_id: Ulid = Field(description="Their parent (directly, or by ancestry).")


class ResumeTarget(Frozen):
    """The corrected decision, as the runtime recorded it."""

    decision_id: Ulid = Field(description="The decision the operator corrected.")
    decision_type: DecisionType = Field(description="Its type.")
    parent_decision_id: Ulid | None = Field(description="Its parent (None for a root).")
    question: str = Field(description=f"Its question, cut at {TARGET_TEXT_MAX} characters.")
    chosen_option: str = Field(
        description=f"What the agent chose, cut at {TARGET_TEXT_MAX} characters.")
    actor_state_ref: str | None = Field(
        description="context_snapshot.actor_state_ref of the target: the runtime checkpoint "
        "the choice was made from, to go back to. None if the agent recorded none.")
    hot_context_ref: str = Field(description="Where the agent stored the context window.")

    @classmethod
    def of(cls, d: Decision) -> ResumeTarget:
        return cls(decision_id=d.decision_id, decision_type=d.decision_type,
                   parent_decision_id=d.parent_decision_id,
                   question=d.question[:TARGET_TEXT_MAX],
                   chosen_option=d.chosen_option[:TARGET_TEXT_MAX],
                   actor_state_ref=d.context_snapshot.actor_state_ref,
                   hot_context_ref=d.context_snapshot.hot_context_ref)
