"""Who sent a message, as the workers verified it: the one place a handler learns it.

Every record an operator or an agent causes names its author from here, never from a
field of the body (a semi-trusted sender writes any name it likes there). The inbound
pipeline (workers.inbound) verifies each message's signature against the principals file
before its family reads it; what it verified travels with the message in its batch.
"""

from __future__ import annotations

from contracts.shared.actor import UNVERIFIED, Actor
from contracts.trust.policy import Identity


def actor_of(identity: Identity) -> Actor:
    """The verified sender (`UNVERIFIED`: unsigned, accepted where signatures are not
    required)."""
    if identity is None:
        return UNVERIFIED
    return Actor(identity.principal.name, identity.principal.role)
