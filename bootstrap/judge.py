"""The judge adapter: an OpenAI-compatible `/v1/chat/completions` endpoint over httpx.

One POST per question, JSON mode asked (`response_format`), temperature 0, the answer's
length bounded (`max_tokens`) and the whole request bounded by JUDGE_TIMEOUT_SECONDS;
at most JUDGE_CONCURRENCY requests in flight. The API key is read from the variable
JUDGE_API_KEY_ENV names and sent as a bearer token; no message carries it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx

from bootstrap.judge_settings import JudgeSettings
from contracts.invariants.judge import ANSWER_BYTES
from services.ports.judge import JudgeUnavailable

__all__ = ["OpenAIChatJudge"]


class OpenAIChatJudge:
    def __init__(self, settings: JudgeSettings) -> None:
        self._settings = settings
        self._slots = asyncio.Semaphore(settings.concurrency)
        key = settings.api_key()
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.timeout_seconds),
            headers={"Authorization": f"Bearer {key}"} if key else {})

    async def complete(self, messages: Sequence[dict[str, str]]) -> bytes:
        body = {"model": self._settings.model, "messages": list(messages),
                "max_tokens": self._settings.max_tokens, "temperature": 0,
                "response_format": {"type": "json_object"}}
        async with self._slots:
            try:
                return await asyncio.wait_for(self._post(body), self._settings.timeout_seconds)
            except TimeoutError:
                raise JudgeUnavailable(
                    f"no answer within {self._settings.timeout_seconds:g}s") from None
            except httpx.HTTPError as exc:
                raise JudgeUnavailable(f"{type(exc).__name__}: {str(exc)[:200]}") from None

    async def _post(self, body: dict[str, object]) -> bytes:
        async with self._client.stream("POST", self._settings.endpoint, json=body) as r:
            if r.status_code != 200:
                raise JudgeUnavailable(f"HTTP {r.status_code}")
            data = bytearray()
            async for chunk in r.aiter_bytes():
                data += chunk
                if len(data) > ANSWER_BYTES:
                    raise JudgeUnavailable(f"an answer over {ANSWER_BYTES} bytes")
            return bytes(data)

    async def close(self) -> None:
        await self._client.aclose()
