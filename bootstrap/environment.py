"""Reading the settings from the environment: each variable parsed, or refused with a
ValueError naming it (the processes turn that into one line and exit 2).
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bootstrap.judge_settings import judge_from_env
from bootstrap.redaction_settings import read_redaction
from bootstrap.retention_settings import read_retention
from bootstrap.setting_types import (
    LogFormat,
    LogLevel,
    StreamProfile,
    env_float,
    env_int,
    parse_addr,
)
from bootstrap.webhook_settings import read_webhook_key, read_webhook_limits
from clients.credentials import NatsCredentials
from contracts.corrections.archive.rules import ArchiveLimits

if TYPE_CHECKING:
    from bootstrap.settings import Settings

__all__ = ["read_settings"]

E = TypeVar("E", bound=StrEnum)


def _env_addr(name: str) -> str | None:
    raw = os.environ.get(name)
    if raw:
        parse_addr(raw)  # refuse a malformed address at start, not at first use
    return raw or None


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


def _env_require_signatures() -> bool:
    """REQUIRE_SIGNATURES, or by default on in the production profile, unless that runs
    as a test rig (ALLOW_UNAUTHENTICATED), and off in development."""
    if os.environ.get("REQUIRE_SIGNATURES", "").strip():
        return _env_bool("REQUIRE_SIGNATURES")
    return _env_profile() is StreamProfile.PRODUCTION and not _env_bool("ALLOW_UNAUTHENTICATED")


def _env_floats(name: str, default: tuple[float, ...]) -> tuple[float, ...]:
    raw = os.environ.get(name)
    return tuple(float(x) for x in raw.split(",") if x.strip()) if raw else default


def _env_archive_limits() -> ArchiveLimits:
    d = ArchiveLimits()
    return ArchiveLimits(
        max_artifact_bytes=env_int("ARCHIVE_MAX_ARTIFACT_BYTES", d.max_artifact_bytes),
        max_artifact_apparent_bytes=env_int("ARCHIVE_MAX_ARTIFACT_APPARENT_BYTES",
                                             d.max_artifact_apparent_bytes),
        max_correction_bytes=env_int("ARCHIVE_MAX_CORRECTION_BYTES", d.max_correction_bytes),
        max_correction_apparent_bytes=env_int("ARCHIVE_MAX_CORRECTION_APPARENT_BYTES",
                                               d.max_correction_apparent_bytes),
        hash_max_bytes=env_int("ARCHIVE_HASH_MAX_BYTES", d.hash_max_bytes),
        min_free_bytes=env_int("ARCHIVE_MIN_FREE_BYTES", d.min_free_bytes),
        stall_seconds=env_float("ARCHIVE_STALL_SECONDS", d.stall_seconds),
    )


def read_settings(kind: type[Settings]) -> Settings:
    """`kind` built from the environment; its defaults where a variable is unset."""
    root = os.environ.get("ARTIFACTS_ROOT")
    return kind(
        nats_url=os.environ.get("NATS_URL", kind.nats_url),
        mongodb_uri=os.environ.get("MONGODB_URI", kind.mongodb_uri),
        mongodb_db=os.environ.get("MONGODB_DB", kind.mongodb_db),
        recorder_batch_size=env_int("RECORDER_BATCH_SIZE", kind.recorder_batch_size),
        recorder_parent_wait_seconds=env_float("RECORDER_PARENT_WAIT_SECONDS",
                                                kind.recorder_parent_wait_seconds),
        recorder_ack_wait_seconds=env_float("RECORDER_ACK_WAIT_SECONDS",
                                             kind.recorder_ack_wait_seconds),
        graceful_timeout=env_float("GRACEFUL_TIMEOUT", kind.graceful_timeout),
        pull_wait_seconds=env_float("PULL_WAIT_SECONDS", kind.pull_wait_seconds),
        max_payload_bytes=env_int("MAX_PAYLOAD_BYTES", kind.max_payload_bytes),
        artifacts_root=Path(root) if root else None,
        archive_root=Path(archive) if (archive := os.environ.get("ARCHIVE_ROOT")) else None,
        archive_limits=_env_archive_limits(),
        corrections_batch_size=env_int("CORRECTIONS_BATCH_SIZE",
                                        kind.corrections_batch_size),
        corrections_ack_wait_seconds=env_float("CORRECTIONS_ACK_WAIT_SECONDS",
                                                kind.corrections_ack_wait_seconds),
        corrections_retry_delay=env_float("CORRECTIONS_RETRY_DELAY",
                                           kind.corrections_retry_delay),
        corrections_lease_seconds=env_float("CORRECTIONS_LEASE_SECONDS",
                                             kind.corrections_lease_seconds),
        corrections_sweep_interval=env_float("CORRECTIONS_SWEEP_INTERVAL",
                                              kind.corrections_sweep_interval),
        worker_lease_seconds=env_float("WORKER_LEASE_SECONDS", kind.worker_lease_seconds),
        recorder_lease_seconds=env_float("RECORDER_LEASE_SECONDS",
                                          kind.recorder_lease_seconds),
        recorder_partitions=env_int("RECORDER_PARTITIONS", kind.recorder_partitions),
        corrections_max_attempts=env_int("CORRECTIONS_MAX_ATTEMPTS",
                                          kind.corrections_max_attempts),
        corrections_max_decisions=env_int("CORRECTIONS_MAX_DECISIONS",
                                           kind.corrections_max_decisions),
        search_scan_max=env_int("SEARCH_SCAN_MAX", kind.search_scan_max),
        bulk_max_matches=env_int("BULK_MAX_MATCHES", kind.bulk_max_matches),
        corrections_cancel_wait_seconds=env_float("CORRECTIONS_CANCEL_WAIT_SECONDS",
                                                   kind.corrections_cancel_wait_seconds),
        outbox_relay_interval=env_float("OUTBOX_RELAY_INTERVAL", kind.outbox_relay_interval),
        outbox_relay_grace=env_float("OUTBOX_RELAY_GRACE", kind.outbox_relay_grace),
        reconciler_batch_size=env_int("RECONCILER_BATCH_SIZE", kind.reconciler_batch_size),
        invariants_batch_size=env_int("INVARIANTS_BATCH_SIZE", kind.invariants_batch_size),
        invariants_ack_wait_seconds=env_float("INVARIANTS_ACK_WAIT_SECONDS",
                                               kind.invariants_ack_wait_seconds),
        invariants_retry_delay=env_float("INVARIANTS_RETRY_DELAY",
                                          kind.invariants_retry_delay),
        connect_timeout_seconds=env_float("CONNECT_TIMEOUT_SECONDS",
                                           kind.connect_timeout_seconds),
        nats_reconnect_wait_seconds=env_float("NATS_RECONNECT_WAIT_SECONDS",
                                               kind.nats_reconnect_wait_seconds),
        mongo_ping_interval_seconds=env_float("MONGO_PING_INTERVAL_SECONDS",
                                               kind.mongo_ping_interval_seconds),
        health_addr=_env_addr("HEALTH_ADDR"),
        consumer_max_deliver=env_int("CONSUMER_MAX_DELIVER", kind.consumer_max_deliver),
        consumer_backoff=_env_floats("CONSUMER_BACKOFF", kind.consumer_backoff),
        allow_standalone_mongodb=_env_bool("ALLOW_STANDALONE_MONGODB"),
        allow_unauthenticated=_env_bool("ALLOW_UNAUTHENTICATED"),
        metrics_sample_seconds=env_float("METRICS_SAMPLE_SECONDS",
                                          kind.metrics_sample_seconds),
        log_format=_env_choice("LOG_FORMAT", LogFormat, kind.log_format),
        log_level=_env_choice("LOG_LEVEL", LogLevel, LogLevel.INFO).value,
        stream_profile=_env_profile(),
        stream_replicas=env_int("STREAM_REPLICAS", 0) or None,
        stream_max_bytes=env_int("STREAM_MAX_BYTES", 0) or None,
        stream_max_age_seconds=env_float("STREAM_MAX_AGE_SECONDS", 0.0) or None,
        nats_credentials=NatsCredentials.from_env(),
        ledger_principals=Path(principals) if (principals := os.environ.get(
            "LEDGER_PRINCIPALS")) else None,
        require_signatures=_env_require_signatures(),
        signature_max_skew_seconds=env_float("SIGNATURE_MAX_SKEW_SECONDS",
                                              kind.signature_max_skew_seconds),
        created_at_max_skew_seconds=env_float("CREATED_AT_MAX_SKEW_SECONDS",
                                               kind.created_at_max_skew_seconds),
        invariant_eval_budget_ms=env_float("INVARIANT_EVAL_BUDGET_MS",
                                            kind.invariant_eval_budget_ms),
        approval_ttl_seconds=env_float("APPROVAL_TTL_SECONDS", kind.approval_ttl_seconds),
        approval_sweep_seconds=env_float("APPROVAL_SWEEP_SECONDS",
                                         kind.approval_sweep_seconds),
        judge=judge_from_env(),
        cloudevents_schema_base=os.environ.get("CLOUDEVENTS_SCHEMA_BASE")
        or kind.cloudevents_schema_base,
        webhooks=read_webhook_limits(), webhook_secret_key=read_webhook_key(),
        redaction=read_redaction(), retention=read_retention(),
    )
