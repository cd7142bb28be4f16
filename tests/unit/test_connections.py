"""URL redaction, connection error wording and the health responder (no servers needed:
the responder is exercised over a loopback socket, as a supervisor would call it)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from pymongo.errors import ServerSelectionTimeoutError

from bootstrap.reachability import describe
from bootstrap.setting_types import parse_addr
from contracts.shared.urls import redact
from workers.health import MAX_REQUEST, HealthServer, Readiness

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("url", "shown"), [
    ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
    ("nats://alice:s3cret@nats.example:4222", "nats://alice:***@nats.example:4222"),
    ("nats://t0ken@nats.example:4222", "nats://***@nats.example:4222"),
    ("nats://a:p1@h1:4222,nats://b:p2@h2:4222", "nats://a:***@h1:4222,nats://b:***@h2:4222"),
    ("mongodb://u:p%40ss@h1:27017,h2:27017/db?replicaSet=rs0&w=majority",
     "mongodb://u:***@h1:27017,h2:27017/db?replicaSet=rs0&w=majority"),
    ("mongodb+srv://u:pw@cluster.example/?retryWrites=true",
     "mongodb+srv://u:***@cluster.example/?retryWrites=true"),
    ("mongodb://:onlypass@h", "mongodb://:***@h"),
    ("cannot reach mongodb://u:pw@h:1 (MONGODB_URI)",
     "cannot reach mongodb://u:***@h:1 (MONGODB_URI)"),
])
def test_redact_hides_every_secret_and_nothing_else(url: str, shown: str) -> None:
    assert redact(url) == shown
    for secret in ("s3cret", "t0ken", "p1", "p2", "p%40ss", "onlypass"):
        assert secret not in redact(url)


def test_describe_says_the_cause_in_a_few_words() -> None:
    assert describe(ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)"),
                    10) == "connection refused"
    assert describe(TimeoutError(), 10) == "no answer within 10 s"
    assert describe(None, 2.5) == "no answer within 2.5 s"
    assert describe(socket.gaierror(-2, "Name or service not known"),
                    10) == "name or service not known"
    selection = ServerSelectionTimeoutError(
        "127.0.0.1:1: [Errno 111] Connect call failed ('127.0.0.1', 1) (configured timeouts: "
        "socketTimeoutMS: 20000.0ms, connectTimeoutMS: 20000.0ms), Timeout: 10s, Topology "
        "Description: <TopologyDescription " + "x" * 5000 + ">")
    assert describe(selection, 10) == "connection refused"
    long = describe(RuntimeError("mongodb://u:pw@h " + "y" * 5000), 10)
    assert len(long) <= 200
    assert "pw" not in long


def test_parse_addr() -> None:
    assert parse_addr("127.0.0.1:8081") == ("127.0.0.1", 8081)
    assert parse_addr(":9000") == ("0.0.0.0", 9000)
    assert parse_addr("[::1]:0") == ("::1", 0)
    for bad in ("8081", "host:", "host:http", "h:70000"):
        with pytest.raises(ValueError, match="HEALTH_ADDR"):
            parse_addr(bad)


def test_readiness_names_what_is_not_ready() -> None:
    def broken() -> str | None:
        raise RuntimeError("boom")

    ready, body = Readiness({"nats": lambda: None, "mongodb": lambda: "timed out"}).report()
    assert not ready
    assert body == {"status": "not ready", "checks": {"nats": "ok", "mongodb": "timed out"}}
    assert Readiness({"a": lambda: None}).report()[0]
    ready, body = Readiness({"a": broken}).report()
    assert not ready and body["checks"] == {"a": "check failed: RuntimeError"}


async def _exchange(port: int, request: bytes) -> tuple[int, dict[str, object] | None]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    if not raw:
        return 0, None
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, json.loads(body) if body else None


async def test_health_server_answers_both_paths_and_survives_garbage() -> None:
    state: dict[str, str | None] = {"nats": "disconnected; reconnecting"}
    server = HealthServer(Readiness({"nats": lambda: state["nats"]}))
    _, port = await server.start("127.0.0.1", 0)
    try:
        assert await _exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") == (
            200, {"status": "alive"})
        assert await _exchange(port, b"GET /readyz HTTP/1.1\r\n\r\n") == (
            503, {"status": "not ready", "checks": {"nats": "disconnected; reconnecting"}})
        state["nats"] = None
        assert await _exchange(port, b"GET /readyz?verbose=1 HTTP/1.0\r\n\r\n") == (
            200, {"status": "ready", "checks": {"nats": "ok"}})
        assert (await _exchange(port, b"HEAD /readyz HTTP/1.1\r\n\r\n"))[0] == 200
        assert (await _exchange(port, b"GET /nope HTTP/1.1\r\n\r\n"))[0] == 404
        assert (await _exchange(port, b"POST /readyz HTTP/1.1\r\n\r\n"))[0] == 405
        for garbage in (b"\x00\xff\r\n\r\n", b"GET\r\n\r\n", b"GET / / / HTTP/1.1\r\n\r\n",
                        b"GET /healthz HTTP/1.1\r\nX: " + b"a" * (MAX_REQUEST * 2) + b"\r\n\r\n"):
            assert (await _exchange(port, garbage))[0] == 400, garbage
        # A client that sends half a request and goes away costs nothing lasting.
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /hea")
        writer.close()
        assert (await _exchange(port, b"GET /healthz HTTP/1.1\r\n\r\n"))[0] == 200
    finally:
        await server.stop()
