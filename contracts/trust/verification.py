"""Verifying a signed message: the signer's principal, or the named rule it breaks.

Pure and never raising: the headers and the body are whatever arrived, so each is
checked for shape and size before anything decodes it (a header of a megabyte, base64
that is not, a signature of the wrong length: each a `bad_signature`, cheaply). In order:

1. no Ledger-* header at all: `unsigned` (the caller decides whether that is allowed);
2. any header missing or malformed: `bad_signature`;
3. the key: no principal holds it (`unknown_key`), or it was revoked or not valid at the
   time it says it signed (`key_revoked`);
4. that time against the stream's own timestamp for the message (JetStream's clock, not
   a worker's): more than `max_skew` apart is `signed_at_skew`, so a revoked key cannot
   sign backdated messages, and a signature cannot be kept to be sent much later;
5. the signature over the message's canonical bytes (contracts.trust.signing):
   `bad_signature` for a flipped byte anywhere, another subject, another message ID, or
   another principal's key in Ledger-Key;
6. the principal's role against the roles that may send the family: `wrong_role`.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.roles import Role
from contracts.shared.rules import Rule, RuleViolation
from contracts.trust.keys import PUBLIC_USER_KEY, verify
from contracts.trust.principals import Directory, KeyRefused, Principal
from contracts.trust.signing import (
    KEY_HEADER,
    SALT_BYTES,
    SALT_HEADER,
    SIG_HEADER,
    SIGNATURE_BYTES,
    SIGNED_AT_HEADER,
    Signature,
    field_digests,
    from_b64url,
    signed_bytes,
)

B64URL = re.compile(r"^[A-Za-z0-9_-]*$")
SIGNED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
SIG_CHARS, SALT_CHARS = 86, 22
"""Lengths of 64 and 16 bytes in unpadded base64url."""
MSG_ID = MSG_ID_HEADER.lower()
_LOWER = {h.lower(): h for h in (KEY_HEADER, SIG_HEADER, SALT_HEADER, SIGNED_AT_HEADER)}


@dataclass(frozen=True, slots=True)
class Verified:
    """Who signed the message, as the ledger verified it, and the signature to keep."""

    principal: Principal
    signature: Signature


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a message is not taken as signed by anyone: a rule and a sentence."""

    rule: Rule
    message: str
    field: str | None = None

    def violation(self) -> RuleViolation:
        return RuleViolation(rule=self.rule, field=self.field, message=self.message)


@dataclass(frozen=True, slots=True)
class _Headers:
    key: str
    sig: bytes
    salt: bytes
    signed_at_text: str
    signed_at: datetime
    sig_text: str
    salt_text: str


def verify_message(headers: Mapping[str, str], *, kind: str, subject: str, data: bytes,
                   directory: Directory, stream_time: datetime, max_skew: timedelta,
                   roles: Collection[Role]) -> Verified | Refusal:
    """The principal that signed this `kind` message, or why not (module docstring)."""
    try:
        return _verify(headers, kind=kind, subject=subject, data=data, directory=directory,
                       stream_time=stream_time, max_skew=max_skew, roles=roles)
    except Exception as exc:  # hostile input: the message is at fault, never the caller
        return Refusal(Rule.BAD_SIGNATURE, f"the signature could not be checked "
                       f"({type(exc).__name__})")


def _verify(headers: Mapping[str, str], *, kind: str, subject: str, data: bytes,
            directory: Directory, stream_time: datetime, max_skew: timedelta,
            roles: Collection[Role]) -> Verified | Refusal:
    found = {_LOWER[k.lower()]: v for k, v in headers.items() if k.lower() in _LOWER}
    msg_id = next((v for k, v in headers.items() if k.lower() == MSG_ID), "")
    if not found:
        return Refusal(Rule.UNSIGNED, "the message carries no Ledger-* signature headers "
                       "and this ledger requires signed messages (docs/security.md)")
    parsed = _parse(found)
    if isinstance(parsed, Refusal):
        return parsed
    who = _vouching(parsed, directory, stream_time, max_skew)
    if isinstance(who, Refusal):
        return who
    return _signed_by(who, parsed, kind=kind, subject=subject, msg_id=msg_id, data=data,
                      roles=roles)


def _vouching(parsed: _Headers, directory: Directory, stream_time: datetime,
              max_skew: timedelta) -> Principal | Refusal:
    """The principal whose key it names, valid at the time it says it signed, which is
    close to the stream's time for it."""
    who = directory.lookup(parsed.key, parsed.signed_at)
    if isinstance(who, KeyRefused):
        return Refusal(Rule(who.rule), who.message, KEY_HEADER)
    skew = parsed.signed_at - stream_time.astimezone(UTC)
    if abs(skew) > max_skew:
        return Refusal(Rule.SIGNED_AT_SKEW, f"signed at {parsed.signed_at_text}, "
                       f"{abs(skew).total_seconds():.0f}s from the stream's time for it "
                       f"(at most {max_skew.total_seconds():g}s)", SIGNED_AT_HEADER)
    return who


def _signed_by(who: Principal, parsed: _Headers, *, kind: str, subject: str, msg_id: str,
               data: bytes, roles: Collection[Role]) -> Verified | Refusal:
    """`who`'s verified signature of this very message, if its role sends `kind`."""
    body = json.loads(data)
    if not isinstance(body, dict):
        return Refusal(Rule.BAD_SIGNATURE, "a signed body is a JSON object")
    fields = field_digests(parsed.salt, body)
    message = signed_bytes(kind=kind, subject=subject, msg_id=msg_id,
                           signed_at=parsed.signed_at_text, key=parsed.key, fields=fields)
    if not verify(parsed.key, message, parsed.sig):
        return Refusal(Rule.BAD_SIGNATURE, f"not a signature by {parsed.key[:12]}… of this "
                       f"{kind} message on {subject[:80]} (changed, moved, or signed by "
                       "another key)", SIG_HEADER)
    if who.role not in roles:
        return Refusal(Rule.WRONG_ROLE, f"{who.name} is a {who.role.value}; {kind} is sent "
                       f"by {', '.join(sorted(r.value for r in roles)) or 'no one'}")
    # Built without validating again: every value was checked above (one per message).
    return Verified(who, Signature.model_construct(
        key=parsed.key, principal=who.name, sig=parsed.sig_text, salt=parsed.salt_text,
        signed_at=parsed.signed_at, fields=fields, kind=kind, subject=subject, msg_id=msg_id))


def _parse(found: Mapping[str, str]) -> _Headers | Refusal:
    """The four headers, each checked for shape before it is decoded."""
    missing = [h for h in _LOWER.values() if h not in found]
    if missing:
        return Refusal(Rule.BAD_SIGNATURE, f"signed messages carry all four Ledger-* headers; "
                       f"missing {', '.join(missing)}", missing[0])
    key, sig, salt, at = (found[KEY_HEADER], found[SIG_HEADER], found[SALT_HEADER],
                          found[SIGNED_AT_HEADER])
    misshapen = _misshapen(key, sig, salt, at)
    if misshapen is not None:
        return misshapen
    try:
        raw_sig, raw_salt = from_b64url(sig), from_b64url(salt)
        signed_at = datetime.fromisoformat(at)  # the shape was checked: always UTC
    except (binascii.Error, ValueError):
        return Refusal(Rule.BAD_SIGNATURE, "Ledger-Sig, Ledger-Salt or Ledger-Signed-At "
                       "does not decode", SIG_HEADER)
    if len(raw_sig) != SIGNATURE_BYTES or len(raw_salt) != SALT_BYTES:
        return Refusal(Rule.BAD_SIGNATURE, "Ledger-Sig or Ledger-Salt has the wrong length",
                       SIG_HEADER)
    return _Headers(key, raw_sig, raw_salt, at, signed_at, sig, salt)


def _misshapen(key: str, sig: str, salt: str, at: str) -> Refusal | None:
    """Each header's shape and length, before anything decodes it."""
    if not PUBLIC_USER_KEY.match(key):
        return Refusal(Rule.BAD_SIGNATURE, "Ledger-Key is not a public user nkey (U and 55 "
                       "base32 characters)", KEY_HEADER)
    for name, text, chars in ((SIG_HEADER, sig, SIG_CHARS), (SALT_HEADER, salt, SALT_CHARS)):
        if len(text) != chars or not B64URL.match(text):
            return Refusal(Rule.BAD_SIGNATURE, f"{name} is {chars} characters of unpadded "
                           "base64url", name)
    if not SIGNED_AT.match(at):
        return Refusal(Rule.BAD_SIGNATURE, "Ledger-Signed-At is RFC 3339 UTC with "
                       "milliseconds (2026-01-01T00:00:00.000Z)", SIGNED_AT_HEADER)
    return None
