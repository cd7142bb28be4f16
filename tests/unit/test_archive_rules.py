"""The archive's pure rules: what is copied, the words for what is not, the manifest's
lines, the dry run's warnings in the same words, and the diff that shows them."""

from __future__ import annotations

import pytest

from cli.history import print_diff
from cli.render import out as console
from contracts.corrections.archive.manifest import ManifestLine, not_copied
from contracts.corrections.archive.preview import ArchivePreview, archive_warnings
from contracts.corrections.archive.rules import (
    ArchiveLimits,
    GiB,
    MiB,
    NotCopied,
    NotCopiedArtifact,
    Skip,
    Source,
    SourceKind,
    Totals,
    before_looking,
    judge,
    size_text,
    worth_hashing,
)
from contracts.corrections.diff import correction_diff
from contracts.corrections.revert import ArchiveEntry
from contracts.corrections.states import CorrectionMode
from tests.unit.test_history import applied
from tests.unit.test_impact import uid

pytestmark = pytest.mark.unit

LIMITS = ArchiveLimits(max_artifact_bytes=10 * MiB, max_artifact_apparent_bytes=GiB,
                       max_correction_bytes=25 * MiB, max_correction_apparent_bytes=2 * GiB,
                       hash_max_bytes=30 * MiB, min_free_bytes=GiB)
FREE = 100 * GiB


def regular(size: int, disk: int | None = None) -> Source:
    return Source(SourceKind.REGULAR, size, size if disk is None else disk)


def test_sizes_read_as_a_person_would() -> None:
    assert [size_text(n) for n in (512, 2048, 3 * MiB, 3 * GiB + GiB // 2)] == [
        "512 B", "2.0 KiB", "3.0 MiB", "3.5 GiB"]


def test_a_file_within_every_limit_is_copied() -> None:
    assert judge(regular(5 * MiB), LIMITS, Totals(), FREE) is None
    # A sparse file is judged on disk by its data, apparent by its length.
    assert judge(regular(GiB, 4096), LIMITS, Totals(), FREE) is None


@pytest.mark.parametrize(("source", "totals", "text", "limit"), [
    (regular(11 * MiB), Totals(), "over size limit: 11.0 MiB on disk, limit 10.0 MiB per "
     "artifact (ARCHIVE_MAX_ARTIFACT_BYTES)", 10 * MiB),
    (regular(3 * GiB, 4096), Totals(), "over size limit: 3.0 GiB apparent size, limit 1.0 GiB "
     "per artifact (ARCHIVE_MAX_ARTIFACT_APPARENT_BYTES)", GiB),
    (regular(6 * MiB), Totals(disk=20 * MiB), "over size limit: 26.0 MiB on disk with this "
     "correction's other copies, limit 25.0 MiB per correction (ARCHIVE_MAX_CORRECTION_BYTES)",
     25 * MiB),
    (regular(GiB, 0), Totals(apparent=GiB + 1), "over size limit: 2.0 GiB apparent size with "
     "this correction's other copies, limit 2.0 GiB per correction "
     "(ARCHIVE_MAX_CORRECTION_APPARENT_BYTES)", 2 * GiB),
])
def test_limits_per_artifact_and_per_correction(source: Source, totals: Totals, text: str,
                                                limit: int) -> None:
    skip = judge(source, LIMITS, totals, FREE)
    assert skip is not None and skip.reason is NotCopied.OVER_SIZE_LIMIT
    assert skip.text == text and skip.limit == limit


def test_the_free_space_floor_counts_the_copy_itself() -> None:
    assert judge(regular(MiB), LIMITS, Totals(), GiB + MiB) is None
    skip = judge(regular(MiB + 1), LIMITS, Totals(), GiB + MiB)
    assert skip is not None and skip.reason is NotCopied.FREE_SPACE_FLOOR
    assert skip.text == ("archive volume at its free-space floor: 1.0 GiB free, the copy "
                         "needs 1.0 MiB, floor 1.0 GiB (ARCHIVE_MIN_FREE_BYTES)")
    assert judge(regular(MiB), LIMITS, Totals(), None) is None  # unknown: no floor


@pytest.mark.parametrize(("kind", "reason"), [
    (SourceKind.MISSING, "missing"), (SourceKind.LINK, "a link"),
    (SourceKind.NOT_REGULAR, "not a regular file"), (SourceKind.UNREADABLE, "unreadable")])
def test_what_is_not_a_regular_file_is_named(kind: SourceKind, reason: str) -> None:
    skip = judge(Source(kind, detail="a FIFO"), LIMITS, Totals(), FREE)
    assert skip is not None and skip.text == f"{reason}: a FIFO"


def test_reasons_known_before_looking_come_in_order() -> None:
    unsafe = before_looking("has '..'", root_configured=False, timed_out_before=True,
                            stall_seconds=30)
    assert unsafe is not None and unsafe.reason is NotCopied.UNSAFE_PATH
    off = before_looking(None, root_configured=False, timed_out_before=True, stall_seconds=30)
    assert off is not None and off.text == ("artifacts root not configured on this worker: "
                                            "ARTIFACTS_ROOT is unset")
    stalled = before_looking(None, root_configured=True, timed_out_before=True,
                             stall_seconds=2.5)
    assert stalled is not None and stalled.text == (
        "timed out: no progress for 2.5 s in an earlier attempt (ARCHIVE_STALL_SECONDS)")
    assert before_looking(None, root_configured=True, timed_out_before=False,
                          stall_seconds=30) is None


def test_hashing_only_what_was_skipped_for_its_size_within_the_budget() -> None:
    big = regular(20 * MiB)
    over = judge(big, LIMITS, Totals(), FREE)
    assert over is not None and worth_hashing(over, big, LIMITS, Totals())
    assert not worth_hashing(over, big, LIMITS, Totals(hashed=11 * MiB))
    assert not worth_hashing(Skip(NotCopied.MISSING), big, LIMITS, Totals())


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="never negative"):
        ArchiveLimits(min_free_bytes=-1)
    with pytest.raises(ValueError, match="ARCHIVE_STALL_SECONDS"):
        ArchiveLimits(stall_seconds=0)


ENTRY = ArchiveEntry(decision_id=uid(1), artifact_path="out/big.log", artifact_type="file",
                     archived_as=f"{uid(1)}/0/out/big.log")


def test_a_manifest_line_says_why_with_the_sizes_and_the_hash() -> None:
    source = regular(20 * MiB)
    skip = judge(source, LIMITS, Totals(), FREE)
    line = ManifestLine.of(ENTRY, skip, source, "ab" * 32)
    assert not line.copied and line.reason is NotCopied.OVER_SIZE_LIMIT
    assert skip is not None and line.skipped == skip.text
    assert (line.size_bytes, line.disk_bytes, line.limit_bytes) == (20 * MiB, 20 * MiB, 10 * MiB)
    copied = ManifestLine.of(ENTRY, None, regular(5))
    assert copied.copied and copied.reason is None and copied.size_bytes == 5
    missing = ManifestLine.of(ENTRY, Skip(NotCopied.MISSING), Source(SourceKind.MISSING))
    assert missing.size_bytes is None
    assert not_copied([line, copied, missing]) == [
        NotCopiedArtifact(decision_id=uid(1), artifact_path="out/big.log",
                          reason=NotCopied.OVER_SIZE_LIMIT, skipped=line.skipped or ""),
        NotCopiedArtifact(decision_id=uid(1), artifact_path="out/big.log",
                          reason=NotCopied.MISSING, skipped="missing")]


def test_the_dry_run_warns_in_the_manifests_words() -> None:
    over = Skip(NotCopied.OVER_SIZE_LIMIT, "20.0 MiB on disk, limit 10.0 MiB per artifact")
    p = ArchivePreview(total=8, inspected=8, copied=("a", "b"), not_copied=tuple(
        (f"f{i}", over) for i in range(6)))
    copied, skipped = archive_warnings(p)
    assert copied == "2 artifact(s) would be archived: a, b."
    assert skipped.startswith(f"6 artifact(s) would not be copied: f0 ({over.text}); f1 (")
    assert skipped.endswith(f"f4 ({over.text}) and 1 more.")
    off = archive_warnings(ArchivePreview(total=3, inspected=0, archiving_on=False))
    assert off == ["Archiving is off on this worker (artifacts root not configured on this "
                   "worker: ARTIFACTS_ROOT is unset): 3 artifact(s) would be listed in the "
                   "manifest, none copied."]
    partial = archive_warnings(ArchivePreview(total=2000, inspected=1000, copied=("a",)))
    assert partial[-1].startswith("Only the first 1000 of 2000 artifacts were inspected")
    stalled = archive_warnings(ArchivePreview(total=2, inspected=1, copied=("a",),
                                              problem="no progress for 5 s looking at 'b'"))
    assert "could not all be inspected: no progress for 5 s looking at 'b'" in stalled[-1]
    assert archive_warnings(ArchivePreview(total=0, inspected=0)) == []


def test_the_diff_shows_what_was_not_copied_and_why() -> None:
    items = [NotCopiedArtifact(decision_id=uid(1), artifact_path=f"f{i}", reason="missing",
                               skipped="missing") for i in range(3)]
    c = applied(CorrectionMode.REVERT, uid(8001), 1, 100, new_decision_id=uid(50),
                superseded_ids=[uid(1)], archived_artifacts_path="/arch/c1",
                archive_not_copied=items[:2], archive_not_copied_count=3)
    diff = correction_diff(c, {})
    assert diff.archive_not_copied == items[:2] and diff.archive_not_copied_count == 3
    assert diff.lists_truncated
    with console.capture() as out:
        print_diff(diff)
    text = out.get()
    assert "not copied (3)" in text and "f1: missing" in text
    assert "1 more (the manifest lists them all)" in text
