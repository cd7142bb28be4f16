"""Expressions that read the database server's clock (`$$NOW`), so that every lease,
heartbeat and wait is stamped and judged by one clock, never by a worker's own.

Why: workers run on several machines, and clocks drift apart. With a worker's clock, a
worker 6 s behind stamps a 5 s lease that has expired for everyone else the moment it
is written, and one 6 s ahead takes every other worker's lease for expired: leases are
stolen, live workers' transactions ended, waits cut short (ADR 0027).

`$$NOW` is the server's time for the whole statement. It is used two ways, both in the
MongoDB subset SecantusDB answers as MongoDB does:

- as a value in an update pipeline: `{"$add": ["$$NOW", ms]}` stamps an expiry;
- in comparisons, through `$toLong` (milliseconds since the epoch) on both sides, in a
  `$expr` filter or an update pipeline. On MongoDB 4.2+ comparing the dates directly
  would do; SecantusDB answers that comparison wrongly (neither earlier nor later), so
  both sides are compared as numbers, which both servers agree on.

A missing date converts to null, which compares below every number: `expired` would
hold for a document without the field, so callers add `{field: {"$type": "date"}}`
where a document may lack it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

NOW = "$$NOW"


def millis(expression: Any) -> dict[str, Any]:
    """A date expression as milliseconds since the epoch (comparable on both servers)."""
    return {"$toLong": expression}


def after_now(duration: timedelta) -> dict[str, Any]:
    """The server's time plus `duration`: an expiry, in an update pipeline."""
    return {"$add": [NOW, int(duration.total_seconds() * 1000)]}


def expired(field: str) -> dict[str, Any]:
    """True where the date in `field` is before the server's time."""
    return {"$lt": [millis(f"${field}"), millis(NOW)]}


def unexpired(field: str) -> dict[str, Any]:
    """True where the date in `field` is at or after the server's time."""
    return {"$gte": [millis(f"${field}"), millis(NOW)]}
