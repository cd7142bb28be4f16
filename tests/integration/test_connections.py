"""Connections as an operator meets them: servers missing at start, outages while running,
and the health endpoint a supervisor polls. Real servers, stopped and restarted on the
same port and data dir as a crash and a restart would."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from clients import CorrectionClient, DecisionRecorder, NatsUnreachable
from deploy.embedded import (
    ManagedServer,
    _binary,
    die_with_parent,
    free_port,
    start_mongo,
    start_nats,
)
from store.database import Document
from tests.conftest import ROOT, Workers, start_cost, worker_env
from tests.factories import plan_tree
from tests.integration.wire import events, publish_all, wait_for_count

PASSWORD = "hunter2-s3cret"


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port nothing can listen on while the test runs: bound here, never listened on,
    so a connection is refused at once. (A port merely found free can be taken by a
    server another test starts meanwhile, and a connection then hangs instead.)"""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def _run_workers(args: list[str], env: dict[str, str]) -> tuple[int, str, str, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.e2e
@pytest.mark.parametrize("entry", [["-m", "workers"], ["-m", "cli.main", "workers"]])
def test_unreachable_nats_exits_fast_with_one_line_naming_nats_url(
        mongo_uri: str, db_name: str, entry: list[str], refused_port: int) -> None:
    port = refused_port
    env = worker_env(f"nats://agent:{PASSWORD}@127.0.0.1:{port}", mongo_uri, db_name,
                     CONNECT_TIMEOUT_SECONDS="1")
    code, out, err, took = _run_workers(entry, env)
    assert code == 1, (out, err)
    assert took < 1 + 3 + 2 * start_cost(env), took  # the deadline plus the start
    assert _error_lines(err) == [
        f"error: cannot reach NATS at nats://agent:***@127.0.0.1:{port} (NATS_URL): "
        "connection refused"], err
    assert "Traceback" not in out + err
    assert PASSWORD not in out + err


@pytest.mark.e2e
@pytest.mark.parametrize("entry", [["-m", "workers"], ["-m", "cli.main", "workers"]])
def test_unreachable_mongodb_exits_fast_with_one_line_naming_mongodb_uri(
        nats_server: ManagedServer, entry: list[str], refused_port: int) -> None:
    port = refused_port
    uri = f"mongodb://ledger:{PASSWORD}@127.0.0.1:{port}/?directConnection=true"
    env = worker_env(nats_server.url, uri, "unused", CONNECT_TIMEOUT_SECONDS="1")
    code, out, err, took = _run_workers(entry, env)
    assert code == 1, (out, err)
    assert took < 1 + 3 + 2 * start_cost(env), took
    assert _error_lines(err) == [
        f"error: cannot reach MongoDB at mongodb://ledger:***@127.0.0.1:{port}/"
        "?directConnection=true (MONGODB_URI): connection refused"], err
    assert "Traceback" not in out + err
    assert PASSWORD not in out + err


@pytest.mark.e2e
def test_a_wrong_nats_password_fails_at_once_without_showing_it(
        mongo_uri: str, db_name: str, tmp_path: Path) -> None:

    port = free_port()
    server = subprocess.Popen([_binary("nats-server"), "-a", "127.0.0.1", "-p", str(port),
                               "--user", "agent", "--pass", "the-right-one"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=die_with_parent)
    try:
        _wait_listening(port)
        env = worker_env(f"nats://agent:{PASSWORD}@127.0.0.1:{port}", mongo_uri, db_name,
                         CONNECT_TIMEOUT_SECONDS="30")
        code, out, err, took = _run_workers(["-m", "workers"], env)
        start = start_cost(env)
    finally:
        server.kill()
        server.wait()
    assert code == 1
    # Refused credentials are not retried until the (30 s) deadline.
    assert took < 3 + 2 * start, took
    assert _error_lines(err) == [f"error: cannot reach NATS at nats://agent:***@127.0.0.1:{port} "
                                 "(NATS_URL): authorization violation"], err
    assert PASSWORD not in out + err


def _wait_listening(port: int) -> None:

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


@pytest.mark.e2e
def test_a_taken_health_port_is_one_line_naming_health_addr(
        nats_server: ManagedServer, mongo_uri: str, db_name: str) -> None:

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        addr = f"127.0.0.1:{taken.getsockname()[1]}"
        env = worker_env(nats_server.url, mongo_uri, db_name, HEALTH_ADDR=addr)
        code, _, err, _ = _run_workers(["-m", "workers"], env)
    assert code == 1
    assert _error_lines(err) == [f"error: cannot listen on {addr} (HEALTH_ADDR): "
                                 "address already in use"], err


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


async def wait_for_status(url: str, status: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: tuple[int, dict[str, Any]] | None = None
    while time.monotonic() < deadline:
        last = await asyncio.to_thread(_get, url)
        if last[0] == status:
            return last[1]
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} did not answer {status} within {timeout}s; last: {last}")


class Outage:
    """A NATS server the test may stop and start again on the same port and store."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.server: ManagedServer | None = start_nats(data_dir, port=self.port)
        self.url = self.server.url

    def stop(self) -> None:
        assert self.server is not None
        self.server.stop()
        self.server = None

    def start(self) -> None:
        self.server = start_nats(self.data_dir, port=self.port)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


@pytest.fixture
def nats_outage(tmp_path: Path) -> Iterator[Outage]:
    outage = Outage(tmp_path / "nats-data")
    try:
        yield outage
    finally:
        outage.close()


async def _recorded_once(nats_url: str, db: AsyncDatabase[Document],
                         decisions: list[dict[str, Any]]) -> None:
    """Every decision stored once and announced once on decisions.persisted.*."""
    ids = {d["decision_id"] for d in decisions}
    assert await wait_for_count(db, "decisions", len(ids), timeout=90,
                                query={"_id": {"$in": list(ids)}}) == len(ids)
    assert await db.dead_letters.count_documents({}) == 0
    # An event whose publish failed in the outage (after its decision was written) comes
    # with the redelivery of its message, an ack wait after the server is back.
    persisted: list[str] = []
    deadline = time.monotonic() + 90
    nc = await nats.connect(nats_url)
    try:
        while len(persisted) < len(ids) and time.monotonic() < deadline:
            persisted = [e[1]["decision_id"]
                         for e in await events(nc, "decisions.persisted.>", settle=0.5)]
    finally:
        await nc.close()
    assert sorted(persisted) == sorted(ids)


@pytest.fixture
async def health_workers(nats_outage: Outage, mongo_uri: str, db: AsyncDatabase[Document],
                         db_name: str, tmp_path: Path) -> AsyncIterator[tuple[Workers, str]]:
    port = free_port()
    env = worker_env(nats_outage.url, mongo_uri, db_name, HEALTH_ADDR=f"127.0.0.1:{port}",
                     NATS_RECONNECT_WAIT_SECONDS="0.05", MONGO_PING_INTERVAL_SECONDS="0.5")
    w = Workers(env, tmp_path / "workers.log")
    await w.start(nats_outage.url)
    try:
        yield w, f"http://127.0.0.1:{port}"
    finally:
        w.stop()


@pytest.mark.e2e
async def test_readyz_follows_a_nats_outage_longer_than_60_reconnect_attempts(
        health_workers: tuple[Workers, str], nats_outage: Outage,
        db: AsyncDatabase[Document]) -> None:
    """nats-py's default gives up after 60 attempts; the worker must not. At 0.05 s between
    attempts a 5 s outage is about 100 of them."""
    w, base = health_workers
    assert await wait_for_status(f"{base}/healthz", 200, 5) == {"status": "alive"}
    body = await wait_for_status(f"{base}/readyz", 200, 10)
    assert body["checks"] == {"nats": "ok", "mongodb": "ok", "consumers": "ok"}

    before, after = plan_tree(15, seed=1), plan_tree(15, seed=2)
    nc = await nats.connect(nats_outage.url)
    await publish_all(nc.jetstream(), before)
    await nc.close()
    nats_outage.stop()
    body = await wait_for_status(f"{base}/readyz", 503, 10)
    assert body["checks"]["nats"].startswith("disconnected; reconnecting"), body
    assert body["checks"]["mongodb"] == "ok"
    await asyncio.sleep(5)
    assert w.alive
    assert (await asyncio.to_thread(_get, f"{base}/healthz"))[0] == 200
    nats_outage.start()
    await wait_for_status(f"{base}/readyz", 200, 15)

    nc = await nats.connect(nats_outage.url)
    await publish_all(nc.jetstream(), after)
    await nc.close()
    await _recorded_once(nats_outage.url, db, before + after)
    attempts = re.findall(r"reconnected after [\d.]+ s and (\d+) failed attempts", w.log())
    assert attempts and int(attempts[-1]) > 60, w.log()[-3000:]


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_two_minute_nats_outage_at_default_settings_ends_reconnected(
        nats_outage: Outage, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        tmp_path: Path) -> None:
    """The NATS outage as it was first reported (ADR 0026): default reconnect settings, 130 s down,
    decisions in flight when it starts."""
    w = Workers(worker_env(nats_outage.url, mongo_uri, db_name), tmp_path / "workers.log")
    await w.start(nats_outage.url)
    try:
        before, in_flight, after = plan_tree(20, seed=3), plan_tree(200, seed=4), plan_tree(
            20, seed=5)
        nc = await nats.connect(nats_outage.url)
        await publish_all(nc.jetstream(), before)
        assert await wait_for_count(db, "decisions", len(before), timeout=30) == len(before)
        await publish_all(nc.jetstream(), in_flight)
        await nc.close()
        nats_outage.stop()
        await asyncio.sleep(130)
        assert w.alive
        nats_outage.start()
        nc = await nats.connect(nats_outage.url)
        await publish_all(nc.jetstream(), after)
        await nc.close()
        await _recorded_once(nats_outage.url, db, before + in_flight + after)
        assert "reconnected after" in w.log()
    finally:
        w.stop()


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_mongodb_outage_ends_with_every_valid_message_recorded_once(
        nats_server: ManagedServer, tmp_path: Path, db_name: str) -> None:
    """A private MongoDB server (the session's must not go down), killed and restarted on
    the same port and data dir while decisions keep arriving."""
    mongo_dir, port = tmp_path / "mongo-data", free_port()
    mongo = start_mongo(mongo_dir, port=port)
    health = free_port()
    env = worker_env(nats_server.url, mongo.url, db_name, HEALTH_ADDR=f"127.0.0.1:{health}",
                     MONGO_PING_INTERVAL_SECONDS="0.5", RECORDER_PARENT_WAIT_SECONDS="60")
    w = Workers(env, tmp_path / "workers.log")
    client: AsyncMongoClient[Document] = AsyncMongoClient(mongo.url, tz_aware=True)
    try:
        await w.start(nats_server.url)
        db = client[db_name]
        before, during, after = plan_tree(20, seed=6), plan_tree(50, seed=7), plan_tree(
            20, seed=8)
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await publish_all(js, before)
        assert await wait_for_count(db, "decisions", len(before), timeout=30) == len(before)

        mongo.stop()
        body = await wait_for_status(f"http://127.0.0.1:{health}/readyz", 503, 10)
        assert body["checks"]["mongodb"] != "ok" and body["checks"]["nats"] == "ok", body
        await publish_all(js, during)  # JetStream takes them; the recorder cannot write
        # Longer than the driver's 30 s server selection: writes fail, not merely wait.
        await asyncio.sleep(35)
        assert w.alive
        mongo = start_mongo(mongo_dir, port=port)
        try:
            await wait_for_status(f"http://127.0.0.1:{health}/readyz", 200, 30)
        except AssertionError as exc:
            raise AssertionError(_outage_diagnosis(mongo, port, w)) from exc
        await publish_all(js, after)
        await nc.close()
        await _recorded_once(nats_server.url, db, before + during + after)
        assert "MongoDB at" in w.log() and "answers again" in w.log()
    finally:
        w.stop()
        await client.close()
        mongo.stop()
        os.sync()


def _outage_diagnosis(mongo: ManagedServer, port: int, w: Workers) -> str:
    """What a readiness that never came back leaves to read: the restarted server's state
    and log, and the worker's last lines (the test's temp dir is gone by the time CI shows
    the failure)."""
    state = "running" if mongo.process.poll() is None else f"exited {mongo.process.returncode}"
    with socket.socket() as probe:
        probe.settimeout(1)
        listening = probe.connect_ex(("127.0.0.1", port))
    log = mongo.log_path
    server_log = log.read_text(errors="replace")[-1500:] if log.exists() else ""
    return (f"readiness did not come back; restarted MongoDB {state}, connect_ex={listening}\n"
            f"--- its log ---\n{server_log}\n--- workers ---\n{w.log()[-3000:]}")


@pytest.mark.e2e
async def test_clients_connect_within_their_timeout_or_say_why(
        nats_server: ManagedServer, refused_port: int) -> None:

    url = f"nats://agent:{PASSWORD}@127.0.0.1:{refused_port}"
    started = time.monotonic()
    with pytest.raises(NatsUnreachable) as caught:
        await DecisionRecorder.connect(url, connect_timeout=1.5)
    assert time.monotonic() - started < 5
    assert str(caught.value) == (f"cannot reach NATS at {url.replace(PASSWORD, '***')}: "
                                 "connection refused")
    with pytest.raises(NatsUnreachable):
        async with CorrectionClient.connect(url, connect_timeout=0.5):
            pass
    async with DecisionRecorder.connect(nats_server.url, connect_timeout=2) as rec:
        assert rec is not None


@pytest.mark.parametrize("fmt", ["json", "text"])
async def test_worker_logs_have_no_colour_codes_and_json_lines_name_the_worker(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path, fmt: str) -> None:
    w = Workers(worker_env(nats_server.url, mongo_uri, db_name, LOG_FORMAT=fmt),
                tmp_path / "workers.log")
    await w.start(nats_server.url)
    w.stop()
    text = w.log()
    assert "\x1b[" not in text
    assert "FastStream app started" in text
    if fmt == "json":
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        started = next(x for x in lines if "FastStream app started" in x["message"])
        assert started["level"] == "info" and started["worker_id"]
        assert {x.get("worker_id") for x in lines if x.get("worker_id")} == {
            started["worker_id"]}
