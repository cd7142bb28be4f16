"""ULID identifiers: every ID in the ledger is a 26-character Crockford base32 ULID."""

from __future__ import annotations

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


def is_ulid(value: str) -> bool:
    try:
        ULID.from_str(value)
    except (ValueError, TypeError):
        return False
    return True


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
