"""A webhook's signing secret: made by the ledger, sealed at rest when a key is set.

The secret is `whsec_` and 32 random bytes in base64 (the Standard Webhooks form), made
here so it is strong whatever the operator would have chosen, shown once to whoever
added the webhook, and kept so the workers can sign. With WEBHOOK_SECRET_KEY (32 bytes,
base64) it is stored sealed (XSalsa20-Poly1305, PyNaCl's SecretBox): a copy of the
database alone does not give it away. Without a key it is stored as it is, in MongoDB,
readable by whoever can read the `webhook_secrets` collection (`agents up` and the docs
say so).
"""

from __future__ import annotations

import base64
import binascii
import secrets

from nacl.exceptions import CryptoError
from nacl.secret import SecretBox

PREFIX = "whsec_"
SECRET_BYTES = 32
PLAIN, SEALED = "plain", "secretbox"


class SecretUnavailable(Exception):
    """The stored secret cannot be read back (sealed with a key this process lacks)."""


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def parse_key(raw: str | None) -> bytes | None:
    """WEBHOOK_SECRET_KEY's 32 bytes (base64); ValueError naming what is wrong."""
    if not raw:
        return None
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("WEBHOOK_SECRET_KEY is not base64") from None
    if len(key) != SecretBox.KEY_SIZE:
        raise ValueError(f"WEBHOOK_SECRET_KEY must be {SecretBox.KEY_SIZE} bytes "
                         f"(base64), not {len(key)}")
    return key


class Sealer:
    def __init__(self, key: bytes | None) -> None:
        self._box = SecretBox(key) if key else None

    @property
    def sealing(self) -> bool:
        return self._box is not None

    def seal(self, secret: str) -> tuple[str, bytes]:
        if self._box is None:
            return PLAIN, secret.encode()
        return SEALED, bytes(self._box.encrypt(secret.encode()))

    def open(self, scheme: str, stored: bytes) -> str:
        if scheme == PLAIN:
            return stored.decode()
        if self._box is None:
            raise SecretUnavailable("the secret is sealed and WEBHOOK_SECRET_KEY is unset")
        try:
            return bytes(self._box.decrypt(stored)).decode()
        except CryptoError:
            raise SecretUnavailable("the secret does not open with WEBHOOK_SECRET_KEY "
                                    "(another key sealed it)") from None

    def __repr__(self) -> str:  # never the key
        return f"Sealer(sealing={self.sealing})"
