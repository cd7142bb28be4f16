"""Impact analysis: BFS over hand-built trees, risk boundaries, recompute estimates,
the dry-run report, and properties tying the level-by-level walk to the plain BFS."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.corrections.dry_run import build_dry_run_report
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.decisions.artifacts import STORED, ArtifactRef
from contracts.decisions.context import ContextSnapshot
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.impact.errors import TargetNotFound
from contracts.impact.estimate import (
    DEFAULT_DECISION_SECONDS,
    TimingSample,
    estimate_recompute_seconds,
    timing_samples,
    type_durations,
    types_without_history,
)
from contracts.impact.risk import LOW_RISK_MAX, MEDIUM_RISK_MAX, RiskLevel, risk_level_for
from contracts.impact.summary import CorrectionImpact, summarize
from contracts.impact.views import DecisionView
from contracts.impact.walk import ImpactWalk
from tests.impact_graph import ImpactGraph, compute_impact, walk_graph
from tests.properties import examples

pytestmark = pytest.mark.unit

T0 = datetime(2025, 1, 1, tzinfo=UTC)
DT = DecisionType


def uid(n: int) -> str:
    """A valid ULID that reads as a number, so failures are legible."""
    return f"{n:026d}"


PLAN, PLAN2, PLAN3 = uid(9001), uid(9002), uid(9003)
SNAP = ContextSnapshot(hot_context_hash="sha256:ab", hot_context_ref="ref")


def dec(
    n: int, parent: int | None = None, *, plan: str = PLAN, type_: DecisionType | None = None,
    deps: Sequence[int] = (), plans: Sequence[str] = (), files: Sequence[str] = (),
    seq: int | None = None, superseded: bool = False, at: int = 0,
) -> Decision:
    return Decision(
        decision_id=uid(n), plan_id=plan,
        parent_decision_id=uid(parent) if parent is not None else None,
        decision_type=type_ or (DT.PROMPT_DEFINITION if parent is None else DT.STRATEGY_CHOICE),
        question=f"q{n}", chosen_option=f"o{n}", context_snapshot=SNAP,
        downstream_decision_ids=[uid(d) for d in deps], downstream_plan_ids=list(plans),
        # Loaded as stored: an absolute path stands for data recorded before the
        # safe_artifact_path rule, which the impact must still list.
        artifacts_produced=[ArtifactRef.model_validate(
            {"artifact_path": f, "artifact_type": "file"}, context={STORED: True})
            for f in files],
        sequence_number=n if seq is None else seq,
        superseded_by=uid(99999) if superseded else None,
        created_at=T0 + timedelta(seconds=at),
    )


def impact(target: int, *decisions: Decision, **kw: Any) -> CorrectionImpact:
    graph = ImpactGraph.from_decisions(decisions)
    result = compute_impact(uid(target), graph, **kw)
    assert summarize(walk_graph(uid(target), graph), **kw) == result
    return result


def ids(*ns: int) -> list[str]:
    return [uid(n) for n in ns]


# The specification's picture: D1 is the target, D2 and D3 below it, D4 below D3.
SEED_TREE = (dec(0), dec(1, 0), dec(2, 1), dec(3, 1), dec(4, 3), dec(5, 0))


def test_seed_tree() -> None:
    result = impact(1, *SEED_TREE)
    assert result.affected_decision_ids == ids(1, 2, 3, 4)
    assert result.affected_count == 4
    assert result.risk_level is RiskLevel.MEDIUM
    assert result.affected_child_plan_ids == []


def test_a_leaf_affects_only_itself() -> None:
    assert impact(4, *SEED_TREE).affected_decision_ids == ids(4)


def test_children_follow_sequence_order_not_insertion_order() -> None:
    tree = (dec(0), dec(1, 0), dec(2, 1, seq=20), dec(3, 1, seq=10))
    assert impact(1, *tree).affected_decision_ids == ids(1, 3, 2)


def test_order_is_breadth_first_children_before_dependents() -> None:
    tree = (dec(0), dec(1, 0, deps=[6]), dec(2, 1), dec(3, 2), dec(6, 0), dec(7, 6))
    assert impact(1, *tree).affected_decision_ids == ids(1, 2, 6, 3, 7)


def test_declared_dependents_and_their_subtrees_are_affected() -> None:
    # D2 declares that D5, a sibling of the target, depends on it.
    tree = (dec(0), dec(1, 0), dec(2, 1, deps=[5]), dec(3, 1), dec(4, 3), dec(5, 0), dec(6, 5))
    result = impact(1, *tree)
    assert result.affected_decision_ids == ids(1, 2, 3, 5, 4, 6)


def test_a_cycle_of_dependents_does_not_loop() -> None:
    tree = (dec(0), dec(1, 0, deps=[2]), dec(2, 0, deps=[3]), dec(3, 0, deps=[1, 2, 3]))
    result = impact(1, *tree)
    assert result.affected_decision_ids == ids(1, 2, 3)
    # Never to decisions recorded before the target, its ancestors among them (ADR 0020).
    assert impact(3, *tree).affected_decision_ids == ids(3)
    assert impact(2, *tree).affected_decision_ids == ids(2, 3)


def test_child_plans_are_followed_transitively() -> None:
    tree = (
        dec(0), dec(1, 0), dec(2, 1, type_=DT.SUBPLAN_SPAWN, plans=[PLAN2]),
        dec(10, plan=PLAN2), dec(11, 10, plan=PLAN2, type_=DT.SUBPLAN_SPAWN, plans=[PLAN3]),
        dec(20, plan=PLAN3), dec(21, 20, plan=PLAN3),
    )
    result = impact(1, *tree)
    assert result.affected_decision_ids == ids(1, 2, 10, 11, 20, 21)
    assert result.affected_child_plan_ids == [PLAN2, PLAN3]


def test_a_child_plan_without_decisions_is_still_rolled_back() -> None:
    result = impact(1, dec(0), dec(1, 0, plans=[PLAN2]))
    assert result.affected_child_plan_ids == [PLAN2]
    assert result.affected_decision_ids == ids(1)


def test_child_plans_that_spawn_each_other_do_not_loop() -> None:
    tree = (dec(0), dec(1, 0, plans=[PLAN2]), dec(10, plan=PLAN2, plans=[PLAN, PLAN2]))
    result = impact(1, *tree)
    # PLAN is the target's own plan: naming it does not take the walk back into it.
    assert result.affected_child_plan_ids == [PLAN2]
    assert result.affected_decision_ids == ids(1, 10)  # never the target's root


def test_superseded_and_missing_decisions_are_not_followed() -> None:
    tree = (dec(0), dec(1, 0, deps=[7, 8]), dec(2, 1, superseded=True), dec(3, 2),
            dec(7, 0, superseded=True), dec(4, 1))
    assert impact(1, *tree).affected_decision_ids == ids(1, 4)


def test_a_superseded_target_is_still_analysed_for_the_dry_run() -> None:
    tree = (dec(0), dec(1, 0, superseded=True), dec(2, 1))
    assert impact(1, *tree).affected_decision_ids == ids(1, 2)


def test_a_missing_target_is_named() -> None:
    with pytest.raises(TargetNotFound, match=uid(42)):
        impact(42, *SEED_TREE)


def test_files_are_deduplicated_in_bfs_order_and_every_artifact_is_listed() -> None:
    tree = (dec(0, files=["root.txt"]), dec(1, 0, files=["b", "a"]), dec(2, 1, files=["a", "c"]))
    result = impact(1, *tree)
    assert result.affected_files == ["b", "a", "c"]
    assert [(a.decision_id, a.artifact_path) for a in result.affected_artifacts] == [
        (uid(1), "b"), (uid(1), "a"), (uid(2), "a"), (uid(2), "c")]


# --- risk ----------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "risk"), [
    (1, RiskLevel.LOW), (3, RiskLevel.LOW), (4, RiskLevel.MEDIUM),
    (10, RiskLevel.MEDIUM), (11, RiskLevel.HIGH), (10_000, RiskLevel.HIGH),
])
def test_risk_boundaries(count: int, risk: RiskLevel) -> None:
    assert risk_level_for(count) is risk
    if count <= 20:  # and through a real chain of that many affected decisions
        chain = (dec(0), *(dec(i, i - 1) for i in range(1, count + 1)))
        assert impact(1, *chain).risk_level is risk


def test_thresholds_are_the_seeds() -> None:
    assert (LOW_RISK_MAX, MEDIUM_RISK_MAX) == (3, 10)


def test_an_inconsistent_impact_is_refused() -> None:
    good = impact(1, *SEED_TREE).model_dump()
    for bad in ({"affected_count": 3}, {"risk_level": RiskLevel.LOW},
                {"affected_decision_ids": ids(2, 1, 3, 4)},
                {"affected_decision_ids": ids(1, 1, 3, 4)}):
        with pytest.raises(ValidationError):
            CorrectionImpact.model_validate(good | bad)


# --- recompute estimate ------------------------------------------------------------


def test_type_durations_are_medians_and_ignore_negative_gaps() -> None:
    def s(t: DecisionType, gap: float) -> TimingSample:
        return TimingSample(t, T0 + timedelta(seconds=gap), T0)

    samples = [s(DT.TOOL_INVOCATION, g) for g in (1, 2, 100)]
    samples += [s(DT.STRATEGY_CHOICE, 4), s(DT.STRATEGY_CHOICE, 6), s(DT.ERROR_RECOVERY, -5)]
    medians = type_durations(samples)
    assert medians == {DT.TOOL_INVOCATION: 2.0, DT.STRATEGY_CHOICE: 5.0}


def test_estimate_uses_the_fallback_for_types_without_history() -> None:
    history = {DT.TOOL_INVOCATION: 2.0}
    types = [DT.TOOL_INVOCATION, DT.TOOL_INVOCATION, DT.ERROR_RECOVERY]
    assert estimate_recompute_seconds(types, history) == 4.0 + DEFAULT_DECISION_SECONDS
    assert estimate_recompute_seconds(types, history, fallback=1.0) == 5.0
    assert types_without_history(types, history) == {DT.ERROR_RECOVERY}


def test_timing_samples_pair_decisions_with_parents_in_the_set() -> None:
    tree = (dec(0, at=0), dec(1, 0, at=10), dec(2, 1, type_=DT.TOOL_INVOCATION, at=13))
    views = ImpactGraph.from_decisions(tree).decisions
    assert timing_samples([views[uid(1)], views[uid(2)]]) == [
        TimingSample(DT.TOOL_INVOCATION, T0 + timedelta(seconds=13), T0 + timedelta(seconds=10))]


def test_impact_estimate_defaults_to_the_subtrees_own_history() -> None:
    tree = (dec(0, at=0), dec(1, 0, at=10), dec(2, 1, at=14), dec(3, 1, at=16),
            dec(4, 3, type_=DT.TOOL_INVOCATION, at=17))
    # strategy_choice: gaps 4 and 6 -> median 5, three of them; tool_invocation: 1.
    assert impact(1, *tree).estimated_recompute_time_seconds == 3 * 5.0 + 1.0
    without_history = impact(1, *tree, durations={})
    assert without_history.estimated_recompute_time_seconds == 4 * DEFAULT_DECISION_SECONDS


# --- cost follows the subtree -----------------------------------------------------------


class CountingMapping(Mapping[str, DecisionView]):
    def __init__(self, data: Mapping[str, DecisionView]) -> None:
        self.data, self.reads = data, 0

    def __getitem__(self, key: str) -> DecisionView:
        self.reads += 1
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the walk must not enumerate the plan")

    def __len__(self) -> int:
        raise AssertionError("the walk must not measure the plan")


def test_the_walk_reads_only_the_affected_subtree() -> None:
    big = [dec(0), *(dec(i, 0) for i in range(1, 2000))]
    sub = [dec(5000, 7), dec(5001, 5000), dec(5002, 5000)]
    graph = ImpactGraph.from_decisions([*big, *sub])
    counting = CountingMapping(graph.decisions)
    walk = walk_graph(uid(7), ImpactGraph(counting, graph.plan_roots))
    assert [v.decision_id for v in walk.affected] == ids(7, 5000, 5001, 5002)
    assert counting.reads == 4
    assert walk.rounds == 3  # one round trip per level


def test_the_store_may_overfetch_without_changing_the_result() -> None:
    graph = ImpactGraph.from_decisions(SEED_TREE)
    walk = ImpactWalk(uid(1))
    while not walk.done:
        walk.expand(graph.decisions, graph.plan_roots)
    assert summarize(walk) == compute_impact(uid(1), graph)


def test_an_unfinished_walk_cannot_be_summarized() -> None:
    with pytest.raises(ValueError, match="not finished"):
        summarize(ImpactWalk(uid(1)))


# --- dry run ---------------------------------------------------------------------------


def req(mode: CorrectionMode = CorrectionMode.REVERT, **kw: Any) -> CorrectionRequest:
    return CorrectionRequest(plan_id=PLAN, decision_id=uid(1), mode=mode,
                             guidance="do it better", requested_by="op", **kw)


BIG_TREE = (
    dec(0), dec(1, 0, files=["x.sql", "y.py"]), *(dec(i, 1, files=["y.py"]) for i in range(2, 13)),
    dec(13, 1, plans=[PLAN2]), dec(20, plan=PLAN2),
)


def test_revert_dry_run_lists_what_would_change_and_warns() -> None:
    im = impact(1, *BIG_TREE, durations={})
    report = build_dry_run_report(req(), im, target_superseded=False,
                                  fallback_types=[DT.STRATEGY_CHOICE])
    assert report.decisions_to_invalidate == im.affected_decision_ids
    assert report.child_plans_to_rollback == [PLAN2]
    assert report.estimated_recompute_time_seconds == im.estimated_recompute_time_seconds
    text = "\n".join(report.warnings)
    assert "High risk: 14 decisions" in text
    assert "1 child plan(s) would be rolled back" in text
    assert "2 artifact(s) would be archived: x.sql, y.py" in text
    assert "strategy_choice" in text
    assert "already superseded" not in text


def test_append_dry_run_invalidates_nothing() -> None:
    im = impact(1, *BIG_TREE)
    report = build_dry_run_report(req(CorrectionMode.APPEND, chosen_option="x"), im,
                                  target_superseded=False)
    assert report.decisions_to_invalidate == []
    assert report.child_plans_to_rollback == []
    assert report.estimated_recompute_time_seconds == 0.0
    assert any("untouched" in w for w in report.warnings)
    assert any("chosen_option is ignored" in w for w in report.warnings)
    assert not any("High risk" in w for w in report.warnings)


def test_dry_run_warns_about_a_target_that_cannot_be_corrected() -> None:
    im = impact(1, *SEED_TREE)
    report = build_dry_run_report(req(), im, target_superseded=True, target_plan_id=PLAN2)
    assert "already superseded" in report.warnings[0]
    assert PLAN2 in report.warnings[1]
    quiet = build_dry_run_report(req(), im, target_superseded=False, target_plan_id=PLAN)
    assert quiet.warnings == []


def test_dry_run_refuses_an_impact_of_another_target() -> None:
    with pytest.raises(ValueError, match="another target"):
        build_dry_run_report(req(), impact(2, *SEED_TREE), target_superseded=False)


def test_dry_run_report_round_trips_as_json() -> None:
    report = build_dry_run_report(req(), impact(1, *BIG_TREE), target_superseded=False)
    assert type(report).model_validate_json(report.model_dump_json()) == report


# --- properties ------------------------------------------------------------------------

PLANS = [PLAN, PLAN2, PLAN3]
NON_ROOT = [t for t in DecisionType if t is not DT.PROMPT_DEFINITION]


# Strategies built once: building them inside the draw loop cost most of these tests' time
# (hypothesis works out each new strategy's properties on first use).
_PLAN = st.sampled_from(PLANS)
_TYPE = st.sampled_from(NON_ROOT)
_PLAN_LIST = st.lists(_PLAN, max_size=2)
_FILES = st.lists(st.sampled_from("abcdef"), max_size=2)
_SEQ = st.integers(0, 5)
_AT = st.integers(-10, 1000)
_PARENT = st.one_of(st.none(), st.integers(0, 29))


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[Decision], int]:
    n = draw(st.integers(1, 30))
    deps = st.lists(st.integers(0, n + 2), max_size=3)
    decisions = []
    for i in range(n):
        pick = draw(_PARENT) if i else None
        parent = None if pick is None else pick % i
        decisions.append(dec(
            i, parent, plan=draw(_PLAN),
            type_=None if parent is None else draw(_TYPE),
            deps=draw(deps), plans=draw(_PLAN_LIST), files=draw(_FILES),
            seq=draw(_SEQ), superseded=draw(st.booleans()), at=draw(_AT),
        ))
    return decisions, draw(st.integers(0, n - 1))


def closure(target: str, graph: ImpactGraph) -> tuple[set[str], set[str]]:
    """Affected decisions and plans as a fixpoint: no queue, no order, no levels."""
    def current(i: str) -> bool:
        return i in graph.decisions and not graph.decisions[i].superseded

    t = graph.decisions[target]

    def later_in_plan(dep: str, by: DecisionView) -> bool:
        v = graph.decisions[dep]
        return v.plan_id == by.plan_id and (
            v.plan_id != t.plan_id or v.sequence_number is None
            or t.sequence_number is None or v.sequence_number > t.sequence_number)

    def spawned(p: str, by: DecisionView) -> bool:
        link = graph.plan_links.get(p)
        began = link.began_at if link else None
        return p not in (t.plan_id, by.plan_id) and (
            began is None or by.created_at is None or began >= by.created_at)

    affected: set[str] = {target}
    plans: set[str] = set()
    while True:
        before = (len(affected), len(plans))
        for d in list(affected):
            v = graph.decisions[d]
            affected |= {c for c in v.children if current(c)}
            affected |= {c for c in v.dependents if current(c) and later_in_plan(c, v)}
            plans |= {p for p in v.child_plans if spawned(p, v)}
        for p in plans:
            affected |= {r for r in graph.plan_roots.get(p, ()) if current(r)}
        if (len(affected), len(plans)) == before:
            return affected, plans


@settings(max_examples=examples(150))
@given(graphs(), st.booleans())
def test_level_by_level_walk_equals_the_queue_bfs(
    case: tuple[list[Decision], int], own_history: bool,
) -> None:
    decisions, t = case
    graph = ImpactGraph.from_decisions(decisions)
    history = None if own_history else {DT.STRATEGY_CHOICE: 3.0}
    walked = summarize(walk_graph(uid(t), graph), history)
    assert walked == compute_impact(uid(t), graph, history)


@settings(max_examples=examples(150))
@given(graphs())
def test_affected_set_is_the_closure_of_the_three_edges(case: tuple[list[Decision], int]) -> None:
    decisions, t = case
    graph = ImpactGraph.from_decisions(decisions)
    result = compute_impact(uid(t), graph)
    affected, plans = closure(uid(t), graph)
    assert set(result.affected_decision_ids) == affected
    assert set(result.affected_child_plan_ids) == plans
    assert len(result.affected_child_plan_ids) == len(plans)
    assert result.affected_decision_ids[0] == uid(t)
    assert result.risk_level is risk_level_for(len(affected))
    by_id = {d.decision_id: d for d in decisions}
    produced = [a.artifact_path for i in result.affected_decision_ids
                for a in by_id[i].artifacts_produced]
    assert result.affected_files == list(dict.fromkeys(produced))
    assert len(result.affected_artifacts) == len(produced)
