"""Verifying again the signature a chained record keeps, from its stored field digests.

A record keeps the signature the ledger verified when the message arrived: the key, the
principal, the Ed25519 signature, the salt, the signing time, the digest of every field
of the body and the envelope (family, subject, Nats-Msg-Id). Those are exactly what the
signed bytes hold (contracts.trust.signing), so the signature is checked again without
the body: with the key alone (the record was signed by that key, and says so
unchanged), and with the principals' keys (the key was that principal's, valid then).
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contracts.trust.chain import (
    CORRECTION_END,
    CORRECTION_REQUEST,
    CORRECTION_RETRY,
    DECISION,
    VIOLATION_REPORT,
    VIOLATION_RESOLUTION,
)
from contracts.trust.keys import verify
from contracts.trust.signing import from_b64url, signed_bytes

SIGNATURE_FIELD = {DECISION: ("signature", "recorded_by"),
                   CORRECTION_REQUEST: ("signature", "requested_by"),
                   VIOLATION_REPORT: ("report_signature", "reported_by"),
                   VIOLATION_RESOLUTION: ("resolution_signature", "resolved_by")}
"""Where each kind of record keeps its signature and the verified principal's name (a
correction's retry and end keep theirs on the transition: `signature`, `by`)."""

SIGNED, UNSIGNED, LEDGER, UNCHECKED = "signed", "unsigned", "ledger", "unchecked"


@dataclass(frozen=True, slots=True)
class Broken:
    rule: str
    message: str


def event_of(line: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The transition a correction's line is about (None: not in its history)."""
    history = line.get("record", {}).get("history")
    for event in history if isinstance(history, list) else []:
        if isinstance(event, Mapping) and event.get("event_id") == line.get("event_id"):
            return event
    return None


def signed_part(line: Mapping[str, Any]) -> tuple[Any, Any, bool]:
    """(signature, verified principal's name, written by the ledger itself) of a line."""
    kind, record = line.get("kind"), line.get("record") or {}
    if kind in (CORRECTION_RETRY, CORRECTION_END):
        event = event_of(line) or {}
        return event.get("signature"), event.get("by"), event.get("by") is None
    sig_field, by_field = SIGNATURE_FIELD.get(str(kind), ("signature", "recorded_by"))
    ledger = kind == DECISION and by_field not in record  # written by a correction
    return record.get(sig_field), record.get(by_field), ledger


class KeyBook:
    """The principals' keys from an export's header: who held a key, and when."""

    def __init__(self, principals: object) -> None:
        self._keys: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for p in principals if isinstance(principals, list) else []:
            if not isinstance(p, Mapping) or not isinstance(p.get("keys"), list):
                continue
            for k in p["keys"]:
                if isinstance(k, Mapping) and isinstance(k.get("public"), str):
                    self._keys[k["public"]] = (str(p.get("name")), k)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def holder(self, public: str, signed_at: str) -> str | Broken:
        found = self._keys.get(public)
        if found is None:
            return Broken("unknown_key", f"key {public[:12]}… belongs to no principal of "
                          "the principals file")
        name, key = found
        try:
            outside = _outside(key, _time(signed_at))
        except ValueError:
            outside = ["signed_at"]
        if outside:
            return Broken("key_revoked", f"key {public[:12]}… of {name} was not valid at "
                          f"{signed_at[:40]} ({outside[0]} {key.get(outside[0])})")
        return name


def _outside(key: Mapping[str, Any], at: datetime) -> list[str]:
    """The bounds of a key's validity `at` falls outside of."""
    found: list[str] = []
    for bound in ("revoked_at", "valid_from", "valid_until"):
        if key.get(bound) is None:
            continue
        limit = _time(str(key[bound]))
        if (bound == "revoked_at" and at >= limit) or (bound == "valid_from" and at < limit) \
                or (bound == "valid_until" and at > limit):
            found.append(bound)
    return found


def check(line: Mapping[str, Any], keys: KeyBook) -> str | Broken:
    """SIGNED, UNSIGNED (accepted unsigned: no principal named), LEDGER (the workers'
    own step), UNCHECKED (kept without its envelope) or what is broken."""
    sig, by, ledger = signed_part(line)
    if not isinstance(sig, Mapping):
        return _unsigned(by, ledger=ledger)
    if sig.get("principal") != by:
        return Broken("wrong_principal", f"names {str(by)[:40]}, its signature "
                      f"{str(sig.get('principal'))[:40]}")
    if not all(isinstance(sig.get(k), str) for k in ("kind", "subject", "msg_id")):
        return UNCHECKED
    if not _verifies(sig):
        return Broken("bad_signature", f"the signature by {str(sig.get('key'))[:12]}… "
                      "does not verify over the digests and envelope it keeps")
    return _held(sig, by, keys)


def _held(sig: Mapping[str, Any], by: object, keys: KeyBook) -> str | Broken:
    """SIGNED if the principals file gives the key to the principal named, valid then
    (without a principals file: the key's own check above is all there is)."""
    holder = keys.holder(str(sig["key"]), str(sig["signed_at"])) if keys else by
    if isinstance(holder, Broken):
        return holder
    if holder != by:
        return Broken("wrong_principal", f"names {str(by)[:40]}, but its key is {holder}'s")
    return SIGNED


def _unsigned(by: object, *, ledger: bool) -> str | Broken:
    """No signature: the ledger's own step, or accepted unsigned; never with a name."""
    if by is not None:
        return Broken("wrong_principal", f"names {str(by)[:40]} but keeps no signature")
    return LEDGER if ledger else UNSIGNED


def _verifies(sig: Mapping[str, Any]) -> bool:
    """Ed25519 over the signed bytes the kept signature describes, with its own key."""
    try:
        message = signed_bytes(kind=sig["kind"], subject=sig["subject"],
                               msg_id=sig["msg_id"], signed_at=str(sig["signed_at"]),
                               key=str(sig["key"]), fields=dict(sig["fields"]))
        return verify(str(sig["key"]), message, from_b64url(str(sig["sig"])))
    except (KeyError, TypeError, ValueError, binascii.Error):
        return False


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
