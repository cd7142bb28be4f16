"""The judge's settings: an OpenAI-compatible chat endpoint that rules on invariants
written only in words (bootstrap.judge, services.judging). Off unless JUDGE_URL is set."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bootstrap.setting_types import env_float, env_int

__all__ = ["JudgeSettings", "judge_from_env"]


@dataclass(frozen=True)
class JudgeSettings:
    url: str | None = None
    """JUDGE_URL: the endpoint's base URL (`/v1/chat/completions` is appended unless the
    URL already ends with it); unset: no judge, word-only invariants stay reported by
    agents."""
    model: str = "judge"
    """JUDGE_MODEL: the `model` of each request."""
    api_key_env: str = "JUDGE_API_KEY"
    """JUDGE_API_KEY_ENV: the name of the variable that holds the API key (sent as a
    bearer token; the key itself is never a setting, never logged)."""
    timeout_seconds: float = 20.0
    """JUDGE_TIMEOUT_SECONDS: one request's whole budget; past it the decision is held."""
    max_tokens: int = 300
    """JUDGE_MAX_TOKENS: the answer's bound, asked of the endpoint."""
    concurrency: int = 4
    """JUDGE_CONCURRENCY: requests in flight at once (per worker)."""
    poll_seconds: float = 0.5
    """JUDGE_POLL_SECONDS: how often an idle worker looks for decisions awaiting it."""
    max_attempts: int = 3
    """JUDGE_MAX_ATTEMPTS: claims of one decision before it is held for a person (a
    worker died while asking, every time)."""

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @property
    def endpoint(self) -> str:
        base = (self.url or "").rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/v1/chat/completions"

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


def judge_from_env() -> JudgeSettings:
    d = JudgeSettings()
    return JudgeSettings(
        url=os.environ.get("JUDGE_URL") or None,
        model=os.environ.get("JUDGE_MODEL") or d.model,
        api_key_env=os.environ.get("JUDGE_API_KEY_ENV") or d.api_key_env,
        timeout_seconds=env_float("JUDGE_TIMEOUT_SECONDS", d.timeout_seconds),
        max_tokens=env_int("JUDGE_MAX_TOKENS", d.max_tokens),
        concurrency=max(1, env_int("JUDGE_CONCURRENCY", d.concurrency)),
        poll_seconds=env_float("JUDGE_POLL_SECONDS", d.poll_seconds),
        max_attempts=max(1, env_int("JUDGE_MAX_ATTEMPTS", d.max_attempts)))
