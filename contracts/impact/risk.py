"""How risky a correction is, by how many decisions it touches."""

from __future__ import annotations

from enum import StrEnum

LOW_RISK_MAX = 3
"""At most this many affected decisions (target included) is low risk."""
MEDIUM_RISK_MAX = 10
"""At most this many is medium risk; more is high."""


class RiskLevel(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


def risk_level_for(affected_count: int) -> RiskLevel:
    if affected_count <= LOW_RISK_MAX:
        return RiskLevel.LOW
    if affected_count <= MEDIUM_RISK_MAX:
        return RiskLevel.MEDIUM
    return RiskLevel.HIGH
