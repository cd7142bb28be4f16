"""The runner's steps after the first: analyse a correction (validate its target,
compute a revert's impact, start the first attempt), and execute its attempt (build
the writes, archive a revert's artifacts, commit), ending the attempt FAILED on any
failure a retry in place would meet again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from contracts.corrections.append_impact import forecast_note
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import AttemptChange, Changes, Versioned
from contracts.corrections.errors import CorrectionTooLarge
from contracts.corrections.planning import validate_target
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionAttemptState as A
from contracts.corrections.states import CorrectionMode
from contracts.corrections.states import CorrectionStatus as S
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.shared.errors import DomainError
from services.append_forecast import AppendForecaster
from services.archive.writer import Archive
from services.corrections.applying import Analysed, attempt_changes
from services.corrections.committing import Committer
from services.corrections.messages import attempt_event, correction_event, new_attempt_events
from services.corrections.policy import (
    AnalysisFailed,
    CorrectionPolicy,
    CrashHook,
    Outcome,
    describe,
    outcome_of,
)
from services.ports.corrections import CorrectionStorePort

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Loaded:
    """What an attempt works from, read and validated."""

    request: CorrectionRequest
    target: Decision
    analysed: Analysed | None
    record: PlanRecord | None


class Steps:
    def __init__(self, store: CorrectionStorePort, writes: Committer, archive: Archive,
                 policy: CorrectionPolicy, *, crash: CrashHook,
                 clock: Callable[[], datetime],
                 forecaster: AppendForecaster | None = None) -> None:
        self._store = store
        self._writes = writes
        self._archive = archive
        self.policy = policy
        self._crash = crash
        self._clock = clock
        self._forecaster = forecaster

    async def impact(self, plan_id: str, decision_id: str) -> Analysed:
        """The impact a revert works from; CorrectionTooLarge past the limit."""
        mark = await self._store.impact.sequence_mark(plan_id)
        impact = await self._store.impact.impact(decision_id, self.policy.max_decisions)
        if impact.exceeds_limit:
            raise CorrectionTooLarge(decision_id, self.policy.max_decisions)
        return Analysed(impact, mark)

    async def analyze(self, v: Versioned, owner: str, failures: int) -> Analysed | None:
        c = v.correction
        try:
            target = await self._store.decisions.get(c.decision_id)
            validate_target(c.request(), target)
            # An append touches no existing decision: the walk is the dry run's business.
            analysed = await self.impact(c.plan_id, c.decision_id) \
                if c.mode is CorrectionMode.REVERT else None
        except DomainError as exc:
            await self._writes.fail(v, str(exc), owner, None)
            return None
        except Exception as exc:
            if outcome_of(exc, committing=False) is not Outcome.FAIL_ATTEMPT:
                raise
            # No attempt exists yet, but the analysis gets the same number of tries.
            log.warning("analysing correction %s failed: %s", c.correction_id, describe(exc),
                        extra={"correction_id": c.correction_id, "plan_id": c.plan_id})
            if failures + 1 >= self.policy.max_attempts:
                await self._writes.fail(v, f"the impact analysis failed {failures + 1} time(s); "
                                 f"last error: {describe(exc)}", owner, None)
                return None
            raise AnalysisFailed from exc
        now = self._clock()
        executing = c.transition(S.EXECUTING, now)
        attempt = CorrectionAttemptRecord.for_correction(c, now).transition(A.EXECUTING, now)
        await self._writes.commit(Changes(
            executing, v.version, lease_owner=owner,
            attempts=[AttemptChange(attempt, None)],
            events=[correction_event(executing), *new_attempt_events(attempt, now)]))
        return analysed

    async def execute(self, v: Versioned, owner: str, analysed: Analysed | None,
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
            await self._writes.commit(Changes(c, v.version, lease_owner=owner,
                                              attempts=[AttemptChange(attempt, None)],
                                              events=new_attempt_events(attempt, now)))
            return
        if stuck is not None:  # the tree kept changing under this attempt
            await self._attempt_failed(v, owner, attempt, tried, stuck)
            return
        loaded = await self._load(v, owner, attempt, tried, analysed)
        if loaded is not None:
            await self._apply(v, owner, attempt, tried, loaded)

    async def _load(self, v: Versioned, owner: str, attempt: CorrectionAttemptRecord,
                    tried: int, analysed: Analysed | None) -> _Loaded | None:
        """The target, the plan's record (append) and the impact (revert), validated; None
        once the correction or the attempt was ended FAILED instead."""
        c = v.correction
        request = c.request()
        try:
            target = await self._store.decisions.get(c.decision_id)
            record = await self._store.plans.get(c.plan_id) \
                if c.mode is CorrectionMode.APPEND else None
            validate_target(request, target)
            assert target is not None
            if c.mode is CorrectionMode.REVERT:
                analysed = analysed or await self.impact(c.plan_id, c.decision_id)
        except DomainError as exc:
            await self._writes.fail(v, str(exc), owner, attempt)
            return None
        except Exception as exc:
            if outcome_of(exc, committing=False) is not Outcome.FAIL_ATTEMPT:
                raise
            await self._attempt_failed(v, owner, attempt, tried, exc)
            return None
        return _Loaded(request, target, analysed, record)

    async def _apply(self, v: Versioned, owner: str, attempt: CorrectionAttemptRecord,
                     tried: int, loaded: _Loaded) -> None:
        """Build the attempt's writes (a revert's archive first) and commit them."""
        c = v.correction
        try:
            note = None
            if c.mode is CorrectionMode.APPEND and self._forecaster is not None:
                note = forecast_note(await self._forecaster.forecast(loaded.target,
                                                                     loaded.record))
            changes = await attempt_changes(
                v, owner, attempt, self._archive, self._clock(), request=loaded.request,
                target=loaded.target, analysed=loaded.analysed, record=loaded.record,
                note=note)
            self._crash("before_execute_commit")
            await self._writes.commit(changes)
        except Exception as exc:
            if outcome_of(exc, committing=True) is not Outcome.FAIL_ATTEMPT:
                raise
            log.warning("attempt %s of correction %s failed: %s", attempt.id,
                        c.correction_id, describe(exc),
                        extra={"correction_id": c.correction_id, "attempt_id": attempt.id,
                               "plan_id": c.plan_id})
            await self._attempt_failed(v, owner, attempt, tried, exc)

    async def _attempt_failed(self, v: Versioned, owner: str, attempt: CorrectionAttemptRecord,
                              tried: int, exc: Exception) -> None:
        c = v.correction
        now = self._clock()
        failed = attempt.transition(A.FAILED, now, error=describe(exc))
        if tried >= self.policy.max_attempts:
            error = (f"the {c.mode.value} failed {tried} time(s); last error: "
                     f"{describe(exc)}")
            await self._writes.fail(v, error, owner, attempt, attempt_error=describe(exc))
            return
        retry = CorrectionAttemptRecord.for_correction(c, now).transition(A.EXECUTING, now)
        await self._writes.commit(Changes(
            c, v.version, lease_owner=owner,
            attempts=[AttemptChange(failed, A.EXECUTING), AttemptChange(retry, None)],
            events=[attempt_event(failed, A.EXECUTING, now), *new_attempt_events(retry, now)]))
        await asyncio.sleep(self.policy.attempt_backoff_seconds * tried)
