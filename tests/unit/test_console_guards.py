"""The console's guards as plain code: the names it answers, its sessions, the login
throttle, and the cookie's flags over TLS (the app over the in-memory store)."""

from __future__ import annotations

import httpx
import pytest
from nats.aio.client import Client

from console.app import create_app, with_principal
from console.config import ConsoleConfig, ConsoleConfigError
from console.sessions import Sessions
from console.throttle import LoginThrottle, Rate
from tests.console_deps import deps_over
from tests.memory_store import MemoryStore

pytestmark = pytest.mark.unit

TOKEN = "s3cret-token-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_it_answers_the_loopback_names_with_its_port_by_default() -> None:
    assert ConsoleConfig(port=9000).served_under() == {
        "127.0.0.1:9000", "localhost:9000", "[::1]:9000"}
    assert "localhost" in ConsoleConfig(port=80).served_under()  # a browser omits :80


def test_configured_names_and_the_bound_address_are_answered_too() -> None:
    c = ConsoleConfig(host="10.0.0.5", port=9000, token=TOKEN,
                      hosts=("Console.Example.com", "proxy.example:8443", "[fd00::1]"))
    assert c.served_under() == {
        "127.0.0.1:9000", "localhost:9000", "[::1]:9000", "10.0.0.5:9000",
        "console.example.com", "console.example.com:9000", "proxy.example:8443",
        "[fd00::1]", "[fd00::1]:9000"}
    assert "0.0.0.0:9000" not in ConsoleConfig(host="0.0.0.0", port=9000,
                                               token=TOKEN).served_under()


@pytest.mark.parametrize("entry", ["*", "*.example.com", "http://console.example.com",
                                   "console.example.com/", "a b", "console:port", "-x.com"])
def test_a_host_pattern_or_url_is_refused_at_start(entry: str) -> None:
    with pytest.raises(ConsoleConfigError, match="CONSOLE_HOSTS"):
        ConsoleConfig(hosts=(entry,))


def test_the_principal_and_hosts_come_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONSOLE_HOST", raising=False)
    monkeypatch.delenv("CONSOLE_PORT", raising=False)
    assert ConsoleConfig.from_env().principal == "console"
    monkeypatch.setenv("CONSOLE_PRINCIPAL", "ops-console")
    monkeypatch.setenv("CONSOLE_HOSTS", "a.example, b.example:9443,")
    c = ConsoleConfig.from_env()
    assert c.principal == "ops-console" and c.hosts == ("a.example", "b.example:9443")
    assert {"a.example:8090", "b.example:9443"} <= c.served_under()
    monkeypatch.setenv("CONSOLE_PRINCIPAL", "Ops Console")
    with pytest.raises(ConsoleConfigError, match="CONSOLE_PRINCIPAL"):
        ConsoleConfig.from_env()


def test_the_page_header_names_the_principal() -> None:
    page = with_principal("<header><nav></nav></header><main></main>", "ops-console")
    assert page.index('id="principal"') < page.index("</header>")
    assert ">as ops-console</span>" in page


def test_a_session_is_random_bounded_and_ends() -> None:
    clock = Clock()
    sessions = Sessions(lifetime=60, max_sessions=3, clock=clock)
    a = sessions.open()
    assert sessions.valid(a) and len(a) >= 40
    assert not sessions.valid(None) and not sessions.valid("") and not sessions.valid(a + "x")
    assert not sessions.valid("x" * 10_000)
    b, c, d = sessions.open(), sessions.open(), sessions.open()
    assert len(sessions) == 3 and not sessions.valid(a)  # the oldest made room
    sessions.close(b)
    assert not sessions.valid(b) and sessions.valid(c)
    clock.now += 61
    assert not sessions.valid(c)
    sessions.open()
    assert len(sessions) == 1 and not sessions.valid(d)  # ended ones are forgotten


def test_login_attempts_are_limited_per_client_and_overall() -> None:
    clock = Clock()
    throttle = LoginThrottle(per_client=Rate(5, 60), overall=Rate(8, 60), max_clients=3,
                             clock=clock)
    assert [throttle.attempt("a") for _ in range(5)] == [0] * 5
    assert throttle.attempt("a") == pytest.approx(12.0)  # one back every 12 s
    assert [throttle.attempt("b") for _ in range(3)] == [0] * 3
    assert throttle.attempt("c") == pytest.approx(7.5)  # overall: all 8 taken, 7.5 s each
    throttle.succeeded("b")  # a right token gives its attempt back
    assert throttle.attempt("c") == 0
    clock.now += 12
    assert throttle.attempt("a") == 0
    for n in range(10):
        throttle.attempt(f"x{n}")
    assert len(throttle) == 3  # the least recently seen are forgotten


async def test_the_session_cookie_is_secure_over_tls() -> None:
    app = create_app(deps_over(MemoryStore(), Client()),
                     ConsoleConfig(host="10.0.0.5", port=443, token=TOKEN,
                                   hosts=("console.example.com",)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="https://console.example.com") as http:
        r = await http.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert r.status_code == 303
        flags = [f.strip().lower() for f in r.headers["set-cookie"].split(";")]
        assert {"secure", "httponly", "samesite=strict"} <= set(flags)
        assert (await http.get("/api/plans")).status_code == 200
