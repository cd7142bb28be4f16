"""A message a worker would not process, kept with every reason, within a fixed size.

The message is kept whole when it is small enough (nearly always): then an operator
can retry it as it was sent. A hostile one is kept in part, so the document stays far
under MongoDB's 16 MB whatever arrives (`contracts.shared.bounds.DEAD_LETTER_MAX_BYTES`): the
payload's first `DEAD_LETTER_PAYLOAD_BYTES` with its full size and SHA-256, headers
and subject cut to size. `truncated` says what was cut; such a letter cannot be retried.

Only the headers the ledger reads are kept (`KEPT_HEADERS`): a sender's other headers
may carry credentials (`Authorization`, a `Cookie`, W3C `baggage` with a user's
token), and a dead letter is shown to every operator by the CLI and the console. The
names of the headers dropped are kept (`dropped_headers`), never their values. A retry
republishes what was kept, which is all the ledger reads.
"""

from __future__ import annotations

import base64
import codecs
import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from itertools import islice
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.shared.bounds import (
    DEAD_LETTER_HEADER_BYTES,
    DEAD_LETTER_MAX_HEADERS,
    DEAD_LETTER_PAYLOAD_BYTES,
    DEAD_LETTER_SUBJECT_BYTES,
    clip,
)
from contracts.shared.rules import ERRORS_DOC, BoundedViolations, EchoText, RuleViolation

KEPT_HEADERS = frozenset({
    "nats-msg-id", "traceparent", "tracestate", "content-type",
    # The signing headers of a signed message (docs/security.md): a retry must carry
    # them, or a signed message comes back unsigned.
    "ledger-key", "ledger-sig", "ledger-salt", "ledger-signed-at",
})
"""Headers a dead letter keeps, by lower-cased name: what the ledger itself reads."""
KEPT_HEADER_PREFIXES = ("nats-expected-",)
"""JetStream's publish expectations (Nats-Expected-Stream, -Last-Msg-Id, ...)."""
DROPPED_NAME_BYTES = 128
"""A dropped header's name is kept cut at this many bytes (32 names: 4 KiB at most,
within `DEAD_LETTER_MAX_BYTES`)."""


def kept_header(name: str) -> bool:
    """Whether a dead letter keeps this header (case-insensitive, as HTTP's and W3C's
    header names are)."""
    lowered = name.lower()
    return lowered in KEPT_HEADERS or lowered.startswith(KEPT_HEADER_PREFIXES)


def split_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the headers a dead letter keeps, the names of the others, cut to size)."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in headers.items():
        if kept_header(name):
            kept[name] = value
        elif len(dropped) < DEAD_LETTER_MAX_HEADERS:
            dropped.append(clip(name, DROPPED_NAME_BYTES))
    return kept, dropped


def dead_letter_id(stream: str, stream_sequence: int) -> str:
    """Derived from the stream position, so a redelivered rejection is kept once."""
    return f"{stream}:{stream_sequence}"


class Truncated(StrEnum):
    """A part of the message a dead letter keeps only in part."""

    PAYLOAD = "payload"
    HEADERS = "headers"
    SUBJECT = "subject"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class DeadLetter(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str = Field(description="'<stream>:<stream sequence>' of the rejected message.")
    subject: str = Field(description="Subject it was published on.")
    headers: dict[str, str] = Field(
        description="Its NATS headers that the ledger reads (Nats-Msg-Id, Nats-Expected-*, "
        "traceparent, tracestate, content-type, Ledger-Key/-Sig/-Salt/-Signed-At).")
    dropped_headers: list[str] = Field(
        default_factory=list,
        description="Names of its other headers, dropped unread: they may carry credentials "
        f"(at most {DEAD_LETTER_MAX_HEADERS} names).")
    payload: bytes = Field(description="The raw payload byte for byte, or its first "
                           f"{DEAD_LETTER_PAYLOAD_BYTES} bytes when 'payload' is truncated.")
    payload_size: int = Field(description="Size of the payload as received, in bytes.")
    payload_sha256: str = Field(description="SHA-256 (hex) of the payload as received.")
    truncated: list[Truncated] = Field(
        default_factory=list,
        description="Parts kept only in part (payload, headers, subject): then it cannot be "
        "retried from here.")
    plan_id: EchoText | None = Field(default=None,
                                     description="Its plan, when it could be read.")
    decision_id: EchoText | None = Field(default=None,
                                         description="Its decision_id, if readable.")
    errors: BoundedViolations = Field(description=ERRORS_DOC)
    rejected_at: datetime = Field(description="When it was rejected (UTC).")
    delivered: int = Field(default=1, description="How many times JetStream had delivered it.")
    discarded_at: datetime | None = Field(
        default=None, description="When an operator discarded it (UTC); None while kept.")
    discarded_by: str | None = Field(
        default=None, description="Who discarded it: the verified principal, or "
        "'unverified'.")
    discard_reason: str | None = Field(default=None, description="Why it was discarded.")
    redactions: list[dict[str, str | int]] = Field(
        default_factory=list, description="What redaction replaced in the payload before it "
        "was kept: {field, rule, count} each, never the value (contracts.redaction).")

    @model_validator(mode="before")
    @classmethod
    def _sized(cls, data: Any) -> Any:
        """Letters kept before sizes were recorded held their payload whole."""
        if isinstance(data, dict) and "payload_size" not in data \
                and isinstance(data.get("payload"), bytes):
            payload = data["payload"]
            data = {**data, "payload_size": len(payload), "payload_sha256": sha256_hex(payload)}
        return data

    @model_validator(mode="before")
    @classmethod
    def _filtered(cls, data: Any) -> Any:
        """Letters kept before headers were filtered held them all: they are filtered
        as they are read, so no reader shows a credential an old letter kept."""
        if isinstance(data, dict) and "dropped_headers" not in data \
                and isinstance(data.get("headers"), dict):
            kept, dropped = split_headers(data["headers"])
            data = {**data, "headers": kept, "dropped_headers": dropped}
        return data

    @classmethod
    def of_message(cls, *, id: str, subject: str, headers: Mapping[str, str], data: bytes,
                   plan_id: str | None, decision_id: str | None,
                   errors: Sequence[RuleViolation], rejected_at: datetime,
                   delivered: int) -> DeadLetter:
        """A letter for this message, cut to size: the only way the workers make one."""
        cut: list[Truncated] = []
        payload = data
        if len(data) > DEAD_LETTER_PAYLOAD_BYTES:
            payload = data[:DEAD_LETTER_PAYLOAD_BYTES]
            cut.append(Truncated.PAYLOAD)
        wanted, dropped = split_headers(headers)
        kept_headers = _bounded_headers(wanted)
        if kept_headers != wanted:
            cut.append(Truncated.HEADERS)
        kept_subject = clip(subject, DEAD_LETTER_SUBJECT_BYTES)
        if kept_subject != subject:
            cut.append(Truncated.SUBJECT)
        return cls(id=id, subject=kept_subject, headers=kept_headers,
                   dropped_headers=dropped, payload=payload,
                   payload_size=len(data), payload_sha256=sha256_hex(data), truncated=cut,
                   plan_id=plan_id, decision_id=decision_id, errors=list(errors),
                   rejected_at=rejected_at, delivered=delivered)

    @property
    def payload_truncated(self) -> bool:
        return Truncated.PAYLOAD in self.truncated

    def kept_in_part(self) -> str:
        """One line saying what of the message this letter does not hold ('' if whole)."""
        if not self.truncated:
            return ""
        parts = ", ".join(t.value for t in self.truncated)
        size = (f"; payload: first {len(self.payload)} of {self.payload_size} bytes, "
                f"sha256 {self.payload_sha256}") if self.payload_truncated else ""
        return f"kept in part ({parts}){size}"

    def payload_shown(self) -> dict[str, str]:
        """The payload as text when it is UTF-8 (almost always JSON), else base64, so
        nothing is lost: `payload_encoding` and `payload`, as the CLI's and the console's
        JSON carry it. A payload kept in part may end inside a character: that tail is
        dropped."""
        try:
            text = codecs.getincrementaldecoder("utf-8")().decode(
                self.payload, final=not self.payload_truncated)
        except UnicodeDecodeError:
            return {"payload_encoding": "base64",
                    "payload": base64.b64encode(self.payload).decode()}
        return {"payload_encoding": "utf-8", "payload": text}


def _bounded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The first DEAD_LETTER_MAX_HEADERS headers, each name and value cut to size."""
    kept: dict[str, str] = {}
    for name, value in islice(headers.items(), DEAD_LETTER_MAX_HEADERS):
        kept[clip(name, DEAD_LETTER_HEADER_BYTES)] = clip(value, DEAD_LETTER_HEADER_BYTES)
    return kept
