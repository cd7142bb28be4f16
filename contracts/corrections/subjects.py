"""NATS subjects and message IDs of the correction path: the public wire contract.

Every event's message ID is derived from what it announces, never from when it was
sent, so whichever replica (re)publishes it, JetStream's duplicate window keeps one.
"""

from __future__ import annotations

import hashlib

from contracts.corrections.states import CorrectionAttemptState, CorrectionStatus
from contracts.shared.subject_tokens import plan_token, plan_token_or_unknown

CORRECTIONS_STREAM = "CORRECTIONS"
REQUESTED_PREFIX = "corrections.requested"
DRYRUN_PREFIX = "corrections.dryrun"
CANCEL_PREFIX = "corrections.cancel"
FAIL_PREFIX = "corrections.fail"
FAIL_REFUSED_PREFIX = "corrections.fail_refused"
RETRY_PREFIX = "corrections.retry"
RETRY_REFUSED_PREFIX = "corrections.retry_refused"
EVENTS_PREFIX = "corrections.events"
ATTEMPTS_PREFIX = "corrections.attempts"
CANCEL_REFUSED_PREFIX = "corrections.cancel_refused"
REJECTED_PREFIX = "corrections.rejected"
RESUME_PREFIX = "corrections.resume"
CORRECTOR_DURABLE = "corrector"
CANCELLER_DURABLE = "correction-canceller"
FAILER_DURABLE = "correction-failer"
RETRIER_DURABLE = "correction-retrier"
DRYRUN_QUEUE = "corrections-dryrun"

ALL_RESUMES = f"{RESUME_PREFIX}.*"


def requested(plan_id: str) -> str:
    """Where an operator publishes a CorrectionRequest (Nats-Msg-Id: <correction_id>)."""
    return f"{REQUESTED_PREFIX}.{plan_token(plan_id)}"


def dryrun(plan_id: str) -> str:
    """Request-reply: a CorrectionRequest in, a DryRunReport back."""
    return f"{DRYRUN_PREFIX}.{plan_token(plan_id)}"


def cancel(plan_id: str) -> str:
    return f"{CANCEL_PREFIX}.{plan_token(plan_id)}"


def cancel_refused(plan_id: str) -> str:
    return f"{CANCEL_REFUSED_PREFIX}.{plan_token(plan_id)}"


def fail(plan_id: str) -> str:
    """Where an operator publishes a FailRequest (see fail_msg_id)."""
    return f"{FAIL_PREFIX}.{plan_token(plan_id)}"


def fail_refused(plan_id: str) -> str:
    return f"{FAIL_REFUSED_PREFIX}.{plan_token(plan_id)}"


def retry(plan_id: str) -> str:
    """Where an operator publishes a RetryRequest (see retry_msg_id)."""
    return f"{RETRY_PREFIX}.{plan_token(plan_id)}"


def retry_refused(plan_id: str) -> str:
    return f"{RETRY_REFUSED_PREFIX}.{plan_token(plan_id)}"


def rejected(plan_id: str | None) -> str:
    """Where an unreadable request or cancel is reported ('unknown' when no plan is readable)."""
    return f"{REJECTED_PREFIX}.{plan_token_or_unknown(plan_id)}"


def rejected_msg_id(stream_sequence: int) -> str:
    return f"correction_rejected:{stream_sequence}"


def event(plan_id: str, status: CorrectionStatus) -> str:
    """`corrections.events.<plan_id>.<status>`; subscribe to `corrections.events.*.applied`."""
    return f"{EVENTS_PREFIX}.{plan_token(plan_id)}.{status.value}"


def events_with_status(status: CorrectionStatus) -> str:
    """Wildcard over all plans for one status."""
    return f"{EVENTS_PREFIX}.*.{status.value}"


def attempt(plan_id: str, state: CorrectionAttemptState) -> str:
    return f"{ATTEMPTS_PREFIX}.{plan_token(plan_id)}.{state.value}"


def resume(plan_id: str) -> str:
    """`corrections.resume.<plan_id>`: the ResumeInstruction of each correction applied to
    the plan; a runtime subscribes to its plans' subjects (or `corrections.resume.*`)."""
    return f"{RESUME_PREFIX}.{plan_token(plan_id)}"


def resume_msg_id(correction_id: str) -> str:
    """One instruction per correction: a correction is applied at most once."""
    return f"resume:{correction_id}"


def request_msg_id(correction_id: str) -> str:
    """Nats-Msg-Id of a CorrectionRequest: the correction_id itself (ADR 0005)."""
    return correction_id


def event_msg_id(correction_id: str, to_status: CorrectionStatus, round_: int = 1) -> str:
    """One per status reached per round (a status is entered at most once per round; a
    round is the pass after an operator's retry). Round 1 keeps the original form."""
    base = f"{correction_id}:{to_status.value}"
    return base if round_ == 1 else f"{base}:r{round_}"


def attempt_msg_id(attempt_id: str, to_state: CorrectionAttemptState) -> str:
    return f"attempt:{attempt_id}:{to_state.value}"


def cancel_refused_msg_id(correction_id: str, status: CorrectionStatus | None) -> str:
    """A refusal is a fact about the status it met (None: no such correction), so a
    repeated cancel meeting the same status is the same fact and is published once."""
    return f"cancel_refused:{correction_id}:{status.value if status else 'missing'}"


def cancel_msg_id(correction_id: str, reason: str | None) -> str:
    """Nats-Msg-Id of a CancelRequest: one per (correction, reason), so repeating the same
    cancel is a retry of it."""
    digest = hashlib.sha256((reason or "").encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"cancel:{correction_id}:{digest}"


def fail_msg_id(correction_id: str, reason: str) -> str:
    """Nats-Msg-Id of a FailRequest: one per (correction, reason), so repeating the same
    request is a retry of it, never a second command."""
    digest = hashlib.sha256(reason.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"fail:{correction_id}:{digest}"


def fail_refused_msg_id(correction_id: str, status: CorrectionStatus | None) -> str:
    """Like cancel_refused_msg_id: one refusal per status met."""
    return f"fail_refused:{correction_id}:{status.value if status else 'missing'}"


def retry_msg_id(correction_id: str, retry_id: str) -> str:
    """Nats-Msg-Id of a RetryRequest: one per request, so republishing it is a retry of the
    publish, never a second retry."""
    return f"retry:{correction_id}:{retry_id}"


def retry_refused_msg_id(correction_id: str, status: CorrectionStatus | None,
                         round_: int) -> str:
    """One refusal per status (and round) met, like fail_refused_msg_id."""
    return f"retry_refused:{correction_id}:{status.value if status else 'missing'}:{round_}"
