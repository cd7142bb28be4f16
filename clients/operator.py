"""The operator's side: dry-run, request, cancel, fail, retry and follow corrections over NATS.

    async with CorrectionClient.connect(url) as ops:
        report = await ops.dry_run(plan_id, decision_id, "revert", "Use Postgres instead")
        cid = await ops.request(plan_id, decision_id, "revert", "Use Postgres instead")
        outcome = await ops.wait_for_outcome(cid, plan_id)    # APPLIED, FAILED or CANCELLED

Requests and cancels are JetStream publishes (fire and forget, retried until the stream
has them); what became of them is read back from `corrections.events.<plan_id>.*`, which
the stream keeps, so following a correction after it finished still finds its outcome.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from opentelemetry import trace
from pydantic import ValidationError

from clients._connect import CONNECT_TIMEOUT, DEFAULT_NATS_URL, Connecting, ConnectionOwner
from clients._durable import replay_from
from clients._publish import DEFAULT_RETRY, RetryPolicy, publish_acked
from clients.credentials import NatsCredentials
from contracts.corrections import subjects
from contracts.corrections.dry_run import DryRunReport
from contracts.corrections.events import CorrectionTransitioned
from contracts.corrections.refusals import DryRunError
from contracts.corrections.requests import (
    CancelRequest,
    CorrectionRequest,
    FailRequest,
    RetryRequest,
)
from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionMode, CorrectionStatus
from contracts.shared.ids import is_ulid, new_id
from contracts.shared.rules import RuleViolation, violations_from

__all__ = ["CorrectionClient", "DryRunRefused", "InvalidCorrection", "LedgerUnavailable",
           "command_answer"]


def plan_events(plan_id: str) -> str:
    """`corrections.events.<plan_id>.*`: every transition of every correction of one plan."""
    if not is_ulid(plan_id):
        raise ValueError(f"plan_id {plan_id!r} is not a ULID, so not a safe subject token")
    return f"{subjects.EVENTS_PREFIX}.{plan_id.upper()}.*"


class InvalidCorrection(Exception):
    """The request breaks the contract (blank or over-long guidance, a bad ID); not sent."""

    def __init__(self, violations: list[RuleViolation]) -> None:
        self.violations = tuple(violations)
        super().__init__("; ".join(str(v) for v in self.violations))


class DryRunRefused(Exception):
    """The ledger answered the dry run with a DryRunError: no report can be made.

    `code` is `target_not_found`, `target_in_other_plan`, `target_superseded` (the
    correction itself would FAIL the same way), `invalid_request` or `internal_error`.
    """

    def __init__(self, error: DryRunError) -> None:
        self.error = error
        self.code = error.error
        super().__init__(f"{error.error}: {error.message}")


class LedgerUnavailable(Exception):
    """No worker answered a dry run (none running, or all busy past the timeout)."""


_tracer = trace.get_tracer("decision_ledger.clients")


class CorrectionClient(ConnectionOwner):
    """Corrections over one NATS connection (see the module docstring)."""

    def __init__(self, nc: Client, *, requested_by: str = "operator",
                 retry: RetryPolicy = DEFAULT_RETRY, owns_connection: bool = False) -> None:
        super().__init__(nc, owns_connection=owns_connection)
        self._js = nc.jetstream()
        self._requested_by = requested_by
        self._retry = retry
        # correction_id -> stream sequence of its request: its events all come later.
        self._requested_at: dict[str, int] = {}

    @classmethod
    def connect(cls, url: str = DEFAULT_NATS_URL, *, requested_by: str = "operator",
                retry: RetryPolicy = DEFAULT_RETRY,
                connect_timeout: float = CONNECT_TIMEOUT,
                credentials: NatsCredentials | None = None) -> Connecting[CorrectionClient]:
        """`ops = await CorrectionClient.connect(url)`, or `async with ... as ops`; raises
        NatsUnreachable when no server answers within `connect_timeout` seconds.
        `credentials` (e.g. `NatsCredentials.from_env()`) when the URL holds no password."""
        return Connecting(url, lambda nc: cls(nc, requested_by=requested_by, retry=retry,
                                              owns_connection=True), connect_timeout,
                          credentials)

    def build(self, plan_id: str, decision_id: str, mode: CorrectionMode | str,
              guidance: str | None = None, *, chosen_option: str | None = None,
              requested_by: str | None = None,
              correction_id: str | None = None) -> CorrectionRequest:
        """The CorrectionRequest `dry_run` and `request` send; InvalidCorrection if unfit.

        `guidance` None: a revert gets the default the contract fills in
        (contracts.corrections.requests.default_revert_guidance); an append is refused."""
        fields: dict[str, object] = {
            "plan_id": plan_id, "decision_id": decision_id, "mode": mode,
            "guidance": guidance, "requested_by": requested_by or self._requested_by,
            "chosen_option": chosen_option}
        if correction_id is not None:
            fields["correction_id"] = correction_id
        try:
            return CorrectionRequest.model_validate(fields)
        except ValidationError as exc:
            raise InvalidCorrection(violations_from(exc)) from None

    async def dry_run(self, plan_id: str, decision_id: str, mode: CorrectionMode | str,
                      guidance: str | None = None, *, chosen_option: str | None = None,
                      requested_by: str | None = None,
                      timeout: float = 10.0) -> DryRunReport:
        """What the correction would touch; nothing is written.

        Raises DryRunRefused when the ledger says no report can be made, and
        LedgerUnavailable when no worker answers.
        """
        req = self.build(plan_id, decision_id, mode, guidance, chosen_option=chosen_option,
                         requested_by=requested_by)
        try:
            reply = await self._nc.request(subjects.dryrun(req.plan_id),
                                           req.model_dump_json().encode(), timeout=timeout)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
            raise LedgerUnavailable(
                f"no answer on {subjects.dryrun(req.plan_id)} within {timeout}s "
                f"({type(exc).__name__}); are the workers running?") from exc
        body = json.loads(reply.data)
        # The documented way to tell the two reply shapes apart: the `error` key.
        if isinstance(body, dict) and "error" in body:
            raise DryRunRefused(DryRunError.model_validate(body))
        return DryRunReport.model_validate(body)

    async def request(self, plan_id: str, decision_id: str, mode: CorrectionMode | str,
                      guidance: str | None = None, *, chosen_option: str | None = None,
                      requested_by: str | None = None,
                      correction_id: str | None = None) -> str:
        """Ask for the correction; returns its correction_id once the stream has it.

        Passing the same `correction_id` again is safe: it is the Nats-Msg-Id, and the
        ledger records one correction per ID.
        """
        req = self.build(plan_id, decision_id, mode, guidance, chosen_option=chosen_option,
                         requested_by=requested_by, correction_id=correction_id)
        with _tracer.start_as_current_span("correction request", attributes={
                "ledger.correction_id": req.correction_id, "ledger.plan_id": req.plan_id,
                "ledger.decision_id": req.decision_id, "ledger.mode": req.mode.value}):
            return await self._send(req)

    async def _send(self, req: CorrectionRequest) -> str:
        ack = await publish_acked(self._js, subjects.requested(req.plan_id),
                                  req.model_dump_json().encode(),
                                  subjects.request_msg_id(req.correction_id), self._retry)
        self._requested_at[req.correction_id] = ack.seq
        return req.correction_id

    async def cancel(self, correction_id: str, plan_id: str, reason: str | None = None) -> None:
        """Ask to cancel; honoured only while PENDING or ANALYZING.

        The answer is an event: `cancelled` on the correction's events, or a CancelRefused
        on `corrections.cancel_refused.<plan_id>`; `wait_for_outcome` sees the first.
        """
        body = CancelRequest(correction_id=correction_id, plan_id=plan_id, reason=reason)
        await publish_acked(self._js, subjects.cancel(body.plan_id),
                            body.model_dump_json().encode(),
                            subjects.cancel_msg_id(body.correction_id, reason), self._retry)

    async def fail(self, correction_id: str, plan_id: str, reason: str) -> None:
        """Ask to end a correction stuck in ANALYZING or EXECUTING as FAILED.

        The answer is an event: `failed` on the correction's events (its `error` names
        the reason), or a FailRefused on `corrections.fail_refused.<plan_id>`.
        InvalidCorrection if the reason is blank or over 1,000 characters.
        """
        try:
            body = FailRequest(correction_id=correction_id, plan_id=plan_id, reason=reason)
        except ValidationError as exc:
            raise InvalidCorrection(violations_from(exc)) from None
        await publish_acked(self._js, subjects.fail(body.plan_id),
                            body.model_dump_json().encode(),
                            subjects.fail_msg_id(body.correction_id, reason), self._retry)

    async def retry(self, correction_id: str, plan_id: str, reason: str | None = None, *,
                    retry_id: str | None = None, requested_by: str | None = None) -> str:
        """Ask for a new round of a FAILED correction; returns the retry_id (pass it again
        to repeat the same request safely: it is the Nats-Msg-Id and is kept in history).

        The answer is an event: `pending` (round n+1) on the correction's events, then a
        new attempt and its outcome, or a RetryRefused on
        `corrections.retry_refused.<plan_id>`. Follow it with `wait_for_outcome` after
        `retry`: a fresh `follow` starts at this request, not at the earlier failure.
        """
        try:
            body = RetryRequest(correction_id=correction_id, plan_id=plan_id,
                                retry_id=retry_id or new_id(), reason=reason,
                                requested_by=requested_by or self._requested_by)
        except ValidationError as exc:
            raise InvalidCorrection(violations_from(exc)) from None
        ack = await publish_acked(self._js, subjects.retry(body.plan_id),
                                  body.model_dump_json().encode(),
                                  subjects.retry_msg_id(body.correction_id, body.retry_id),
                                  self._retry)
        self._requested_at[body.correction_id] = ack.seq
        return body.retry_id

    async def follow(self, correction_id: str, plan_id: str,
                     timeout: float = 120.0) -> AsyncIterator[CorrectionTransitioned]:
        """Every transition of the correction, in order, ending with the terminal one.

        An ordered consumer on `corrections.events.<plan_id>.*` from the request's own
        stream position when this client sent it (else from the start of the stream),
        so transitions published before the call are delivered too. Raises TimeoutError
        if the correction is not terminal within `timeout`.
        """
        start = self._requested_at.get(correction_id.upper())
        sub = await self._js.subscribe(plan_events(plan_id),
                                       ordered_consumer=True, config=replay_from(start))
        try:
            async with asyncio.timeout(timeout):
                while True:
                    msg = await sub.next_msg(timeout=None)
                    event = CorrectionTransitioned.model_validate_json(msg.data)
                    if event.correction_id != correction_id.upper():
                        continue
                    yield event
                    if CORRECTION_LIFECYCLE.is_terminal(event.to_status):
                        return
        finally:
            await sub.unsubscribe()

    async def wait_for_outcome(self, correction_id: str, plan_id: str,
                               timeout: float = 120.0) -> CorrectionTransitioned:
        """The terminal event: to_status APPLIED, FAILED (see `error`) or CANCELLED."""
        last: CorrectionTransitioned | None = None
        async for event in self.follow(correction_id, plan_id, timeout):
            last = event
        assert last is not None  # follow returns only after a terminal event
        return last


REFUSED_SUBJECT = {"cancel": subjects.cancel_refused, "fail": subjects.fail_refused,
                   "retry": subjects.retry_refused}
"""Where the ledger says no to each operator command."""


async def command_answer(ops: CorrectionClient, correction_id: str, plan_id: str, *,
                         verb: str, done: CorrectionStatus,
                         send: Callable[[], Awaitable[object]],
                         timeout: float) -> dict[str, object]:
    """Send a cancel, fail or retry (`send`), then wait for the ledger's answer: `done` on
    the correction's events, or its refusal on `corrections.<verb>_refused.<plan_id>`.

    Returns {"correction_id", "status": done | "refused" | None (no answer in time),
    "message"}. The `agents` CLI and the web console both call it."""
    nc = ops.connection
    answer: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
    done_subject = subjects.event(plan_id, done)
    refused_subject = REFUSED_SUBJECT[verb](plan_id)

    async def on_msg(msg: Msg) -> None:
        try:
            data = json.loads(msg.data)
        except ValueError:  # not ours to judge; the ledger's own messages are JSON
            return
        if not isinstance(data, dict) or data.get("correction_id") != correction_id \
                or answer.done():
            return
        if msg.subject == refused_subject:
            answer.set_result({"correction_id": correction_id, "status": "refused",
                               "message": f"{verb} refused: {data.get('reason')}"})
        else:
            answer.set_result({"correction_id": correction_id, "status": done.value,
                               "message": data.get("reason")})

    # Core subscriptions, opened before the command is sent: both subjects are also
    # captured by the CORRECTIONS stream, but a live answer is all a command needs.
    subs = [await nc.subscribe(done_subject, cb=on_msg),
            await nc.subscribe(refused_subject, cb=on_msg)]
    try:
        await send()
        try:
            return await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            return {"correction_id": correction_id, "status": None,
                    "message": f"{verb} published, but the ledger did not answer within "
                               f"{timeout:g}s (agents correction show {correction_id})"}
    finally:
        for s in subs:
            await s.unsubscribe()
