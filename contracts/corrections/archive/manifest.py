"""What a revert's archive records about each artifact: manifest.json.

The manifest lists every affected artifact, copied or not; one not copied says why in
the words of contracts.corrections.archive.rules, with its sizes, the limit it met and, when
reading it stayed within the hashing limit, its SHA-256. The correction keeps the
first of those not copied (the diff and the console show them without the archive
volume); the dry run warns beforehand in the same words (contracts.corrections.archive.preview).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pydantic import Field

from contracts.corrections.archive.rules import (
    ArchiveLimits,
    NotCopied,
    NotCopiedArtifact,
    Skip,
    Source,
    SourceKind,
)
from contracts.corrections.revert import ArchiveEntry, RevertWrites


class ManifestLine(ArchiveEntry):
    """One artifact in manifest.json."""

    copied: bool = Field(description="Whether its copy is in the archive folder.")
    reason: NotCopied | None = Field(default=None, description="Why not, when not copied.")
    skipped: str | None = Field(default=None, description="The reason with its particulars.")
    size_bytes: int | None = Field(default=None, description="Apparent size, when looked at.")
    disk_bytes: int | None = Field(default=None, description="Allocated size, when looked at.")
    limit_bytes: int | None = Field(default=None, description="The limit or floor it met.")
    sha256: str | None = Field(default=None, description="Of its content, for one not copied "
                               "for its size while within ARCHIVE_HASH_MAX_BYTES.")

    @classmethod
    def of(cls, entry: ArchiveEntry, skip: Skip | None, source: Source | None = None,
           sha256: str | None = None) -> ManifestLine:
        sizes: dict[str, Any] = {}
        if source is not None and source.kind is SourceKind.REGULAR:
            sizes = {"size_bytes": source.size, "disk_bytes": source.disk}
        if skip is None:
            return cls(**entry.model_dump(), copied=True, **sizes)
        return cls(**entry.model_dump(), copied=False, reason=skip.reason, skipped=skip.text,
                   limit_bytes=skip.limit, sha256=sha256, **sizes)


def manifest_document(writes: RevertWrites, lines: Sequence[ManifestLine],
                      limits: ArchiveLimits) -> dict[str, Any]:
    """The content of manifest.json."""
    copied = sum(1 for line in lines if line.copied)
    return {
        "correction_id": writes.correction_id, "plan_id": writes.plan_id,
        "target_decision_id": writes.target_decision_id,
        "new_decision_id": writes.new_decision.decision_id,
        "superseded_ids": writes.supersede_ids,
        "child_plans_rolled_back": writes.child_plans_to_roll_back,
        "copied_count": copied, "not_copied_count": len(lines) - copied,
        "limits": asdict(limits),
        "artifacts": [line.model_dump(mode="json", exclude_none=True) for line in lines],
    }


def not_copied(lines: Sequence[ManifestLine]) -> list[NotCopiedArtifact]:
    """Every line without a copy, for the correction's record."""
    return [NotCopiedArtifact(decision_id=line.decision_id, artifact_path=line.artifact_path,
                              reason=line.reason, skipped=line.skipped or line.reason.value)
            for line in lines if line.reason is not None]
