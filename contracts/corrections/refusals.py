"""The correction path's answers that say no: an operator's cancel, fail or retry
refused (with the status the correction was in), a command that cannot be read, and a
dry run that has no report to give."""

from __future__ import annotations

from pydantic import Field

from contracts.corrections import subjects
from contracts.corrections.states import CorrectionStatus
from contracts.shared.base import Frozen
from contracts.shared.bounds import MAX_TEXT_BYTES
from contracts.shared.ids import Ulid
from contracts.shared.rules import ERRORS_DOC, BoundedViolations, EchoText
from contracts.shared.timestamps import UtcTime


class _Refusal(Frozen):
    """What every refusal of an operator's command (cancel, fail, retry) says: which
    correction, its plan, the status it was found in, and why, in one sentence."""

    correction_id: Ulid = Field(description="The correction the command named.")
    plan_id: Ulid = Field(description="Its plan.")
    status: CorrectionStatus | None = Field(
        description="Its status when the command arrived; None if no such correction exists."
    )
    reason: str = Field(description="Why the command was refused, in one sentence.")


def _refusal_reason(correction_id: str, plan_id: str, status: CorrectionStatus | None,
                    only: str) -> str:
    if status is None:
        return f"no correction {correction_id} in plan {plan_id}"
    return f"correction {correction_id} is {status.value}; {only}"


class CancelRefused(_Refusal):
    """Published to `corrections.cancel_refused.<plan_id>` (and sent as the reply, if the
    cancel was a request) when a correction is past the point where it can be cancelled."""

    @classmethod
    def for_status(
        cls, correction_id: str, plan_id: str, status: CorrectionStatus | None
    ) -> CancelRefused:
        why = _refusal_reason(correction_id, plan_id, status,
                              "only pending or analyzing corrections can be cancelled")
        return cls(correction_id=correction_id, plan_id=plan_id, status=status, reason=why)

    @property
    def subject(self) -> str:
        return subjects.cancel_refused(self.plan_id)

    @property
    def msg_id(self) -> str:
        return subjects.cancel_refused_msg_id(self.correction_id, self.status)


class FailRefused(_Refusal):
    """Published to `corrections.fail_refused.<plan_id>` when an operator's fail cannot be
    honoured: the correction is not ANALYZING or EXECUTING (or does not exist)."""

    @classmethod
    def for_status(
        cls, correction_id: str, plan_id: str, status: CorrectionStatus | None
    ) -> FailRefused:
        why = _refusal_reason(correction_id, plan_id, status,
                              "only analyzing or executing corrections can be failed by an "
                              "operator (cancel a pending one)")
        return cls(correction_id=correction_id, plan_id=plan_id, status=status, reason=why)

    @property
    def subject(self) -> str:
        return subjects.fail_refused(self.plan_id)

    @property
    def msg_id(self) -> str:
        return subjects.fail_refused_msg_id(self.correction_id, self.status)


class RetryRefused(_Refusal):
    """Published to `corrections.retry_refused.<plan_id>` when an operator's retry cannot be
    honoured: the correction is not FAILED (or does not exist), or its target can no longer
    be corrected (missing, superseded, in another plan), so a new round would fail again."""

    round: int = Field(default=1, ge=1, description="Its round when the retry arrived.")

    @classmethod
    def for_status(cls, correction_id: str, plan_id: str, status: CorrectionStatus | None,
                   round_: int = 1, *, target_error: str | None = None) -> RetryRefused:
        if status is not None and target_error is not None:
            why = f"correction {correction_id} cannot be retried: {target_error}"
        else:
            why = _refusal_reason(correction_id, plan_id, status,
                                  "only a failed correction can be retried")
        return cls(correction_id=correction_id, plan_id=plan_id, status=status,
                   round=round_, reason=why[:1000])

    @property
    def subject(self) -> str:
        return subjects.retry_refused(self.plan_id)

    @property
    def msg_id(self) -> str:
        return subjects.retry_refused_msg_id(self.correction_id, self.status, self.round)


class CorrectionRejected(Frozen):
    """Published to `corrections.rejected.<plan_id|unknown>` when a request or cancel message
    cannot be read; the message is kept in `dead_letters` and never redelivered."""

    dead_letter_id: EchoText = Field(
        description="'CORRECTIONS:<stream sequence>' in dead_letters.")
    subject: EchoText = Field(description="Subject the message was published on (cut at "
                              f"{MAX_TEXT_BYTES} bytes).")
    plan_id: EchoText | None = Field(default=None, description="Plan, when readable.")
    correction_id: EchoText | None = Field(default=None,
                                           description="correction_id, if readable.")
    errors: BoundedViolations = Field(description=ERRORS_DOC)
    rejected_at: UtcTime = Field(description="When (UTC).")


class DryRunError(Frozen):
    """The reply to `corrections.dryrun.<plan_id>` when no report can be made.

    code: `target_not_found`, `target_in_other_plan` (applying would FAIL with the
    same message), or `invalid_request` (unreadable body, or a body whose plan_id
    differs from the subject's). A superseded target is not an error here: the report
    warns and names its current replacement (applying still FAILS, target_superseded).
    """

    error: str = Field(description="Machine-readable code.", examples=["target_not_found"])
    message: str = Field(description="What is wrong, in one sentence.")
    correction_id: str | None = Field(default=None, description="From the request, if readable.")
    plan_id: str | None = Field(default=None, description="From the subject.")
    decision_id: str | None = Field(default=None, description="The target, if readable.")
