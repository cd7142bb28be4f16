"""Driver errors become the store's named errors (contracts.shared.persistence) at the
repository edge.

`translate_errors` wraps every public coroutine method of a repository class: a
`PyMongoError` leaves it as a `StoreFailure` (`DuplicateRecord` for a taken unique key,
`StoreUnreachable` for a server that does not answer) whose message starts with the
driver's error type and whose `__cause__` is the driver's exception. Nothing above
`store/` catches a driver's exception: the services, the workers, the console and the
CLI decide on these.

A method that takes a `session` runs inside its caller's transaction and is left
alone: `with_transaction` must see the driver's own error (its
TransientTransactionError label is what makes it retry). The public method that ran
the transaction translates whatever finally leaves it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pymongo.errors import BulkWriteError, ConnectionFailure, DuplicateKeyError, PyMongoError

from contracts.shared.persistence import DuplicateRecord, StoreFailure, StoreUnreachable

T = TypeVar("T")

_OURS: tuple[tuple[type[PyMongoError], type[StoreFailure]], ...] = (
    (DuplicateKeyError, DuplicateRecord),
    (ConnectionFailure, StoreUnreachable),
    (PyMongoError, StoreFailure),
)
DUPLICATE_KEY = 11000


def _ours(exc: PyMongoError) -> type[StoreFailure]:
    if isinstance(exc, BulkWriteError):
        # A bulk insert refused only for taken keys is a duplicate, like a single one.
        errors = exc.details.get("writeErrors") or []
        if errors and all(e.get("code") == DUPLICATE_KEY for e in errors):
            return DuplicateRecord
    return next(o for driver, o in _OURS if isinstance(exc, driver))


def translated(exc: PyMongoError) -> StoreFailure:
    """The store's error for a driver's: its message names the driver's type first (so
    a one-line report still says `ServerSelectionTimeoutError: ...`), its cause is it."""
    ours = _ours(exc)(f"{type(exc).__name__}: {exc}")
    ours.__cause__ = exc
    return ours


def _wrap(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except PyMongoError as exc:
            raise translated(exc) from exc
    return wrapper


def translate_errors(cls: type[T]) -> type[T]:
    """Class decorator: the public coroutine methods raise store errors (see above)."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(member):
            continue
        if "session" in inspect.signature(member).parameters:
            continue
        setattr(cls, name, _wrap(member))
    return cls
