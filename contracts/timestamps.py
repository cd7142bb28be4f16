"""UTC, millisecond-precision timestamps, the same rule `contracts.decision` applies.

A BSON date holds milliseconds, so normalising on the way in makes a stored time
compare equal to the one that was sent; naive datetimes are taken as UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator


def to_utc_ms(value: datetime) -> datetime:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def utc_now() -> datetime:
    return to_utc_ms(datetime.now(UTC))


UtcTime = Annotated[datetime, AfterValidator(to_utc_ms)]
"""A datetime stored as UTC with millisecond precision."""
