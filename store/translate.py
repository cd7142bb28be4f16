"""Driver errors become the store's named errors (store.errors) at the repository edge.

`translate_errors` wraps every public coroutine method of a repository class. What it
raises is a copy of the driver's exception whose class derives from both the driver's
class and the store error, so `except StoreFailure` works in the services (which import
nothing from pymongo) while `except ConnectionFailure` and friends, wherever they
already are, behave exactly as before.

A method that takes a `session` runs inside its caller's transaction and is left
alone: `with_transaction` must see the driver's own error (its
TransientTransactionError label is what makes it retry).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pymongo.errors import BulkWriteError, ConnectionFailure, DuplicateKeyError, PyMongoError

from store.errors import DuplicateRecord, StoreFailure, StoreUnreachable

T = TypeVar("T")

_OURS: tuple[tuple[type[PyMongoError], type[StoreFailure]], ...] = (
    (DuplicateKeyError, DuplicateRecord),
    (ConnectionFailure, StoreUnreachable),
    (PyMongoError, StoreFailure),
)
_classes: dict[tuple[type[PyMongoError], type[StoreFailure]], type[Exception]] = {}
DUPLICATE_KEY = 11000


def _ours(exc: PyMongoError) -> type[StoreFailure]:
    if isinstance(exc, BulkWriteError):
        # A bulk insert refused only for taken keys is a duplicate, like a single one.
        errors = exc.details.get("writeErrors") or []
        if errors and all(e.get("code") == DUPLICATE_KEY for e in errors):
            return DuplicateRecord
    return next(o for driver, o in _OURS if isinstance(exc, driver))


def translated(exc: PyMongoError) -> StoreFailure:
    """The same error, also a StoreFailure (DuplicateRecord, StoreUnreachable)."""
    if isinstance(exc, StoreFailure):
        return exc
    kind, ours = type(exc), _ours(exc)
    cls = _classes.get((kind, ours))
    if cls is None:
        # Named like the driver's class: error messages that print the type stay the same.
        cls = _classes[kind, ours] = type(kind.__name__, (ours, kind),
                                          {"__module__": __name__})
    copy: Any = cls.__new__(cls, *exc.args)
    copy.__dict__.update(exc.__dict__)
    assert isinstance(copy, StoreFailure)
    return copy


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
