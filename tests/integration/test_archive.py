"""A revert's archive against real MongoDB and NATS, driven in-process: a sparse file
costs the disk of its data, an artifact over a limit or past the free-space floor is
listed with the reason (and the dry run said so first, in the same words), a read that
hangs ends the attempt FAILED naming the artifact, and a worker with no ARTIFACTS_ROOT
says that archiving is off."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.archive.rules import ArchiveLimits, MiB, NotCopied, Source, size_text
from contracts.corrections.record import Correction
from contracts.corrections.states import CorrectionAttemptState, CorrectionStatus
from services.archive.fs import Sources
from services.archive.writer import Archive
from services.corrections.policy import CorrectionPolicy
from services.corrections.service import CorrectionService
from services.read_model import correction_diff_of
from store.database import Document
from store.mongo_store import MongoStore
from tests.integration.correction_support import artifact_plan, release, request

pytestmark = pytest.mark.store

S = CorrectionStatus
GiB = 1 << 30


async def _revert(svc: CorrectionService, plan_id: str, target: str,
                  timeout: float = 30) -> Correction:
    req = request(plan_id, target)
    await svc.request_correction(req, arrival=1)
    async with asyncio.timeout(timeout):  # never a correction that waits for ever
        await svc.run_plan(plan_id)
    c = await svc.get_correction(req.correction_id)
    assert c is not None
    return c


def _manifest(c: Correction) -> tuple[Path, dict[str, Any]]:
    folder = Path(c.archived_artifacts_path or "")
    return folder, {a["artifact_path"]: a for a in
                    json.loads((folder / "manifest.json").read_text())["artifacts"]}


def _data_runs(path: Path) -> list[tuple[int, int]]:
    fd, runs, pos = os.open(path, os.O_RDONLY), [], 0
    try:
        while True:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                assert exc.errno == errno.ENXIO
                return runs
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            runs.append((start, pos))
    finally:
        os.close(fd)


async def test_a_sparse_3_gib_artifact_costs_the_disk_of_its_data(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    big = tmp_path / "artifacts" / "out" / "sparse.bin"
    big.parent.mkdir()
    offsets = [0, GiB, 3 * GiB - 4096]
    with big.open("wb") as f:
        f.truncate(3 * GiB)
        for i, offset in enumerate(offsets):
            f.seek(offset)
            f.write(bytes([65 + i]) * 4096)
    plan, target = await artifact_plan(db, ["out/sparse.bin"])
    c = await _revert(make(), plan, target)
    assert c.status is S.APPLIED, c.error
    folder, lines = _manifest(c)
    line = lines["out/sparse.bin"]
    assert line["copied"] is True and line["size_bytes"] == 3 * GiB
    copy, src = folder / line["archived_as"], big.stat()
    st = copy.stat()
    assert st.st_size == 3 * GiB
    assert st.st_blocks * 512 <= src.st_blocks * 512 + MiB  # not 3 GiB of zeros
    assert _data_runs(copy) == _data_runs(big)
    with copy.open("rb") as f:
        for i, offset in enumerate(offsets):
            f.seek(offset)
            assert f.read(4096) == bytes([65 + i]) * 4096
    assert c.archive_not_copied == [] and c.archive_not_copied_count == 0


async def test_an_artifact_over_a_limit_is_listed_with_why_and_the_dry_run_said_so(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    arts = tmp_path / "artifacts"
    content = os.urandom(2 * MiB)
    (arts / "big.log").write_bytes(content)
    (arts / "small.txt").write_text("small\n")
    with (arts / "sparse.img").open("wb") as f:
        f.truncate(3 * GiB)  # apparent size over its limit, nothing on disk
    limits = ArchiveLimits(max_artifact_bytes=MiB, max_artifact_apparent_bytes=2 * GiB)
    svc = make(Archive(tmp_path / "archive", arts, limits))
    plan, target = await artifact_plan(db, ["big.log", "small.txt", "sparse.img"])
    disk = (arts / "big.log").stat().st_blocks * 512
    over = (f"over size limit: {size_text(disk)} on disk, limit 1.0 MiB per artifact "
            "(ARCHIVE_MAX_ARTIFACT_BYTES)")
    apparent = ("over size limit: 3.0 GiB apparent size, limit 2.0 GiB per artifact "
                "(ARCHIVE_MAX_ARTIFACT_APPARENT_BYTES)")

    report = await svc.generate_dry_run_report(request(plan, target))
    assert "1 artifact(s) would be archived: small.txt." in report.warnings
    assert (f"2 artifact(s) would not be copied: big.log ({over}); sparse.img ({apparent})."
            in report.warnings)

    c = await _revert(svc, plan, target)
    assert c.status is S.APPLIED, c.error
    folder, lines = _manifest(c)
    assert lines["small.txt"]["copied"] is True
    big = lines["big.log"]
    assert big["copied"] is False and big["reason"] == "over size limit"
    assert big["skipped"] == over and big["limit_bytes"] == MiB
    assert big["size_bytes"] == 2 * MiB and big["disk_bytes"] == disk
    assert big["sha256"] == hashlib.sha256(content).hexdigest()
    assert not (folder / big["archived_as"]).exists()
    sparse = lines["sparse.img"]
    assert sparse["skipped"] == apparent
    assert "sha256" not in sparse  # 3 GiB: past the 1 GiB hashing budget
    assert [(n.artifact_path, n.skipped) for n in c.archive_not_copied] == [
        ("big.log", over), ("sparse.img", apparent)]
    diff = await correction_diff_of(MongoStore(db), c.correction_id)
    assert diff is not None and diff.archive_not_copied_count == 2
    assert [n.skipped for n in diff.archive_not_copied] == [over, apparent]


async def test_below_the_free_space_floor_a_revert_goes_on_without_copies(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    arts = tmp_path / "artifacts"
    (arts / "a.txt").write_text("a\n")
    # A floor above what the volume has free stands in for a full archive volume.
    floor = shutil.disk_usage(tmp_path).free + 1024 * GiB
    svc = make(Archive(tmp_path / "archive", arts, ArchiveLimits(min_free_bytes=floor)))
    plan, target = await artifact_plan(db, ["a.txt"])
    words = f"floor {size_text(floor)} (ARCHIVE_MIN_FREE_BYTES)"
    report = await svc.generate_dry_run_report(request(plan, target))
    [warning] = [w for w in report.warnings if "would not be copied" in w]
    assert "a.txt (archive volume at its free-space floor: " in warning and words in warning
    c = await _revert(svc, plan, target)
    assert c.status is S.APPLIED, c.error
    folder, lines = _manifest(c)
    line = lines["a.txt"]
    assert line["copied"] is False and line["reason"] == NotCopied.FREE_SPACE_FLOOR
    assert line["skipped"].endswith(words) and line["limit_bytes"] == floor
    assert line["sha256"] == hashlib.sha256(b"a\n").hexdigest()
    assert [p.name for p in folder.rglob("*") if p.is_file()] == ["manifest.json"]


async def test_a_worker_without_artifacts_root_says_archiving_is_off(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    svc = make(Archive(tmp_path / "archive", None))
    plan, target = await artifact_plan(db, ["a.txt", "b.txt"])
    report = await svc.generate_dry_run_report(request(plan, target))
    assert ("Archiving is off on this worker (artifacts root not configured on this worker: "
            "ARTIFACTS_ROOT is unset): 2 artifact(s) would be listed in the manifest, none "
            "copied.") in report.warnings
    c = await _revert(svc, plan, target)
    _, lines = _manifest(c)
    assert {a["reason"] for a in lines.values()} == {
        "artifacts root not configured on this worker"}
    assert c.archive_not_copied_count == 2


# --- a read that hangs --------------------------------------------------------------------


class HangingSources(Sources):
    """A file system whose open of `hangs.bin` never returns, as on a hung NFS server:
    the artifact is a FIFO, opened the way a plain open would, which waits for a writer
    (the real archive refuses FIFOs without opening them)."""

    def open(self, artifact_path: str) -> tuple[Source, int | None]:
        if artifact_path == "hangs.bin":
            assert self.root is not None
            os.close(os.open(self.root / artifact_path, os.O_RDONLY))
        return super().open(artifact_path)


class HangingArchive(Archive):
    sources = HangingSources


@pytest.mark.parametrize("attempts", [1, 3])
async def test_a_read_that_hangs_ends_the_attempt_failed_naming_the_artifact(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path, attempts: int) -> None:
    arts = tmp_path / "artifacts"
    os.mkfifo(arts / "hangs.bin")
    (arts / "fine.txt").write_text("fine\n")
    archive = HangingArchive(tmp_path / "archive", arts, ArchiveLimits(stall_seconds=1))
    svc = make(archive, policy=CorrectionPolicy(max_attempts=attempts,
                                                attempt_backoff_seconds=0.05))
    plan, target = await artifact_plan(db, ["fine.txt", "hangs.bin"])
    try:
        c = await _revert(svc, plan, target)
    finally:
        release(arts / "hangs.bin")
    first = (await svc.list_attempts(c.correction_id))[0]
    assert first.state is CorrectionAttemptState.FAILED and first.error is not None
    assert first.error.startswith("ArchiveStalled: no progress for 1 s reading artifact "
                                  "'hangs.bin' (decision ")
    if attempts == 1:
        assert c.status is S.FAILED and c.error is not None and "'hangs.bin'" in c.error
        assert not archive.folder(plan, c.correction_id).exists()
        return
    # The next attempt lists it as timed out rather than hang on it again.
    assert c.status is S.APPLIED, c.error
    _, lines = _manifest(c)
    assert lines["fine.txt"]["copied"] is True
    assert lines["hangs.bin"]["reason"] == "timed out"
    assert lines["hangs.bin"]["skipped"] == ("timed out: no progress for 1 s in an earlier "
                                             "attempt (ARCHIVE_STALL_SECONDS)")
    assert [n.reason for n in c.archive_not_copied] == [NotCopied.TIMED_OUT]


async def test_a_dry_run_whose_look_hangs_answers_and_says_so(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    arts = tmp_path / "artifacts"
    os.mkfifo(arts / "hangs.bin")
    svc = make(HangingArchive(tmp_path / "archive", arts, ArchiveLimits(stall_seconds=1)))
    plan, target = await artifact_plan(db, ["hangs.bin"])
    try:
        async with asyncio.timeout(30):
            report = await svc.generate_dry_run_report(request(plan, target))
    finally:
        release(arts / "hangs.bin")
    [warning] = [w for w in report.warnings if "could not all be inspected" in w]
    assert "no progress for 1 s looking at artifact 'hangs.bin'" in warning
