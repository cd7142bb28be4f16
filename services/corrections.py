"""The correction service: the seed's API, and the driver that takes each correction of a
plan from PENDING to APPLIED, FAILED or CANCELLED.

Exactly-once events come from the transactional outbox (store.outbox): every step
commits its state change together with the events announcing it, then publishes
them under fixed Nats-Msg-Ids and deletes them. A process dying between the commit
and the publish leaves them for the next flush of that correction or the relay.

Ordering: a plan's corrections are worked one at a time by whoever holds the plan's
lease (store.locks), a started one first, then oldest arrival (contracts.corrections.driver
.next_to_drive); a heartbeat renews the lease while the
driver holds it, and every step's transaction renews it conditionally on its owner,
so a driver that stalled past its lease cannot commit.

Nothing wedges: a step that fails for anything but a database outage or a concurrent
change (an archive it cannot write, a document too large, a correction over
CORRECTIONS_MAX_DECISIONS) ends the attempt FAILED with the error, and the correction
FAILED once its attempts are used; a concurrent change is retried with a fresh read
(and a fresh impact), with a growing pause, a bounded number of times.
A revert or append is one transaction, so the tree is either fully corrected or
untouched; a driver that dies mid-way leaves the correction ANALYZING or EXECUTING
and the next lease holder resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from opentelemetry import propagate, trace

from contracts.corrections import subjects
from contracts.corrections.append import append_writes
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import AttemptChange, Changes, Versioned
from contracts.corrections.driver import Step, next_step, next_to_drive
from contracts.corrections.dry_run import DryRunReport, build_dry_run_report
from contracts.corrections.errors import CorrectionTooLarge
from contracts.corrections.events import AttemptTransitioned, CorrectionTransitioned
from contracts.corrections.planning import validate_target
from contracts.corrections.record import Correction
from contracts.corrections.refusals import (
    CancelRefused,
    CorrectionRejected,
    FailRefused,
    RetryRefused,
)
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.revert import revert_writes
from contracts.corrections.states import (
    CANCELLABLE,
    OPERATOR_FAILABLE,
    RETRYABLE,
    CorrectionAttemptState,
    CorrectionMode,
    CorrectionStatus,
)
from contracts.corrections.subjects import CORRECTIONS_STREAM
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.decisions.subjects import persisted, persisted_msg_id
from contracts.impact.estimate import timing_samples, type_durations, types_without_history
from contracts.impact.summary import CorrectionImpact, summarize
from contracts.recording.events import persisted_body
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.errors import DomainError
from contracts.shared.ids import new_id
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable
from services import outbox
from services.archive import Archive
from services.ports import (
    CorrectionObserver,
    CorrectionStorePort,
    EventPublisher,
    OutgoingEvent,
)
from store.errors import (
    ConcurrentChange,
    DuplicateRecord,
    LeaseLost,
    ResourceNotFoundError,
    StoreFailure,
)

log = logging.getLogger(__name__)

REPLACEMENT_HOPS_MAX = 1000
"""Steps a dry run follows superseded_by to find a superseded target's current replacement."""

A = CorrectionAttemptState
S = CorrectionStatus

CrashHook = Callable[[str], None]
"""Called with a step name at each point a process could die; tests kill the worker there."""


def no_crash(step: str) -> None:
    """The production hook: nothing."""


class AnalysisFailed(Exception):
    """The analysis of a correction failed for a reason a later try may not meet; the
    driver pauses and tries again, up to policy.max_attempts, then FAILs it."""


class PlanBusy(Exception):
    """Another driver holds the plan's lease; its corrections will be run by that driver."""

    def __init__(self, plan_id: str) -> None:
        self.plan_id = plan_id
        super().__init__(f"plan {plan_id} is being corrected by another driver")


@dataclass(frozen=True)
class CorrectionPolicy:
    max_attempts: int = 3
    """Attempts at the revert/append (or at the analysis) before the correction is FAILED."""
    attempt_backoff_seconds: float = 0.2
    max_decisions: int = 10_000
    """Largest number of decisions one correction may touch (CORRECTIONS_MAX_DECISIONS)."""
    conflict_backoff_seconds: float = 0.05
    """Pause after the first concurrent change; doubled each round up to the max."""
    conflict_backoff_max_seconds: float = 2.0
    max_conflicts: int = 10
    """Concurrent changes in a row before the attempt is FAILED (about 10 s of rounds)."""

    def conflict_backoff(self, rounds: int) -> float:
        """The pause before reading again after `rounds` concurrent changes in a row."""
        grown = self.conflict_backoff_seconds * 2.0 ** max(rounds - 1, 0)
        return min(grown, self.conflict_backoff_max_seconds)


class Outcome(StrEnum):
    """What the driver does about an exception raised by a step."""

    LEASE_LOST = "lease_lost"
    """Another driver took the plan: stop; it carries on."""
    READ_AGAIN = "read_again"
    """The correction or the tree changed under us: read it again, recompute the impact."""
    RETRY_LATER = "retry_later"
    """The database failed a read: nothing was committed, the request is redelivered."""
    FAIL_ATTEMPT = "fail_attempt"
    """Anything else (the archive, a document too large, the transaction itself): a retry
    in place would meet it again, so the attempt ends FAILED with the error."""


def outcome_of(exc: BaseException, *, committing: bool) -> Outcome:
    """Decide, from the exception alone, how a failed step ends (pure: unit-tested).

    `committing`: the exception came from building or committing the step's writes
    (the archive copy, the transaction), not from the reads before them.
    """
    if isinstance(exc, LeaseLost):
        return Outcome.LEASE_LOST
    if isinstance(exc, ConcurrentChange):
        return Outcome.READ_AGAIN
    if isinstance(exc, StoreFailure) and not committing:
        return Outcome.RETRY_LATER
    return Outcome.FAIL_ATTEMPT


def describe(exc: BaseException) -> str:
    """One line for the record: the exception's type and message (bounded later)."""
    return f"{type(exc).__name__}: {exc}"


def persisted_message(d: Decision) -> OutgoingEvent:
    """The decisions.persisted event of a decision a correction wrote directly, as the
    recorder would publish it: the reconciler then reconciles an append's child plan
    like any plan, exactly once (outboxed with the write, fixed Nats-Msg-Id)."""
    return OutgoingEvent(persisted(d.plan_id), persisted_body(d),
                         persisted_msg_id(d.decision_id))


_tracer = trace.get_tracer("decision_ledger.corrections")


@contextlib.contextmanager
def step_span(c: Correction) -> Iterator[None]:
    """One span per lifecycle step, a child of the request's trace context (when the
    request carried one), naming the correction, its plan and its target."""
    parent = propagate.extract(c.trace_context) if c.trace_context else None
    with _tracer.start_as_current_span(
            f"correction {c.status.value}", context=parent, attributes={
                "ledger.correction_id": c.correction_id, "ledger.plan_id": c.plan_id,
                "ledger.decision_id": c.decision_id, "ledger.mode": c.mode.value}):
        yield


def correction_event(c: Correction) -> OutgoingEvent:
    e = CorrectionTransitioned.from_correction(c)
    return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)


def resume_message(r: ResumeInstruction) -> OutgoingEvent:
    """The plan runtime's instruction, outboxed with the APPLIED transition it follows."""
    return OutgoingEvent(r.subject, r.model_dump_json().encode(), r.msg_id)


def attempt_event(a: CorrectionAttemptRecord, from_state: CorrectionAttemptState | None,
                  at: datetime) -> OutgoingEvent:
    e = AttemptTransitioned.from_attempt(a, from_state, at=at)
    return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)


def new_attempt_events(a: CorrectionAttemptRecord, at: datetime) -> list[OutgoingEvent]:
    """An attempt is stored already EXECUTING; both of its transitions are announced."""
    pending = a.model_copy(update={"state": A.PENDING})
    return [attempt_event(pending, None, at), attempt_event(a, A.PENDING, at)]


class CorrectionService:
    def __init__(self, store: CorrectionStorePort, publisher: EventPublisher, archive: Archive, *,
                 policy: CorrectionPolicy | None = None, crash: CrashHook = no_crash,
                 worker_id: str | None = None,
                 clock: Callable[[], datetime] = utc_now,
                 observer: CorrectionObserver | None = None) -> None:
        self._store = store
        self._observer = observer
        self._publisher = publisher
        self._archive = archive
        self.policy = policy or CorrectionPolicy()
        self._crash = crash
        self._worker_id = worker_id or new_id()
        self._clock = clock

    # --- the seed's API ------------------------------------------------------------

    async def request_correction(self, request: CorrectionRequest, *,
                                 arrival: int = 0,
                                 trace: Mapping[str, str] | None = None) -> Correction:
        """Record the request as a PENDING correction; a known correction_id records nothing.

        `arrival` orders the plan's corrections (the stream sequence of the request);
        `trace` is the request message's headers, whose trace context every event of the
        correction carries on.
        """
        existing = await self._store.corrections.get(request.correction_id)
        if existing is None:
            created = Correction.from_request(request, self._clock(), trace=trace)
            try:
                await self._commit(Changes(created, None, arrival=arrival,
                                           events=[correction_event(created)]))
            except DuplicateRecord:
                pass  # a concurrent delivery recorded it first
            else:
                return created
            existing = await self._store.corrections.get(request.correction_id)
            assert existing is not None
        await self.flush(request.correction_id)  # its pending event, if a crash left it
        return existing.correction

    async def analyze_impact(self, decision_id: str) -> CorrectionImpact:
        """BFS impact of correcting `decision_id`; TargetNotFound if it does not exist.
        The walk stops past `policy.max_decisions` (the result says `exceeds_limit`)."""
        return await self._store.impact.impact(decision_id, self.policy.max_decisions)

    async def generate_dry_run_report(self, request: CorrectionRequest) -> DryRunReport:
        """What the correction would do, reading only. Raises the named DomainError
        (TargetNotFound, TargetInOtherPlan) that applying would FAIL with; a superseded
        target is answered with a report whose warning names its current replacement
        (applying it still FAILS with TargetSuperseded)."""
        target = await self._store.decisions.get(request.decision_id)
        validate_target(request, target, allow_superseded=True)
        assert target is not None
        replacement = (await self._current_replacement(target)
                       if target.superseded_by is not None else None)
        walk = await self._store.impact.walk(request.decision_id, self.policy.max_decisions)
        durations = type_durations(timing_samples(walk.affected))
        impact = summarize(walk, durations)
        return build_dry_run_report(
            request, impact, target_superseded=replacement is not None,
            current_replacement=replacement,
            fallback_types=types_without_history(
                (v.decision_type for v in walk.affected), durations),
            max_decisions=self.policy.max_decisions)

    async def _current_replacement(self, target: Decision) -> str:
        """The decision that stands in for `target` now: its replacement's replacement,
        and so on, at most REPLACEMENT_HOPS_MAX steps (a cycle cannot keep it going)."""
        current = target.superseded_by
        assert current is not None
        for _ in range(REPLACEMENT_HOPS_MAX):
            d = await self._store.decisions.get(current)
            if d is None or d.superseded_by is None or d.superseded_by == current:
                break
            current = d.superseded_by
        return current

    async def execute_correction(self, correction_id: str) -> Correction:
        """Run one correction to a terminal status now; PlanBusy if its plan is being worked."""
        v = await self._get(correction_id)
        owner = self._owner()
        plan_id = v.correction.plan_id
        if not await self._store.locks.acquire(plan_id, owner, self._clock()):
            raise PlanBusy(plan_id)
        async with self._holding(plan_id, owner):
            return await self._advance(correction_id, owner)

    async def execute_revert(self, correction_id: str) -> Correction:
        await self._require_mode(correction_id, CorrectionMode.REVERT)
        return await self.execute_correction(correction_id)

    async def execute_append(self, correction_id: str) -> Correction:
        await self._require_mode(correction_id, CorrectionMode.APPEND)
        return await self.execute_correction(correction_id)

    async def get_correction(self, correction_id: str) -> Correction | None:
        v = await self._store.corrections.get(correction_id)
        return v.correction if v else None

    async def list_corrections(self, plan_id: str | None = None,
                               status: CorrectionStatus | None = None,
                               limit: int = 100) -> list[Correction]:
        return await self._store.corrections.find(plan_id, status, limit)

    async def list_attempts(self, correction_id: str) -> list[CorrectionAttemptRecord]:
        return await self._store.attempts.list_by_correction(correction_id)

    async def cancel_correction(self, correction_id: str, reason: str | None = None, *,
                                plan_id: str | None = None) -> Correction | CancelRefused:
        """CANCELLED from PENDING or ANALYZING; otherwise the refusal, which is also
        published to corrections.cancel_refused.<plan_id> (once per status met)."""
        while True:
            v = await self._store.corrections.get(correction_id)
            if v is None or (plan_id is not None and v.correction.plan_id != plan_id):
                return await self._refuse(correction_id, plan_id, None)
            c = v.correction
            if c.status not in CANCELLABLE:
                return await self._refuse(correction_id, c.plan_id, c.status)
            cancelled = c.transition(S.CANCELLED, self._clock(), reason=reason)
            try:
                await self._commit(Changes(cancelled, v.version,
                                           events=[correction_event(cancelled)]))
            except ConcurrentChange:
                continue  # the driver moved it meanwhile: decide again on what it is now
            return cancelled

    async def fail_correction(self, correction_id: str, reason: str, *,
                              plan_id: str | None = None) -> Correction | FailRefused:
        """An operator ends a correction stuck in ANALYZING or EXECUTING as FAILED.

        The reason becomes the correction's error (and its executing attempt, if any,
        ends FAILED with it). A driver still working it loses its next conditional
        write and stops. Otherwise the refusal is returned and published to
        corrections.fail_refused.<plan_id> (once per status met).
        """
        while True:
            v = await self._store.corrections.get(correction_id)
            if v is None or (plan_id is not None and v.correction.plan_id != plan_id):
                return await self._refuse_fail(correction_id, plan_id, None)
            c = v.correction
            if c.status not in OPERATOR_FAILABLE:
                return await self._refuse_fail(correction_id, c.plan_id, c.status)
            attempts = await self._store.attempts.list_by_correction(correction_id)
            running = next((a for a in reversed(attempts) if a.state is A.EXECUTING), None)
            try:
                await self._fail(v, f"failed by an operator: {reason}", None, running,
                                 reason=reason)
            except ConcurrentChange:
                continue  # the driver moved it meanwhile: decide again on what it is now
            failed = await self._get(correction_id)
            return failed.correction

    async def retry_correction(self, correction_id: str, retry_id: str, *,
                               plan_id: str | None = None, reason: str | None = None,
                               requested_by: str = "operator") -> Correction | RetryRefused:
        """An operator starts a new round of a FAILED correction: FAILED -> PENDING.

        The driver (or the recovery sweep, which drives every plan with unfinished
        corrections) then analyses it again and executes it in a new attempt; the earlier
        attempts stay, so `list_attempts` shows every try. A retry whose `retry_id` is
        already in the history is not applied twice (a redelivery). Refused, and the
        refusal published to corrections.retry_refused.<plan_id>, when the correction is
        not FAILED, or when its target can no longer be corrected (a new round would
        end FAILED again, so the operator is told why instead).
        """
        while True:
            v = await self._store.corrections.get(correction_id)
            if v is None or (plan_id is not None and v.correction.plan_id != plan_id):
                return await self._refuse_retry(correction_id, plan_id, None, 1)
            c = v.correction
            if c.retried_by(retry_id):
                return c
            if c.status not in RETRYABLE:
                return await self._refuse_retry(correction_id, c.plan_id, c.status,
                                                c.round_of())
            try:  # a read to refuse early only: the driver validates the target again
                validate_target(c.request(), await self._store.decisions.get(c.decision_id))
            except DomainError as exc:
                return await self._refuse_retry(correction_id, c.plan_id, c.status,
                                                c.round_of(), target_error=str(exc))
            why = f"retried by {requested_by}" + (f": {reason}" if reason else "")
            # No attempt is added while FAILED, and the write below is conditional on the
            # version read, so this count is exact.
            before = len(await self._store.attempts.list_by_correction(correction_id))
            retried = c.transition(S.PENDING, self._clock(), reason=why[:1000],
                                   retry_id=retry_id, attempts_before=before)
            try:
                await self._commit(Changes(retried, v.version,
                                           events=[correction_event(retried)]))
            except ConcurrentChange:
                continue  # retried (or cancelled) meanwhile: decide again on what it is now
            return retried

    # --- driving ---------------------------------------------------------------------

    async def drive_plan(self, plan_id: str) -> bool:
        """Work the plan's unfinished corrections, oldest arrival first, until none remain.

        False if another driver holds the plan's lease (it will do the work)."""
        owner = self._owner()
        if not await self._store.locks.acquire(plan_id, owner, self._clock()):
            return False
        async with self._holding(plan_id, owner):
            # Read again after each one: a request recorded meanwhile takes its place
            # by arrival (a stale list would run a later arrival before it).
            while todo := await self._store.corrections.unfinished(plan_id):
                v = todo[next_to_drive([t.correction.status for t in todo])]
                await self._advance(v.correction.correction_id, owner)
            return True

    @contextlib.asynccontextmanager
    async def _holding(self, plan_id: str, owner: str) -> AsyncIterator[None]:
        """Keep the lease just acquired renewed while the body runs, then release it."""
        beat = asyncio.create_task(self._renew_lease(plan_id, owner),
                                   name=f"lease-heartbeat:{plan_id}")
        try:
            yield
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            await self._store.locks.release(plan_id, owner)

    async def _renew_lease(self, plan_id: str, owner: str) -> None:
        # Every third of the lease: two renewals can fail (a database hiccup) before it
        # expires. The renewal is conditional on the owner, so once another driver took
        # the plan this one stops renewing and its next commit fails its fence.
        every = self._store.locks.ttl.total_seconds() / 3
        while True:
            await asyncio.sleep(every)
            try:
                if not await self._store.locks.renew(plan_id, owner, self._clock()):
                    log.warning("lease on plan %s lost by %s; its next commit will fail",
                                plan_id, owner)
                    return
            except StoreFailure as exc:
                log.warning("renewing the lease on plan %s failed: %s", plan_id, exc)

    async def orphaned_plans(self) -> list[str]:
        """Plans with unfinished corrections and no live lease: their driver died (or
        none ever started). Whoever calls drive_plan on one takes it over; the lease
        decides who, so two sweeping replicas never both drive it."""
        plans = await self._store.corrections.plans_with_unfinished()
        if not plans:
            return []
        live = await self._store.locks.live(plans, self._clock())
        return [p for p in plans if p not in live]

    async def flush(self, correction_id: str) -> None:
        await outbox.flush(self._store.outbox, self._publisher, correction_id)

    async def relay(self, created_before: datetime | None = None) -> int:
        """Flush every correction with events left in the outbox; returns how many."""
        left = await self._store.outbox.pending(created_before)
        corrections = list(dict.fromkeys(p.correction_id for p in left))
        for cid in corrections:
            await self.flush(cid)
        return len(corrections)

    # --- the steps ---------------------------------------------------------------------

    async def _advance(self, correction_id: str, owner: str) -> Correction:
        impact: CorrectionImpact | None = None
        conflicts = 0
        analysis_failures = 0
        last_conflict: Exception | None = None
        while True:
            v = await self._get(correction_id)
            c = v.correction
            step = next_step(c.status, conflicts=conflicts,
                             max_conflicts=self.policy.max_conflicts)
            if step is Step.FINISHED:
                # Its last events may be in the outbox if our own commit looked failed
                # but had committed (an unknown commit result).
                await self.flush(correction_id)
                if c.status is S.FAILED and c.mode is CorrectionMode.REVERT:
                    # Failed under us (an operator's fail) maybe after we wrote the archive.
                    await asyncio.to_thread(self._archive.remove, c.plan_id, c.correction_id)
                return c
            try:
                with step_span(c):
                    impact = await self._step(
                        step, v, owner, impact, analysis_failures=analysis_failures,
                        stuck=last_conflict if step is Step.FAIL_ATTEMPT else None)
                conflicts, last_conflict = 0, None
            except AnalysisFailed:
                analysis_failures += 1
                await asyncio.sleep(self.policy.attempt_backoff_seconds * analysis_failures)
            except ConcurrentChange as exc:
                if isinstance(exc, LeaseLost):
                    raise
                # Whatever changed may be the tree the impact was computed from: never
                # reuse it, and do not spin while the other writer finishes.
                impact = None
                conflicts += 1
                last_conflict = exc
                log.info("correction %s changed under us (%s); reading it again (round %d)",
                         correction_id, exc, conflicts)
                await asyncio.sleep(self.policy.conflict_backoff(conflicts))

    async def _step(self, step: Step, v: Versioned, owner: str,
                    impact: CorrectionImpact | None, *, analysis_failures: int,
                    stuck: Exception | None) -> CorrectionImpact | None:
        """Do `step` (contracts.corrections.driver) for the correction as read; the impact an
        analysis computed, for the execution that follows it."""
        c = v.correction
        if step is Step.START_ANALYSIS:
            analyzing = c.transition(S.ANALYZING, self._clock())
            await self._commit(Changes(analyzing, v.version, lease_owner=owner,
                                       events=[correction_event(analyzing)]))
            return impact
        if step is Step.ANALYZE:
            return await self._analyze(v, owner, analysis_failures)
        await self._execute(v, owner, impact, stuck)
        return None

    async def _impact(self, decision_id: str) -> CorrectionImpact:
        """The impact a revert works from; CorrectionTooLarge past the limit."""
        impact = await self._store.impact.impact(decision_id, self.policy.max_decisions)
        if impact.exceeds_limit:
            raise CorrectionTooLarge(decision_id, self.policy.max_decisions)
        return impact

    async def _analyze(self, v: Versioned, owner: str,
                       failures: int) -> CorrectionImpact | None:
        c = v.correction
        try:
            target = await self._store.decisions.get(c.decision_id)
            validate_target(c.request(), target)
            # An append touches no existing decision: the walk is the dry run's business.
            impact = await self._impact(c.decision_id) if c.mode is CorrectionMode.REVERT \
                else None
        except DomainError as exc:
            await self._fail(v, str(exc), owner, None)
            return None
        except Exception as exc:
            if outcome_of(exc, committing=False) is not Outcome.FAIL_ATTEMPT:
                raise
            # No attempt exists yet, but the analysis gets the same number of tries.
            log.warning("analysing correction %s failed: %s", c.correction_id, describe(exc),
                        extra={"correction_id": c.correction_id, "plan_id": c.plan_id})
            if failures + 1 >= self.policy.max_attempts:
                await self._fail(v, f"the impact analysis failed {failures + 1} time(s); "
                                 f"last error: {describe(exc)}", owner, None)
                return None
            raise AnalysisFailed from exc
        now = self._clock()
        executing = c.transition(S.EXECUTING, now)
        attempt = CorrectionAttemptRecord.for_correction(c, now).transition(A.EXECUTING, now)
        await self._commit(Changes(
            executing, v.version, lease_owner=owner,
            attempts=[AttemptChange(attempt, None)],
            events=[correction_event(executing), *new_attempt_events(attempt, now)]))
        return impact

    async def _execute(self, v: Versioned, owner: str, impact: CorrectionImpact | None,
                       stuck: Exception | None) -> None:
        c = v.correction
        # Only this round's attempts count against max_attempts: an operator's retry
        # gets a fresh budget, and the earlier attempts (all ended) stay listed.
        attempts = await self._store.attempts.list_by_correction(c.correction_id)
        tried = len(attempts) - c.attempts_before_round
        attempt = next((a for a in reversed(attempts) if a.state is A.EXECUTING), None)
        if attempt is None:  # a crash between the two writes of a retry: start the next
            now = self._clock()
            attempt = CorrectionAttemptRecord.for_correction(c, now).transition(A.EXECUTING, now)
            await self._commit(Changes(c, v.version, lease_owner=owner,
                                       attempts=[AttemptChange(attempt, None)],
                                       events=new_attempt_events(attempt, now)))
            return
        if stuck is not None:  # the tree kept changing under this attempt
            await self._attempt_failed(v, owner, attempt, tried, stuck)
            return
        request = c.request()
        try:
            target = await self._store.decisions.get(c.decision_id)
            record = await self._store.plans.get(c.plan_id) \
                if c.mode is CorrectionMode.APPEND else None
            validate_target(request, target)
            assert target is not None
            if c.mode is CorrectionMode.REVERT:
                impact = impact or await self._impact(c.decision_id)
        except DomainError as exc:
            await self._fail(v, str(exc), owner, attempt)
            return
        except Exception as exc:
            if outcome_of(exc, committing=False) is not Outcome.FAIL_ATTEMPT:
                raise
            await self._attempt_failed(v, owner, attempt, tried, exc)
            return
        try:
            changes = await self._changes(v, owner, attempt, request=request, target=target,
                                         impact=impact, record=record)
            self._crash("before_execute_commit")
            await self._commit(changes)
        except Exception as exc:
            if outcome_of(exc, committing=True) is not Outcome.FAIL_ATTEMPT:
                raise
            log.warning("attempt %s of correction %s failed: %s", attempt.id,
                        c.correction_id, describe(exc),
                        extra={"correction_id": c.correction_id, "attempt_id": attempt.id,
                               "plan_id": c.plan_id})
            await self._attempt_failed(v, owner, attempt, tried, exc)

    async def _changes(self, v: Versioned, owner: str, attempt: CorrectionAttemptRecord, *,
                       request: CorrectionRequest, target: Decision,
                       impact: CorrectionImpact | None, record: PlanRecord | None) -> Changes:
        """What the attempt commits; for a revert, the archive is written first."""
        c = v.correction
        now = self._clock()
        if c.mode is CorrectionMode.REVERT:
            assert impact is not None
            revert = revert_writes(request, target, impact, new_decision_id=new_id(),
                                 sequence_number=0, at=now)
            path = await asyncio.to_thread(self._archive.write, revert)
            done = attempt.transition(A.COMPLETE, now, new_decision_id=revert.new_decision.
                                      decision_id, archived_artifacts_path=path)
            applied = c.transition(S.APPLIED, now, **revert.applied_info(path))
            return Changes(applied, v.version, lease_owner=owner, revert=revert,
                           announce=persisted_message,
                           attempts=[AttemptChange(done, A.EXECUTING)],
                           events=[attempt_event(done, A.EXECUTING, now),
                                   correction_event(applied),
                                   resume_message(ResumeInstruction.after_revert(
                                       applied, target, revert))])
        append = append_writes(
            request, target, child_plan_id=new_id(), child_root_decision_id=new_id(),
            intervention_decision_id=new_id(), sequence_number=0, at=now,
            project=record.project if record else target.project,
            action_template=record.action_template if record else target.action_template)
        done = attempt.transition(A.COMPLETE, now, new_decision_id=append.new_decision_id)
        applied = c.transition(S.APPLIED, now, **append.applied_info())
        return Changes(applied, v.version, lease_owner=owner, append=append,
                       announce=persisted_message,
                       attempts=[AttemptChange(done, A.EXECUTING)],
                       events=[attempt_event(done, A.EXECUTING, now),
                               correction_event(applied),
                               resume_message(ResumeInstruction.after_append(
                                   applied, target, append))])

    async def _attempt_failed(self, v: Versioned, owner: str, attempt: CorrectionAttemptRecord,
                              tried: int, exc: Exception) -> None:
        c = v.correction
        now = self._clock()
        failed = attempt.transition(A.FAILED, now, error=describe(exc))
        if tried >= self.policy.max_attempts:
            error = (f"the {c.mode.value} failed {tried} time(s); last error: "
                     f"{describe(exc)}")
            await self._fail(v, error, owner, attempt, attempt_error=describe(exc))
            return
        retry = CorrectionAttemptRecord.for_correction(c, now).transition(A.EXECUTING, now)
        await self._commit(Changes(
            c, v.version, lease_owner=owner,
            attempts=[AttemptChange(failed, A.EXECUTING), AttemptChange(retry, None)],
            events=[attempt_event(failed, A.EXECUTING, now), *new_attempt_events(retry, now)]))
        await asyncio.sleep(self.policy.attempt_backoff_seconds * tried)

    async def _fail(self, v: Versioned, error: str, owner: str | None,
                    attempt: CorrectionAttemptRecord | None, *, reason: str | None = None,
                    attempt_error: str | None = None) -> None:
        """FAILED with `error`; `owner` None for an operator's fail, which holds no lease
        (its write is conditional on the version read, like a cancel)."""
        c = v.correction
        now = self._clock()
        failed = c.transition(S.FAILED, now, error=error, reason=reason)
        changes: list[AttemptChange] = []
        events: list[OutgoingEvent] = []
        if attempt is not None:
            gave_up = attempt.transition(A.FAILED, now, error=attempt_error or error)
            changes.append(AttemptChange(gave_up, A.EXECUTING))
            events.append(attempt_event(gave_up, A.EXECUTING, now))
        events.append(correction_event(failed))
        await self._commit(Changes(failed, v.version, lease_owner=owner, attempts=changes,
                                   events=events))
        if c.mode is CorrectionMode.REVERT:
            await asyncio.to_thread(self._archive.remove, c.plan_id, c.correction_id)
        log.info("correction %s FAILED: %s", c.correction_id, error,
                 extra={"correction_id": c.correction_id, "plan_id": c.plan_id})

    async def _commit(self, changes: Changes) -> None:
        now = self._clock()
        c = changes.correction
        if c.trace_context:  # every event of the correction continues the request's trace
            carried = tuple(c.trace_context.items())
            changes = dataclasses.replace(changes, events=[
                dataclasses.replace(e, headers=carried) for e in changes.events])
        await self._store.writer.commit(changes, now)
        if self._observer is not None and c.is_terminal:
            # The commit is conditional on the version read, so each end is counted once.
            self._observer.correction_ended(c.mode.value, c.status.value,
                                            (now - c.requested_at).total_seconds())
        status = changes.correction.status.value
        self._crash(f"after_commit:{status}")
        await self.flush(changes.correction.correction_id)
        self._crash(f"after_publish:{status}")

    async def reject(self, subject: str, headers: dict[str, str], data: bytes, *,
                     stream_sequence: int, delivered: int, unreadable: Unreadable) -> None:
        """Keep an unreadable request or cancel in dead_letters, then report it (once per
        stream message, whoever retries): bad input is never retried."""
        now = self._clock()
        letter = DeadLetter.of_message(
            id=dead_letter_id(CORRECTIONS_STREAM, stream_sequence), subject=subject,
            headers=headers, data=data, plan_id=unreadable.plan_id, decision_id=None,
            errors=unreadable.violations, rejected_at=now, delivered=delivered)
        await self._store.dead_letters.keep([letter])
        body = CorrectionRejected(
            dead_letter_id=letter.id, subject=subject, plan_id=unreadable.plan_id,
            correction_id=unreadable.message_id, errors=letter.errors, rejected_at=now)
        await self._publisher.publish_all([OutgoingEvent(
            subjects.rejected(unreadable.plan_id), body.model_dump_json().encode(),
            subjects.rejected_msg_id(stream_sequence))])
        log.warning("rejected %s on %s: %s", letter.id, subject, unreadable.reason,
                    extra={"dead_letter_id": letter.id, "subject": subject,
                           "plan_id": unreadable.plan_id})

    # --- helpers -------------------------------------------------------------------------

    async def _refuse(self, correction_id: str, plan_id: str | None,
                      status: CorrectionStatus | None) -> CancelRefused:
        if plan_id is None:  # no plan to address the refusal to
            raise ResourceNotFoundError("correction", correction_id)
        refused = CancelRefused.for_status(correction_id, plan_id, status)
        await self._publisher.publish_all([OutgoingEvent(
            refused.subject, refused.model_dump_json().encode(), refused.msg_id)])
        return refused

    async def _refuse_fail(self, correction_id: str, plan_id: str | None,
                           status: CorrectionStatus | None) -> FailRefused:
        if plan_id is None:
            raise ResourceNotFoundError("correction", correction_id)
        refused = FailRefused.for_status(correction_id, plan_id, status)
        await self._publisher.publish_all([OutgoingEvent(
            refused.subject, refused.model_dump_json().encode(), refused.msg_id)])
        return refused

    async def _refuse_retry(self, correction_id: str, plan_id: str | None,
                            status: CorrectionStatus | None, round_: int, *,
                            target_error: str | None = None) -> RetryRefused:
        if plan_id is None:
            raise ResourceNotFoundError("correction", correction_id)
        refused = RetryRefused.for_status(correction_id, plan_id, status, round_,
                                          target_error=target_error)
        await self._publisher.publish_all([OutgoingEvent(
            refused.subject, refused.model_dump_json().encode(), refused.msg_id)])
        return refused

    async def _get(self, correction_id: str) -> Versioned:
        v = await self._store.corrections.get(correction_id)
        if v is None:
            raise ResourceNotFoundError("correction", correction_id)
        return v

    async def _require_mode(self, correction_id: str, mode: CorrectionMode) -> None:
        c = (await self._get(correction_id)).correction
        if c.mode is not mode:
            raise ValueError(f"correction {correction_id} is a {c.mode.value}, not a "
                             f"{mode.value}")

    def _owner(self) -> str:
        # One owner per drive, not per process: two deliveries in one worker must not
        # both believe they hold the plan.
        return f"{self._worker_id}:{new_id()}"


__all__ = ["CorrectionPolicy", "CorrectionService", "CrashHook", "Outcome", "PlanBusy",
           "no_crash", "outcome_of"]
