"""What a decision produced (`ArtifactRef`), and the rule that keeps its path safe to
archive (rule safe_artifact_path)."""

from __future__ import annotations

import re

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from contracts.shared.base import Frozen
from contracts.shared.rules import Rule
from contracts.shared.text import NonEmptyStr

ARTIFACT_PATH_MAX_BYTES = 1024
"""Longest artifact_path accepted (UTF-8 bytes); Linux's PATH_MAX is 4096, ours leaves
room for the archive folder the copy lands in."""
ARTIFACT_COMPONENT_MAX_BYTES = 255
"""Longest component (between slashes): NAME_MAX of every common Linux filesystem."""
STORED = "stored"
"""Validation context key: set when loading what is already recorded (see ArtifactRef)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""NUL and the control characters, searched at C speed (every artifact of every decision)."""


def artifact_path_problem(path: str) -> str | None:
    """Why `path` cannot be archived safely, or None when it can.

    A revert copies each artifact from under ARTIFACTS_ROOT into the archive, so the
    path must stay inside that tree (relative, no '..') and be a name the filesystem
    accepts (no NUL, no control characters, components and total within the limits):
    otherwise the copy could read outside the tree or fail on every attempt.
    """
    if path.startswith(("/", "\\")) or _DRIVE.match(path):
        return "must be relative to ARTIFACTS_ROOT, not absolute"
    if _CONTROL.search(path):
        return "must not contain NUL or control characters"
    size = _utf8_size(path)
    if size > ARTIFACT_PATH_MAX_BYTES:
        return f"is {size} bytes long; at most {ARTIFACT_PATH_MAX_BYTES} are accepted"
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        return "must not contain '..' components"
    # No component is longer than the whole: most paths need no look at each one.
    if size > ARTIFACT_COMPONENT_MAX_BYTES and any(
            _utf8_size(p) > ARTIFACT_COMPONENT_MAX_BYTES for p in parts):
        return f"has a component over {ARTIFACT_COMPONENT_MAX_BYTES} bytes"
    return None


_DRIVE = re.compile(r"[A-Za-z]:")
"""A Windows drive letter at the start (`match` anchors it)."""


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class ArtifactRef(Frozen):
    """Something the decision produced; archived when the decision is reverted."""

    artifact_path: NonEmptyStr = Field(
        description="Path of the artifact, relative to ARTIFACTS_ROOT: no leading '/', no "
        "'..' component, no NUL or control character, components of at most 255 bytes, "
        "at most 1024 bytes in all (rule safe_artifact_path).",
        examples=["src/db/migrations/0042_add_index.sql"],
    )
    artifact_type: NonEmptyStr = Field(
        description="Kind of artifact (file, patch, report, ...).", examples=["file"]
    )

    @field_validator("artifact_path")
    @classmethod
    def _safe_path(cls, value: str, info: ValidationInfo) -> str:
        # Decisions recorded before the rule existed must still load (a revert of them
        # skips the unsafe path in its manifest), so the store reads with STORED set.
        if isinstance(info.context, dict) and info.context.get(STORED):
            return value
        problem = artifact_path_problem(value)
        if problem is not None:
            raise PydanticCustomError(
                Rule.SAFE_ARTIFACT_PATH.value,
                "rule safe_artifact_path: artifact_path {problem}",
                {"problem": problem},
            )
        return value
