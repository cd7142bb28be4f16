"""What an ID a person typed names: a whole ULID, or its last few characters.

The CLI and the console read every ID through `resolve`, so `…ZD5CJVAF` copied from a
tree works wherever a full ID does, and both refuse an ambiguous suffix the same way,
with the candidates. Reads only, through the read port (services/read_ports.py).
"""

from __future__ import annotations

from collections.abc import Collection

from contracts.shared.ids import is_ulid
from contracts.shared.views import SUFFIX_MIN, IdKind, IdMatch, suffix_of
from services.read_ports import LedgerReads

CANDIDATES_SHOWN = 10
"""Candidates an ambiguous suffix lists at most (per kind asked)."""


class IdNotUsable(ValueError):
    """The text names nothing usable; the message says why, in one sentence."""

    def __init__(self, message: str, candidates: tuple[IdMatch, ...] = ()) -> None:
        self.candidates = candidates
        super().__init__(message)


def _kinds_text(kinds: Collection[IdKind]) -> str:
    names = [k.value for k in IdKind if k in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


async def resolve(reads: LedgerReads, raw: str, kinds: Collection[IdKind]) -> str:
    """The full ID `raw` names among `kinds`: `raw` itself (upper-cased) when it is a
    whole ULID (whether it is recorded is for the caller to say, in its words), else
    the one ID of those kinds ending with it. IdNotUsable when it is not an ID or a
    suffix of one, when no record ends with it, or when several do."""
    text = raw.strip()
    if is_ulid(text):
        return text.upper()
    suffix = suffix_of(text)
    if suffix is None:
        raise IdNotUsable(f"{text[:40]!r} is not a ULID (26 characters of Crockford "
                          f"base32) nor the last {SUFFIX_MIN} or more characters of one")
    found = await reads.views.ids_ending(suffix, CANDIDATES_SHOWN + 1, kinds)
    unique = list(dict.fromkeys(m.id for m in found))
    if not unique:
        raise IdNotUsable(f"no {_kinds_text(kinds)} ID ends with {suffix}")
    if len(unique) > 1:
        shown = tuple(found[:CANDIDATES_SHOWN])
        raise IdNotUsable(f"{suffix} ends {len(unique)} IDs; give more characters: "
                          + ", ".join(f"{m.kind.value} {m.id}" for m in shown), shown)
    return unique[0]

