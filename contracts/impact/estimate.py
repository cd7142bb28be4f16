"""How long the decisions a correction invalidates took, from recorded history: the
dry run's recompute-time estimate."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import NamedTuple

from contracts.decisions.types import DecisionType
from contracts.impact.views import DecisionView

DEFAULT_DECISION_SECONDS = 30.0
"""Recompute time assumed per decision whose type has no recorded history in the sample.

Thirty seconds is roughly one LLM round trip with a tool call; it is only a fallback,
and the dry run says when it was used."""


class TimingSample(NamedTuple):
    """How long one recorded decision took: from its parent's creation to its own."""

    decision_type: DecisionType
    created_at: datetime
    parent_created_at: datetime


def timing_samples(views: Iterable[DecisionView]) -> list[TimingSample]:
    """Samples for the views whose parent is among them (e.g. an affected subtree)."""
    by_id = {v.decision_id: v for v in views}
    out: list[TimingSample] = []
    for v in by_id.values():
        parent = by_id.get(v.parent_decision_id) if v.parent_decision_id else None
        if v.created_at is not None and parent is not None and parent.created_at is not None:
            out.append(TimingSample(v.decision_type, v.created_at, parent.created_at))
    return out


def type_durations(
    samples: Iterable[tuple[DecisionType, datetime, datetime]],
) -> dict[DecisionType, float]:
    """Median seconds per decision type, from (type, created_at, parent's created_at).

    The median, because one decision that waited hours for a human would drag a
    mean far from the typical case. Negative gaps (clock skew between agents) are
    dropped rather than clamped, so they do not pull the median toward zero.
    """
    gaps: dict[DecisionType, list[float]] = defaultdict(list)
    for decision_type, created_at, parent_created_at in samples:
        gap = (created_at - parent_created_at).total_seconds()
        if gap >= 0:
            gaps[decision_type].append(gap)
    return {t: float(statistics.median(g)) for t, g in gaps.items()}


def estimate_recompute_seconds(
    types: Iterable[DecisionType],
    durations: Mapping[DecisionType, float],
    fallback: float = DEFAULT_DECISION_SECONDS,
) -> float:
    """Sum of each affected decision's typical duration; `fallback` for unknown types."""
    return float(sum(durations.get(t, fallback) for t in types))


def types_without_history(
    types: Iterable[DecisionType], durations: Mapping[DecisionType, float]
) -> frozenset[DecisionType]:
    return frozenset(t for t in types if t not in durations)
