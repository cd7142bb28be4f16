"""What a revert's archive copies, and the words for what it does not: pure rules.

The archive volume is shared by every plan's reverts, and an artifact is whatever an
agent wrote (a 1 TiB sparse file, a 50 GB log), so what one artifact and one correction
may put there is bounded, and a floor of free space is kept. The archive service looks
at each artifact (stat calls, never its content) and asks `judge`; the dry run asks the
same question of the same facts beforehand, so its warning and the manifest say the
same words (`Skip.text`). Limits count two sizes: on disk (what a copy costs, since
holes stay holes) and apparent (what a reader of the copy, or a volume without holes,
pays).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from pydantic import Field

from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


class NotCopied(StrEnum):
    """Why an artifact has no copy in the archive (the manifest's `reason`)."""

    NO_ARTIFACTS_ROOT = "artifacts root not configured on this worker"
    UNSAFE_PATH = "unsafe artifact_path"
    MISSING = "missing"
    LINK = "a link"
    NOT_REGULAR = "not a regular file"
    UNREADABLE = "unreadable"
    OVER_SIZE_LIMIT = "over size limit"
    FREE_SPACE_FLOOR = "archive volume at its free-space floor"
    TIMED_OUT = "timed out"


class SourceKind(StrEnum):
    """What stands at an artifact's path, as a look without following links found it."""

    REGULAR = "regular"
    MISSING = "missing"
    LINK = "link"
    NOT_REGULAR = "not_regular"
    UNREADABLE = "unreadable"


_KIND_REASON = {SourceKind.MISSING: NotCopied.MISSING, SourceKind.LINK: NotCopied.LINK,
                SourceKind.NOT_REGULAR: NotCopied.NOT_REGULAR,
                SourceKind.UNREADABLE: NotCopied.UNREADABLE}


@dataclass(frozen=True)
class Source:
    """An artifact as a look found it: `size` apparent, `disk` allocated (st_blocks)."""

    kind: SourceKind
    size: int = 0
    disk: int = 0
    detail: str = ""


@dataclass(frozen=True)
class ArchiveLimits:
    """The archive's settings (docs/corrections.md, Settings); defaults are safe on a
    volume of tens of GiB shared by every plan."""

    max_artifact_bytes: int = 1 * GiB
    """ARCHIVE_MAX_ARTIFACT_BYTES: on disk, per artifact."""
    max_artifact_apparent_bytes: int = 16 * GiB
    """ARCHIVE_MAX_ARTIFACT_APPARENT_BYTES: apparent size, per artifact."""
    max_correction_bytes: int = 4 * GiB
    """ARCHIVE_MAX_CORRECTION_BYTES: on disk, all copies of one correction."""
    max_correction_apparent_bytes: int = 64 * GiB
    """ARCHIVE_MAX_CORRECTION_APPARENT_BYTES: apparent size, all copies of one correction."""
    hash_max_bytes: int = 1 * GiB
    """ARCHIVE_HASH_MAX_BYTES: most bytes one correction reads to hash artifacts it does
    not copy (so the manifest can still identify them)."""
    min_free_bytes: int = 1 * GiB
    """ARCHIVE_MIN_FREE_BYTES: a copy that would leave less free on the archive volume is
    not made; the revert goes on without it."""
    stall_seconds: float = 30.0
    """ARCHIVE_STALL_SECONDS: a read or write that makes no progress this long ends the
    attempt FAILED, naming the artifact."""

    def __post_init__(self) -> None:
        sizes = (self.max_artifact_bytes, self.max_artifact_apparent_bytes,
                 self.max_correction_bytes, self.max_correction_apparent_bytes,
                 self.hash_max_bytes, self.min_free_bytes)
        if min(sizes) < 0:
            raise ValueError("archive limits are byte counts, never negative")
        if not self.stall_seconds > 0:
            raise ValueError("ARCHIVE_STALL_SECONDS must be positive")


@dataclass(frozen=True)
class Totals:
    """What this correction's copies (and hashes) have cost so far."""

    disk: int = 0
    apparent: int = 0
    hashed: int = 0

    def copied(self, source: Source) -> Totals:
        return replace(self, disk=self.disk + source.disk,
                       apparent=self.apparent + source.size)


@dataclass(frozen=True)
class Skip:
    """An artifact not copied: the reason, what made it so, and the limit it met."""

    reason: NotCopied
    detail: str = ""
    limit: int | None = None

    @property
    def text(self) -> str:
        """The manifest's `skipped` and the dry run's words for it."""
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


def size_text(n: int) -> str:
    """A byte count for a person: '3.0 GiB', '512 B'."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def before_looking(path_problem: str | None, *, root_configured: bool,
                   timed_out_before: bool, stall_seconds: float) -> Skip | None:
    """The reasons known without touching the file system: an unsafe recorded path is
    never opened, and an artifact that stalled an earlier attempt is not read again
    (a second stuck read would only fail this attempt too)."""
    if path_problem is not None:
        return Skip(NotCopied.UNSAFE_PATH,
                    f"{path_problem} (recorded before the safe_artifact_path rule)")
    if not root_configured:
        return Skip(NotCopied.NO_ARTIFACTS_ROOT, "ARTIFACTS_ROOT is unset")
    if timed_out_before:
        return Skip(NotCopied.TIMED_OUT, f"no progress for {stall_seconds:g} s in an "
                    "earlier attempt (ARCHIVE_STALL_SECONDS)")
    return None


def _size_limit(source: Source, limits: ArchiveLimits, totals: Totals) -> Skip | None:
    checks = (
        (source.disk, limits.max_artifact_bytes, "on disk", "per artifact",
         "ARCHIVE_MAX_ARTIFACT_BYTES"),
        (source.size, limits.max_artifact_apparent_bytes, "apparent size", "per artifact",
         "ARCHIVE_MAX_ARTIFACT_APPARENT_BYTES"),
        (totals.disk + source.disk, limits.max_correction_bytes,
         "on disk with this correction's other copies", "per correction",
         "ARCHIVE_MAX_CORRECTION_BYTES"),
        (totals.apparent + source.size, limits.max_correction_apparent_bytes,
         "apparent size with this correction's other copies", "per correction",
         "ARCHIVE_MAX_CORRECTION_APPARENT_BYTES"),
    )
    for size, limit, what, scope, setting in checks:
        if size > limit:
            return Skip(NotCopied.OVER_SIZE_LIMIT, f"{size_text(size)} {what}, limit "
                        f"{size_text(limit)} {scope} ({setting})", limit)
    return None


def judge(source: Source, limits: ArchiveLimits, totals: Totals,
          free_bytes: int | None) -> Skip | None:
    """Why `source` is not copied, or None to copy it. `totals` are this correction's
    copies so far (in manifest order): an artifact over what is left is skipped and a
    later, smaller one may still fit. `free_bytes` is what the archive volume has free
    now (None: unknown, no floor applied)."""
    if source.kind is not SourceKind.REGULAR:
        return Skip(_KIND_REASON[source.kind], source.detail)
    over = _size_limit(source, limits, totals)
    if over is not None:
        return over
    if free_bytes is not None and free_bytes - source.disk < limits.min_free_bytes:
        return Skip(NotCopied.FREE_SPACE_FLOOR,
                    f"{size_text(free_bytes)} free, the copy needs {size_text(source.disk)}, "
                    f"floor {size_text(limits.min_free_bytes)} (ARCHIVE_MIN_FREE_BYTES)",
                    limits.min_free_bytes)
    return None


def worth_hashing(skip: Skip, source: Source, limits: ArchiveLimits, totals: Totals) -> bool:
    """Whether to read a file not copied for its size, to name it by its SHA-256: only
    while this correction's hashing stays within ARCHIVE_HASH_MAX_BYTES."""
    sized = skip.reason in (NotCopied.OVER_SIZE_LIMIT, NotCopied.FREE_SPACE_FLOOR)
    return sized and totals.hashed + source.size <= limits.hash_max_bytes


class NotCopiedArtifact(Frozen):
    """An artifact a revert listed in its manifest without a copy, and why: kept on the
    correction so `agents correction diff` and the console show it without the archive
    volume at hand."""

    decision_id: Ulid = Field(description="The superseded decision that produced it.")
    artifact_path: str = Field(description="Its path as recorded.")
    reason: NotCopied = Field(description="Why it was not copied.")
    skipped: str = Field(description="The reason with its particulars, as in the manifest.")
