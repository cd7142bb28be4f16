"""RFC 8785 (JSON Canonicalization Scheme) bytes of a JSON value, fast for what bodies hold.

What is signed must be reproducible byte for byte by a verifier in any language, so it
is JCS, never "the JSON we happened to produce". The `rfc8785` package is the reference;
it is pure Python and walks every value through several layers of calls, which for the
fields of a thousand decisions costs more than the recorder's own work. So there are
three writers, tried in order, each taking only what it writes as JCS does:

1. `json`'s C encoder (sorted keys, no spaces, non-ASCII kept), for lists and objects
   it writes as JCS does: of strings, booleans, null, integers within 2**53, and lists
   and objects of those, with ASCII keys. It would differ for floats (`1.0` where JCS
   writes `1`, `1e-05` where JCS writes `1e-5`), for larger integers (JCS refuses
   them), and for keys at or above U+E000 (JCS orders keys by UTF-16 code units,
   `json` by code points); `_json_safe` checks the types first, one set per container.
2. A writer of its own for the common cases, floats included (those whose Python repr
   ECMAScript writes the same), with the C string encoder of `json`.
3. `rfc8785` for anything else.
A property test (tests/unit/test_canonical.py) holds them to rfc8785's bytes for every
JSON value.
"""

from __future__ import annotations

import json
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


def _refuse(value: object) -> object:
    raise TypeError(type(value).__name__)


_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_chunks: Callable[[object, int], Any] | None = _make_c_encoder and _make_c_encoder(
    None, _refuse, json.encoder.encode_basestring, None, ":", ",", True, False, False)
"""`json`'s C encoder made once (`JSONEncoder.encode` makes one per call, which costs
more than writing a small value): no circularity markers (a JSON value has no cycles; a
cycle would end in RecursionError), sorted keys, no spaces, non-ASCII kept, NaN and the
infinities refused. None where `json` has no C part (writer 2 then does it all)."""
_CONTAINERS = (dict, list)


class _Slow(Exception):
    """A value the fast path does not write: rfc8785 does."""


def canonical(value: object) -> bytes:
    """The RFC 8785 bytes of a JSON value (what `json.loads` returns). Raises
    `rfc8785.CanonicalizationError` (a ValueError) for what JCS cannot write: NaN,
    infinities, integers beyond 2**53, lone surrogates."""
    fast = canonical_fast(value)
    return fast if fast is not None else rfc8785.dumps(value)  # type: ignore[arg-type]


def canonical_fast(value: object) -> bytes | None:
    """The fast writer alone: the RFC 8785 bytes of a value made only of the common
    cases, or None (nothing else tried) for anything else, which the caller converts."""
    try:
        if type(value) is str:  # most fields of most records
            return _quote(value).encode("utf-8")
        if type(value) in _CONTAINERS and value:
            text = _c_json(cast(dict[Any, Any] | list[Any], value))
            if text is not None:
                return text.encode("utf-8")
        return _write(value).encode("utf-8")
    except (_Slow, UnicodeEncodeError):
        return None


def _c_json(value: dict[Any, Any] | list[Any]) -> str | None:
    """Writer 1 (module docstring): `json`'s bytes when they are JCS's, else None."""
    if _c_chunks is None:
        return None
    try:
        return "".join(_c_chunks(value, 0)) if _json_safe(value) else None
    except (TypeError, ValueError, RecursionError):
        return None


_LEAVES = frozenset({str, bool, type(None)})
"""What `json`'s C encoder writes as JCS does, whatever the value."""


def _json_safe(container: dict[Any, Any] | list[Any]) -> bool:
    """Whether `json` writes this list or object as JCS does: no float in it, no integer
    beyond 2**53, and only ASCII keys (ordered alike by code point and by UTF-16 code
    unit). One set of types per container, so a flat object of strings (most of what is
    digested: field digests, a context's references) costs no Python step per value.
    Raises TypeError for a key that is no string."""
    if type(container) is dict:
        if not "".join(container).isascii():
            return False
        values: Any = container.values()
    else:
        values = container
    kinds = set(map(type, values))
    if kinds <= _LEAVES:
        return True
    if not kinds <= _LEAVES | {int, dict, list}:
        return False
    return all(_json_safe(v) if type(v) in _CONTAINERS
               else type(v) is not int or -SAFE_INT < v < SAFE_INT for v in values)


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
