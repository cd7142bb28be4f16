"""A plan's records as a hash chain, so a record changed, removed or reordered after it
was written is detected (`agents audit verify`, docs/security.md).

Every record of a plan (its decisions, whoever wrote them; a correction's request, its
retries and its end; a violation's report and its resolution) carries

    chain = {"seq": n, "prev": <digest of the record at n-1, None at 0>, "digest": d}
    d = "sha256:" + hex(sha256(JCS({"plan_id", "seq", "prev", "kind", "record_id",
                                    "content"})))

`content` is what the record says that never changes once written: the digest of every
immutable field of the stored record, `"sha256:" + hex(sha256(utf8(name) || 0x00 ||
JCS(value)))` (the field digest of contracts.trust.signing with an empty salt), so a
field erased later can keep its digest and the chain still verifies. A correction's
events add the transition itself and, for APPLIED, its results; the fields a later step
does change (a decision's `superseded_by`, a correction's `status`) are left out and
checked against the chained correction records instead.

The plan's counter document (the `plans` document that holds `next_sequence`) keeps the
chain's length and head digest, written in the same transaction as the record: two
writers of one plan conflict in the database, and a record removed from the end is seen
against the counter. Values are digested in their JSON form (`plain`): a date as RFC
3339 UTC with milliseconds, the precision MongoDB keeps, so a digest computed before the
insert is the one recomputed from what is read back.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from hashlib import sha256
from typing import Any

from contracts.trust.canonical import SAFE_INT, canonical, canonical_fast

DECISION = "decision"
CORRECTION_REQUEST = "correction.request"
CORRECTION_RETRY = "correction.retry"
CORRECTION_END = "correction.end"
VIOLATION_REPORT = "violation.report"
VIOLATION_RESOLUTION = "violation.resolution"
KINDS = (DECISION, CORRECTION_REQUEST, CORRECTION_RETRY, CORRECTION_END, VIOLATION_REPORT,
         VIOLATION_RESOLUTION)

DECISION_MUTABLE = frozenset({"_id", "chain", "superseded_by", "superseded_at",
                              "superseded_by_correction", "erased", "search_tokens"})
"""What a decision's content leaves out: its key (the record_id), its link, what a
revert sets later (checked against the chained correction ends), what an erasure
says of itself (its removed values' digests stand in for them: `kept_digests`), and its
search tokens (derived from chained fields, and written again by a reindex or an
erasure)."""
CORRECTION_REQUEST_FIELDS = ("plan_id", "decision_id", "mode", "guidance", "requested_by",
                             "claimed_by", "verified", "signature", "chosen_option",
                             "requested_at", "trace_context")
"""What a correction's request fixes for good: every event of it chains their digests."""
CORRECTION_RESULTS = ("new_decision_id", "superseded_ids", "child_plans_rolled_back",
                      "child_plans_spawned")
RESOLUTION_FIELDS = ("resolved_at", "resolved_by", "resolution_signature")
VIOLATION_REPORT_SKIP = frozenset({"_id", "chain", "erased", *RESOLUTION_FIELDS})
TERMINAL = frozenset({"applied", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Link:
    seq: int
    prev: str | None
    digest: str

    def as_document(self) -> dict[str, Any]:
        return {"seq": self.seq, "prev": self.prev, "digest": self.digest}

    @classmethod
    def of(cls, doc: object) -> Link | None:
        """A stored link, or None if it is not one (missing, or changed out of shape)."""
        if not isinstance(doc, Mapping):
            return None
        seq, prev, digest = doc.get("seq"), doc.get("prev"), doc.get("digest")
        if type(seq) is not int or not isinstance(digest, str) \
                or not (prev is None or isinstance(prev, str)):
            return None
        return cls(seq, prev, digest)


@dataclass(frozen=True, slots=True)
class Head:
    """Where a plan's chain stands: how many records it holds and the last one's digest."""

    length: int = 0
    digest: str | None = None

    @classmethod
    def of(cls, counter: Mapping[str, Any] | None) -> Head:
        """From the plan's counter document (None: no document yet)."""
        if not counter:
            return cls()
        return cls(int(counter.get("chain_length") or 0), counter.get("chain_head"))

    def link(self, plan_id: str, kind: str, record_id: str,
             content: Mapping[str, Any]) -> Link:
        """The link of the next record."""
        return Link(self.length, self.digest, link_digest(
            plan_id, seq=self.length, prev=self.digest, kind=kind, record_id=record_id,
            content=content))

    def after(self, link: Link) -> Head:
        return Head(link.seq + 1, link.digest)

    def as_fields(self) -> dict[str, Any]:
        """What the counter document keeps of it."""
        return {"chain_length": self.length, "chain_head": self.digest}


def link_digest(plan_id: str, *, seq: int, prev: str | None, kind: str, record_id: str,
                content: Mapping[str, Any]) -> str:
    body = {"plan_id": plan_id, "seq": seq, "prev": prev, "kind": kind,
            "record_id": record_id, "content": content}
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def plain(value: object) -> Any:  # noqa: PLR0911 - one return per JSON type
    """A stored value as JSON that JCS can write, the same whether it comes from the
    model before the insert or from MongoDB after it: a date is RFC 3339 UTC with
    milliseconds (naive dates are UTC), an enum its value, a tuple a list. What JCS cannot
    write (an integer beyond 2**53, NaN, a lone surrogate, bytes, a driver type) becomes
    a tagged object, so a hostile value never stops a write."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, str):
        return _text(str(value))
    if isinstance(value, int):
        return int(value) if -SAFE_INT < value < SAFE_INT else {"$int": str(value)}
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, datetime):
        return _when(value)
    if isinstance(value, Mapping):
        return {_key(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    return {"$type": type(value).__name__, "value": str(value)}


def _when(at: datetime) -> str:
    """RFC 3339 UTC with milliseconds (naive: UTC), the precision MongoDB keeps."""
    at = at.astimezone(UTC) if at.tzinfo is not None else at
    return at.isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


def _key(key: object) -> str:
    """A key as a string JCS can write (a lone surrogate: tagged, as in `_text`)."""
    text = str(key)
    written = _text(text)
    return text if written is text else "$str:" + str(written["$str"])


def _text(text: str) -> Any:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return {"$str": text.encode("utf-8", "surrogatepass").hex()}
    return text


def field_digests(record: Mapping[str, Any], skip: Collection[str] = ()) -> dict[str, str]:
    """The digest of every field of `record` but those in `skip`: the same whether the
    record is the document about to be written or its `plain` form read back."""
    return {name: _digest(name, value) for name, value in record.items() if name not in skip}


def _digest(name: str, value: object) -> str:
    """`field_digest(b"", name, plain(value))`, without walking a value that is plain
    already (most of a document is: the recorder digests every field of every decision).
    A value the fast canonical writer takes as it is, it writes as `plain` would; a
    constant (null, a boolean, an empty list), which most of a decision's optional
    fields hold, is digested once per field name."""
    constant = _constant(value)
    if constant is not None:
        return _constant_digest(name, constant)
    if isinstance(value, datetime):
        data = b'"' + _when(value).encode("ascii") + b'"'
    else:
        if isinstance(value, dict):  # a kept signature: its time at the top, the rest JSON
            value = {k: _when(v) if isinstance(v, datetime) else v for k, v in value.items()}
        # None: not JSON as it is (a date deeper down, a driver type, a huge int)
        data = canonical_fast(value) or canonical(plain(value))
    return "sha256:" + sha256(_prefix(name) + data).hexdigest()


def _constant(value: object) -> bytes | None:
    if value is None:
        return b"null"
    if value is True or value is False:
        return b"true" if value else b"false"
    return b"[]" if type(value) is list and not value else None


@functools.lru_cache(maxsize=1024)
def _prefix(name: str) -> bytes:
    return name.encode("utf-8") + b"\x00"


@functools.lru_cache(maxsize=4096)
def _constant_digest(name: str, data: bytes) -> str:
    return "sha256:" + sha256(_prefix(name) + data).hexdigest()


def kept_digests(doc: Mapping[str, Any], digests: dict[str, str]) -> dict[str, str]:
    """`digests` with each field an erasure removed given the digest of the value it
    removed (`erased.fields`, contracts.retention.erasure), so an erased record's link
    verifies as before."""
    erased = doc.get("erased")
    kept = erased.get("fields") if isinstance(erased, Mapping) else None
    if isinstance(kept, Mapping):
        digests.update({str(k): v for k, v in kept.items()
                        if str(k) in digests and isinstance(v, str)})
    return digests


def decision_content(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A decision's content: every stored field but the mutable ones (plain JSON)."""
    return content_of(decision_digests(doc))


def decision_digests(doc: Mapping[str, Any]) -> dict[str, str]:
    """The field digests a decision's content holds (`decision_content`)."""
    digests = field_digests(doc, DECISION_MUTABLE)
    return kept_digests(doc, digests) if "erased" in doc else digests


def content_of(digests: Mapping[str, str]) -> dict[str, Any]:
    """A decision's content from its field digests."""
    return {"fields": digests}


def correction_kind(event: Mapping[str, Any]) -> str | None:
    """Which chained record a correction's transition is, or None (a runner's working
    step, ANALYZING or EXECUTING, which no record vouches for)."""
    if event.get("from_status") is None:
        return CORRECTION_REQUEST
    if event.get("to_status") in TERMINAL:
        return CORRECTION_END
    if event.get("from_status") == "failed" and event.get("to_status") == "pending":
        return CORRECTION_RETRY
    return None


def correction_content(doc: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """One chained event of a correction (plain JSON): its request's fields, the
    transition as stored, and, for APPLIED, what it changed (lists sorted)."""
    results = None
    if event.get("to_status") == "applied":
        results = {name: sorted(v) if isinstance(v := doc.get(name), list) else v
                   for name in CORRECTION_RESULTS}
    request = {name: doc.get(name) for name in CORRECTION_REQUEST_FIELDS}
    return {"request": kept_digests(doc, field_digests(request)), "event": dict(event),
            "results": results}


def violation_content(doc: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """A violation's report (every field but the resolution's) or its resolution."""
    if kind == VIOLATION_RESOLUTION:
        return {"fields": field_digests({name: doc.get(name) for name in RESOLUTION_FIELDS})}
    return {"fields": kept_digests(doc, field_digests(doc, VIOLATION_REPORT_SKIP))}
