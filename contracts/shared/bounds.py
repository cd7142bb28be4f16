"""How much of a hostile message is ever echoed back: the bounds every report keeps.

A rejection is published as an event (NATS refuses payloads over 1 MB) and kept as a
dead letter (BSON refuses documents over 16 MB). A message can be built to break a
rule 100,000 times, or to carry a 500 KB field name, so every report is cut to size
here, on the way in, and the bounds below are what the README promises:

- a body larger than the accepted payload size (`MAX_PAYLOAD_BYTES`, a setting) is
  refused unread, so its size costs no parsing;
- at most `MAX_ERRORS` violations are listed, then one `more_errors` entry counts the rest;
- every echoed text (a violation's message, a subject, an ID) is cut at
  `MAX_TEXT_BYTES` of UTF-8, a field path at `MAX_FIELD_BYTES`;
- so a rejection event serialises to at most `REJECTION_EVENT_MAX_BYTES`;
- a dead letter keeps the payload whole up to `DEAD_LETTER_PAYLOAD_BYTES` (beyond
  that its first bytes, its size and its SHA-256), at most `DEAD_LETTER_MAX_HEADERS`
  headers cut at `DEAD_LETTER_HEADER_BYTES` each, so its BSON document is at most
  `DEAD_LETTER_MAX_BYTES`.
"""

from __future__ import annotations

import re

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
"""Default of the MAX_PAYLOAD_BYTES setting. A decision is text written by an agent;
256 KiB holds a long reasoning trace many times over, while reading the worst body of
that size (a list of 60,000 bad IDs) stays a fraction of a second of CPU. NATS itself
allows 1 MB, which took seconds to read and explain."""

MAX_ERRORS = 20
"""Violations listed per message; the rest are counted in one `more_errors` entry."""
MAX_TEXT_BYTES = 300
"""An echoed message, subject or ID, in UTF-8 bytes (an ellipsis marks a cut)."""
MAX_FIELD_BYTES = 100
"""A violation's field path (an unknown key can be any length)."""

DEAD_LETTER_PAYLOAD_BYTES = 64 * 1024
"""A dead letter keeps a payload up to this size whole; a larger one only in part
(its first bytes, with its full size and SHA-256), and cannot be retried from it."""
DEAD_LETTER_SUBJECT_BYTES = 4096
"""NATS's own default limit on a protocol line; a longer subject is cut."""
DEAD_LETTER_MAX_HEADERS = 32
DEAD_LETTER_HEADER_BYTES = 512
"""Each header name and value is cut at this many bytes; headers past the 32nd dropped."""

REJECTION_EVENT_MAX_BYTES = 24 * 1024
"""Upper bound of a serialised rejection event (DecisionRejected, CorrectionRejected,
ViolationRejected). JSON escapes at most double a text's UTF-8 size (`"` and `\\`;
control characters are replaced before), so: (MAX_ERRORS + 1) entries of
2 x (MAX_TEXT_BYTES + MAX_FIELD_BYTES) + 64 bytes = 18.2 KB, plus a subject and
three IDs of 2 x MAX_TEXT_BYTES each and the fixed keys: under 21 KB."""
DEAD_LETTER_MAX_BYTES = 128 * 1024
"""Upper bound of a dead letter's BSON document: payload 64 KiB, subject 4 KiB,
headers 32 x 2 x 512 B = 32 KiB, errors about 10 KB (BSON does not escape), the
rest a few hundred bytes: under 112 KiB, against MongoDB's 16 MB."""

INLINE_IDS_MAX = 100
"""Events and dry-run replies carry at most this many IDs per list, plus the full count:
100 ULIDs are ~3 KB, so a reply stays far under NATS's 1 MB payload limit whatever the
correction's size. The full lists are in the correction's document
(`agents correction show ID --json`)."""

ELLIPSIS = "…"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clip(text: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """`text` in at most `max_bytes` of UTF-8, ending in an ellipsis when cut.

    Control characters become U+FFFD and lone surrogates (json.loads lets `"\\ud800"`
    through) "?": they would otherwise swell sixfold in JSON, or fail to encode at all."""
    if len(text) <= max_bytes and text.isprintable() and len(text.encode()) <= max_bytes:
        return text  # the common case: short and clean (no surrogate is printable)
    # Every character is at least one byte, so the first max_bytes + 1 decide the cut.
    text = text[: max_bytes + 1]
    data = _CONTROL.sub("\ufffd", text).encode("utf-8", "replace")  # lone surrogates -> "?"
    if len(data) <= max_bytes:
        return data.decode("utf-8")
    keep = max_bytes - len(ELLIPSIS.encode())
    return data[:keep].decode("utf-8", "ignore") + ELLIPSIS
