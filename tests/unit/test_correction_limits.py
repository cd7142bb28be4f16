"""The pure parts of 'corrections never wedge': how a failed step ends, the backoff, the
decision limit, and the bounds on events and dry-run replies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bson.errors import InvalidDocument
from pymongo.errors import (
    AutoReconnect,
    DocumentTooLarge,
    DuplicateKeyError,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)

from bootstrap.settings import Settings
from contracts.corrections.archive.rules import ArchiveLimits
from contracts.corrections.dry_run import build_dry_run_report
from contracts.corrections.events import CorrectionTransitioned
from contracts.corrections.record import Correction
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.revert import revert_writes
from contracts.corrections.states import OPERATOR_FAILABLE, CorrectionMode, CorrectionStatus
from contracts.corrections.transition import bounded_text
from contracts.impact.risk import RiskLevel
from contracts.impact.summary import summarize
from contracts.impact.walk import ImpactWalk
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.persistence import (
    ConcurrentChange,
    DuplicateRecord,
    LeaseLost,
    StoreFailure,
    StoreUnreachable,
)
from services.corrections.policy import CorrectionPolicy, Outcome, outcome_of
from store.translate import translated
from tests.impact_graph import ImpactGraph, compute_impact, walk_graph
from tests.unit.test_impact import PLAN, dec, uid

pytestmark = pytest.mark.unit

S = CorrectionStatus


@pytest.mark.parametrize(("exc", "committing", "outcome"), [
    (LeaseLost("p", "o"), True, Outcome.LEASE_LOST),
    (LeaseLost("p", "o"), False, Outcome.LEASE_LOST),
    (ConcurrentChange("x"), True, Outcome.READ_AGAIN),
    # The driver's errors reach the service translated by the store (store.translate).
    (translated(AutoReconnect("down")), False, Outcome.RETRY_LATER),
    (translated(OperationFailure("boom")), False, Outcome.RETRY_LATER),
    (StoreFailure("down"), False, Outcome.RETRY_LATER),
    # In the writes, a database error uses up an attempt (as the specified retries do).
    (translated(AutoReconnect("down")), True, Outcome.FAIL_ATTEMPT),
    # Not database errors: a retry in place would meet them again.
    (DocumentTooLarge("17 MB"), True, Outcome.FAIL_ATTEMPT),
    (DocumentTooLarge("17 MB"), False, Outcome.FAIL_ATTEMPT),
    (InvalidDocument("bad key"), True, Outcome.FAIL_ATTEMPT),
    (PermissionError(13, "read-only"), True, Outcome.FAIL_ATTEMPT),
    (NotADirectoryError(20, "not a directory"), True, Outcome.FAIL_ATTEMPT),
    (ValueError("embedded null byte"), True, Outcome.FAIL_ATTEMPT),
])
def test_how_a_failed_step_ends(exc: Exception, committing: bool, outcome: Outcome) -> None:
    assert outcome_of(exc, committing=committing) is outcome


def test_a_driver_error_leaves_the_store_as_the_stores_own() -> None:
    """Nothing above the store catches a driver's type: a translated error is only the
    store's, names the driver's error first and keeps it as its cause."""
    driver = ServerSelectionTimeoutError("[Errno 111] Connection refused")
    down = translated(driver)
    assert type(down) is StoreUnreachable and not isinstance(down, PyMongoError)
    assert str(down) == "ServerSelectionTimeoutError: [Errno 111] Connection refused"
    assert down.__cause__ is driver
    taken = translated(DuplicateKeyError("E11000", 11000, {"keyValue": {"_id": "x"}}))
    assert type(taken) is DuplicateRecord and not isinstance(taken, PyMongoError)
    refused = translated(OperationFailure("boom"))
    assert type(refused) is StoreFailure and not isinstance(refused, StoreUnreachable)


def test_conflict_backoff_grows_and_is_bounded() -> None:
    p = CorrectionPolicy()
    waits = [p.conflict_backoff(n) for n in range(1, p.max_conflicts + 1)]
    assert waits[0] == pytest.approx(0.05)
    assert waits == sorted(waits) and max(waits) == p.conflict_backoff_max_seconds
    assert sum(waits) < 15  # the attempt fails after about ten seconds of rounds


def test_operator_may_fail_only_working_corrections() -> None:
    assert {S.ANALYZING, S.EXECUTING} == OPERATOR_FAILABLE


def test_bounded_text_cuts_and_says_how_much() -> None:
    assert bounded_text("short") == "short"
    cut = bounded_text("x" * 5000, 100)
    assert cut.startswith("x" * 100) and "4900 more characters" in cut and len(cut) < 150


# --- the decision limit ---------------------------------------------------------------


def wide(n: int) -> ImpactGraph:
    """A root with one child (the target) under which n-1 leaves hang."""
    leaves = [dec(i, 1) for i in range(2, n + 1)]
    return ImpactGraph.from_decisions([dec(0), dec(1, 0), *leaves])


def test_the_walk_stops_once_past_the_limit() -> None:
    graph = wide(500)
    walk = walk_graph(uid(1), graph)
    assert not walk.exceeded and len(walk.affected) == 500
    stopped = _walk(graph, 50)
    assert stopped.exceeded and len(stopped.affected) == 51  # not one more is kept
    impact = summarize(stopped)
    assert impact.exceeds_limit and not impact.complete
    assert impact.risk_level is RiskLevel.HIGH  # risk stays computed
    with pytest.raises(ValueError, match="whole impact"):
        revert_writes(req(), dec(1, 0), impact, new_decision_id=uid(9999),
                    sequence_number=1, at=dec(1, 0).created_at)


def test_a_walk_at_the_limit_is_not_refused() -> None:
    graph = wide(50)
    walk = _walk(graph, 50)
    assert not walk.exceeded and len(walk.affected) == 50


def _walk(graph: ImpactGraph, limit: int) -> ImpactWalk:
    walk = ImpactWalk(uid(1), limit=limit)
    while not walk.done:
        found = ((i, graph.decisions.get(i)) for i in walk.decision_ids_wanted)
        walk.expand({i: v for i, v in found if v is not None}, {})
    return walk


def req(**kw: Any) -> CorrectionRequest:
    fields: dict[str, Any] = {"plan_id": PLAN, "decision_id": uid(1), "mode": CorrectionMode.REVERT,
              "guidance": "Use an online migration.", "requested_by": "alice"}
    return CorrectionRequest(**(fields | kw))


def test_dry_run_over_the_limit_says_so_and_stays_small() -> None:
    impact = summarize(_walk(wide(5000), 1000))
    report = build_dry_run_report(req(), impact, target_superseded=False, max_decisions=1000)
    assert report.exceeds_limit and report.max_decisions == 1000
    assert "Too large: more than 1000 decisions" in report.warnings[0]
    assert "would fail before writing anything" in report.warnings[0]
    assert report.lists_truncated and report.impact.lists_truncated
    assert len(report.decisions_to_invalidate) == INLINE_IDS_MAX
    assert report.decisions_to_invalidate_count == 1001
    assert len(report.impact.affected_decision_ids) == INLINE_IDS_MAX
    assert report.impact.affected_count == 1001
    assert report.impact.risk_level is RiskLevel.HIGH
    assert len(report.model_dump_json()) < 20_000


def test_a_bounded_dry_run_of_any_size_fits_in_a_nats_message() -> None:
    graph = wide(20_000)  # over the ~18,000 that used to go unanswered
    impact = compute_impact(uid(1), graph)
    report = build_dry_run_report(req(), impact, target_superseded=False, max_decisions=50_000)
    assert not report.exceeds_limit and report.decisions_to_invalidate_count == 20_000
    assert len(report.model_dump_json()) < 64 * 1024
    small = build_dry_run_report(req(), compute_impact(uid(1), wide(5)),
                                 target_superseded=False)
    assert not small.lists_truncated and small.decisions_to_invalidate_count == 5
    assert small.impact.affected_files_count == 0


def test_applied_event_lists_the_first_ids_and_counts_them_all() -> None:
    graph = wide(40_000)  # over the ~36,000 whose APPLIED event used to exceed 1 MB
    impact = compute_impact(uid(1), graph)
    at = dec(1, 0).created_at
    plan = revert_writes(req(), dec(1, 0), impact, new_decision_id=uid(99_999),
                       sequence_number=1, at=at)
    c = Correction.from_request(req(), at)
    for to in (S.ANALYZING, S.EXECUTING):
        c = c.transition(to, at)
    c = c.transition(S.APPLIED, at, **plan.applied_info("/archive/x"))
    assert len(c.superseded_ids) == 40_000  # the document keeps every ID
    e = CorrectionTransitioned.from_correction(c)
    assert e.superseded_ids == c.superseded_ids[:INLINE_IDS_MAX]
    assert e.superseded_count == 40_000 and e.lists_truncated
    assert len(e.model_dump_json()) < 10_000
    again = json.loads(e.model_dump_json())
    assert CorrectionTransitioned.model_validate(again) == e


def test_a_failed_correction_records_a_bounded_error() -> None:
    at = dec(1, 0).created_at
    c = Correction.from_request(req(), at).transition(S.ANALYZING, at)
    failed = c.transition(S.FAILED, at, error="OSError: " + "x" * 100_000)
    assert failed.error is not None and len(failed.error) < 2_100
    assert len(CorrectionTransitioned.from_correction(failed).model_dump_json()) < 3_000


# --- where the archive goes -------------------------------------------------------------


def test_archive_root_defaults_outside_the_agents_tree(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    s = Settings(artifacts_root=tmp_path / "work")
    assert s.resolved_archive_root() == tmp_path / "data" / "decision-ledger" / "archive"


def test_archive_root_inside_artifacts_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="inside ARTIFACTS_ROOT"):
        Settings(artifacts_root=tmp_path / "work", archive_root=tmp_path / "work" / ".archive")
    with pytest.raises(ValueError, match="inside ARTIFACTS_ROOT"):
        Settings(artifacts_root=tmp_path, archive_root=tmp_path)
    Settings(artifacts_root=tmp_path / "work", archive_root=tmp_path / "work-archive")


def test_archive_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_env().archive_limits == ArchiveLimits()
    monkeypatch.setenv("ARCHIVE_MAX_ARTIFACT_BYTES", "1024")
    monkeypatch.setenv("ARCHIVE_MAX_CORRECTION_APPARENT_BYTES", "4096")
    monkeypatch.setenv("ARCHIVE_MIN_FREE_BYTES", "0")
    monkeypatch.setenv("ARCHIVE_STALL_SECONDS", "2.5")
    limits = Settings.from_env().archive_limits
    assert (limits.max_artifact_bytes, limits.max_correction_apparent_bytes,
            limits.min_free_bytes, limits.stall_seconds) == (1024, 4096, 0, 2.5)
    assert limits.max_correction_bytes == ArchiveLimits().max_correction_bytes
    monkeypatch.setenv("ARCHIVE_STALL_SECONDS", "0")
    with pytest.raises(ValueError, match="ARCHIVE_STALL_SECONDS"):
        Settings.from_env()
