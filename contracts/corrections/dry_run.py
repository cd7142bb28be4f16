"""The dry run's reply: what a correction would do, with every warning an operator
should read before applying it."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pydantic import Field

from contracts.corrections.append_impact import ChildPlanForecast, forecast_warnings
from contracts.corrections.archive.preview import ArchivePreview, archive_warnings
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.decisions.types import DecisionType
from contracts.impact.estimate import DEFAULT_DECISION_SECONDS
from contracts.impact.risk import MEDIUM_RISK_MAX, RiskLevel
from contracts.impact.summary import CorrectionImpact
from contracts.shared.base import Frozen
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import Ulid


class DryRunReport(Frozen):
    """The reply to `corrections.dryrun.<plan_id>`: what the correction would do."""

    correction_id: Ulid = Field(description="From the request.")
    plan_id: Ulid = Field(description="From the request.")
    mode: CorrectionMode = Field(description="From the request.")
    impact: CorrectionImpact = Field(description="The full impact analysis.")
    decisions_to_invalidate: list[Ulid] = Field(
        default_factory=list,
        description="Decisions that would be superseded (revert only; empty for append).",
    )
    child_plans_to_rollback: list[Ulid] = Field(
        default_factory=list, description="Child plans that would be rolled back (revert only)."
    )
    decisions_to_invalidate_count: int = Field(
        default=0, ge=0, description="How many decisions would be superseded (the list holds "
        "the first 100 at most)."
    )
    child_plans_to_rollback_count: int = Field(
        default=0, ge=0, description="How many child plans would be rolled back (the list "
        "holds the first 100 at most)."
    )
    lists_truncated: bool = Field(
        default=False, description="True when any list here or in `impact` holds only its "
        "first 100 entries: the reply stays far under the NATS payload limit."
    )
    exceeds_limit: bool = Field(
        default=False, description="True when the correction would touch more than "
        "`max_decisions` decisions: applying it would FAIL before writing anything.",
    )
    max_decisions: int | None = Field(
        default=None, description="CORRECTIONS_MAX_DECISIONS of the ledger that answered."
    )
    estimated_recompute_time_seconds: float = Field(
        ge=0, description="Wall-clock estimate of the work invalidated (0 for append)."
    )
    warnings: list[str] = Field(
        default_factory=list, description="Human-readable cautions, most serious first."
    )
    child_plan: ChildPlanForecast | None = Field(
        default=None, description="Append only: the child plan it would create, the "
        "invariants it would run under, and whether its lineage is blocked.")
    current_replacement_id: Ulid | None = Field(
        default=None, description="When the target is already superseded: the decision that "
        "stands in for it now (superseded_by followed to the current tree). Correct that "
        "one instead; applying this request would fail (target_superseded)."
    )


def _listing(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def build_dry_run_report(
    request: CorrectionRequest,
    impact: CorrectionImpact,
    *,
    target_superseded: bool,
    current_replacement: str | None = None,
    target_plan_id: str | None = None,
    fallback_types: Collection[DecisionType] = (),
    max_decisions: int | None = None,
    inline: int = INLINE_IDS_MAX,
    archive: ArchivePreview | None = None,
    child_plan: ChildPlanForecast | None = None,
) -> DryRunReport:
    """The report, with every warning an operator should read before applying.

    `archive` is what the archive would do with the artifacts, from a look at them
    (its warnings replace the plain list of what would be archived); `child_plan` what
    an append would start (its warnings follow the append's).

    Its lists are cut to their first `inline` entries (with their counts), so the reply
    fits in one NATS message whatever the size of the subtree.
    """
    if request.decision_id != impact.target_decision_id:
        raise ValueError("the impact was computed for another target")
    revert = request.mode is CorrectionMode.REVERT
    warnings = _failure_warnings(request, impact, revert, target_superseded=target_superseded,
                                 current_replacement=current_replacement,
                                 target_plan_id=target_plan_id, max_decisions=max_decisions)
    warnings += (_revert_warnings(impact, fallback_types, archive) if revert
                 else _append_warnings(request, impact))
    if child_plan is not None and not revert:
        warnings += forecast_warnings(child_plan)
    invalidate = list(impact.affected_decision_ids) if revert else []
    rollback = list(impact.affected_child_plan_ids) if revert else []
    bounded = impact.bounded(inline)
    return DryRunReport(
        correction_id=request.correction_id, plan_id=request.plan_id, mode=request.mode,
        impact=bounded,
        decisions_to_invalidate=invalidate[:inline],
        child_plans_to_rollback=rollback[:inline],
        decisions_to_invalidate_count=len(invalidate),
        child_plans_to_rollback_count=len(rollback),
        lists_truncated=bounded.lists_truncated,
        exceeds_limit=impact.exceeds_limit,
        max_decisions=max_decisions,
        estimated_recompute_time_seconds=impact.estimated_recompute_time_seconds if revert
        else 0.0,
        warnings=warnings,
        current_replacement_id=current_replacement if target_superseded else None,
        child_plan=None if revert else child_plan,
    )


def _failure_warnings(request: CorrectionRequest, impact: CorrectionImpact, revert: bool, *,
                      target_superseded: bool, current_replacement: str | None,
                      target_plan_id: str | None, max_decisions: int | None) -> list[str]:
    """Why applying the correction would fail (or how its counts fall short): read first."""
    warnings: list[str] = []
    if impact.exceeds_limit:
        warnings.append(
            f"Too large: more than {max_decisions} decisions are below the target "
            "(CORRECTIONS_MAX_DECISIONS); the counts here are lower bounds"
            + ("; applying this revert would fail before writing anything." if revert
               else "."))
    if target_superseded:
        instead = (f"the current decision {current_replacement}" if current_replacement
                   else "the decision that replaced it")
        warnings.append(
            f"Target {request.decision_id} is already superseded: applying this correction "
            f"would fail. Correct {instead} instead.")
    if target_plan_id is not None and target_plan_id != request.plan_id:
        warnings.append(
            f"Target {request.decision_id} belongs to plan {target_plan_id}, not "
            f"{request.plan_id}: applying this correction would fail.")
    return warnings


def _revert_warnings(impact: CorrectionImpact, fallback_types: Collection[DecisionType],
                     archive: ArchivePreview | None) -> list[str]:
    """What a revert would remove, and how far its estimate is a guess."""
    warnings: list[str] = []
    if impact.risk_level is RiskLevel.HIGH:
        warnings.append(
            f"High risk: {impact.affected_count} decisions would be superseded "
            f"(more than {MEDIUM_RISK_MAX}).")
    plans = impact.affected_child_plan_ids
    if plans:
        warnings.append(f"{len(plans)} child plan(s) would be rolled back: {_listing(plans)}.")
    if archive is not None:
        warnings.extend(archive_warnings(archive))
    elif impact.affected_files:
        warnings.append(
            f"{len(impact.affected_files)} artifact(s) would be archived: "
            f"{_listing(impact.affected_files)}.")
    if fallback_types:
        names = ", ".join(sorted(t.value for t in fallback_types))
        warnings.append(
            f"No recorded history for {names}: the estimate assumes "
            f"{DEFAULT_DECISION_SECONDS:g}s per such decision.")
    return warnings


def _append_warnings(request: CorrectionRequest, impact: CorrectionImpact) -> list[str]:
    """What an append leaves alone, and what of the request it ignores."""
    warnings = [
        f"Append mode leaves the existing tree untouched: the target and the "
        f"{impact.affected_count - 1} decision(s) below it stay current; a child plan "
        "carrying the guidance is spawned under the target."]
    if request.chosen_option is not None:
        warnings.append("chosen_option is ignored in append mode; it names the "
                        "replacement decision of a revert.")
    return warnings
