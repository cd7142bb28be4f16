"""Who this process is, as the ledger verifies it: for the operator's acts that write
straight to the store rather than travel as a message (`agents invariant resolve`).

The process signs what it does with its seed (NATS_NKEY_SEED, the key its NATS
connection authenticates with) and verifies that signature against the principals file
exactly as a worker verifies a message, so the record names a principal only when the
seed is one the principals file lists, and keeps a signature anyone can check offline.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from bootstrap.settings import Settings
from contracts.corrections import subjects as correction_subjects
from contracts.corrections.families import REQUESTED
from contracts.invariants import subjects
from contracts.invariants.families import EVENTS
from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.roles import Role
from contracts.shared.rules import RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.trust.policy import FamilyTrust, Identity
from contracts.trust.signing import Signer

__all__ = ["bulk_identity", "own_identity", "own_signer", "resolution_identity"]


def own_signer(settings: Settings) -> Signer | None:
    """A signer over NATS_NKEY_SEED; None without one. ValueError (one line) for a seed
    file that cannot be read or is not a user seed."""
    seed_file = settings.nats_credentials.nkey_seed_file
    if seed_file is None:
        return None
    try:
        return Signer(seed_file.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"NATS_NKEY_SEED={seed_file}: not a readable user nkey seed "
                         f"({type(exc).__name__})") from None


def own_identity(settings: Settings, *, kind: str, subject: str, msg_id: str, body: bytes,
                 roles: Collection[Role]) -> Identity | RuleViolation:
    """This process's principal for an act of `kind` on `subject` (the message it would
    be): verified, None (no seed, where signatures are not required), or the rule."""
    policy = settings.trust_policy()
    signer = own_signer(settings)
    headers = {MSG_ID_HEADER: msg_id}
    if signer is not None:
        headers |= signer.headers(kind=kind, subject=subject, msg_id=msg_id, body=body)
    return FamilyTrust(kind, frozenset(roles), policy).identify(headers, subject, body,
                                                                utc_now())


def resolution_identity(settings: Settings, violation_id: str, plan_id: str
                        ) -> Identity | RuleViolation:
    """The operator resolving a violation, as the ledger verifies it: the resolution
    signed as the event it announces (`invariants.events.<plan_id>.resolved`), by an
    operator. What `agents invariant resolve` and the console both sign."""
    body = json.dumps({"violation_id": violation_id, "resolved": True}).encode()
    return own_identity(settings, kind=EVENTS.name,
                        subject=subjects.event(plan_id, subjects.RESOLVED),
                        msg_id=subjects.event_msg_id(violation_id, subjects.RESOLVED),
                        body=body, roles={Role.OPERATOR})


def bulk_identity(settings: Settings, batch_id: str) -> Identity | RuleViolation:
    """The operator requesting a bulk batch, as the workers will verify each of its
    correction requests (signed by the same key, role operator): the batch checks every
    match against this identity's project scope before it requests anything."""
    body = json.dumps({"batch_id": batch_id}).encode()
    return own_identity(settings, kind=REQUESTED.name,
                        subject=correction_subjects.requested(batch_id), msg_id=batch_id,
                        body=body, roles={Role.OPERATOR})
