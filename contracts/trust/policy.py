"""What a worker checks of who sent an inbound message, per message family.

`TrustPolicy` is one deployment's setting (the principals, whether signatures are
required, the skew allowed); `FamilyTrust` is that policy for one family, with the roles
the family's declaration says may sign it. The inbound pipeline (workers.inbound) asks
`identify` of every message before its family reads it, so a family added later gets
the same check without a line of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from contracts.shared.families import Direction, MessageFamily
from contracts.shared.roles import Role
from contracts.shared.rules import Rule, RuleViolation
from contracts.trust.principals import Directory
from contracts.trust.signing import Signature
from contracts.trust.verification import Refusal, Verified, verify_message

Identity = Verified | None
"""Who sent a message, as far as the ledger verified it: a principal, or None for an
unsigned message accepted where signatures are not required (recorded `verified:
false`, naming no principal)."""

DEFAULT_SKEW = timedelta(seconds=300)


@dataclass(frozen=True)
class TrustPolicy:
    """How one deployment treats signatures (bootstrap.settings: LEDGER_PRINCIPALS,
    REQUIRE_SIGNATURES, SIGNATURE_MAX_SKEW_SECONDS)."""

    directory: Directory | None = None
    """None: no principals file, nothing can be verified: every message is unverified
    (and REQUIRE_SIGNATURES cannot be on)."""
    required: bool = False
    max_skew: timedelta = DEFAULT_SKEW

    def __post_init__(self) -> None:
        if self.required and self.directory is None:
            raise ValueError("REQUIRE_SIGNATURES (on by default in the production profile) "
                             "needs LEDGER_PRINCIPALS, the principals whose signatures are "
                             "verified; or set REQUIRE_SIGNATURES=0")

    def for_family(self, family: MessageFamily) -> FamilyTrust | None:
        """The check of an inbound family (None for an event: the workers' own)."""
        if family.direction is not Direction.INBOUND:
            return None
        return FamilyTrust(family.name, signers(family), self)


def signers(family: MessageFamily) -> frozenset[Role]:
    """The roles whose principals may sign `family`: its declared publishers, but for
    those that only republish what others signed (a dead letter's retry)."""
    return frozenset(p.role for p in family.publishers if p.signs)


@dataclass(frozen=True)
class FamilyTrust:
    kind: str
    roles: frozenset[Role]
    policy: TrustPolicy = field(default_factory=TrustPolicy)

    def identify(self, headers: Mapping[str, str], subject: str, data: bytes,
                 stream_time: datetime) -> Identity | RuleViolation:
        """The verified principal, None (unsigned where that is allowed), or the rule
        the message breaks. Never raises."""
        policy = self.policy
        if policy.directory is None:
            return None
        found = verify_message(headers, kind=self.kind, subject=subject, data=data,
                               directory=policy.directory, stream_time=stream_time,
                               max_skew=policy.max_skew, roles=self.roles)
        if isinstance(found, Refusal):
            if found.rule is Rule.UNSIGNED and not policy.required:
                return None
            return found.violation()
        return found


def principal_name(identity: Identity) -> str | None:
    return identity.principal.name if identity is not None else None


def signature_of(identity: Identity) -> Signature | None:
    return identity.signature if identity is not None else None


def provenance(identity: Identity, by: str) -> dict[str, object]:
    """What a stored record keeps of who sent it: `by` (recorded_by, requested_by, ...)
    the verified principal's name or None, `verified`, and the signature to verify the
    record again later (None when unverified)."""
    if identity is None:
        return {by: None, "verified": False, "signature": None}
    return {by: identity.principal.name, "verified": True,
            "signature": identity.signature.model_dump()}
