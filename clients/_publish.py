"""One JetStream publish, retried until the stream has it.

Every message the clients publish carries a `Nats-Msg-Id` fixed before the first try
(a decision_id, a correction_id), so retrying after a timeout cannot store it twice:
if the first try did reach the stream, JetStream drops the retry within its duplicate
window and answers with the original's PubAck (`duplicate=True`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import PubAck
from opentelemetry import propagate

from contracts.shared.ids import MSG_ID_HEADER
from contracts.trust.signing import Signer

RETRYABLE: tuple[type[BaseException], ...] = (
    TimeoutError,                          # asyncio's, on 3.11 the builtin
    nats.errors.TimeoutError,              # no PubAck in time: the stream may or may not have it
    nats.errors.NoRespondersError,         # no stream bound yet (servers starting) or leader lost
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
    nats.errors.ConnectionReconnectingError,
)
"""Failures a later try can fix. An APIError (bad subject, stream config) is not here: it
would fail the same way every time."""
CAUGHT: tuple[type[BaseException], ...] = (*RETRYABLE, nats.js.errors.APIError)
"""What publish_acked turns into a retry or a PublishFailed (stream_refusal says which)."""


class PublishFailed(Exception):
    """The stream did not acknowledge the message after every retry, or refused it
    (`refused`: full under `discard: new`, too large, a stream error): nothing stored."""

    def __init__(self, subject: str, msg_id: str, attempts: int, last: BaseException,
                 refused: str | None = None) -> None:
        self.subject = subject
        self.msg_id = msg_id
        self.attempts = attempts
        self.last = last
        self.refused = refused
        if refused is not None:
            super().__init__(f"the stream refused {msg_id} on {subject}: {refused}")
        else:
            super().__init__(f"no JetStream ack for {msg_id} on {subject} after {attempts} "
                             f"attempt(s): {type(last).__name__}: {last}")


def stream_refusal(exc: BaseException) -> str | None:
    """Why the stream refused the message for good, or None if a retry may succeed.

    A stream at its limits with `discard: new` (the production profile) answers 503
    "maximum bytes exceeded" (or messages, or per subject): retrying for seconds cannot
    free space that only `max_age` or an operator frees, so it is not retried. Any other
    APIError but 503 (message too large, bad subject) fails the same way every time.
    """
    if not isinstance(exc, nats.js.errors.APIError):
        return None
    description = exc.description or type(exc).__name__
    if "exceeded" in description:
        return (f"{description} (the stream is full and set to refuse new messages: "
                "an operator must raise its limits or wait for max_age to free space)")
    if isinstance(exc, nats.js.errors.ServiceUnavailableError):
        return None
    return f"{description} (code {exc.code}, err_code {exc.err_code})"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long one try waits for its PubAck, and how tries are spaced.

    The default gives up after about 15 s of trying (6 tries, 0.2 s doubling to 3.2 s
    between them): long enough to ride out a server restart or a leader election, short
    enough that an agent learns something is wrong before it has made many more choices.
    """

    attempts: int = 6
    ack_timeout: float = 2.0
    first_delay: float = 0.2
    max_delay: float = 5.0

    def delays(self) -> list[float]:
        return [min(self.first_delay * 2**i, self.max_delay) for i in range(self.attempts - 1)]


DEFAULT_RETRY = RetryPolicy()


async def publish_acked(js: JetStreamContext, subject: str, payload: bytes, msg_id: str,
                        policy: RetryPolicy = DEFAULT_RETRY, *, signer: Signer | None = None,
                        kind: str | None = None) -> PubAck:
    """Publish with `Nats-Msg-Id: msg_id` and return the PubAck, retrying what can be retried.

    The current OpenTelemetry context (when the application set one up) goes in the
    headers too (`traceparent`), and the ledger carries it on to the events it publishes
    about the message. With a `signer`, the message is signed as a `kind` message (its
    family's name) once, before the first try: a retry is the same signed message."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    headers[MSG_ID_HEADER] = msg_id
    if signer is not None:
        if kind is None:
            raise ValueError("a signed message names its kind (its family's name)")
        headers |= signer.headers(kind=kind, subject=subject, msg_id=msg_id, body=payload)
    last: BaseException | None = None
    for attempt, delay in enumerate([*policy.delays(), None], start=1):
        try:
            return await js.publish(subject, payload, timeout=policy.ack_timeout,
                                    headers=headers)
        except CAUGHT as exc:
            last = exc
            refused = stream_refusal(exc)
            if refused is not None:
                raise PublishFailed(subject, msg_id, attempt, exc, refused) from exc
            if delay is None:
                raise PublishFailed(subject, msg_id, attempt, exc) from exc
            await asyncio.sleep(delay)
    raise AssertionError(f"unreachable: {last}")  # pragma: no cover
