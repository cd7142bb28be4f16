"""Impact analysis: which decisions, files and child plans a correction would touch.

The analysis is a BFS from the target over the *current* tree (decisions not yet
superseded), following three kinds of edge, in this order for each decision:
its children by parent link, its declared dependents (`downstream_decision_ids`),
and the child plans it spawned (`downstream_plan_ids`), whose root decisions are
then followed in turn, so child plans are reached transitively. Every node is
visited once, so a cycle among declared dependents cannot loop. The last two edges
never leave the target's plan family (`Family`), whatever was recorded.

The store never hands over a whole plan: `ImpactWalk.expand` lets it fetch
one BFS level per round trip (the views of the frontier's decisions and the roots
of the frontier's plans), so the cost follows the affected subtree, not the plan.
The tests hold a second BFS over a whole in-memory graph (tests/impact_graph.py:
`compute_impact`, one queue, no levels), property-tested to agree with this one.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple, Self

from pydantic import Field, model_validator

from contracts.archive.preview import ArchivePreview, archive_warnings
from contracts.corrections.model import INLINE_IDS_MAX, CorrectionMode, CorrectionRequest
from contracts.decisions.model import ArtifactRef, Decision, DecisionType
from contracts.shared.base import Frozen
from contracts.shared.errors import TargetNotFound
from contracts.shared.ids import Ulid

LOW_RISK_MAX = 3
"""At most this many affected decisions (target included) is low risk."""
MEDIUM_RISK_MAX = 10
"""At most this many is medium risk; more is high."""

DEFAULT_DECISION_SECONDS = 30.0
"""Recompute time assumed per decision whose type has no recorded history in the sample.

Thirty seconds is roughly one LLM round trip with a tool call; it is only a fallback,
and the dry run says when it was used."""


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


# --- the view of the tree the BFS needs ------------------------------------------


class NodeKind(StrEnum):
    DECISION = "decision"
    PLAN = "plan"


class Ref(NamedTuple):
    """A BFS node: a decision, or a child plan whose roots are still to be followed."""

    kind: NodeKind
    id: str


@dataclass(frozen=True, slots=True)
class DecisionView:
    """What the BFS needs to know about one decision.

    `children` are the IDs of its current children in the order the store lists
    them (sequence_number ascending, then decision_id); that order becomes the BFS
    order, so every store (and the tests' in-memory graph) must use the same one.
    """

    decision_id: str
    decision_type: DecisionType
    children: tuple[str, ...] = ()
    dependents: tuple[str, ...] = ()
    child_plans: tuple[str, ...] = ()
    artifacts: tuple[ArtifactRef, ...] = ()
    parent_decision_id: str | None = None
    created_at: datetime | None = None
    superseded: bool = False
    plan_id: str | None = None
    sequence_number: int | None = None

    @classmethod
    def from_decision(cls, decision: Decision, children: Sequence[str] = ()) -> DecisionView:
        return cls(
            decision_id=decision.decision_id,
            decision_type=decision.decision_type,
            children=tuple(children),
            dependents=tuple(decision.downstream_decision_ids),
            child_plans=tuple(decision.downstream_plan_ids),
            artifacts=tuple(decision.artifacts_produced),
            parent_decision_id=decision.parent_decision_id,
            created_at=decision.created_at,
            superseded=decision.superseded_by is not None,
            plan_id=decision.plan_id,
            sequence_number=decision.sequence_number,
        )

    def edges(self) -> tuple[Ref, ...]:
        return (
            *(Ref(NodeKind.DECISION, c) for c in self.children),
            *(Ref(NodeKind.DECISION, d) for d in self.dependents),
            *(Ref(NodeKind.PLAN, p) for p in self.child_plans),
        )


@dataclass(frozen=True, slots=True)
class PlanLink:
    """What the walk needs to know about a plan named as a child plan: its recorded
    parent (plans collection; None for data recorded before claims were recorded) and
    when its first decision was created (None: no decision yet)."""

    parent_plan_id: str | None = None
    began_at: datetime | None = None


class Family:
    """The walk never leaves the target's plan family (issue 8).

    A named child plan is followed only if its recorded parent is the naming decision's
    plan; for a plan recorded before parents were (no recorded parent), only if it is
    neither the target's plan nor the naming decision's, and did not begin before the
    naming decision (a plan that began on its own was not spawned by it). A declared
    dependent is followed only inside the naming decision's own plan (a child plan's
    decisions are reached through the plan itself), and in the target's plan only if it
    was recorded after the target: every ancestor of the target was recorded before it
    (sequence numbers follow the tree), and so was nothing that depends on it."""

    def __init__(self, target_decision_id: str) -> None:
        self.target_decision_id = target_decision_id
        self.target_plan: str | None = None
        self.target_sequence: int | None = None
        self.claimants: dict[str, list[DecisionView]] = defaultdict(list)
        """Child plan -> every affected decision that named it."""
        self.namers: dict[str, list[DecisionView]] = defaultdict(list)
        """Dependent decision -> every affected decision that declared it."""
        self.children: set[str] = set()
        """Children of affected decisions, and roots of plans entered: always followed."""

    def visited(self, view: DecisionView) -> None:
        if view.decision_id == self.target_decision_id:
            self.target_plan = view.plan_id
            self.target_sequence = view.sequence_number

    def note_edges(self, view: DecisionView) -> None:
        """Every edge of an affected decision counts, seen or not: a node refused by one
        namer is followed if any affected namer allows it, whatever the BFS order."""
        self.children.update(view.children)
        for d in view.dependents:
            self.namers[d].append(view)
        for p in view.child_plans:
            self.claimants[p].append(view)

    def entered(self, roots: Iterable[str]) -> None:
        self.children.update(roots)

    def plan_ok(self, plan_id: str, link: PlanLink | None) -> bool:
        return any(_claims(by, plan_id, link or PlanLink(), self.target_plan)
                   for by in self.claimants.get(plan_id, ()))

    def dependent_ok(self, view: DecisionView) -> bool:
        if view.decision_id in self.children or view.decision_id == self.target_decision_id:
            return True
        return any(view.plan_id == by.plan_id for by in self.namers.get(view.decision_id, ())) \
            and (view.plan_id != self.target_plan or view.sequence_number is None
                 or self.target_sequence is None or view.sequence_number > self.target_sequence)


def _claims(by: DecisionView, plan_id: str, link: PlanLink, target_plan: str | None) -> bool:
    """May `by` take the walk into `plan_id`? See Family."""
    if plan_id in (target_plan, by.plan_id):
        return False
    if link.parent_plan_id is not None:
        return link.parent_plan_id == by.plan_id
    return link.began_at is None or by.created_at is None or link.began_at >= by.created_at


def child_order(decisions: Iterable[Decision]) -> list[str]:
    """IDs in the order children are listed: sequence_number, unnumbered last, then ID."""
    return [
        d.decision_id
        for d in sorted(
            decisions,
            key=lambda d: (d.sequence_number is None, d.sequence_number or 0, d.decision_id),
        )
    ]


# --- level-by-level BFS, for the store --------------------------------------------


class ImpactWalk:
    """The BFS between two round trips: call `expand` with the frontier's views until `done`.

    The one mutable object in the domain, on purpose: copying the visited set each
    round would make a 10,000-deep chain quadratic. It still does no I/O, and the
    result depends only on what it was fed.
    """

    def __init__(self, target_decision_id: str, limit: int | None = None) -> None:
        self.target_decision_id = target_decision_id
        self.limit = limit
        """Stop once more than this many decisions are affected (None: walk it all)."""
        self.exceeded = False
        first = Ref(NodeKind.DECISION, target_decision_id)
        self._frontier: tuple[Ref, ...] = (first,)
        self._seen: set[Ref] = {first}
        self._affected: list[DecisionView] = []
        self._plans: list[str] = []
        self._family = Family(target_decision_id)
        self.rounds = 0

    @property
    def done(self) -> bool:
        return not self._frontier

    @property
    def frontier(self) -> tuple[Ref, ...]:
        return self._frontier

    @property
    def decision_ids_wanted(self) -> tuple[str, ...]:
        """Decisions whose views the next `expand` needs (a missing one counts as gone)."""
        return tuple(r.id for r in self._frontier if r.kind is NodeKind.DECISION)

    @property
    def plan_ids_wanted(self) -> tuple[str, ...]:
        """Plans whose current root decisions the next `expand` needs."""
        return tuple(r.id for r in self._frontier if r.kind is NodeKind.PLAN)

    @property
    def affected(self) -> tuple[DecisionView, ...]:
        return tuple(self._affected)

    @property
    def child_plan_ids(self) -> tuple[str, ...]:
        return tuple(self._plans)

    def expand(
        self,
        decisions: Mapping[str, DecisionView],
        plan_roots: Mapping[str, Sequence[str]],
        plan_links: Mapping[str, PlanLink] | None = None,
    ) -> tuple[Ref, ...]:
        """Visit one BFS level in order; return the next frontier.

        `decisions` holds the views of `decision_ids_wanted` that exist (extra entries
        are ignored); `plan_roots` the current roots of `plan_ids_wanted`, `plan_links`
        their recorded parents and first decisions (missing: none recorded).
        """
        nxt: list[Ref] = []
        links = plan_links or {}
        for ref in self._frontier:
            if ref.kind is NodeKind.PLAN:
                if not self._family.plan_ok(ref.id, links.get(ref.id)):
                    self._seen.discard(ref)  # another claimant may still take it
                    continue
                self._plans.append(ref.id)
                self._family.entered(plan_roots.get(ref.id, ()))
                edges: Iterable[Ref] = (
                    Ref(NodeKind.DECISION, r) for r in plan_roots.get(ref.id, ()))
            else:
                view = decisions.get(ref.id)
                if view is None or not _follow(view, ref, self.target_decision_id):
                    continue
                if not self._family.dependent_ok(view):
                    # Not this way; it may still be reached as a child of the subtree.
                    self._seen.discard(ref)
                    continue
                self._family.visited(view)
                self._affected.append(view)
                if self.limit is not None and len(self._affected) > self.limit:
                    # Too big to correct: stop here rather than read the rest of a
                    # 100,000-decision subtree only to refuse it.
                    self.exceeded = True
                    self._frontier = ()
                    self.rounds += 1
                    return self._frontier
                edges = view.edges()
                self._family.note_edges(view)
            for edge in edges:
                if edge not in self._seen:
                    self._seen.add(edge)
                    nxt.append(edge)
        self._frontier = tuple(nxt)
        self.rounds += 1
        return self._frontier


def _follow(view: DecisionView, ref: Ref, target: str) -> bool:
    # The target is analysed even when superseded, so a dry run can still report on
    # it (with a warning); anything else must be in the current tree.
    return not view.superseded or ref.id == target


# --- recompute time from recorded history ---------------------------------------


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


# --- the result --------------------------------------------------------------------


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


# --- dry run -------------------------------------------------------------------------


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
) -> DryRunReport:
    """The report, with every warning an operator should read before applying.

    `archive` is what the archive would do with the artifacts, from a look at them
    (its warnings replace the plain list of what would be archived).

    Its lists are cut to their first `inline` entries (with their counts), so the reply
    fits in one NATS message whatever the size of the subtree.
    """
    if request.decision_id != impact.target_decision_id:
        raise ValueError("the impact was computed for another target")
    revert = request.mode is CorrectionMode.REVERT
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
    if revert and impact.risk_level is RiskLevel.HIGH:
        warnings.append(
            f"High risk: {impact.affected_count} decisions would be superseded "
            f"(more than {MEDIUM_RISK_MAX}).")
    plans = impact.affected_child_plan_ids
    if revert and plans:
        warnings.append(f"{len(plans)} child plan(s) would be rolled back: {_listing(plans)}.")
    if revert and archive is not None:
        warnings.extend(archive_warnings(archive))
    elif revert and impact.affected_files:
        warnings.append(
            f"{len(impact.affected_files)} artifact(s) would be archived: "
            f"{_listing(impact.affected_files)}.")
    if not revert:
        warnings.append(
            f"Append mode leaves the existing tree untouched: the target and the "
            f"{impact.affected_count - 1} decision(s) below it stay current; a child plan "
            "carrying the guidance is spawned under the target.")
        if request.chosen_option is not None:
            warnings.append("chosen_option is ignored in append mode; it names the "
                            "replacement decision of a revert.")
    if revert and fallback_types:
        names = ", ".join(sorted(t.value for t in fallback_types))
        warnings.append(
            f"No recorded history for {names}: the estimate assumes "
            f"{DEFAULT_DECISION_SECONDS:g}s per such decision.")
    invalidate = list(impact.affected_decision_ids) if revert else []
    rollback = list(plans) if revert else []
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
    )
