"""The configuration of every process that opens the ledger (the workers, the web
console, the CLI) and of the tests: one record read from the environment.

Values only: reading them touches no server, so a mistyped variable is refused before
anything starts (the names and defaults are in docs/operations.md). How the environment
is read is bootstrap/environment.py's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from bootstrap.environment import read_settings
from bootstrap.judge_settings import JudgeSettings
from bootstrap.required_secrets import require_secrets
from bootstrap.retention_settings import RetentionSettings
from bootstrap.setting_types import LogFormat, Retry, StreamProfile
from clients.credentials import NatsCredentials
from contracts.corrections.archive.rules import ArchiveLimits
from contracts.redaction.rules import Rules
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.cloudevents import DEFAULT_SCHEMA_BASE
from contracts.shared.partitions import MAX_PARTITIONS
from contracts.trust.policy import TrustPolicy
from contracts.trust.principals import load_directory
from contracts.webhooks.policy import WebhookLimits

__all__ = ["Settings"]

MAX_PULL_WAIT_SECONDS = 30.0
"""Longest PULL_WAIT_SECONDS: a stop waits this long for an idle pull at worst."""


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
    recorder_parent_wait_seconds: float = 60.0
    recorder_ack_wait_seconds: float = 5.0
    graceful_timeout: float = 15.0
    pull_wait_seconds: float = 1.0
    """PULL_WAIT_SECONDS: how long an idle pull waits for a first message. A pull returns
    as soon as one arrives, so a longer wait costs no latency; each expiry costs a pull
    request and its answer, and a stopping worker waits for its idle pulls to end (so
    a stop takes up to this long). Test rigs that start and stop workers by the hundred
    shorten it."""
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    """Largest message body a consumer reads; a larger one is dead-lettered unread
    (rule payload_too_large). Why 256 KiB: contracts.shared.bounds."""
    artifacts_root: Path | None = None
    archive_root: Path | None = None
    """Where revert archives go; default the user data dir (`agents up`: <data-dir>/archive).
    Never inside ARTIFACTS_ROOT, the tree agents write to (refused at start)."""
    archive_limits: ArchiveLimits = field(default_factory=ArchiveLimits)
    """ARCHIVE_MAX_* sizes, ARCHIVE_HASH_MAX_BYTES, ARCHIVE_MIN_FREE_BYTES and
    ARCHIVE_STALL_SECONDS (contracts.corrections.archive.rules; docs/corrections.md, Settings)."""
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
    recorder_partitions: int = 1
    """RECORDER_PARTITIONS: in how many partitions decisions are recorded, by plan
    (contracts.shared.partitions): each is recorded by one worker process at a time, and
    the partitions are spread over the live ones (workers.leading). 1 to 32; changing it
    on a running system: docs/operations.md, Partitions."""
    corrections_max_attempts: int = 3
    corrections_max_decisions: int = 10_000
    """Most decisions one correction may touch; beyond it the dry run warns and a revert
    FAILS before writing anything (docs/corrections.md, Limits)."""
    search_scan_max: int = 2000
    """SEARCH_SCAN_MAX: most decisions one page of a search reads (`agents search`, the
    console's Search): past it the page says where to go on (services/search.py)."""
    bulk_max_matches: int = 1000
    """BULK_MAX_MATCHES: most decisions one bulk correction batch may match; a filter that
    matches more is refused whole, before anything is requested (docs/bulk.md)."""
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
    allow_unauthenticated: bool = False
    """ALLOW_UNAUTHENTICATED=1: start the production profile without credentials for
    NATS or MongoDB (test rigs only; otherwise refused at start: bootstrap.required_secrets)."""
    allow_standalone_mongodb: bool = False
    """ALLOW_STANDALONE_MONGODB=1: start against a MongoDB that is not a replica set
    (development only: no failover, and transactions need a replica set anyway)."""
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
    ledger_principals: Path | None = None
    """LEDGER_PRINCIPALS: the principals file (contracts.trust.principals) whose keys the
    workers verify signed messages against; unset: nothing is verified, every message
    is recorded `verified: false` (docs/security.md)."""
    require_signatures: bool = False
    """REQUIRE_SIGNATURES: refuse unsigned messages (rule unsigned). Unset: on in the
    production profile (unless ALLOW_UNAUTHENTICATED), off in development."""
    signature_max_skew_seconds: float = 300.0
    """SIGNATURE_MAX_SKEW_SECONDS: how far Ledger-Signed-At may be from the stream's
    timestamp of the message (rule signed_at_skew)."""
    created_at_max_skew_seconds: float = 300.0
    """CREATED_AT_MAX_SKEW_SECONDS: how far a decision's created_at may be from the
    stream's timestamp of its message (rule created_at_skew)."""
    invariant_eval_budget_ms: float = 20.0
    """INVARIANT_EVAL_BUDGET_MS: CPU milliseconds of check evaluation a recorder batch may
    spend per decision it holds (a batch of 1,000: 20 s); past it the batch's remaining
    evaluations are unevaluated (an error invariant then refuses or holds the decision:
    docs/invariants.md). Typical checks cost 2 µs each, `matches` 0.2 ms."""
    approval_ttl_seconds: float = 3600.0
    """APPROVAL_TTL_SECONDS: how long a decision held for a person's approval waits for a
    verdict; then the approval expires (the agent is told `expired`, the decision stays
    refused, the plan blocked until an operator resolves its violation)."""
    approval_sweep_seconds: float = 5.0
    """APPROVAL_SWEEP_SECONDS: how often each worker looks for approvals past their
    expiry (a verdict after it is refused whether or not the sweep has run)."""
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    """JUDGE_*: the judge of word-only invariants (bootstrap.judge_settings); off by
    default."""
    cloudevents_schema_base: str = DEFAULT_SCHEMA_BASE
    """CLOUDEVENTS_SCHEMA_BASE: the URL docs/schemas/ is published at; every event's
    `ce-dataschema` is it and `<family>.json` (default: the console `agents up` starts)."""
    webhooks: WebhookLimits = field(default_factory=WebhookLimits)
    """WEBHOOK_* (docs/webhooks.md): timeouts, attempts, backoff, concurrency, allowlist."""
    redaction: Rules = field(default_factory=Rules)
    """REDACTION_DETECTORS, REDACTION_PATTERNS: what is redacted from free text before it
    is stored (contracts.redaction; docs/retention.md). Default: every built-in detector."""
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    """RETENTION_*: policies by plan status and age, applied by the workers
    (bootstrap.retention_settings; docs/retention.md)."""
    webhook_secret_key: str | None = field(default=None, repr=False)
    """WEBHOOK_SECRET_KEY: 32 bytes (base64) sealing webhook secrets at rest; unset:
    they are stored as they are, in MongoDB."""

    def __post_init__(self) -> None:
        if not 0 < self.pull_wait_seconds <= MAX_PULL_WAIT_SECONDS:
            raise ValueError(f"PULL_WAIT_SECONDS must be above 0 and at most "
                             f"{MAX_PULL_WAIT_SECONDS:g}, not {self.pull_wait_seconds:g}")
        if not 1 <= self.recorder_partitions <= MAX_PARTITIONS:
            raise ValueError(f"RECORDER_PARTITIONS must be 1 to {MAX_PARTITIONS}, not "
                             f"{self.recorder_partitions}")
        if self.search_scan_max < 1:
            raise ValueError(f"SEARCH_SCAN_MAX must be at least 1, not {self.search_scan_max}")
        if self.bulk_max_matches < 1:
            raise ValueError(f"BULK_MAX_MATCHES must be at least 1, not {self.bulk_max_matches}")
        if self.artifacts_root is None:
            return
        archive, artifacts = self.resolved_archive_root().resolve(), self.artifacts_root.resolve()
        if archive.is_relative_to(artifacts):
            raise ValueError(
                f"ARCHIVE_ROOT {archive} is inside ARTIFACTS_ROOT {artifacts}, the tree agents "
                "write to; set ARCHIVE_ROOT to a folder outside it")

    def trust_policy(self) -> TrustPolicy:
        """What the workers verify signatures against: the principals file read now (a
        bad file is a ValueError of one line naming LEDGER_PRINCIPALS)."""
        directory = None
        if self.ledger_principals is not None:
            try:
                text = self.ledger_principals.read_text()
            except OSError as exc:
                raise ValueError(f"LEDGER_PRINCIPALS={self.ledger_principals}: "
                                 f"{exc.strerror or exc}") from None
            try:
                directory = load_directory(text)
            except ValueError as exc:
                raise ValueError(f"LEDGER_PRINCIPALS={self.ledger_principals}: {exc}") from None
        return TrustPolicy(directory, required=self.require_signatures,
                           max_skew=timedelta(seconds=self.signature_max_skew_seconds))

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
        """The settings the environment gives; ValueError (one line) naming the variable
        for a bad value or, in the production profile, a missing secret."""
        settings = read_settings(cls)
        if settings.stream_profile is StreamProfile.PRODUCTION \
                and not settings.allow_unauthenticated:
            require_secrets(settings.nats_url, settings.nats_credentials, settings.mongodb_uri)
        settings.trust_policy()  # a missing or bad principals file stops the start here
        return settings
