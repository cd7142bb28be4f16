"""NATS user nkeys as Ed25519 keys: the same key authenticates a connection and signs.

A public user nkey is `U` + base32 of (prefix byte, 32-byte key, CRC-16). Decoding it
here (rather than trusting a library's string handling at verification time) lets the
principals file be checked when it is loaded: a key with a bad checksum is a typo
caught at start, not a signature that silently never verifies.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re

import nkeys
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

PUBLIC_USER_KEY = re.compile(r"^U[A-Z2-7]{55}$")


class BadKey(ValueError):
    """Not a public user nkey (wrong shape, prefix or checksum)."""


def raw_public_key(public: str) -> bytes:
    """The 32 raw Ed25519 bytes of a public user nkey `U...`."""
    if not PUBLIC_USER_KEY.match(public):
        raise BadKey(f"{public[:12]!r}…: a public user nkey is 'U' and 55 base32 characters")
    try:
        raw = base64.b32decode(public + "=" * (-len(public) % 8))
    except binascii.Error as exc:
        raise BadKey(f"{public[:12]!r}…: not base32") from exc
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if nkeys.crc16(bytearray(body)) != crc:
        raise BadKey(f"{public[:12]!r}…: checksum does not match (a typo?)")
    if body[0] != nkeys.PREFIX_BYTE_USER:
        raise BadKey(f"{public[:12]!r}…: not a user key")
    return bytes(body[1:])


def verify(public: str, message: bytes, signature: bytes) -> bool:
    """True when `signature` is `public`'s Ed25519 signature of `message`."""
    key = _verify_key(public)
    if key is None:
        return False
    try:
        key.verify(message, signature)
    except (BadSignatureError, ValueError):
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _verify_key(public: str) -> VerifyKey | None:
    """Decoded once per key: a deployment has few keys, and every message of a batch is
    signed by one of them (decoding and checking the nkey cost a third of a verify)."""
    try:
        return VerifyKey(raw_public_key(public))
    except (BadKey, ValueError):
        return None


def new_user_seed() -> bytes:
    """A fresh user seed (`SU...`), for `agents up` and tests; never logged."""
    return bytes(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER))


def public_of_seed(seed: bytes) -> str:
    """The public user nkey of a seed."""
    return str(nkeys.from_seed(bytearray(seed)).public_key.decode())
