"""Both correction lifecycles, exhaustively over every pair of states, and the models
that carry them (guidance bounds, history, events, subjects)."""

from __future__ import annotations

import enum
from datetime import UTC, datetime, timedelta
from itertools import pairwise, product
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.corrections import subjects
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.events import AttemptTransitioned, CorrectionTransitioned
from contracts.corrections.families import CORRECTIONS
from contracts.corrections.record import Correction
from contracts.corrections.refusals import CancelRefused, RetryRefused
from contracts.corrections.requests import CancelRequest, CorrectionRequest
from contracts.corrections.states import (
    ATTEMPT_LIFECYCLE,
    ATTEMPT_TRANSITIONS,
    CANCELLABLE,
    CORRECTION_LIFECYCLE,
    CORRECTION_TRANSITIONS,
    RETRYABLE,
    CorrectionAttemptState,
    CorrectionMode,
    CorrectionStatus,
)
from contracts.corrections.transition import TransitionInfo
from contracts.families import captured
from contracts.shared.errors import DomainError, IllegalTransition
from contracts.shared.lifecycle import Lifecycle, check_transition, is_allowed, terminal_states
from contracts.shared.subject_tokens import plan_of

pytestmark = pytest.mark.unit

S = CorrectionStatus
A = CorrectionAttemptState
T0 = datetime(2025, 1, 1, tzinfo=UTC)
PLAN = "01JD7X4Q9R8N2V5K3M6P1T0W7Y"
TARGET = "01JD7X4Q9R8N2V5K3M6P1T0W7Z"
NEW = "01JD7X4Q9R8N2V5K3M6P1T0W80"
CORRECTIONS_STREAM_SUBJECTS = captured(CORRECTIONS)

# Written out from the specification (plus the two documented FAILED edges and the operator's
# retry), not read back from the table under test.
CORRECTION_EDGES = {
    (S.PENDING, S.ANALYZING), (S.ANALYZING, S.EXECUTING), (S.EXECUTING, S.APPLIED),
    (S.EXECUTING, S.FAILED), (S.PENDING, S.CANCELLED), (S.ANALYZING, S.CANCELLED),
    (S.PENDING, S.FAILED), (S.ANALYZING, S.FAILED), (S.FAILED, S.PENDING),
}
RETRY_EDGES = {(S.FAILED, S.PENDING)}
"""The edges only an operator's command takes: their source stays terminal."""
ATTEMPT_EDGES = {(A.PENDING, A.EXECUTING), (A.EXECUTING, A.COMPLETE), (A.EXECUTING, A.FAILED)}
PATH_TO = {
    S.PENDING: [], S.ANALYZING: [S.ANALYZING], S.EXECUTING: [S.ANALYZING, S.EXECUTING],
    S.APPLIED: [S.ANALYZING, S.EXECUTING, S.APPLIED], S.FAILED: [S.FAILED],
    S.CANCELLED: [S.CANCELLED],
}
ATTEMPT_PATH_TO = {
    A.PENDING: [], A.EXECUTING: [A.EXECUTING], A.COMPLETE: [A.EXECUTING, A.COMPLETE],
    A.FAILED: [A.EXECUTING, A.FAILED],
}


def request(**overrides: Any) -> CorrectionRequest:
    fields: dict[str, Any] = {
        "plan_id": PLAN, "decision_id": TARGET, "mode": CorrectionMode.REVERT,
        "guidance": "use a safer migration", "requested_by": "alice",
    }
    return CorrectionRequest(**(fields | overrides))


def info_for(to: CorrectionStatus, from_: CorrectionStatus | None = None) -> TransitionInfo:
    if from_ is S.FAILED and to is S.PENDING:
        return {"retry_id": NEW}
    if to is S.APPLIED:
        return {"new_decision_id": NEW, "superseded_ids": [TARGET]}
    if to is S.FAILED:
        return {"error": "boom"}
    return {}


def correction_at(status: CorrectionStatus) -> Correction:
    c = Correction.from_request(request(), T0)
    for i, step in enumerate(PATH_TO[status], start=1):
        c = c.transition(step, T0 + timedelta(seconds=i), **info_for(step))
    assert c.status is status
    return c


def attempt_at(state: CorrectionAttemptState) -> CorrectionAttemptRecord:
    a = CorrectionAttemptRecord.for_correction(correction_at(S.EXECUTING), T0)
    for step in ATTEMPT_PATH_TO[state]:
        a = a.transition(step, T0, new_decision_id=NEW if step is A.COMPLETE else None)
    return a


# --- the generic helper -----------------------------------------------------------


class Light(enum.Enum):
    RED = "red"
    GREEN = "green"
    OFF = "off"


LIGHT = {Light.RED: frozenset({Light.GREEN, Light.OFF}), Light.GREEN: frozenset({Light.RED})}


def test_terminal_states_are_states_without_outgoing_edges() -> None:
    assert terminal_states(LIGHT) == {Light.OFF}
    assert CORRECTION_LIFECYCLE.terminal == {S.APPLIED, S.FAILED, S.CANCELLED}
    assert ATTEMPT_LIFECYCLE.terminal == {A.COMPLETE, A.FAILED}


def test_check_transition_names_the_machine_and_the_edge() -> None:
    check_transition(LIGHT, Light.RED, Light.GREEN)
    with pytest.raises(IllegalTransition) as err:
        check_transition(LIGHT, Light.OFF, Light.RED)
    assert isinstance(err.value, DomainError)
    assert (err.value.machine, err.value.from_, err.value.to) == ("Light", Light.OFF, Light.RED)
    assert "terminal" in str(err.value)
    with pytest.raises(IllegalTransition, match="self-transition"):
        check_transition(LIGHT, Light.RED, Light.RED, machine="light")


def test_a_self_loop_in_a_table_is_still_refused() -> None:
    assert not is_allowed({Light.RED: frozenset({Light.RED})}, Light.RED, Light.RED)


def test_lifecycle_needs_an_initial_state_in_its_table() -> None:
    with pytest.raises(ValueError, match="initial"):
        Lifecycle("light", LIGHT, Light.OFF)


def test_tables_cover_every_state_and_cannot_be_mutated() -> None:
    assert set(CORRECTION_TRANSITIONS) == set(CorrectionStatus)
    assert set(ATTEMPT_TRANSITIONS) == set(CorrectionAttemptState)
    with pytest.raises(TypeError):
        CORRECTION_TRANSITIONS[S.APPLIED] = frozenset({S.PENDING})  # type: ignore[index]


def test_correction_table_without_the_retry_is_acyclic_so_a_status_is_entered_once_per_round(
) -> None:
    def reachable(s: CorrectionStatus) -> set[CorrectionStatus]:
        out: set[CorrectionStatus] = set()
        todo = [t for t in CORRECTION_TRANSITIONS[s] if (s, t) not in RETRY_EDGES]
        while todo:
            n = todo.pop()
            if n not in out:
                out.add(n)
                todo.extend(t for t in CORRECTION_TRANSITIONS[n] if (n, t) not in RETRY_EDGES)
        return out

    assert all(s not in reachable(s) for s in CorrectionStatus)


def test_only_failed_can_be_retried_and_stays_terminal_for_the_runner() -> None:
    assert {S.FAILED} == RETRYABLE
    assert S.FAILED in CORRECTION_LIFECYCLE.terminal
    for from_, to in product(CorrectionStatus, CorrectionStatus):
        assert CORRECTION_LIFECYCLE.reopens(from_, to) == ((from_, to) in RETRY_EDGES)


def test_a_reopen_edge_must_be_in_the_table() -> None:
    with pytest.raises(ValueError, match="reopen"):
        Lifecycle("light", LIGHT, Light.RED, reopen={Light.OFF: frozenset({Light.RED})})
    lit = Lifecycle("light", {**LIGHT, Light.OFF: frozenset({Light.RED})}, Light.RED,
                    reopen={Light.OFF: frozenset({Light.RED})})
    assert lit.terminal == {Light.OFF} and lit.allows(Light.OFF, Light.RED)


def test_only_pending_and_analyzing_can_be_cancelled() -> None:
    assert {S.PENDING, S.ANALYZING} == CANCELLABLE


# --- exhaustive over all pairs ----------------------------------------------------


@pytest.mark.parametrize(("from_", "to"), list(product(CorrectionStatus, CorrectionStatus)))
def test_correction_transition(from_: CorrectionStatus, to: CorrectionStatus) -> None:
    c = correction_at(from_)
    at = T0 + timedelta(minutes=5)
    if (from_, to) in CORRECTION_EDGES:
        info = info_for(to, from_)
        info["reason"] = "why"
        after = c.transition(to, at, **info)
        assert after.status is to
        assert after.history[-1].reason == "why"
        assert after.history[-1].from_status is from_
        assert after.history[-1].at == at
        assert after.history[:-1] == c.history
        assert c.status is from_  # the original is unchanged
    else:
        with pytest.raises(IllegalTransition) as err:
            c.transition(to, at, **info_for(to))
        assert (err.value.machine, err.value.from_, err.value.to) == ("correction", from_, to)


@pytest.mark.parametrize(
    ("from_", "to"), list(product(CorrectionAttemptState, CorrectionAttemptState))
)
def test_attempt_transition(from_: CorrectionAttemptState, to: CorrectionAttemptState) -> None:
    a = attempt_at(from_)
    at = T0 + timedelta(minutes=5)
    new = NEW if to is A.COMPLETE else None
    if (from_, to) in ATTEMPT_EDGES:
        after = a.transition(to, at, new_decision_id=new)
        assert after.state is to
        assert after.completed_at == (at if to in {A.COMPLETE, A.FAILED} else None)
        assert a.state is from_
    else:
        with pytest.raises(IllegalTransition) as err:
            a.transition(to, at, new_decision_id=new)
        assert err.value.machine == "correction_attempt"


# --- the aggregate's own invariants ----------------------------------------------


def test_a_new_correction_is_pending_with_its_creation_entry() -> None:
    r = request()
    c = Correction.from_request(r, T0)
    assert c.status is S.PENDING
    assert [(h.from_status, h.to_status) for h in c.history] == [(None, S.PENDING)]
    assert c.request() == r


def test_applied_needs_a_new_decision_and_failed_needs_an_error() -> None:
    with pytest.raises(ValidationError, match="new_decision_id"):
        correction_at(S.EXECUTING).transition(S.APPLIED, T0)
    with pytest.raises(ValidationError, match="error"):
        correction_at(S.EXECUTING).transition(S.FAILED, T0)
    with pytest.raises(ValidationError, match="APPLIED"):
        correction_at(S.PENDING).transition(S.ANALYZING, T0, new_decision_id=NEW)


def test_a_stored_history_that_breaks_the_table_is_refused() -> None:
    doc = correction_at(S.EXECUTING).model_dump()
    del doc["history"][1]  # pending -> executing was never an edge
    with pytest.raises(ValidationError, match="lifecycle"):
        Correction.model_validate(doc)
    doc = correction_at(S.EXECUTING).model_dump() | {"status": S.PENDING}
    with pytest.raises(ValidationError, match="last history entry"):
        Correction.model_validate(doc)


def test_a_correction_survives_a_json_round_trip() -> None:
    c = correction_at(S.APPLIED)
    assert Correction.model_validate_json(c.model_dump_json()) == c


def test_attempt_complete_needs_a_new_decision_and_only_then() -> None:
    with pytest.raises(ValidationError, match="new_decision_id"):
        attempt_at(A.EXECUTING).transition(A.COMPLETE, T0)
    with pytest.raises(ValidationError, match="only on success"):
        attempt_at(A.EXECUTING).transition(A.FAILED, T0, new_decision_id=NEW)
    with pytest.raises(ValidationError, match="completed_at"):
        CorrectionAttemptRecord.model_validate(attempt_at(A.PENDING).model_dump() | {
            "completed_at": T0})


def test_attempt_keeps_the_archive_path() -> None:
    a = attempt_at(A.EXECUTING).transition(
        A.COMPLETE, T0, new_decision_id=NEW, archived_artifacts_path="/a/b")
    assert (a.new_decision_id, a.archived_artifacts_path, a.completed_at) == (NEW, "/a/b", T0)


# --- guidance and the other request fields --------------------------------------


@pytest.mark.parametrize(("length", "ok"), [(0, False), (1, True), (10_000, True), (10_001, False)])
def test_guidance_length_bounds(length: int, ok: bool) -> None:
    guidance = "g" * length
    attempt_fields = attempt_at(A.PENDING).model_dump() | {"guidance": guidance}
    if ok:
        assert request(guidance=guidance).guidance == guidance
        assert CorrectionAttemptRecord.model_validate(attempt_fields).guidance == guidance
    else:
        with pytest.raises(ValidationError):
            request(guidance=guidance)
        with pytest.raises(ValidationError):
            CorrectionAttemptRecord.model_validate(attempt_fields)


@pytest.mark.parametrize("blank", [" ", "\n\t ", " " * 10_000])
def test_blank_guidance_is_refused(blank: str) -> None:
    with pytest.raises(ValidationError, match="non_empty"):
        request(guidance=blank)


def test_guidance_is_kept_as_sent() -> None:
    assert request(guidance="  x  ").guidance == "  x  "


@pytest.mark.parametrize("field", ["requested_by", "chosen_option"])
def test_blank_names_are_refused(field: str) -> None:
    with pytest.raises(ValidationError):
        request(**{field: "  "})


def test_request_ids_are_ulids_in_canonical_case() -> None:
    assert request(plan_id=PLAN.lower()).plan_id == PLAN
    with pytest.raises(ValidationError, match="valid_ulid"):
        request(decision_id="not-a-ulid")
    with pytest.raises(ValidationError):
        request(mode="rewrite")


def test_requested_at_is_utc_milliseconds() -> None:
    naive = datetime(2025, 1, 1, 12, 0, 0, 123456)  # naive on purpose: taken as UTC
    assert request(requested_at=naive).requested_at == datetime(
        2025, 1, 1, 12, 0, 0, 123000, tzinfo=UTC)


def test_cancel_request_reason_is_optional() -> None:
    assert CancelRequest(correction_id=NEW, plan_id=PLAN).reason is None


# --- events and subjects --------------------------------------------------------


def test_events_follow_the_history_and_carry_results_only_when_applied() -> None:
    c = correction_at(S.APPLIED)
    events = [CorrectionTransitioned.from_correction(c, i) for i in range(len(c.history))]
    assert [e.to_status for e in events] == [S.PENDING, S.ANALYZING, S.EXECUTING, S.APPLIED]
    assert [e.event_id for e in events] == [h.event_id for h in c.history]
    assert events[-1].new_decision_id == NEW and events[-1].superseded_ids == [TARGET]
    assert all(e.new_decision_id is None for e in events[:-1])
    assert events[-1].subject == f"corrections.events.{PLAN}.applied"
    assert events[-1].msg_id == f"{c.correction_id}:applied"
    # Rebuilding the event gives the same bytes: a republish is deduplicated.
    assert CorrectionTransitioned.from_correction(c) == events[-1]


def test_failed_event_carries_the_error() -> None:
    e = CorrectionTransitioned.from_correction(correction_at(S.FAILED))
    assert (e.from_status, e.to_status, e.error) == (S.PENDING, S.FAILED, "boom")


def test_an_event_for_a_non_edge_is_refused() -> None:
    fields = CorrectionTransitioned.from_correction(correction_at(S.ANALYZING)).model_dump()
    with pytest.raises(ValidationError, match="not a transition"):
        CorrectionTransitioned.model_validate(fields | {"from_status": S.APPLIED})


def test_attempt_events() -> None:
    a = attempt_at(A.COMPLETE)
    e = AttemptTransitioned.from_attempt(a, A.EXECUTING)
    assert (e.to_state, e.at, e.new_decision_id) == (A.COMPLETE, T0, NEW)
    assert e.subject == f"corrections.attempts.{PLAN}.complete"
    assert e.msg_id == f"attempt:{a.id}:complete"
    with pytest.raises(ValidationError):
        AttemptTransitioned.from_attempt(a, A.PENDING)


def test_cancel_refused() -> None:
    r = CancelRefused.for_status(NEW, PLAN, S.EXECUTING)
    assert "executing" in r.reason and r.subject == f"corrections.cancel_refused.{PLAN}"
    missing = CancelRefused.for_status(NEW, PLAN, None)
    assert missing.msg_id != r.msg_id


def test_subjects() -> None:
    assert subjects.requested(PLAN) == f"corrections.requested.{PLAN}"
    assert subjects.dryrun(PLAN) == f"corrections.dryrun.{PLAN}"
    assert subjects.cancel(PLAN) == f"corrections.cancel.{PLAN}"
    assert subjects.event(PLAN, S.FAILED) == f"corrections.events.{PLAN}.failed"
    assert subjects.events_with_status(S.APPLIED) == "corrections.events.*.applied"
    assert subjects.attempt(PLAN, A.FAILED) == f"corrections.attempts.{PLAN}.failed"
    assert plan_of(subjects.event(PLAN, S.FAILED), subjects.EVENTS_PREFIX) == PLAN
    assert plan_of("decisions.recorded.X", subjects.REQUESTED_PREFIX) is None
    assert subjects.request_msg_id(NEW) == NEW
    assert not any(s.startswith(subjects.DRYRUN_PREFIX)
                   for s in CORRECTIONS_STREAM_SUBJECTS)
    for bad in ["a.b", "*", ">", ""]:
        with pytest.raises(ValueError, match="ULID"):
            subjects.requested(bad)


# --- properties where the rules combine ------------------------------------------


@given(st.lists(st.sampled_from(CorrectionStatus), max_size=12))
def test_any_sequence_of_requests_keeps_the_correction_consistent(
    steps: list[CorrectionStatus],
) -> None:
    c = Correction.from_request(request(), T0)
    for i, to in enumerate(steps, start=1):
        legal = (c.status, to) in CORRECTION_EDGES
        try:
            c = c.transition(to, T0 + timedelta(seconds=i), **info_for(to, c.status))
        except IllegalTransition:
            assert not legal
        else:
            assert legal
    # Within a round each status is entered once, so (status, round) msg ids never repeat.
    keyed = [(h.to_status, c.round_of(i)) for i, h in enumerate(c.history)]
    assert len(set(keyed)) == len(keyed)
    assert all(s not in CORRECTION_LIFECYCLE.terminal or (s, t) in RETRY_EDGES
               for s, t in pairwise([h.to_status for h in c.history]))
    assert (c.error is not None) == (c.status is S.FAILED)
    events = [CorrectionTransitioned.from_correction(c, i) for i in range(len(c.history))]
    assert len({e.msg_id for e in events}) == len(events)
    assert Correction.model_validate(c.model_dump()) == c


@given(st.lists(st.sampled_from(CorrectionAttemptState), max_size=8))
def test_any_sequence_of_attempt_steps_sets_completed_at_once(
    steps: list[CorrectionAttemptState],
) -> None:
    a = attempt_at(A.PENDING)
    for i, to in enumerate(steps, start=1):
        at = T0 + timedelta(seconds=i)
        try:
            a = a.transition(to, at, new_decision_id=NEW if to is A.COMPLETE else None)
        except IllegalTransition:
            assert (a.state, to) not in ATTEMPT_EDGES
    assert (a.completed_at is not None) == a.is_terminal


# --- the operator's retry (ADR 0017) ----------------------------------------------


def test_a_retry_opens_round_two_clears_the_error_and_keeps_the_failure_in_history() -> None:
    failed = correction_at(S.FAILED)
    assert failed.attempts_before_round == 0
    retried = failed.transition(S.PENDING, T0 + timedelta(minutes=1), reason="fixed the disk",
                                retry_id=NEW, attempts_before=3)
    assert retried.status is S.PENDING and retried.error is None
    assert retried.history[-2].error == "boom"
    assert retried.history[-1].retry_id == NEW and retried.retried_by(NEW)
    assert (retried.round_of(0), retried.round_of(1), retried.round_of()) == (1, 1, 2)
    assert retried.attempts_before_round == 3
    assert retried.transition(S.ANALYZING, T0 + timedelta(minutes=2)).attempts_before_round == 3
    events = [CorrectionTransitioned.from_correction(retried, i)
              for i in range(len(retried.history))]
    assert [e.msg_id for e in events] == [
        f"{retried.correction_id}:pending", f"{retried.correction_id}:failed",
        f"{retried.correction_id}:pending:r2"]
    assert events[-1].round == 2 and events[-1].from_status is S.FAILED


def test_only_a_retry_entry_names_a_retry_id() -> None:
    c = correction_at(S.ANALYZING)
    doc = c.model_dump()
    doc["history"][-1]["retry_id"] = NEW
    with pytest.raises(ValidationError, match="retry_id"):
        Correction.model_validate(doc)


def test_retry_refused() -> None:
    r = RetryRefused.for_status(NEW, PLAN, S.APPLIED)
    assert "applied" in r.reason and r.subject == f"corrections.retry_refused.{PLAN}"
    gone = RetryRefused.for_status(NEW, PLAN, S.FAILED, 2, target_error="superseded")
    assert "superseded" in gone.reason and gone.msg_id.endswith(":failed:2")
    assert RetryRefused.for_status(NEW, PLAN, None).msg_id != r.msg_id
    assert subjects.retry(PLAN) == f"corrections.retry.{PLAN}"
    assert f"{subjects.RETRY_PREFIX}.*" in CORRECTIONS_STREAM_SUBJECTS
    assert f"{subjects.RETRY_REFUSED_PREFIX}.*" in CORRECTIONS_STREAM_SUBJECTS
    assert subjects.retry_msg_id(TARGET, NEW) == f"retry:{TARGET}:{NEW}"


# --- a revert without guidance (ADR 0017) --------------------------------------------


def test_a_revert_without_guidance_gets_the_default_naming_target_and_operator() -> None:
    r = CorrectionRequest(plan_id=PLAN, decision_id=TARGET.lower(), mode="revert",
                          requested_by="alice")
    assert r.guidance == f"Revert of decision {TARGET} requested by alice"
    assert r.guidance_defaulted
    assert not request().guidance_defaulted
    assert CorrectionRequest.model_validate_json(r.model_dump_json()) == r


def test_an_append_still_needs_guidance() -> None:
    with pytest.raises(ValidationError, match="guidance"):
        CorrectionRequest(plan_id=PLAN, decision_id=TARGET, mode="append", requested_by="a")
    with pytest.raises(ValidationError, match="guidance"):
        CorrectionRequest(plan_id=PLAN, decision_id=TARGET, mode="revert", requested_by="a",
                          guidance="  ")
