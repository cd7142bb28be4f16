"""Durable by construction, the pure parts: stream profiles, the stream update rules,
the standalone-MongoDB refusal, settings and NATS_URL lists."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from rich.console import Console

from bootstrap.reachability import standalone_refusal
from bootstrap.setting_types import StreamProfile
from bootstrap.settings import Settings
from cli.banner import banner, not_durable
from cli.run import _with_roots
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.urls import nats_servers
from store.database import DURABLE_OPTIONS, connect
from workers.stream_config import (
    MSG_SIZE_HEADROOM,
    PRODUCTION_MAX_AGE,
    PRODUCTION_MAX_BYTES,
    StreamLimits,
    limits_for,
    plan_update,
    stream_config,
)

DEV = StreamLimits.of(StreamProfile.DEVELOPMENT, max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES)
PROD = StreamLimits.of(StreamProfile.PRODUCTION, max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES)


def config(limits: StreamLimits = DEV, **changes: object) -> StreamConfig:
    base = stream_config("DECISIONS", ["decisions.>"], 120.0, "decisions", limits)
    return dataclasses.replace(base, **changes)


def as_server_returns(cfg: StreamConfig) -> StreamConfig:
    """What stream_info gives back for an unlimited stream: -1 and 0, not None."""
    unset = {name: -1 for name in ("max_msgs", "max_consumers", "max_msgs_per_subject")
             if getattr(cfg, name) is None}
    return dataclasses.replace(cfg, **unset)


# --- profiles ---------------------------------------------------------------------------

def test_development_profile_is_todays_behaviour() -> None:
    cfg = config(DEV)
    assert cfg.num_replicas == 1
    assert cfg.discard == DiscardPolicy.OLD
    assert (cfg.max_bytes, cfg.max_age, cfg.max_msg_size) == (-1, 0.0, -1)
    assert not cfg.deny_delete and not cfg.deny_purge
    assert cfg.storage == StorageType.FILE and cfg.retention == RetentionPolicy.LIMITS


def test_production_profile_limits_and_protections() -> None:
    cfg = config(PROD)
    assert cfg.num_replicas == 3
    assert cfg.discard == DiscardPolicy.NEW
    assert cfg.max_bytes == PRODUCTION_MAX_BYTES
    assert cfg.max_age == PRODUCTION_MAX_AGE
    assert cfg.max_msg_size == DEFAULT_MAX_PAYLOAD_BYTES + MSG_SIZE_HEADROOM
    assert cfg.deny_delete and cfg.deny_purge
    assert cfg.as_dict()["max_age"] == int(PRODUCTION_MAX_AGE * 1e9)  # nanoseconds on the wire


def test_settings_override_the_production_defaults() -> None:
    limits = StreamLimits.of(StreamProfile.PRODUCTION, replicas=5, max_bytes=1024,
                             max_age_seconds=60.0, max_payload_bytes=1000)
    assert (limits.replicas, limits.max_bytes, limits.max_age, limits.max_msg_size) == (
        5, 1024, 60.0, 1000 + MSG_SIZE_HEADROOM)
    # Development has no limits to override, but replicas stay settable (a dev cluster).
    dev = StreamLimits.of(StreamProfile.DEVELOPMENT, replicas=3, max_bytes=1024,
                          max_payload_bytes=1000)
    assert (dev.replicas, dev.max_bytes, dev.discard) == (3, -1, DiscardPolicy.OLD)


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STREAM_PROFILE", "STREAM_REPLICAS", "STREAM_MAX_BYTES",
                 "STREAM_MAX_AGE_SECONDS", "ALLOW_STANDALONE_MONGODB"):
        monkeypatch.delenv(name, raising=False)
    plain = Settings.from_env()
    assert plain.stream_profile is StreamProfile.DEVELOPMENT
    assert limits_for(plain).replicas == 1
    assert not plain.allow_standalone_mongodb
    monkeypatch.setenv("STREAM_PROFILE", "Production")
    monkeypatch.setenv("STREAM_MAX_BYTES", "4096")
    monkeypatch.setenv("ALLOW_STANDALONE_MONGODB", "1")
    monkeypatch.setenv("ALLOW_UNAUTHENTICATED", "1")  # no credentials in this test
    prod = Settings.from_env()
    assert limits_for(prod).replicas == 3
    assert limits_for(prod).max_bytes == 4096
    assert prod.allow_standalone_mongodb


@pytest.mark.parametrize(("name", "value"), [("STREAM_PROFILE", "prod"),
                                             ("ALLOW_STANDALONE_MONGODB", "maybe")])
def test_bad_settings_are_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        Settings.from_env()


# --- updating an existing stream --------------------------------------------------------

def test_identical_stream_needs_no_update() -> None:
    for limits in (DEV, PROD):
        update = plan_update(as_server_returns(config(limits)), config(limits))
        assert update.config is None
        assert update.drift == ()


def test_replicas_are_never_lowered() -> None:
    existing = as_server_returns(config(DEV, num_replicas=3))
    update = plan_update(existing, config(DEV))  # a worker without STREAM_REPLICAS
    assert update.config is None
    [drift] = update.drift
    assert (drift.field, drift.existing, drift.wanted, drift.updated) == (
        "num_replicas", 3, 1, False)
    assert "STREAM_REPLICAS" in drift.describe("DECISIONS")


def test_replicas_are_raised() -> None:
    update = plan_update(as_server_returns(config(DEV)), config(DEV, num_replicas=3))
    assert update.config is not None and update.config.num_replicas == 3


def test_operator_limits_and_unowned_fields_survive() -> None:
    existing = as_server_returns(config(
        DEV, max_bytes=10 * 1024**3, max_age=3600.0, max_msgs=1_000_000,
        max_msgs_per_subject=50, compression="s2", metadata={"team": "ops"}))
    update = plan_update(existing, config(PROD))
    assert update.config is not None
    cfg = update.config
    # The operator's limits stay; the one it lacked (max_msg_size) is filled in.
    assert (cfg.max_bytes, cfg.max_age, cfg.max_msgs) == (10 * 1024**3, 3600.0, 1_000_000)
    assert cfg.max_msg_size == PROD.max_msg_size
    # Fields the app does not declare are carried over untouched.
    assert (cfg.max_msgs_per_subject, cfg.compression, cfg.metadata) == (
        50, "s2", {"team": "ops"})
    # Protections are added.
    assert cfg.discard == DiscardPolicy.NEW and cfg.deny_delete and cfg.deny_purge
    kept = {d.field for d in update.drift if not d.updated}
    assert kept == {"max_bytes", "max_age"}  # max_msgs: the profile has no opinion


def test_protections_are_never_removed() -> None:
    existing = as_server_returns(config(PROD))
    update = plan_update(existing, config(DEV))  # a development worker on a production stream
    assert update.config is None
    kept = {d.field: d for d in update.drift}
    # Its limits are no drift either: development wants none, so has no opinion.
    assert set(kept) == {"num_replicas", "discard", "deny_delete", "deny_purge"}
    assert not any(d.updated for d in update.drift)


def test_owned_fields_are_brought_to_the_code() -> None:
    existing = as_server_returns(config(DEV, subjects=["decisions.>", "audit.>"],
                                        duplicate_window=10.0, description="old"))
    wanted = config(DEV, subjects=["decisions.>", "decisions2.>"])
    update = plan_update(existing, wanted)
    assert update.config is not None
    assert update.config.subjects == ["decisions.>", "audit.>", "decisions2.>"]
    assert update.config.duplicate_window == 120.0
    assert update.config.description == "decisions"
    by_field = {(d.field, d.updated) for d in update.drift}
    assert by_field == {("subjects", True), ("subjects", False), ("duplicate_window", True),
                        ("description", True)}


def test_fixed_fields_are_reported_not_changed() -> None:
    existing = as_server_returns(config(DEV, storage=StorageType.MEMORY))
    update = plan_update(existing, config(DEV))
    assert update.config is None
    [drift] = update.drift
    assert drift.field == "storage" and not drift.updated


# --- MongoDB ----------------------------------------------------------------------------

def test_clients_are_made_durable_whatever_the_uri_says() -> None:
    client = connect("mongodb://127.0.0.1:1/?w=1&journal=false&readConcernLevel=local",
                     serverSelectionTimeoutMS=100)
    try:
        assert client.write_concern.document == {"w": "majority", "j": True}
        assert client.read_concern.level == "majority"
        assert client.options.retry_writes and client.options.retry_reads
        assert DURABLE_OPTIONS["w"] == "majority"
    finally:
        # Never connected: nothing to close but the (unstarted) topology.
        asyncio.run(client.close())


def test_standalone_server_is_refused_without_the_flag() -> None:
    uri = "mongodb://app:s3cret@db.example:27017/?directConnection=true"
    refusal = standalone_refusal(None, uri, allow_standalone=False)
    assert refusal is not None
    line = str(refusal)
    assert "\n" not in line
    assert "s3cret" not in line and "app:***@db.example" in line
    assert "ALLOW_STANDALONE_MONGODB=1" in line and "MONGODB_URI" in line
    assert standalone_refusal(None, uri, allow_standalone=True) is None
    assert standalone_refusal("rs0", uri, allow_standalone=False) is None


# --- NATS_URL ---------------------------------------------------------------------------

def test_nats_url_may_list_servers() -> None:
    assert nats_servers("nats://a:4222") == ["nats://a:4222"]
    assert nats_servers("nats://a:4222, nats://b:4223,nats://c:4224,") == [
        "nats://a:4222", "nats://b:4223", "nats://c:4224"]


# --- agents up ----------------------------------------------------------------------------

def test_up_banner_says_what_is_not_durable() -> None:

    dev = dataclasses.replace(Settings(), allow_standalone_mongodb=True)
    lines = not_durable(dev, {"nats", "mongo"})
    assert len(lines) == 2
    assert "one NATS node without sync_interval: always" in lines[0]
    assert "streams R1, no limits, discard old" in lines[0]
    assert "one MongoDB node" in lines[1] and "ALLOW_STANDALONE_MONGODB=1" in lines[1]
    # Servers from the environment, production streams: nothing to confess.
    prod = Settings(stream_profile=StreamProfile.PRODUCTION)
    assert not_durable(prod, set()) == []


def test_up_banner_says_where_artifacts_are_archived_from_or_that_archiving_is_off(
        tmp_path: Path) -> None:


    def shown(settings: Settings) -> str:
        out = Console(record=True, width=250)
        out.print(banner(settings, tmp_path, [], {}))
        return " ".join(out.export_text().split())

    off = shown(_with_roots(Settings(), tmp_path / "data", None))
    assert "archiving off ARTIFACTS_ROOT is unset: a revert's archive lists the artifacts in " \
        "its manifest, copies none (--artifacts-root DIR" in off
    on = _with_roots(Settings(), tmp_path / "data", tmp_path / "work")
    assert on.artifacts_root == tmp_path / "work"
    assert on.archive_root == tmp_path / "data" / "archive"
    assert f"artifacts {tmp_path / 'work'} (ARTIFACTS_ROOT: agents write here" in shown(on)
    # The environment wins over the option.
    kept = _with_roots(Settings(artifacts_root=tmp_path / "env"), tmp_path / "data",
                       tmp_path / "work")
    assert kept.artifacts_root == tmp_path / "env"
