"""UTC, millisecond-precision timestamps, the same rule `contracts.decisions.model` applies.

A BSON date holds milliseconds, so normalising on the way in makes a stored time
compare equal to the one that was sent; naive datetimes are taken as UTC.

A time near the ends of Python's range (`9999-12-31T23:00:00-05:00`) has no UTC
equivalent; as a field it is a `schema` violation of that field, never an
OverflowError (BSON's own range is far wider, so Python's is the one that binds).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError


def to_utc_ms(value: datetime) -> datetime:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def utc_field(value: datetime) -> datetime:
    """`to_utc_ms` as a field validator: out of range is the field's error."""
    try:
        return to_utc_ms(value)
    except OverflowError:
        raise PydanticCustomError(
            "schema",
            "out of range: {value} has no UTC equivalent between 0001-01-01 and 9999-12-31",
            {"value": value.isoformat()},
        ) from None


def utc_now() -> datetime:
    return to_utc_ms(datetime.now(UTC))


UtcTime = Annotated[datetime, AfterValidator(utc_field)]
"""A datetime stored as UTC with millisecond precision."""
