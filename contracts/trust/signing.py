"""Signing a message: what is signed, and the four headers that carry the signature.

A message keeps its body exactly as its contract says; the signature travels in headers,
so any NATS client in any language can speak the contract (docs/security.md shows how):

    Ledger-Key        the signer's public user nkey (U...)
    Ledger-Sig        base64url, no padding, of the Ed25519 signature (64 bytes)
    Ledger-Salt       base64url, no padding, of 16 random bytes, fresh per message
    Ledger-Signed-At  RFC 3339 UTC with milliseconds: 2026-01-01T00:00:00.000Z

What is signed is the RFC 8785 canonical JSON (contracts.trust.canonical) of

    {"purpose": "decision-ledger/v1", "kind": <family name>, "subject": <subject>,
     "msg_id": <Nats-Msg-Id>, "signed_at": <Ledger-Signed-At>, "key": <Ledger-Key>,
     "fields": {<top-level body field>: <digest>, ...}}

with, for every top-level field of the JSON body,
`digest = "sha256:" + hex(sha256(salt || utf8(name) || 0x00 || JCS(value)))`.

Why this shape: the purpose, kind, subject and message ID bind a signature to one
message of one family sent to one place, so it cannot be replayed as another kind, on
another plan's subject, or under another ID (domain separation); the salted per-field
digests let a later erasure drop a field's value and keep its digest, and the record
still verifies (the salt keeps a short value such as a yes/no from being guessed from
its digest).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime

import nkeys

from contracts.shared.base import Frozen
from contracts.shared.timestamps import UtcTime
from contracts.trust.canonical import canonical

PURPOSE = "decision-ledger/v1"
KEY_HEADER = "Ledger-Key"
SIG_HEADER = "Ledger-Sig"
SALT_HEADER = "Ledger-Salt"
SIGNED_AT_HEADER = "Ledger-Signed-At"
HEADERS = (KEY_HEADER, SIG_HEADER, SALT_HEADER, SIGNED_AT_HEADER)
SALT_BYTES = 16
SIGNATURE_BYTES = 64


class Signature(Frozen):
    """A verified signature as a record keeps it: enough to verify the record again
    offline with the principal's public key (docs/security.md, the audit procedure)."""

    key: str
    principal: str
    sig: str
    salt: str
    signed_at: UtcTime
    fields: dict[str, str]
    kind: str | None = None
    subject: str | None = None
    msg_id: str | None = None
    """The envelope it was verified under (family, subject, Nats-Msg-Id): with `fields`,
    everything the signed bytes hold, so the record is verified again exactly as it
    arrived (None in records kept before the envelope was)."""


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def from_b64url(text: str) -> bytes:
    """Strict: only the URL-safe alphabet, no padding (binascii.Error otherwise)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def format_signed_at(at: datetime) -> str:
    """RFC 3339 UTC with milliseconds, the one form Ledger-Signed-At takes."""
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def field_digest(salt: bytes, name: str, value: object) -> str:
    return "sha256:" + hashlib.sha256(
        salt + name.encode("utf-8") + b"\x00" + canonical(value)).hexdigest()


def field_digests(salt: bytes, body: Mapping[str, object]) -> dict[str, str]:
    """The digest of every top-level field of a JSON body (parsed with `json.loads`)."""
    return {name: field_digest(salt, name, value) for name, value in body.items()}


def signed_bytes(*, kind: str, subject: str, msg_id: str, signed_at: str, key: str,
                 fields: Mapping[str, str]) -> bytes:
    """The bytes the Ed25519 signature is over."""
    return canonical({"purpose": PURPOSE, "kind": kind, "subject": subject,
                      "msg_id": msg_id, "signed_at": signed_at, "key": key,
                      "fields": dict(fields)})


class Signer:
    """Signs with one user nkey seed (`SU...`, NATS_NKEY_SEED): the key the connection
    authenticates with is the key that signs. The seed is never logged or shown."""

    def __init__(self, seed: bytes) -> None:
        self._keys = nkeys.from_seed(bytearray(seed.strip()))
        self.public_key = str(self._keys.public_key.decode())

    def __repr__(self) -> str:
        return f"Signer({self.public_key[:12]}…)"

    def headers(self, *, kind: str, subject: str, msg_id: str, body: bytes,
                now: datetime | None = None, salt: bytes | None = None) -> dict[str, str]:
        """The four Ledger-* headers of `body` (a JSON object) sent as a `kind` message on
        `subject` with Nats-Msg-Id `msg_id`."""
        salt = os.urandom(SALT_BYTES) if salt is None else salt
        signed_at = format_signed_at(now or datetime.now(UTC))
        parsed = json.loads(body)
        if not isinstance(parsed, dict):
            raise ValueError("only a JSON object body can be signed")
        message = signed_bytes(kind=kind, subject=subject, msg_id=msg_id,
                               signed_at=signed_at, key=self.public_key,
                               fields=field_digests(salt, parsed))
        return {KEY_HEADER: self.public_key, SIG_HEADER: b64url(self._keys.sign(message)),
                SALT_HEADER: b64url(salt), SIGNED_AT_HEADER: signed_at}


def sign(seed: bytes, *, kind: str, subject: str, msg_id: str, body: bytes,
         now: datetime | None = None, salt: bytes | None = None) -> dict[str, str]:
    """`Signer(seed).headers(...)`, for a one-off message."""
    return Signer(seed).headers(kind=kind, subject=subject, msg_id=msg_id, body=body,
                                now=now, salt=salt)
