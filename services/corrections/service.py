"""The correction service: the operator's API over one store, one publisher and one
archive. It records requests, answers dry runs and reads, and hands the rest to the
operator commands (`commands`) and the plan runner (`runner`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import Changes
from contracts.corrections.dry_run import DryRunReport, build_dry_run_report
from contracts.corrections.planning import validate_target
from contracts.corrections.record import Correction
from contracts.corrections.refusals import CancelRefused, FailRefused, RetryRefused
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.impact.estimate import timing_samples, type_durations, types_without_history
from contracts.impact.summary import summarize
from contracts.shared.ids import new_id
from contracts.shared.persistence import DuplicateRecord
from contracts.shared.rules import RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable
from contracts.trust.ownership import out_of_scope
from contracts.trust.policy import Identity, signature_of
from services.append_forecast import AppendForecaster
from services.archive.writer import Archive
from services.corrections import rejections
from services.corrections.commands import OperatorCommands
from services.corrections.committing import Committer
from services.corrections.messages import correction_event
from services.corrections.policy import CorrectionPolicy, CrashHook, no_crash
from services.corrections.runner import PlanRunner
from services.corrections.steps import Steps
from services.ports.corrections import CorrectionStorePort
from services.ports.publishing import CorrectionObserver, EventPublisher

REPLACEMENT_HOPS_MAX = 1000
"""Steps a dry run follows superseded_by to find a superseded target's current replacement."""


class CorrectionService:
    def __init__(self, store: CorrectionStorePort, publisher: EventPublisher, archive: Archive, *,
                 policy: CorrectionPolicy | None = None, crash: CrashHook = no_crash,
                 worker_id: str | None = None,
                 clock: Callable[[], datetime] = utc_now,
                 observer: CorrectionObserver | None = None,
                 forecaster: AppendForecaster | None = None) -> None:
        self._store = store
        self._publisher = publisher
        self.policy = policy or CorrectionPolicy()
        self._clock = clock
        self._archive = archive
        self._forecaster = forecaster
        """What an append would start (services.append_forecast); None: not analysed."""
        self._writes = Committer(store, publisher, archive, clock=clock, crash=crash,
                                 observer=observer)
        self._commands = OperatorCommands(store, publisher, self._writes, clock=clock)
        steps = Steps(store, self._writes, archive, self.policy, crash=crash, clock=clock,
                      forecaster=forecaster)
        self._runner = PlanRunner(store, self._writes, steps, archive, self.policy,
                                  worker_id=worker_id or new_id(), clock=clock)

    # --- the specified API (ADR 0001) -----------------------------------------------

    async def request_correction(self, request: CorrectionRequest, *,
                                 arrival: int = 0,
                                 trace: Mapping[str, str] | None = None,
                                 identity: Identity = None) -> Correction:
        """Record the request as a PENDING correction; a known correction_id records nothing.

        `arrival` orders the plan's corrections (the stream sequence of the request);
        `trace` is the request message's headers, whose trace context every event of the
        correction carries on; `identity` who sent it, as verified (its requested_by).
        """
        existing = await self._store.corrections.get(request.correction_id)
        if existing is None:
            created = Correction.from_request(request, self._clock(), trace=trace,
                                              by=signature_of(identity))
            try:
                await self._writes.commit(Changes(created, None, arrival=arrival,
                                           events=[correction_event(created)]))
            except DuplicateRecord:
                pass  # a concurrent delivery recorded it first
            else:
                return created
            existing = await self._store.corrections.get(request.correction_id)
            assert existing is not None
        await self.flush(request.correction_id)  # its pending event, if a crash left it
        return existing.correction

    async def scope_refusal(self, identity: Identity, plan_id: str) -> RuleViolation | None:
        """`operator_scope` when a verified operator's command concerns a plan outside
        its projects (a plan not recorded yet has no project: only `*` covers it)."""
        if identity is None:
            return None
        plan = await self._store.plans.get(plan_id)
        return out_of_scope(identity, plan_id, plan.project if plan else None)

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
        revert = request.mode is CorrectionMode.REVERT
        archive = await self._archive.preview(impact.affected_artifacts) if revert else None
        child = None if revert or self._forecaster is None else \
            await self._forecaster.forecast(target, await self._store.plans.get(target.plan_id))
        return build_dry_run_report(
            request, impact, target_superseded=replacement is not None,
            current_replacement=replacement,
            fallback_types=types_without_history(
                (v.decision_type for v in walk.affected), durations),
            max_decisions=self.policy.max_decisions, archive=archive, child_plan=child)

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
        return await self._runner.execute_correction(correction_id)

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
                                plan_id: str | None = None,
                                identity: Identity = None) -> Correction | CancelRefused:
        """CANCELLED from PENDING or ANALYZING; otherwise the refusal, which is also
        published to corrections.cancel_refused.<plan_id> (once per status met).
        `identity`: who asked, as verified (the transition's `by`)."""
        return await self._commands.cancel(correction_id, reason, plan_id=plan_id,
                                           by=signature_of(identity))

    async def fail_correction(self, correction_id: str, reason: str, *,
                              plan_id: str | None = None,
                              identity: Identity = None) -> Correction | FailRefused:
        """An operator ends a correction stuck in ANALYZING or EXECUTING as FAILED
        (`OperatorCommands.fail`); otherwise the refusal."""
        return await self._commands.fail(correction_id, reason, plan_id=plan_id,
                                         by=signature_of(identity))

    async def retry_correction(self, correction_id: str, retry_id: str, *,
                               plan_id: str | None = None, reason: str | None = None,
                               identity: Identity = None) -> Correction | RetryRefused:
        """An operator starts a new round of a FAILED correction: FAILED -> PENDING
        (`OperatorCommands.retry`); otherwise the refusal."""
        return await self._commands.retry(correction_id, retry_id, plan_id=plan_id,
                                          reason=reason, by=signature_of(identity))

    # --- running ---------------------------------------------------------------------

    async def run_plan(self, plan_id: str) -> bool:
        """Work the plan's unfinished corrections, oldest arrival first, until none remain.

        False if another runner holds the plan's lease (it will do the work)."""
        return await self._runner.run_plan(plan_id)

    async def orphaned_plans(self, after: str | None = None
                             ) -> tuple[list[str], str | None]:
        """A page of the plans with unfinished corrections and no live lease, and where
        the next page starts (`PlanRunner.orphaned_plans`)."""
        return await self._runner.orphaned_plans(after)

    async def flush(self, correction_id: str) -> None:
        await self._writes.flush(correction_id)

    async def relay(self, created_before: datetime | None = None) -> int:
        """Flush every correction with events left in the outbox; returns how many."""
        left = await self._store.outbox.pending(created_before)
        corrections = list(dict.fromkeys(p.source_id for p in left))
        for cid in corrections:
            await self.flush(cid)
        return len(corrections)

    async def reject(self, subject: str, headers: dict[str, str], data: bytes, *,
                     stream_sequence: int, delivered: int, unreadable: Unreadable) -> None:
        """Keep an unreadable request or cancel in dead_letters, then report it (once per
        stream message, whoever retries): bad input is never retried."""
        await rejections.reject(self._store.dead_letters, self._publisher, self._clock(),
                                subject=subject, headers=headers, data=data,
                                stream_sequence=stream_sequence, delivered=delivered,
                                unreadable=unreadable)
