"""The dry run's words about a revert's archive: what would be copied and what not.

The archive service looks at the artifacts as a revert would (contracts.corrections.archive.rules
decides), so the warning says what the manifest will say, in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts.corrections.archive.rules import NotCopied, Skip

LISTED_IN_WARNING = 5
"""Artifacts a dry-run warning names before it says 'and N more'."""


@dataclass(frozen=True)
class ArchivePreview:
    """What the archive would do with a revert's artifacts, from a look at them now."""

    total: int
    """Artifacts of the affected decisions."""
    inspected: int
    """How many of them were looked at (the first ones, in manifest order)."""
    not_copied: tuple[tuple[str, Skip], ...] = ()
    """(artifact_path, why) of each inspected one that would not be copied."""
    copied: tuple[str, ...] = ()
    """artifact_path of each inspected one that would be copied."""
    archiving_on: bool = True
    """False when ARTIFACTS_ROOT is unset on the worker: manifests only."""
    problem: str | None = None
    """Why the look stopped early (it stalled), if it did."""


def _listing(items: Sequence[str]) -> str:
    shown = "; ".join(items[:LISTED_IN_WARNING])
    more = len(items) - LISTED_IN_WARNING
    return shown + (f" and {more} more" if more > 0 else "")


def archive_warnings(p: ArchivePreview) -> list[str]:
    """The dry run's warnings about the archive, in the manifest's words."""
    if p.total == 0:
        return []
    if not p.archiving_on:
        off = Skip(NotCopied.NO_ARTIFACTS_ROOT, "ARTIFACTS_ROOT is unset")
        return [f"Archiving is off on this worker ({off.text}): {p.total} artifact(s) would "
                "be listed in the manifest, none copied."]
    warnings = []
    if p.copied:
        warnings.append(f"{len(p.copied)} artifact(s) would be archived: "
                        f"{_listing(p.copied).replace('; ', ', ')}.")
    if p.not_copied:
        warnings.append(f"{len(p.not_copied)} artifact(s) would not be copied: "
                        f"{_listing([f'{path} ({skip.text})' for path, skip in p.not_copied])}.")
    if p.problem is not None:
        warnings.append(f"The artifacts could not all be inspected: {p.problem}; applying "
                        "would end an attempt FAILED the same way.")
    elif p.inspected < p.total:
        warnings.append(f"Only the first {p.inspected} of {p.total} artifacts were inspected; "
                        "the manifest will say what became of the others.")
    return warnings
