"""Which key a client signs with: an explicit seed, or the credentials' NATS_NKEY_SEED.

Signing is what lets the ledger name who sent a message (docs/security.md): with a seed
every message the client publishes carries the Ledger-* headers; without one it is sent
unsigned, which a development ledger records as unverified and a production one refuses.
"""

from __future__ import annotations

from clients.credentials import NatsCredentials
from contracts.trust.signing import Signer

__all__ = ["signer_for"]


def signer_for(credentials: NatsCredentials | None = None,
               seed: bytes | None = None) -> Signer | None:
    """`seed` (the `SU...` bytes) if given, else the seed file NATS_NKEY_SEED names."""
    if seed is not None:
        return Signer(seed)
    if credentials is not None and credentials.nkey_seed_file is not None:
        return Signer(credentials.nkey_seed_file.read_bytes())
    return None
