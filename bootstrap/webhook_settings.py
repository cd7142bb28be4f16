"""The WEBHOOK_* variables (docs/webhooks.md, Settings), read into the webhooks' limits."""

from __future__ import annotations

import os

from bootstrap.setting_types import env_float, env_int
from contracts.webhooks.policy import Allowlist, WebhookLimits
from services.webhook_secrets import parse_key


def read_webhook_limits() -> WebhookLimits:
    """The limits the environment gives; ValueError naming a bad variable."""
    d = WebhookLimits()
    backoff = os.environ.get("WEBHOOK_BACKOFF")
    try:
        allow = Allowlist.parse(os.environ.get("WEBHOOK_ALLOWED_HOSTS", ""))
    except ValueError as exc:
        raise ValueError(f"WEBHOOK_ALLOWED_HOSTS: {exc}") from None
    limits = WebhookLimits(
        timeout_seconds=env_float("WEBHOOK_TIMEOUT_SECONDS", d.timeout_seconds),
        max_attempts=env_int("WEBHOOK_MAX_ATTEMPTS", d.max_attempts),
        backoff=tuple(float(x) for x in backoff.split(",") if x.strip()) if backoff
        else d.backoff,
        max_age_seconds=env_float("WEBHOOK_MAX_AGE_SECONDS", d.max_age_seconds),
        per_endpoint=env_int("WEBHOOK_PER_ENDPOINT", d.per_endpoint),
        in_flight=env_int("WEBHOOK_IN_FLIGHT", d.in_flight),
        response_max_bytes=env_int("WEBHOOK_RESPONSE_MAX_BYTES", d.response_max_bytes),
        allow=allow)
    if min(limits.timeout_seconds, limits.max_attempts, limits.per_endpoint,
           limits.in_flight) <= 0 or not limits.backoff:
        raise ValueError("WEBHOOK_TIMEOUT_SECONDS, _MAX_ATTEMPTS, _PER_ENDPOINT and "
                         "_IN_FLIGHT must be positive and WEBHOOK_BACKOFF not empty")
    return limits


def read_webhook_key() -> str | None:
    """WEBHOOK_SECRET_KEY, checked (32 bytes of base64) but kept as given."""
    raw = os.environ.get("WEBHOOK_SECRET_KEY") or None
    parse_key(raw)
    return raw
