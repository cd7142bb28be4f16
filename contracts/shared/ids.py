"""ULID identifiers: every ID in the ledger is a 26-character Crockford base32 ULID."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError
from ulid import ULID

MSG_ID_HEADER = "Nats-Msg-Id"
"""The header JetStream deduplicates on: every publish in the system sets it to an ID
derived from what the message says (a decision's ULID, `<correction_id>:<status>`...),
so a retry from any replica is recognised as the same message."""


def new_id() -> str:
    """A fresh ULID as its canonical string."""
    return str(ULID())


_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}")
"""What `ULID.from_str` accepts: 26 Crockford base32 characters (I, L, O and U are not
among them) in either case, the first at most 7 (a larger one overflows 128 bits)."""


def is_ulid(value: str) -> bool:
    """`ULID.from_str` would parse it. One regular expression instead of decoding the
    bytes: every ID of every message is checked, and decoding was a tenth of the
    recorder's time reading a message."""
    return isinstance(value, str) and _ULID.fullmatch(value) is not None


def _check_ulid(value: str) -> str:
    if not is_ulid(value):
        raise PydanticCustomError(
            "valid_ulid",
            "rule valid_ulid: {value} is not a ULID (26 Crockford base32 characters)",
            {"rule": "valid_ulid", "value": value},
        )
    # Canonical upper case, so the same ID never appears under two spellings.
    return value.upper()


Ulid = Annotated[str, AfterValidator(_check_ulid)]
"""A string that must parse as a ULID; stored in canonical upper case."""
