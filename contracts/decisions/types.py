"""The kinds of choice an agent records, and the phase of the plan each belongs to."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    STRATEGIZE = "Strategize"
    EXECUTE = "Execute"
    ANY = "Any"


class DecisionType(StrEnum):
    """The 11 kinds of choice an agent records."""

    PROMPT_DEFINITION = "prompt_definition"
    INVARIANT_ENFORCED = "invariant_enforced"
    STRATEGY_CHOICE = "strategy_choice"
    IMPLEMENTATION_CHOICE = "implementation_choice"
    RESOURCE_SELECTION = "resource_selection"
    SUBPLAN_SPAWN = "subplan_spawn"
    SUBPLAN_PARALLEL_SPAWN = "subplan_parallel_spawn"
    TOOL_INVOCATION = "tool_invocation"
    ERROR_RECOVERY = "error_recovery"
    VALIDATION_RESPONSE = "validation_response"
    USER_INTERVENTION = "user_intervention"

    @property
    def phase(self) -> Phase:
        return PHASE_OF[self]


PHASE_OF: dict[DecisionType, Phase] = {
    DecisionType.PROMPT_DEFINITION: Phase.STRATEGIZE,
    DecisionType.INVARIANT_ENFORCED: Phase.STRATEGIZE,
    DecisionType.STRATEGY_CHOICE: Phase.STRATEGIZE,
    DecisionType.IMPLEMENTATION_CHOICE: Phase.EXECUTE,
    DecisionType.RESOURCE_SELECTION: Phase.EXECUTE,
    DecisionType.SUBPLAN_SPAWN: Phase.STRATEGIZE,
    DecisionType.SUBPLAN_PARALLEL_SPAWN: Phase.STRATEGIZE,
    DecisionType.TOOL_INVOCATION: Phase.EXECUTE,
    DecisionType.ERROR_RECOVERY: Phase.EXECUTE,
    DecisionType.VALIDATION_RESPONSE: Phase.EXECUTE,
    DecisionType.USER_INTERVENTION: Phase.ANY,
}
