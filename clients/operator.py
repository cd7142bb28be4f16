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

import json

import nats.errors
from nats.aio.client import Client
from opentelemetry import trace
from pydantic import ValidationError

from clients._connect import CONNECT_TIMEOUT, DEFAULT_NATS_URL, Connecting, ConnectionOwner
from clients._publish import DEFAULT_RETRY, RetryPolicy, publish_acked
from clients.correction_errors import DryRunRefused, InvalidCorrection, LedgerUnavailable
from clients.credentials import NatsCredentials
from clients.following import CorrectionFollowing
from clients.signing import signer_for
from contracts.corrections import subjects
from contracts.corrections.dry_run import DryRunReport
from contracts.corrections.families import CANCEL, DRYRUN, FAIL, REQUESTED, RETRY
from contracts.corrections.refusals import DryRunError
from contracts.corrections.requests import (
    CancelRequest,
    CorrectionRequest,
    FailRequest,
    RetryRequest,
)
from contracts.corrections.states import CorrectionMode
from contracts.shared.ids import MSG_ID_HEADER, new_id
from contracts.shared.rules import violations_from
from contracts.shared.tracing import CONVERSATION, GENAI_SCHEMA_URL
from contracts.trust.signing import Signer

__all__ = ["CorrectionClient"]


_tracer = trace.get_tracer("decision_ledger.clients", schema_url=GENAI_SCHEMA_URL)


class CorrectionClient(CorrectionFollowing, ConnectionOwner):
    """Corrections over one NATS connection (see the module docstring)."""

    def __init__(self, nc: Client, *, requested_by: str | None = None,
                 retry: RetryPolicy = DEFAULT_RETRY, owns_connection: bool = False,
                 signer: Signer | None = None) -> None:
        """`requested_by`: what requests call their sender (a claim the ledger keeps as
        claimed_by); who sent them is the principal whose key `signer` holds."""
        super().__init__(nc, owns_connection=owns_connection)
        self._js = nc.jetstream()
        self._requested_by = requested_by
        self._signer = signer
        self._retry = retry
        # correction_id -> stream sequence of its request: its events all come later.
        self._requested_at: dict[str, int] = {}

    @property
    def signer(self) -> Signer | None:
        """The key this client signs with (None: unsigned), for the other commands the
        same principal sends (clients.upkeep)."""
        return self._signer

    @classmethod
    def connect(cls, url: str = DEFAULT_NATS_URL, *, requested_by: str | None = None,
                retry: RetryPolicy = DEFAULT_RETRY,
                connect_timeout: float = CONNECT_TIMEOUT,
                credentials: NatsCredentials | None = None,
                seed: bytes | None = None) -> Connecting[CorrectionClient]:
        """`ops = await CorrectionClient.connect(url)`, or `async with ... as ops`; raises
        NatsUnreachable when no server answers within `connect_timeout` seconds.
        `credentials` (e.g. `NatsCredentials.from_env()`) when the URL holds no password;
        their NATS_NKEY_SEED (or `seed`) signs every command (docs/security.md)."""
        signer = signer_for(credentials, seed)
        return Connecting(url, lambda nc: cls(nc, requested_by=requested_by, retry=retry,
                                              owns_connection=True, signer=signer),
                          connect_timeout, credentials)

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
            subject, body = subjects.dryrun(req.plan_id), req.model_dump_json().encode()
            # The message ID the signature covers travels as on a stream (no stream keeps
            # a dry run, but the responder verifies it like any inbound message).
            headers = {MSG_ID_HEADER: req.correction_id, **self._signer.headers(
                kind=DRYRUN.name, subject=subject, msg_id=req.correction_id, body=body)} \
                if self._signer else None
            reply = await self._nc.request(subject, body, timeout=timeout, headers=headers)
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
                CONVERSATION: req.plan_id,
                "ledger.correction_id": req.correction_id, "ledger.plan_id": req.plan_id,
                "ledger.decision_id": req.decision_id, "ledger.mode": req.mode.value}):
            return await self._send(req)

    async def _send(self, req: CorrectionRequest) -> str:
        ack = await publish_acked(self._js, subjects.requested(req.plan_id),
                                  req.model_dump_json().encode(),
                                  subjects.request_msg_id(req.correction_id), self._retry,
                                  signer=self._signer, kind=REQUESTED.name)
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
                            subjects.cancel_msg_id(body.correction_id, reason), self._retry,
                            signer=self._signer, kind=CANCEL.name)

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
                            subjects.fail_msg_id(body.correction_id, reason), self._retry,
                            signer=self._signer, kind=FAIL.name)

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
                                  self._retry, signer=self._signer, kind=RETRY.name)
        self._requested_at[body.correction_id] = ack.seq
        return body.retry_id
