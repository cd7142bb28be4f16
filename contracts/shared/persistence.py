"""What a store refused, could not find or could not reach: the errors every store port
raises (services/ports.py, services/read_ports.py).

They are not domain errors: they say what the database did, so a caller can tell "your
request broke a rule of the ledger" (contracts.shared.errors) from "the store said no"
(these). They live here, below both the services and `store/`, because both sides of a
port name them: the MongoDB store (store/, which turns the driver's exceptions into
these at the repository edge, store/translate.py) and the in-memory store of the tests
raise them; the services, the workers, the console and the CLI catch them and never a
database driver's exception.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ConcurrentChange", "DatabaseError", "DuplicateRecord", "ForeignKeyViolation",
    "InvariantNotFound", "LeaseFence", "LeaseLost", "ResourceNotFoundError",
    "RestrictViolation",
    "StoreFailure", "StoreUnreachable", "ViolationNotFound",
]


class DatabaseError(Exception):
    """The store refused a write because of a reference between records."""


class ForeignKeyViolation(DatabaseError):
    """A record names a row that does not exist (e.g. an attempt of an unknown correction)."""

    def __init__(self, what: str, field: str, missing: str) -> None:
        self.what = what
        self.field = field
        self.missing = missing
        super().__init__(f"{what}: {field} {missing} does not exist")


class RestrictViolation(DatabaseError):
    """A delete would orphan a record that keeps the audit trail."""

    def __init__(self, what: str, referenced_by: list[str]) -> None:
        self.what = what
        self.referenced_by = referenced_by
        shown = ", ".join(referenced_by[:5]) + (" ..." if len(referenced_by) > 5 else "")
        super().__init__(
            f"cannot delete {what}: it is named by correction attempt(s) {shown}; "
            "the correction audit trail must keep it"
        )


class ConcurrentChange(DatabaseError):
    """A conditional write found the record changed since it was read; nothing was written.

    Raised inside a transaction, so the whole transaction aborts: the caller reads
    again and decides anew (another replica, or a cancel, got there first).
    """


class LeaseLost(ConcurrentChange):
    """The lease (a plan's, or a recorder partition's) is no longer ours: another holder
    took it after ours expired."""

    def __init__(self, plan_id: str, owner: str) -> None:
        self.plan_id = plan_id
        self.owner = owner
        super().__init__(f"lease {plan_id} is no longer held by {owner}")


@dataclass(frozen=True)
class LeaseFence:
    """Commit only while `owner` is the last to have taken `lease`: the write's
    transaction also writes the lease's fence record on that condition, and aborts with
    LeaseLost when another took it since.

    Why in the transaction: a holder that stalled past its lease's expiry (a paused
    process, a starved host) wakes up with a batch in hand and no idea that another
    replica took over. A check before the write would race the take-over; a write to
    the record the take-over also writes cannot, since the database orders the two (one
    of them conflicts)."""

    lease: str
    owner: str


class ResourceNotFoundError(LookupError):
    """No record with that ID."""

    def __init__(self, what: str, record_id: str) -> None:
        self.what = what
        self.record_id = record_id
        super().__init__(f"{what} {record_id} not found")


class InvariantNotFound(ResourceNotFoundError):
    def __init__(self, invariant_id: str) -> None:
        super().__init__("invariant", invariant_id)


class ViolationNotFound(ResourceNotFoundError):
    def __init__(self, violation_id: str) -> None:
        super().__init__("violation", violation_id)


class StoreFailure(Exception):
    """The database failed an operation: unreachable, timed out, or refused for a reason
    of its own. The message starts with the driver's error type; the driver's exception
    is the `__cause__` (for a traceback, never for an `except`)."""


class StoreUnreachable(StoreFailure):
    """The database did not answer (no server selected, connection refused or lost)."""


class DuplicateRecord(StoreFailure):
    """A write met a unique key already taken (e.g. a correction_id recorded by a
    concurrent delivery first); nothing of its transaction was written."""
