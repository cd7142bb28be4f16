"""RFC 8785 (JSON Canonicalization Scheme) bytes of a JSON value, fast for what bodies hold.

What is signed must be reproducible byte for byte by a verifier in any language, so it
is JCS, never "the JSON we happened to produce". The `rfc8785` package is the reference;
it is pure Python and walks every value through several layers of calls, which for the
fields of a thousand decisions costs more than the recorder's own work. `canonical`
writes the common cases (strings, booleans, null, integers and floats in the range where
Python's shortest repr and ECMAScript's agree, lists and objects of those) itself with
the C string encoder of `json`, and hands anything else to `rfc8785`. A property test
(tests/unit/test_canonical.py) holds the two to the same bytes for every JSON value.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from typing import Any, cast

import rfc8785

_quote: Callable[[str], str] = json.encoder.encode_basestring
"""`json`'s C string encoder, non-ASCII kept: escapes exactly what JCS escapes (`"`,
`\\`, and U+0000-U+001F as \\b \\t \\n \\f \\r or \\u00xx in lower-case hex)."""

SAFE_INT = 2**53
"""Integers JCS writes as themselves: beyond, they are IEEE doubles (rfc8785 refuses)."""
FIXED_MIN, FIXED_MAX = 1e-4, 1e16
"""Floats whose Python repr is fixed notation; ECMAScript writes the same digits there."""


class _Slow(Exception):
    """A value the fast path does not write: rfc8785 does."""


def canonical(value: object) -> bytes:
    """The RFC 8785 bytes of a JSON value (what `json.loads` returns). Raises
    `rfc8785.CanonicalizationError` (a ValueError) for what JCS cannot write: NaN,
    infinities, integers beyond 2**53, lone surrogates."""
    try:
        return _write(value).encode("utf-8")
    except (_Slow, UnicodeEncodeError):
        return rfc8785.dumps(value)  # type: ignore[arg-type]


def canonical_fast(value: object) -> bytes | None:
    """The fast writer alone: the RFC 8785 bytes of a value made only of the common
    cases, or None (nothing else tried) for anything else, which the caller converts."""
    try:
        return _write(value).encode("utf-8")
    except (_Slow, UnicodeEncodeError):
        return None


def _write(value: object) -> str:
    if value is None:
        return "null"
    writer = _WRITERS.get(type(value))
    if writer is None:
        raise _Slow
    return writer(value)


def _int(number: int) -> str:
    if -SAFE_INT < number < SAFE_INT:
        return str(number)
    raise _Slow


def _list(values: list[object]) -> str:
    return "[" + ",".join(_write(v) for v in values) + "]"


def _float(number: float) -> str:
    magnitude = abs(number)
    if number.is_integer():
        if magnitude < SAFE_INT:
            return str(int(number))  # 1.0 is 1 and -0.0 is 0 in JCS
        raise _Slow
    if FIXED_MIN <= magnitude < FIXED_MAX:
        return repr(number)
    raise _Slow


def _object(obj: dict[object, object]) -> str:
    keys = list(obj)
    if not all(type(k) is str for k in keys):
        raise _Slow
    names = cast(list[str], keys)
    if all(k.isascii() for k in names):
        names.sort()
    else:  # JCS orders by UTF-16 code units, not by code points
        names.sort(key=lambda k: k.encode("utf-16-be"))
    return "{" + ",".join(_quote(k) + ":" + _write(obj[k]) for k in names) + "}"


_WRITERS: dict[type, Callable[[Any], str]] = {
    str: _quote, bool: lambda b: "true" if b else "false", int: _int, float: _float,
    list: _list, dict: _object}
"""By exact type (a subclass, such as an IntEnum, goes to rfc8785)."""
