"""The errors the store raises, for the store's own modules.

They are defined in contracts.shared.persistence, below both sides of the ports: the
services and everything above them import them from there, never from `store/`.
"""

from __future__ import annotations

from contracts.shared.persistence import (
    ConcurrentChange,
    DatabaseError,
    DuplicateRecord,
    ForeignKeyViolation,
    InvariantNotFound,
    LeaseLost,
    ResourceNotFoundError,
    RestrictViolation,
    StoreFailure,
    StoreUnreachable,
    ViolationNotFound,
)

__all__ = [
    "ConcurrentChange", "DatabaseError", "DuplicateRecord", "ForeignKeyViolation",
    "InvariantNotFound", "LeaseLost", "ResourceNotFoundError", "RestrictViolation",
    "StoreFailure", "StoreUnreachable", "ViolationNotFound",
]
