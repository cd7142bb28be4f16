"""The judge's port: one chat completion asked, its body answered (bootstrap.judge is the
OpenAI-compatible adapter)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class JudgeUnavailable(Exception):
    """The judge gave no answer: a timeout, a connection or HTTP error, an answer too
    large. The message says which, without the API key."""


class ChatJudge(Protocol):
    async def complete(self, messages: Sequence[dict[str, str]]) -> bytes:
        """The body of a successful chat completion; JudgeUnavailable otherwise."""
        ...

    async def close(self) -> None: ...
