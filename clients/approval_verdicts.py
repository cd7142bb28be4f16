"""An operator's verdict on a held decision, sent as any NATS client would: the body on
`invariants.verdicts.<plan_id>`, its request_id the Nats-Msg-Id, signed with the
operator's key (the workers refuse an unsigned or non-operator verdict where principals
are verified). What became of it is kept under the request_id by the workers."""

from __future__ import annotations

from nats.aio.client import Client

from clients._publish import DEFAULT_RETRY, RetryPolicy, publish_acked
from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalVerdict
from contracts.invariants.families import VERDICTS
from contracts.trust.signing import Signer


async def send_verdict(nc: Client, verdict: ApprovalVerdict, *, signer: Signer | None,
                       retry: RetryPolicy = DEFAULT_RETRY) -> None:
    """Publish `verdict` until the stream acknowledged it (a retry is the same verdict)."""
    await publish_acked(nc.jetstream(), subjects.verdicts(verdict.plan_id),
                        verdict.model_dump_json().encode(), verdict.request_id, retry,
                        signer=signer, kind=VERDICTS.name)
