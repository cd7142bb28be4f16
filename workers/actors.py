"""Who sent a message, as far as the workers know: the one place a handler learns it.

Every record an operator or an agent causes names its author from here, never from a
field of the body (a semi-trusted sender writes any name it likes there). The inbound
pipeline verifies no signature yet, so nobody is verified: a `Ledger-Key` header
alone proves nothing and is not read. When the pipeline verifies the signer, this is
where its principal comes in.
"""

from __future__ import annotations

from nats.aio.msg import Msg

from contracts.shared.actor import UNVERIFIED, Actor


def actor_of(msg: Msg) -> Actor:
    """The verified sender of `msg` (today: nobody verified)."""
    return UNVERIFIED
