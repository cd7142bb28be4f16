"""Upkeep over NATS: a comment on a decision, a plan marked completed or abandoned, a
dead letter discarded. Each is one JetStream publish with its Nats-Msg-Id (repeating
it is one command); the workers record it with who sent it as they verified it, never
a name this client could claim.

    notes = UpkeepClient(nc)
    await notes.comment(plan_id, decision_id, "Ask billing before touching the cache")
    await notes.end_plan(plan_id, "completed", "shipped in 1.4")
"""

from __future__ import annotations

from nats.aio.client import Client

from clients._publish import DEFAULT_RETRY, RetryPolicy, publish_acked
from contracts.decisions.comments import CommentRequest
from contracts.decisions.plan_ending import EndPlanRequest
from contracts.recording.families import COMMENT, DISCARD, END_PLAN
from contracts.shared.dead_letter_care import DiscardRequest, stream_of
from contracts.shared.ids import new_id
from contracts.trust.signing import Signer

__all__ = ["UpkeepClient"]


class UpkeepClient:
    def __init__(self, nc: Client, retry: RetryPolicy = DEFAULT_RETRY, *,
                 signer: Signer | None = None) -> None:
        """`signer`: the principal's key (clients.signing.signer_for); the workers record
        that principal as the author. Unsigned, the record says 'unverified', and a
        ledger that requires signatures refuses it."""
        self._js = nc.jetstream()
        self._retry = retry
        self._signer = signer

    async def comment(self, plan_id: str, decision_id: str, text: str, *,
                      comment_id: str | None = None) -> str:
        """Comment on a decision; returns the comment_id (pass it again to repeat the
        same comment safely). ValidationError for a blank or over-long text."""
        body = CommentRequest(comment_id=comment_id or new_id(), plan_id=plan_id,
                              decision_id=decision_id, text=text)
        await publish_acked(self._js, COMMENT.subject_for(body.plan_id),
                            body.model_dump_json().encode(), body.comment_id, self._retry,
                            signer=self._signer, kind=COMMENT.name)
        return body.comment_id

    async def end_plan(self, plan_id: str, status: str, reason: str | None = None) -> None:
        """Ask to mark the plan `completed` or `abandoned`; the workers judge it
        (contracts.decisions.plan_ending) and record it on the plan."""
        body = EndPlanRequest.model_validate(
            {"plan_id": plan_id, "status": status, "reason": reason})
        await publish_acked(self._js, END_PLAN.subject_for(body.plan_id),
                            body.model_dump_json().encode(), body.msg_id(), self._retry,
                            signer=self._signer, kind=END_PLAN.name)

    async def discard(self, dead_letter_id: str, reason: str) -> None:
        """Ask to discard a dead letter (`<STREAM>:<sequence>`), with why."""
        body = DiscardRequest(dead_letter_id=dead_letter_id, reason=reason)
        stream = stream_of(body.dead_letter_id)
        assert stream is not None  # the model checked its shape
        await publish_acked(self._js, DISCARD.subject.format(stream=stream),
                            body.model_dump_json().encode(), body.msg_id(), self._retry,
                            signer=self._signer, kind=DISCARD.name)
