"""What a correction of a decision touches (`CorrectionImpact`), summed up from a
finished walk."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Self

from pydantic import Field, model_validator

from contracts.decisions.types import DecisionType
from contracts.impact.errors import TargetNotFound
from contracts.impact.estimate import estimate_recompute_seconds, timing_samples, type_durations
from contracts.impact.risk import RiskLevel, risk_level_for
from contracts.impact.views import DecisionView
from contracts.impact.walk import ImpactWalk
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid


class AffectedArtifact(Frozen):
    """An artifact of an affected decision: one line of the revert's archive manifest."""

    decision_id: Ulid = Field(description="The affected decision that produced it.")
    artifact_path: str = Field(description="Its path, as recorded.")
    artifact_type: str = Field(description="Its kind, as recorded.")


class CorrectionImpact(Frozen):
    """What a correction of `target_decision_id` touches."""

    target_decision_id: Ulid = Field(description="The target decision.")
    affected_decision_ids: list[Ulid] = Field(
        min_length=1, description="Affected decisions in BFS order, the target first."
    )
    affected_count: int = Field(description="len(affected_decision_ids), target included.")
    affected_files: list[str] = Field(
        default_factory=list, description="Artifact paths of affected decisions, de-duplicated."
    )
    affected_artifacts: list[AffectedArtifact] = Field(
        default_factory=list,
        description="Every artifact with the decision that produced it (the archive manifest).",
    )
    affected_child_plan_ids: list[Ulid] = Field(
        default_factory=list, description="Child plans reached, transitively, in BFS order."
    )
    estimated_recompute_time_seconds: float = Field(
        ge=0, description="Sum of typical durations of the affected decisions' types."
    )
    risk_level: RiskLevel = Field(description="low <= 3 < medium <= 10 < high.")
    exceeds_limit: bool = Field(
        default=False,
        description="True when the walk stopped after finding more decisions than "
        "CORRECTIONS_MAX_DECISIONS: the counts are then lower bounds, and applying fails.",
    )
    lists_truncated: bool = Field(
        default=False,
        description="True when the lists hold only their first 100 entries (a dry-run "
        "reply); the *_count fields give the full sizes.",
    )
    affected_files_count: int = Field(default=0, ge=0, description="len of the full "
                                      "affected_files.")
    affected_artifacts_count: int = Field(default=0, ge=0, description="len of the full "
                                          "affected_artifacts.")
    affected_child_plan_count: int = Field(default=0, ge=0, description="len of the full "
                                           "affected_child_plan_ids.")

    @model_validator(mode="before")
    @classmethod
    def _counts(cls, data: object) -> object:
        # The counts default to the lists' lengths, so only a bounded copy sets them.
        if isinstance(data, dict):
            for count, items in (("affected_files_count", "affected_files"),
                                 ("affected_artifacts_count", "affected_artifacts"),
                                 ("affected_child_plan_count", "affected_child_plan_ids")):
                if count not in data:
                    data = {**data, count: len(data.get(items) or ())}
        return data

    @property
    def complete(self) -> bool:
        """Every list is whole and the walk was not stopped: fit to plan a revert from."""
        return not (self.exceeds_limit or self.lists_truncated)

    def bounded(self, inline: int = INLINE_IDS_MAX) -> CorrectionImpact:
        """This impact with every list cut to its first `inline` entries (counts kept)."""
        lists = ("affected_decision_ids", "affected_files", "affected_artifacts",
                 "affected_child_plan_ids")
        if all(len(getattr(self, k)) <= inline for k in lists):
            return self
        update: dict[str, object] = {k: getattr(self, k)[:inline] for k in lists}
        return type(self).model_validate(
            self.model_dump() | update | {"lists_truncated": True})

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.affected_decision_ids[0] != self.target_decision_id:
            raise ValueError("the target comes first among the affected decisions")
        listed = len(self.affected_decision_ids)
        if (self.affected_count != listed if not self.lists_truncated
                else self.affected_count < listed):
            raise ValueError("affected_count must equal len(affected_decision_ids)")
        if len(set(self.affected_decision_ids)) != listed:
            raise ValueError("affected_decision_ids must not repeat")
        if self.risk_level is not risk_level_for(self.affected_count):
            raise ValueError(f"risk for {self.affected_count} decisions is "
                             f"{risk_level_for(self.affected_count)}")
        return self


def summarize(
    walk: ImpactWalk, durations: Mapping[DecisionType, float] | None = None
) -> CorrectionImpact:
    """The impact of a finished walk.

    Without `durations`, they come from the affected decisions' own history: how
    long each took after its parent the first time is the best guess of how long it
    takes again, and reading it costs nothing beyond the walk.
    """
    if not walk.done:
        raise ValueError("the walk is not finished; expand it until done")
    impact = _impact(walk.target_decision_id, walk.affected, walk.child_plan_ids, durations)
    return impact.model_copy(update={"exceeds_limit": True}) if walk.exceeded else impact


def _impact(
    target: str,
    affected: Sequence[DecisionView],
    plans: Sequence[str],
    durations: Mapping[DecisionType, float] | None,
) -> CorrectionImpact:
    if not affected or affected[0].decision_id != target:
        raise TargetNotFound(target)
    if durations is None:
        durations = type_durations(timing_samples(affected))
    artifacts = [
        AffectedArtifact(
            decision_id=v.decision_id, artifact_path=a.artifact_path,
            artifact_type=a.artifact_type,
        )
        for v in affected for a in v.artifacts
    ]
    count = len(affected)
    return CorrectionImpact(
        target_decision_id=target,
        affected_decision_ids=[v.decision_id for v in affected],
        affected_count=count,
        affected_files=list(dict.fromkeys(a.artifact_path for a in artifacts)),
        affected_artifacts=artifacts,
        affected_child_plan_ids=list(plans),
        estimated_recompute_time_seconds=estimate_recompute_seconds(
            (v.decision_type for v in affected), durations),
        risk_level=risk_level_for(count),
    )
