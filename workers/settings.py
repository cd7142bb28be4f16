"""Configuration from the environment: the same variables for `agents up`, `agents workers`
and the tests."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from clients.credentials import NatsCredentials
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from workers.health import parse_addr
from workers.inbound import Retry
from workers.logs import LogFormat
from workers.required_secrets import require_secrets
from workers.stream_config import StreamLimits, StreamProfile


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


def _env_addr(name: str) -> str | None:
    raw = os.environ.get(name)
    if raw:
        parse_addr(raw)  # refuse a malformed address at start, not at first use
    return raw or None


class _LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


E = TypeVar("E", bound=StrEnum)


def _env_choice(name: str, kind: type[E], default: E) -> E:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return kind(raw.strip().lower() if kind is LogFormat else raw.strip().upper())
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected one of "
                         f"{', '.join(k.value for k in kind)}") from None


def _env_bool(name: str) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ValueError(f"{name}={raw!r}: expected 1 or 0")


def _env_profile() -> StreamProfile:
    raw = os.environ.get("STREAM_PROFILE", "").strip().lower() or StreamProfile.DEVELOPMENT
    try:
        return StreamProfile(raw)
    except ValueError:
        raise ValueError(f"STREAM_PROFILE={raw!r}: expected one of "
                         f"{', '.join(p.value for p in StreamProfile)}") from None


def _env_floats(name: str, default: tuple[float, ...]) -> tuple[float, ...]:
    raw = os.environ.get(name)
    return tuple(float(x) for x in raw.split(",") if x.strip()) if raw else default


@dataclass(frozen=True)
class Settings:
    nats_url: str = "nats://127.0.0.1:4222"
    mongodb_uri: str = "mongodb://127.0.0.1:27017/?directConnection=true"
    mongodb_db: str = "decisions"
    recorder_batch_size: int = 1000
    """Most messages the recorder pulls and writes in one transaction. A batch fills only
    under a backlog; there each batch costs a few round trips whatever its size, so 1,000
    recorded ~10-35% more per second than 500 on the 2-core bench machine (README,
    Benchmarks), while a bare insert_many is as fast in either size."""
    recorder_batch_timeout: float = 0.02
    recorder_parent_wait_seconds: float = 60.0
    recorder_ack_wait_seconds: float = 5.0
    graceful_timeout: float = 15.0
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    """Largest message body a consumer reads; a larger one is dead-lettered unread
    (rule payload_too_large). Why 256 KiB: contracts.shared.bounds."""
    artifacts_root: Path | None = None
    archive_root: Path | None = None
    """Where revert archives go; default the user data dir (`agents up`: <data-dir>/archive).
    Never inside ARTIFACTS_ROOT, the tree agents write to (refused at start)."""
    corrections_batch_size: int = 16
    corrections_ack_wait_seconds: float = 5.0
    corrections_retry_delay: float = 1.0
    """Nak delay of a cancel waiting for its request, and of a request whose recording
    failed."""
    corrections_lease_seconds: float = 5.0
    """How long a plan's lease outlives its driver's last renewal, i.e. how soon the recovery
    sweep takes a dead driver's plan over. Renewed every third of it while held."""
    corrections_sweep_interval: float = 1.0
    """How often every worker renews its heartbeat, ends dead workers' transactions and
    looks for unfinished corrections whose driver is gone."""
    worker_lease_seconds: float = 5.0
    """A worker whose heartbeat is older than this is taken for dead: its open
    transactions are ended (store.workers) so they stop blocking the documents they hold."""
    recorder_lease_seconds: float = 5.0
    """One replica records at a time (workers.leading): how long the recorder's lease
    outlives its holder's last renewal, i.e. how soon a standby takes over from a worker
    that died (one that stops gracefully hands it over at once)."""
    corrections_max_attempts: int = 3
    corrections_max_decisions: int = 10_000
    """Most decisions one correction may touch; beyond it the dry run warns and a revert
    FAILS before writing anything (docs/corrections.md, Limits)."""
    corrections_cancel_wait_seconds: float = 5.0
    """How long a cancel naming an unknown correction waits for its request to arrive."""
    outbox_relay_interval: float = 5.0
    outbox_relay_grace: float = 2.0
    """The relay republishes only events older than this, leaving fresh ones to their step."""
    reconciler_batch_size: int = 500
    """Persisted events the reconciliation worker pulls at once (it skips all but roots)."""
    invariants_batch_size: int = 100
    invariants_ack_wait_seconds: float = 5.0
    invariants_retry_delay: float = 1.0
    """Unused since failures are retried with `consumer_backoff` (kept so an existing
    environment still parses)."""
    connect_timeout_seconds: float = 10.0
    """How long a starting worker tries to reach NATS and MongoDB before it exits."""
    nats_reconnect_wait_seconds: float = 2.0
    """Pause between reconnect attempts once running (attempts never stop)."""
    mongo_ping_interval_seconds: float = 5.0
    """How often a running worker pings MongoDB for its readiness."""
    health_addr: str | None = None
    """HEALTH_ADDR `host:port` of the /healthz and /readyz endpoint; unset: none."""
    consumer_max_deliver: int = 20
    """MaxDeliver of every durable consumer: deliveries that may fail before a message is
    dead-lettered (rule max_deliveries). The recorder adds the deliveries its parent wait
    takes."""
    consumer_backoff: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
    """Nak delay after the 1st, 2nd, ... failed delivery (the last repeats): with the
    defaults, 20 deliveries span about an hour of database outage."""
    metrics_sample_seconds: float = 15.0
    """METRICS_SAMPLE_SECONDS: how often the consumer and ledger gauges of /metrics are
    read from NATS and MongoDB (one consumer_info per consumer, three counts)."""
    log_format: LogFormat = LogFormat.TEXT
    """LOG_FORMAT: `text` for a person, `json` (one object per line, with the IDs a line
    is about) for a log pipeline; neither has colour codes (workers.logs)."""
    log_level: str = "INFO"
    """LOG_LEVEL: DEBUG, INFO, WARNING or ERROR."""
    allow_standalone_mongodb: bool = False
    """ALLOW_STANDALONE_MONGODB=1: start against a MongoDB that is not a replica set
    (development only: no failover, and transactions need a replica set anyway)."""
    allow_unauthenticated: bool = False
    """ALLOW_UNAUTHENTICATED=1: start the production profile without credentials for
    NATS or MongoDB (test rigs only; otherwise refused at start: workers.required_secrets)."""
    stream_profile: StreamProfile = StreamProfile.DEVELOPMENT
    """STREAM_PROFILE: `development` (no limits, one replica) or `production` (limits,
    discard new, deny delete/purge, three replicas): workers.stream_config."""
    stream_replicas: int | None = None
    """STREAM_REPLICAS; unset: the profile's (1 in development, 3 in production)."""
    stream_max_bytes: int | None = None
    """STREAM_MAX_BYTES per stream in the production profile; unset: the profile's."""
    stream_max_age_seconds: float | None = None
    """STREAM_MAX_AGE_SECONDS in the production profile; unset: the profile's."""
    nats_credentials: NatsCredentials = field(default_factory=NatsCredentials)
    """NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_NKEY_SEED and NATS_TLS_CA/
    _CERT/_KEY (clients.credentials); a password in NATS_URL works too. MongoDB's user
    and TLS options belong in MONGODB_URI (docs/operations.md, Access control)."""
    crash_at: str | None = None
    """TEST ONLY (CORRECTIONS_CRASH_AT): SIGKILL the worker at this step (docs/corrections.md)."""

    def __post_init__(self) -> None:
        if self.artifacts_root is None:
            return
        archive, artifacts = self.resolved_archive_root().resolve(), self.artifacts_root.resolve()
        if archive.is_relative_to(artifacts):
            raise ValueError(
                f"ARCHIVE_ROOT {archive} is inside ARTIFACTS_ROOT {artifacts}, the tree agents "
                "write to; set ARCHIVE_ROOT to a folder outside it")

    def stream_limits(self) -> StreamLimits:
        """What the streams are created with (workers.stream_config)."""
        return StreamLimits.of(self.stream_profile, replicas=self.stream_replicas,
                               max_bytes=self.stream_max_bytes,
                               max_age_seconds=self.stream_max_age_seconds,
                               max_payload_bytes=self.max_payload_bytes)

    def retry(self, extra_deliveries: int = 0) -> Retry:
        """The bounded retries of a durable consumer (`extra_deliveries` for waits that
        are not failures, e.g. the recorder's parent wait)."""
        return Retry(self.consumer_max_deliver + extra_deliveries, self.consumer_backoff)

    def resolved_archive_root(self) -> Path:
        if self.archive_root is not None:
            return self.archive_root
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(data) / "decision-ledger" / "archive"

    @classmethod
    def from_env(cls) -> Settings:
        """The settings the environment gives; ValueError (one line) for a bad value or,
        in the production profile, a missing secret."""
        settings = cls._read_env()
        if settings.stream_profile is StreamProfile.PRODUCTION \
                and not settings.allow_unauthenticated:
            require_secrets(settings.nats_url, settings.nats_credentials, settings.mongodb_uri)
        return settings

    @classmethod
    def _read_env(cls) -> Settings:
        root = os.environ.get("ARTIFACTS_ROOT")
        return cls(
            nats_url=os.environ.get("NATS_URL", cls.nats_url),
            mongodb_uri=os.environ.get("MONGODB_URI", cls.mongodb_uri),
            mongodb_db=os.environ.get("MONGODB_DB", cls.mongodb_db),
            recorder_batch_size=_env_int("RECORDER_BATCH_SIZE", cls.recorder_batch_size),
            recorder_batch_timeout=_env_float("RECORDER_BATCH_TIMEOUT",
                                              cls.recorder_batch_timeout),
            recorder_parent_wait_seconds=_env_float("RECORDER_PARENT_WAIT_SECONDS",
                                                    cls.recorder_parent_wait_seconds),
            recorder_ack_wait_seconds=_env_float("RECORDER_ACK_WAIT_SECONDS",
                                                 cls.recorder_ack_wait_seconds),
            graceful_timeout=_env_float("GRACEFUL_TIMEOUT", cls.graceful_timeout),
            max_payload_bytes=_env_int("MAX_PAYLOAD_BYTES", cls.max_payload_bytes),
            artifacts_root=Path(root) if root else None,
            archive_root=Path(archive) if (archive := os.environ.get("ARCHIVE_ROOT")) else None,
            corrections_batch_size=_env_int("CORRECTIONS_BATCH_SIZE",
                                            cls.corrections_batch_size),
            corrections_ack_wait_seconds=_env_float("CORRECTIONS_ACK_WAIT_SECONDS",
                                                    cls.corrections_ack_wait_seconds),
            corrections_retry_delay=_env_float("CORRECTIONS_RETRY_DELAY",
                                               cls.corrections_retry_delay),
            corrections_lease_seconds=_env_float("CORRECTIONS_LEASE_SECONDS",
                                                 cls.corrections_lease_seconds),
            corrections_sweep_interval=_env_float("CORRECTIONS_SWEEP_INTERVAL",
                                                  cls.corrections_sweep_interval),
            worker_lease_seconds=_env_float("WORKER_LEASE_SECONDS", cls.worker_lease_seconds),
            recorder_lease_seconds=_env_float("RECORDER_LEASE_SECONDS",
                                              cls.recorder_lease_seconds),
            corrections_max_attempts=_env_int("CORRECTIONS_MAX_ATTEMPTS",
                                              cls.corrections_max_attempts),
            corrections_max_decisions=_env_int("CORRECTIONS_MAX_DECISIONS",
                                               cls.corrections_max_decisions),
            corrections_cancel_wait_seconds=_env_float("CORRECTIONS_CANCEL_WAIT_SECONDS",
                                                       cls.corrections_cancel_wait_seconds),
            outbox_relay_interval=_env_float("OUTBOX_RELAY_INTERVAL", cls.outbox_relay_interval),
            outbox_relay_grace=_env_float("OUTBOX_RELAY_GRACE", cls.outbox_relay_grace),
            reconciler_batch_size=_env_int("RECONCILER_BATCH_SIZE", cls.reconciler_batch_size),
            invariants_batch_size=_env_int("INVARIANTS_BATCH_SIZE", cls.invariants_batch_size),
            invariants_ack_wait_seconds=_env_float("INVARIANTS_ACK_WAIT_SECONDS",
                                                   cls.invariants_ack_wait_seconds),
            invariants_retry_delay=_env_float("INVARIANTS_RETRY_DELAY",
                                              cls.invariants_retry_delay),
            connect_timeout_seconds=_env_float("CONNECT_TIMEOUT_SECONDS",
                                               cls.connect_timeout_seconds),
            nats_reconnect_wait_seconds=_env_float("NATS_RECONNECT_WAIT_SECONDS",
                                                   cls.nats_reconnect_wait_seconds),
            mongo_ping_interval_seconds=_env_float("MONGO_PING_INTERVAL_SECONDS",
                                                   cls.mongo_ping_interval_seconds),
            health_addr=_env_addr("HEALTH_ADDR"),
            consumer_max_deliver=_env_int("CONSUMER_MAX_DELIVER", cls.consumer_max_deliver),
            consumer_backoff=_env_floats("CONSUMER_BACKOFF", cls.consumer_backoff),
            allow_standalone_mongodb=_env_bool("ALLOW_STANDALONE_MONGODB"),
            allow_unauthenticated=_env_bool("ALLOW_UNAUTHENTICATED"),
            metrics_sample_seconds=_env_float("METRICS_SAMPLE_SECONDS",
                                              cls.metrics_sample_seconds),
            log_format=_env_choice("LOG_FORMAT", LogFormat, cls.log_format),
            log_level=_env_choice("LOG_LEVEL", _LogLevel, _LogLevel.INFO).value,
            stream_profile=_env_profile(),
            stream_replicas=_env_int("STREAM_REPLICAS", 0) or None,
            stream_max_bytes=_env_int("STREAM_MAX_BYTES", 0) or None,
            stream_max_age_seconds=_env_float("STREAM_MAX_AGE_SECONDS", 0.0) or None,
            nats_credentials=NatsCredentials.from_env(),
            crash_at=os.environ.get("CORRECTIONS_CRASH_AT") or None,
        )
