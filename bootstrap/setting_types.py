"""The value types settings are made of: choices (enums), an address, a retry budget.

Plain values with their own validation and no I/O, so the settings can be read and
checked before anything is connected, and every layer that takes a setting (the
workers' streams, consumers and logs, the CLI's banner) names the same type.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["LogFormat", "LogLevel", "Retry", "StreamProfile", "parse_addr"]


class StreamProfile(StrEnum):
    """STREAM_PROFILE: how the streams are created (workers.stream_config)."""

    DEVELOPMENT = "development"
    """One replica, no limits, the oldest message dropped first: today's `agents up`."""
    PRODUCTION = "production"
    """Three replicas, size and age limits, `discard: new`, deny delete and purge."""


class LogFormat(StrEnum):
    """LOG_FORMAT (workers.logs)."""

    TEXT = "text"
    JSON = "json"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Retry:
    """One consumer's bounded retries: MaxDeliver, and the delay before each retry."""

    max_deliver: int
    backoff: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.max_deliver < 1 or not self.backoff:
            raise ValueError("a consumer needs max_deliver >= 1 and at least one backoff delay")

    def delay(self, delivered: int) -> float:
        """The nak delay after a failed delivery number `delivered` (1-based)."""
        return self.backoff[min(max(delivered, 1), len(self.backoff)) - 1]

    def consumer_backoff(self, ack_wait: float) -> list[float]:
        """The consumer's BackOff (redelivery after an ack timeout: a worker died or hung).
        JetStream takes its first value as the ack wait, so none is shorter than ack_wait,
        and it must be shorter than MaxDeliver."""
        return [max(ack_wait, b) for b in self.backoff][:max(1, self.max_deliver - 1)]


def parse_addr(addr: str) -> tuple[str, int]:
    """`host:port` (or `:port` for every interface); ValueError names what is wrong."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"HEALTH_ADDR must be host:port, got {addr!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def env_float(name: str, default: float) -> float:
    """The variable as a float, `default` when unset or empty; ValueError when it does
    not parse (the caller names the variable)."""
    raw = os.environ.get(name)
    return float(raw) if raw else default


def env_int(name: str, default: int) -> int:
    """The variable as an int, `default` when unset or empty."""
    raw = os.environ.get(name)
    return int(raw) if raw else default
