"""A revert's archive on disk: the manifest of every affected artifact, and copies.

Written before the revert's transaction into a folder named by the correction, emptied
first (a retry, or the attempt after a crash, starts from the same clean place), and
fsynced whole before `write` returns: the APPLIED the transaction records never names
copies a power loss took back. What is copied is decided by contracts.corrections.archive.rules
(sizes, free-space floor); every artifact not copied is in the manifest with the reason.
Copies keep holes and go through the kernel (archive_copy); nothing follows a link
(archive_fs); all of it runs under a progress watchdog (archive_watch): a stall ends the
attempt FAILED naming the artifact, and the next attempt lists it as timed out instead
of reading it again. Any other OSError propagates: the attempt ends FAILED.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from contracts.corrections.archive.manifest import ManifestLine, manifest_document
from contracts.corrections.archive.preview import ArchivePreview
from contracts.corrections.archive.rules import (
    ArchiveLimits,
    Skip,
    Totals,
    before_looking,
    judge,
    worth_hashing,
)
from contracts.corrections.revert import MANIFEST_NAME, ArchiveEntry, RevertWrites, archive_folder
from contracts.decisions.artifacts import artifact_path_problem
from contracts.impact.summary import AffectedArtifact
from services.archive.copy import (
    copy_into,
    free_bytes,
    fsync_path,
    sha256_of,
    sync_tree,
    write_synced,
)
from services.archive.fs import (
    ROOT,
    NotAFolder,
    Sources,
    closing,
    open_dirs,
    parts_of,
    remove_entry,
)
from services.archive.preview import preview_archive
from services.archive.watch import ArchiveStalled, Progress, run_watched

__all__ = ["Archive", "ArchiveResult", "NotAFolder"]

log = logging.getLogger(__name__)

REMEMBERED_MAX = 1000
"""Corrections whose stalled artifacts a worker remembers (the oldest forgotten first)."""


class ArchiveResult(NamedTuple):
    path: str
    """The folder's absolute path."""
    lines: list[ManifestLine]
    """The manifest's artifacts, copied or not."""


class Archive:
    sources = Sources
    """How artifacts are reached from ARTIFACTS_ROOT (a test stands in a hanging file
    system here)."""

    def __init__(self, archive_root: Path, artifacts_root: Path | None = None,
                 limits: ArchiveLimits | None = None) -> None:
        self.archive_root = archive_root
        self.artifacts_root = artifacts_root.resolve() if artifacts_root else None
        self.limits = limits or ArchiveLimits()
        self._stalled: dict[str, set[str]] = {}

    def folder(self, plan_id: str, correction_id: str) -> Path:
        return self.archive_root / archive_folder(plan_id, correction_id)

    # --- what the service awaits: the I/O in a watched thread ------------------------

    async def archive(self, writes: RevertWrites) -> ArchiveResult:
        """`write` under the watchdog; ArchiveStalled names what made no progress."""
        try:
            result = await run_watched(lambda p: self.write(writes, p),
                                       self.limits.stall_seconds)
        except ArchiveStalled as exc:
            self._remember(writes.correction_id, exc.artifact)
            raise
        self._stalled.pop(writes.correction_id, None)
        return result

    async def discard(self, plan_id: str, correction_id: str) -> None:
        """`remove` under the watchdog; best effort, a stall is logged."""
        self._stalled.pop(correction_id, None)
        try:
            await run_watched(lambda p: self.remove(plan_id, correction_id),
                              self.limits.stall_seconds)
        except ArchiveStalled as exc:
            log.warning("removing the archive of correction %s: %s", correction_id, exc,
                        extra={"correction_id": correction_id, "plan_id": plan_id})

    async def preview(self, artifacts: Sequence[AffectedArtifact]) -> ArchivePreview:
        """What `write` would do with these artifacts now, for the dry run."""
        return await preview_archive(artifacts, self.artifacts_root, self.archive_root,
                                     self.limits, self.sources)

    def _remember(self, correction_id: str, artifact: str | None) -> None:
        if artifact is None:
            return
        if correction_id not in self._stalled and len(self._stalled) >= REMEMBERED_MAX:
            self._stalled.pop(next(iter(self._stalled)))
        self._stalled.setdefault(correction_id, set()).add(artifact)

    # --- the blocking work ----------------------------------------------------------

    def write(self, writes: RevertWrites, progress: Progress | None = None) -> ArchiveResult:
        """Copy what the rules allow, write the manifest, fsync it all."""
        progress = progress or Progress()
        progress.step("opening the archive folder")
        stalled = frozenset(self._stalled.get(writes.correction_id, ()))
        # The configured root is trusted (an operator chose it); what lies below it is
        # created without following links.
        existed = self.archive_root.exists()
        self.archive_root.mkdir(parents=True, exist_ok=True)
        if not existed:
            fsync_path(self.archive_root.parent)
        rel = parts_of(archive_folder(writes.plan_id, writes.correction_id))
        with closing(os.open(self.archive_root, ROOT)) as root_fd:
            with closing(open_dirs(root_fd, rel[:-1], create=True)) as parent:
                progress.step("emptying the archive folder")
                # A retry starts from an empty folder, so O_EXCL never meets its own copies.
                remove_entry(parent, rel[-1])
                with closing(open_dirs(parent, rel[-1:], create=True)) as folder:
                    lines = self._copies(folder, writes.manifest, stalled, progress)
                    progress.step("writing the manifest")
                    write_synced(folder, MANIFEST_NAME,
                                 manifest_document(writes, lines, self.limits))
                    sync_tree(folder, progress)
            for depth in range(len(rel) - 1, -1, -1):  # each new folder's name, up to the root
                with closing(open_dirs(root_fd, rel[:depth], create=False)) as above:
                    os.fsync(above)
        return ArchiveResult(str(self.folder(writes.plan_id, writes.correction_id).resolve()),
                             lines)

    def remove(self, plan_id: str, correction_id: str) -> None:
        """Remove the correction's folder, reached without following links (a link
        planted on the way must not make this delete elsewhere); best effort."""
        rel = parts_of(archive_folder(plan_id, correction_id))
        try:
            with closing(os.open(self.archive_root, ROOT)) as root_fd, \
                    closing(open_dirs(root_fd, rel[:-1], create=False)) as parent:
                remove_entry(parent, rel[-1])
        except OSError:
            pass  # nothing there, or not ours to touch

    def _copies(self, folder: int, entries: Sequence[ArchiveEntry], stalled: frozenset[str],
                progress: Progress) -> list[ManifestLine]:
        totals, lines = Totals(), []
        with self.sources(self.artifacts_root) as sources:
            for entry in entries:
                line, totals = self._archive_one(
                    folder, sources, entry, totals,
                    stalled_before=entry.archived_as in stalled, progress=progress)
                lines.append(line)
        return lines

    def _archive_one(self, folder: int, sources: Sources, entry: ArchiveEntry,
                     totals: Totals, *, stalled_before: bool,
                     progress: Progress) -> tuple[ManifestLine, Totals]:
        skip = self._before_looking(entry.artifact_path, stalled_before=stalled_before)
        if skip is not None:
            return ManifestLine.of(entry, skip), totals
        progress.step(_doing("reading", entry), artifact=entry.archived_as)
        source, fd = sources.open(entry.artifact_path)
        skip = judge(source, self.limits, totals, free_bytes(folder) if fd is not None else None)
        if fd is None:
            return ManifestLine.of(entry, skip, source), totals
        with closing(fd):
            if skip is None:
                progress.step(_doing("copying", entry), artifact=entry.archived_as)
                copy_into(fd, folder, entry.archived_as, source.size, progress)
                return ManifestLine.of(entry, None, source), totals.copied(source)
            if not worth_hashing(skip, source, self.limits, totals):
                return ManifestLine.of(entry, skip, source), totals
            progress.step(_doing("hashing", entry), artifact=entry.archived_as)
            digest = sha256_of(fd, source.size, progress)
            return (ManifestLine.of(entry, skip, source, digest),
                    replace(totals, hashed=totals.hashed + source.size))

    def _before_looking(self, artifact_path: str, *, stalled_before: bool) -> Skip | None:
        return before_looking(artifact_path_problem(artifact_path),
                              root_configured=self.artifacts_root is not None,
                              timed_out_before=stalled_before,
                              stall_seconds=self.limits.stall_seconds)


def _doing(verb: str, entry: ArchiveEntry) -> str:
    """What the watchdog names if this step stalls."""
    return f"{verb} artifact {entry.artifact_path!r} (decision {entry.decision_id})"
