"""The dry run's look at a revert's artifacts: what the archive would copy, and why not.

The same rules as the archive itself (contracts.corrections.archive.rules), applied to a look at
each artifact (an lstat and an open, no content read) in manifest order, with the
volume's free space less the copies before it, so the warning says what the manifest
will say. At most PREVIEW_MAX artifacts are looked at, for at most PREVIEW_SECONDS,
under the same watchdog.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from contracts.corrections.archive.preview import ArchivePreview
from contracts.corrections.archive.rules import ArchiveLimits, Skip, Totals, before_looking, judge
from contracts.decisions.artifacts import artifact_path_problem
from contracts.impact.summary import AffectedArtifact
from services.archive.copy import free_bytes_at
from services.archive.fs import Sources
from services.archive.watch import ArchiveStalled, Progress, run_watched

PREVIEW_MAX = 1000
"""Artifacts a dry run looks at; it says when there were more."""
PREVIEW_SECONDS = 5.0
"""How long a dry run spends looking (and, at most, waits on one stalled look): its
reply is awaited for 10 s by default (clients.operator)."""


class _Seen:
    """The findings so far: read by the waiter even when the look stalled."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.copied: list[str] = []
        self.not_copied: list[tuple[str, Skip]] = []

    def add(self, artifact_path: str, skip: Skip | None) -> None:
        if skip is None:
            self.copied.append(artifact_path)
        else:
            self.not_copied.append((artifact_path, skip))

    def preview(self, problem: str | None = None) -> ArchivePreview:
        copied, not_copied = tuple(self.copied), tuple(self.not_copied)
        return ArchivePreview(self.total, len(copied) + len(not_copied), not_copied, copied,
                              problem=problem)


async def preview_archive(artifacts: Sequence[AffectedArtifact], artifacts_root: Path | None,
                          archive_root: Path, limits: ArchiveLimits,
                          sources: type[Sources] = Sources) -> ArchivePreview:
    if artifacts_root is None:
        return ArchivePreview(len(artifacts), 0, archiving_on=False)
    seen = _Seen(len(artifacts))
    deadline = time.monotonic() + PREVIEW_SECONDS

    def look_all(progress: Progress) -> None:
        free, totals = free_bytes_at(archive_root), Totals()
        with sources(artifacts_root) as tree:
            for a in artifacts[:PREVIEW_MAX]:
                if time.monotonic() > deadline:
                    return  # the warning says how many were looked at
                skip = before_looking(artifact_path_problem(a.artifact_path),
                                      root_configured=True, timed_out_before=False,
                                      stall_seconds=limits.stall_seconds)
                if skip is None:
                    progress.step(f"looking at artifact {a.artifact_path!r} (decision "
                                  f"{a.decision_id})")
                    source, fd = tree.open(a.artifact_path)
                    if fd is not None:
                        os.close(fd)
                    skip = judge(source, limits, totals,
                                 None if free is None else free - totals.disk)
                    totals = totals if skip else totals.copied(source)
                seen.add(a.artifact_path, skip)

    try:
        await run_watched(look_all, min(limits.stall_seconds, PREVIEW_SECONDS),
                          name="archive preview")
    except ArchiveStalled as exc:
        return seen.preview(problem=str(exc))
    return seen.preview()
