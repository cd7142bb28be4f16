"""Durable by construction, against the real servers: streams are never clobbered, the
production profile is enforced by nats-server, a full stream ends a client's publish
in PublishFailed at once, and the workers run with durable MongoDB settings."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest
from nats.js.api import DiscardPolicy
from nats.js.errors import ServerError
from pymongo import AsyncMongoClient

from bootstrap.setting_types import StreamProfile
from clients._publish import PublishFailed
from clients.recorder import DecisionRecorder
from contracts.decisions.subjects import DECISIONS_STREAM
from deploy.embedded import ManagedServer
from store.database import Document, replica_set_name
from store.transactions import run_in_transaction
from tests.conftest import ROOT, Workers, worker_env
from workers.stream_config import StreamLimits
from workers.streams import StreamRefused, ensure_streams, stream_configs

WINDOW = "the agent's context window"


async def test_existing_streams_keep_what_the_operator_set(
        nc: nats.NATS, caplog: pytest.LogCaptureFixture) -> None:
    js = nc.jetstream()
    assert await ensure_streams(js) == []  # created
    info = await js.stream_info(DECISIONS_STREAM)
    # An operator tunes the stream, and an old worker left a short duplicate window.
    await js.update_stream(dataclasses.replace(
        info.config, max_bytes=512 * 1024**2, max_msgs_per_subject=10_000,
        duplicate_window=10.0, metadata={"owner": "ops"}))

    with caplog.at_level(logging.WARNING, logger="workers.streams"):
        drift = await ensure_streams(js)  # the next worker start

    after = (await js.stream_info(DECISIONS_STREAM)).config
    assert after.max_bytes == 512 * 1024**2
    assert after.max_msgs_per_subject == 10_000
    assert (after.metadata or {}).get("owner") == "ops"
    assert after.duplicate_window == pytest.approx(120.0)  # the app's own field, restored
    assert [(d.field, d.updated) for d in drift] == [("duplicate_window", True)]
    assert "stream DECISIONS: duplicate_window is 10.0" in caplog.text
    # A third start finds nothing to change and says nothing.
    caplog.clear()
    assert await ensure_streams(js) == []
    assert caplog.text == ""


async def test_production_profile_is_enforced_by_the_server(nc: nats.NATS) -> None:
    js = nc.jetstream()
    # A production stream on one node (replicas=1 here), small enough to fill.
    limits = StreamLimits.of(StreamProfile.PRODUCTION, replicas=1, max_bytes=64 * 1024,
                             max_payload_bytes=4096)
    await ensure_streams(js, limits)
    info = await js.stream_info(DECISIONS_STREAM)
    assert info.config.discard == DiscardPolicy.NEW
    assert info.config.max_msg_size == limits.max_msg_size
    assert info.config.deny_purge and info.config.deny_delete

    with pytest.raises(ServerError, match="purge not permitted"):
        await js.purge_stream(DECISIONS_STREAM)
    rec = DecisionRecorder(nc, owns_connection=False)
    first = await rec.root("fill the stream", context=WINDOW)
    with pytest.raises(ServerError, match="message delete not permitted"):
        await js.delete_msg(DECISIONS_STREAM, 1)
    # Nor can a development worker take the protections off again.
    await ensure_streams(js)
    again = (await js.stream_info(DECISIONS_STREAM)).config
    assert again.deny_purge and again.discard == DiscardPolicy.NEW

    # Too large for the stream: refused at once, with the reason.
    with pytest.raises(PublishFailed, match="message size exceeds maximum") as big:
        await rec.root("x" * (limits.max_msg_size + 1), context=WINDOW)
    assert big.value.attempts == 1

    # Fill it: discard new refuses the next publish, and the client says so at once
    # instead of retrying for 15 s. Nothing already stored was dropped.
    started = time.monotonic()
    with pytest.raises(PublishFailed, match="maximum bytes exceeded") as full:
        for i in range(1000):
            await rec.root(f"decision {i} " + "y" * 1000, context=WINDOW)
    assert full.value.attempts == 1
    assert full.value.refused is not None and "stream is full" in str(full.value)
    assert time.monotonic() - started < 10
    state = (await js.stream_info(DECISIONS_STREAM)).state
    assert state.first_seq == 1  # the first message is still there
    assert state.bytes <= 64 * 1024
    assert first.decision_id


async def test_a_stream_the_server_cannot_make_is_one_clear_error(nc: nats.NATS) -> None:
    limits = StreamLimits.of(StreamProfile.PRODUCTION, max_payload_bytes=4096)  # R3
    with pytest.raises(StreamRefused) as refused:
        await ensure_streams(nc.jetstream(), limits)
    line = str(refused.value)
    assert "stream DECISIONS (num_replicas 3" in line
    assert "replicas > 1 not supported in non-clustered mode" in line
    assert "STREAM_REPLICAS" in line and "\n" not in line


def test_stream_configs_default_to_development() -> None:
    for config in stream_configs():
        assert config.num_replicas == 1 and config.discard == DiscardPolicy.OLD


async def test_secantusdb_takes_every_durable_setting(
        mongo_client: AsyncMongoClient[Document], db_name: str) -> None:
    """The test client is made by store.database.connect: majority/journaled writes,
    majority reads, and a snapshot transaction with a majority commit all succeed."""
    assert await replica_set_name(mongo_client) is not None  # SecantusDB says "secantus"
    coll = mongo_client[db_name]["durability"]
    await coll.insert_one({"_id": "a"})
    assert await coll.find_one({"_id": "a"}) == {"_id": "a"}

    async def move(session: object) -> int:
        await coll.insert_one({"_id": "b"}, session=session)  # type: ignore[arg-type]
        return await coll.count_documents({}, session=session)  # type: ignore[arg-type]

    assert await run_in_transaction(mongo_client, move) == 2


async def test_workers_start_without_the_standalone_flag_on_a_replica_set(
        nats_server: ManagedServer, mongo_uri: str, db_name: str, tmp_path: Path) -> None:
    w = Workers(worker_env(nats_server.url, mongo_uri, db_name, ALLOW_STANDALONE_MONGODB="0"),
                tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        assert w.alive
        assert "not a replica set" not in w.log()
    finally:
        assert w.stop() == 0


@pytest.mark.e2e
def test_production_profile_on_one_node_stops_the_workers_in_one_line(
        nats_server: ManagedServer, mongo_uri: str, db_name: str) -> None:
    env = worker_env(nats_server.url, mongo_uri, db_name, STREAM_PROFILE="production",
                     ALLOW_UNAUTHENTICATED="1")  # the servers here have no users
    proc = subprocess.run([sys.executable, "-m", "workers"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert "nats-server refused stream DECISIONS (num_replicas 3" in errors[0]
    assert "Traceback" not in proc.stdout + proc.stderr
