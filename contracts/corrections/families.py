"""The correction path's message families and their stream (contracts.shared.families).

Commands come from operators and are consumed by the workers; a command the workers
refuse is answered on its `*_refused` family, so whoever sent it can wait for either
outcome.
"""

from __future__ import annotations

from pydantic import BaseModel

from contracts.corrections import subjects
from contracts.corrections.dry_run import DryRunReport
from contracts.corrections.events import AttemptTransitioned, CorrectionTransitioned
from contracts.corrections.refusals import (
    CancelRefused,
    CorrectionRejected,
    DryRunError,
    FailRefused,
    RetryRefused,
)
from contracts.corrections.requests import (
    CancelRequest,
    CorrectionRequest,
    FailRequest,
    RetryRequest,
)
from contracts.corrections.resume import ResumeInstruction
from contracts.shared.families import Direction, MessageFamily, Stream
from contracts.shared.roles import ConsumerSpec, Publisher, Reader, Role, Via

CORRECTIONS = Stream(
    subjects.CORRECTIONS_STREAM, "corrections",
    # Ten minutes: longer than the relay ever leaves an event in the outbox after a
    # crash, so a republished event is always recognised as a duplicate.
    duplicate_window=600.0,
    description="Correction requests and cancels from operators, and every lifecycle and attempt "
    "transition (corrections.dryrun.* is request-reply, not captured).")

COMMANDS = ConsumerSpec(ack_wait="corrections_ack_wait_seconds",
                        batch_size="corrections_batch_size")
"""Every command consumer's settings (the cancel adds its waits)."""
DEAD_LETTER_RETRY = Publisher(Role.OPERATOR, "agents dead-letters retry: a dead letter "
                              "republished to the subject it was first sent to", signs=False)


def _command(prefix: str, body: type[BaseModel], durable: str, *, sent_by: str,
             msg_id: str, description: str, consumer: ConsumerSpec = COMMANDS
             ) -> MessageFamily:
    return MessageFamily(
        f"{prefix}.{{plan_id}}", body, Direction.INBOUND, CORRECTIONS, msg_id=msg_id,
        description=description,
        publishers=(Publisher(Role.OPERATOR, sent_by), DEAD_LETTER_RETRY),
        readers=(Reader(Role.WORKER, Via.DURABLE, "workers.corrections", durable=durable,
                        consumer=consumer),))


ABOUT_CORRECTION = "plan/{plan_id}/correction/{correction_id}"


def _event(prefix: str, body: type[BaseModel], *, msg_id: str, description: str,
           event_type: str, readers: tuple[Reader, ...] = (),
           about: str = ABOUT_CORRECTION) -> MessageFamily:
    return MessageFamily(
        prefix, body, Direction.EVENT, CORRECTIONS, msg_id=msg_id, description=description,
        publishers=(Publisher(Role.WORKER, "the correction workers (services.corrections)"),),
        readers=readers, event_type=event_type, about=about)


def _waits_for(command: str) -> Reader:
    return Reader(Role.OPERATOR, Via.CORE, f"agents correction {command} waits for the "
                  "outcome or the refusal (clients.operator)")


REQUESTED = _command(
    subjects.REQUESTED_PREFIX, CorrectionRequest, subjects.CORRECTOR_DURABLE,
    sent_by="CorrectionClient.request (agents plan correct, the console)",
    msg_id="<correction_id> (a second request with the same correction_id creates nothing)",
    description="Operators publish a CorrectionRequest. The correction is recorded "
    "PENDING, then run: the plan's corrections one at a time in arrival order. Unreadable "
    "requests are dead-lettered and reported on corrections.rejected.<plan_id>.")

DRYRUN = MessageFamily(
    f"{subjects.DRYRUN_PREFIX}.{{plan_id}}", CorrectionRequest, Direction.INBOUND, None,
    msg_id=None, replies=(DryRunReport, DryRunError),
    description="Core NATS request-reply (not captured by any stream): send a "
    "CorrectionRequest, receive a DryRunReport, or a DryRunError (error: target_not_found | "
    "target_in_other_plan | invalid_request | internal_error, or the trust rule the request "
    "breaks: unsigned, bad_signature, unknown_key, ..., operator_scope). A superseded "
    "target gets a report whose warnings and current_replacement_id name the decision "
    "that replaced it. Nothing is written.",
    publishers=(Publisher(Role.OPERATOR, "CorrectionClient.dry_run (agents plan correct "
                          "--dry-run, the console)"),),
    readers=(Reader(Role.WORKER, Via.RESPONDER, "workers.dry_run",
                    queue=subjects.DRYRUN_QUEUE),))

CANCEL = _command(
    subjects.CANCEL_PREFIX, CancelRequest, subjects.CANCELLER_DURABLE,
    sent_by="CorrectionClient.cancel (agents correction cancel, the console)",
    msg_id="cancel:<correction_id>:<sha256(reason)[:16]>",
    description="Cancel a PENDING or ANALYZING correction (a cancelled event follows). "
    "Otherwise the refusal is published to corrections.cancel_refused.<plan_id>.",
    consumer=ConsumerSpec(
        ack_wait="corrections_ack_wait_seconds", batch_size="corrections_batch_size",
        waits="a cancel's redeliveries while its request is not recorded yet (it travels "
              "on another consumer; CORRECTIONS_CANCEL_WAIT_SECONDS)"))

FAIL = _command(
    subjects.FAIL_PREFIX, FailRequest, subjects.FAILER_DURABLE,
    sent_by="CorrectionClient.fail (agents correction fail)",
    msg_id="fail:<correction_id>:<sha256(reason)[:16]>",
    description="An operator ends a correction stuck in ANALYZING or EXECUTING as FAILED; "
    "the reason becomes its error and is kept in its history (a failed event follows, and "
    "its executing attempt ends failed). Otherwise the refusal is published to "
    "corrections.fail_refused.<plan_id>.")

RETRY = _command(
    subjects.RETRY_PREFIX, RetryRequest, subjects.RETRIER_DURABLE,
    sent_by="CorrectionClient.retry (agents correction retry)",
    msg_id="retry:<correction_id>:<retry_id>",
    description="An operator starts a new round of a FAILED correction: failed -> pending "
    "(a pending event with round n+1 and the retry's reason follows), then it is analysed "
    "again and executed in a new attempt; earlier attempts stay listed. Refused on "
    "corrections.retry_refused.<plan_id> when it is not failed or its target can no "
    "longer be corrected.")

EVENTS = _event(
    f"{subjects.EVENTS_PREFIX}.{{plan_id}}.{{status}}", CorrectionTransitioned,
    event_type="correction.{status}",
    msg_id="<correction_id>:<status>, or <correction_id>:<status>:r<round> after an "
    "operator's retry",
    description="One per lifecycle transition, exactly once, in order per correction. "
    "Lists carry their first 100 IDs and a count, so an event stays far under the payload "
    "limit. Subscribe e.g. corrections.events.*.applied.",
    readers=(
        Reader(Role.OPERATOR, Via.REPLAY, "CorrectionClient.follow and wait_for_outcome "
               "(agents plan correct --wait, the console)"),
        Reader(Role.OPERATOR, Via.CORE, "agents correction cancel | fail | retry wait for "
               "the outcome; the console's live view (console.live)"),
        Reader(Role.SUBSCRIBER, Via.DURABLE, "outcomes (clients.subscriber): a durable "
               "the subscriber declares", durable="{consumer}"),
    ))

ATTEMPTS = _event(
    f"{subjects.ATTEMPTS_PREFIX}.{{plan_id}}.{{state}}", AttemptTransitioned,
    event_type="correction.attempt.{state}",
    msg_id="attempt:<attempt_id>:<state>",
    description="One per attempt state change.")

CANCEL_REFUSED = _event(
    f"{subjects.CANCEL_REFUSED_PREFIX}.{{plan_id}}", CancelRefused,
    event_type="correction.cancel_refused",
    msg_id="cancel_refused:<correction_id>:<status met, or missing>",
    description="A cancel that came too late (or named no correction of the plan).",
    readers=(_waits_for("cancel"),))

REJECTED = _event(
    f"{subjects.REJECTED_PREFIX}.{{plan_id}}", CorrectionRejected,
    event_type="correction.rejected", about="plan/{plan_id}",
    msg_id="correction_rejected:<stream seq>",
    description="An unreadable request or command, kept in dead_letters; plan_id "
    "'unknown' when unreadable.")

FAIL_REFUSED = _event(
    f"{subjects.FAIL_REFUSED_PREFIX}.{{plan_id}}", FailRefused,
    event_type="correction.fail_refused",
    msg_id="fail_refused:<correction_id>:<status met, or missing>",
    description="An operator's fail of a correction that is not analyzing or executing "
    "(or of no correction of the plan).",
    readers=(_waits_for("fail"),))

RETRY_REFUSED = _event(
    f"{subjects.RETRY_REFUSED_PREFIX}.{{plan_id}}", RetryRefused,
    event_type="correction.retry_refused",
    msg_id="retry_refused:<correction_id>:<status met, or missing>:<round>",
    description="An operator's retry of a correction that is not failed (or of no "
    "correction of the plan), or whose target can no longer be corrected.",
    readers=(_waits_for("retry"),))

RESUME = _event(
    f"{subjects.RESUME_PREFIX}.{{plan_id}}", ResumeInstruction,
    event_type="correction.resume",
    msg_id="resume:<correction_id>",
    description="Where the plan's runtime goes on, once per applied correction, in the "
    "stream (a runtime that was down gets it when it comes back). revert: go back to "
    "target.actor_state_ref and record what follows under resume_at (the replacement); "
    "append: run the child plan, its decisions under resume_at (the child's root). "
    "plan_id is the corrected plan. Client: DecisionRecorder.on_resume (docs/clients.md).",
    readers=(Reader(Role.AGENT, Via.DURABLE, "DecisionRecorder.on_resume (clients.resume): "
                    "the runtime's own resume_<principal>", durable="resume_{principal}"),
             Reader(Role.AGENT, Via.DURABLE, "DecisionRecorder.on_resume (clients.resume) "
                    "with a durable the runtime declares", durable="{consumer}")))

FAMILIES = (REQUESTED, DRYRUN, CANCEL, FAIL, RETRY, EVENTS, ATTEMPTS, CANCEL_REFUSED,
            REJECTED, FAIL_REFUSED, RETRY_REFUSED, RESUME)
