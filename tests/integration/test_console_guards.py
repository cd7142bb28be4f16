"""What keeps a web page, a guesser and an oversized body out of a real console (uvicorn
on a free port, the test's NATS and MongoDB): the names it is served under, the origin
of writes, bodies refused before they are read, login attempts rate-limited, a session
in the cookie instead of the token, and the principal it acts as."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.settings import Settings
from console.config import ConsoleConfig
from console.deps import Deps
from console.wiring import open_deps
from contracts.shared.roles import Role
from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import worker_env
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import cli_workers, seed_plan
from tests.integration.console_support import Console, console, serve_console
from tests.integration.wire import until
from tests.trust_support import member, write_principals, write_seed

__all__ = ["cli_workers", "console"]

pytestmark = pytest.mark.e2e

TOKEN = "s3cret-token-0123456789"


def port_of(c: Console) -> int:
    port = urlsplit(c.url).port
    assert port is not None
    return port


async def raw_request(c: Console, head: str, timeout: float = 10) -> tuple[int, str]:
    """Send `head` (request line and headers, no body) on a raw connection; the status
    and the response as text. Nothing else is sent: a server that waited for a body
    would never answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(c))
    try:
        writer.write(head.replace("\n", "\r\n").encode() + b"\r\n")
        await writer.drain()
        answer = (await asyncio.wait_for(reader.read(65536), timeout)).decode("latin-1")
    finally:
        writer.close()
    return int(answer.split(" ", 2)[1]), answer


# --- the names it is served under ------------------------------------------------------


async def test_a_rebound_name_is_refused_for_reads_and_writes(
        cli_workers: InProcessWorkers, console: Console, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=4)
    dry_run = f"/api/decisions/{tree[1]['decision_id']}/dry-run"
    port = port_of(console)
    rebound = {"Host": f"rebind.example:{port}", "Origin": f"http://rebind.example:{port}"}
    async with httpx.AsyncClient(base_url=console.url, timeout=60) as http:
        # A page at rebind.example whose name now resolves to 127.0.0.1.
        assert (await http.get("/api/plans", headers=rebound)).status_code == 421
        assert (await http.post(dry_run, json={"mode": "revert"},
                                headers=rebound)).status_code == 421
        assert (await http.get("/", headers=rebound)).status_code == 421
        # The same requests under the console's own names are answered.
        for name in ("127.0.0.1", "localhost", "[::1]"):
            own = {"Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"}
            assert (await http.get("/api/plans", headers=own)).status_code == 200, name
        answered = await http.post(dry_run, json={"mode": "revert"}, headers={
            "Origin": console.url})
        assert answered.status_code == 200, answered.text
    status, _ = await raw_request(console, "GET /api/plans HTTP/1.0\n")
    assert status == 400  # no Host at all


async def test_a_configured_name_is_answered(db: AsyncDatabase[Document],
                                             nc: nats.NATS) -> None:
    async with serve_console(db, nc, hosts=("console.example.com",)) as c, \
            httpx.AsyncClient(base_url=c.url, timeout=10) as http:
        port = port_of(c)
        for host in ("console.example.com", f"console.example.com:{port}",
                     f"CONSOLE.example.com:{port}"):
            assert (await http.get("/api/plans", headers={"Host": host})).status_code == 200
        for host in (f"console.example.com:{port + 1}", f"evil.console.example.com:{port}",
                     f"example.com:{port}"):
            assert (await http.get("/api/plans", headers={"Host": host})).status_code == 421


# --- writes come from the console's own pages -----------------------------------------


async def test_writes_and_api_reads_from_another_site_are_refused(console: Console) -> None:
    write = "/api/decisions/01JD8X0000000000000000000A/dry-run"
    async with httpx.AsyncClient(base_url=console.url, timeout=10) as http:
        for site in ("cross-site", "same-site", "none"):
            r = await http.post(write, json={"mode": "revert"},
                                headers={"Sec-Fetch-Site": site})
            assert r.status_code == 403, site
        ours = await http.post(write, json={"mode": "revert"}, headers={
            "Sec-Fetch-Site": "same-origin", "Origin": console.url})
        assert ours.status_code == 404  # past the guard: no such decision
        for site in ("cross-site", "same-site"):
            assert (await http.get("/api/plans", headers={
                "Sec-Fetch-Site": site})).status_code == 403
        # A link from elsewhere may open the page itself; only its API calls are checked.
        assert (await http.get("/", headers={"Sec-Fetch-Site": "cross-site"})
                ).status_code == 200
        other_port = console.url.replace(str(port_of(console)), str(port_of(console) + 1))
        assert (await http.post("/logout", headers={"Origin": other_port})).status_code == 403


# --- bodies over the limit ---------------------------------------------------------------


async def test_a_declared_body_over_the_limit_is_refused_unread(console: Console) -> None:
    host = urlsplit(console.url).netloc
    for path in ("/api/decisions/01JD8X0000000000000000000A/dry-run", "/login"):
        status, answer = await raw_request(console, (
            f"POST {path} HTTP/1.1\nHost: {host}\nContent-Type: application/json\n"
            "Content-Length: 100000000\n"))
        assert status == 413, answer
    status, _ = await raw_request(console, (
        f"POST /login HTTP/1.1\nHost: {host}\nContent-Length: 5000\n"))
    assert status == 413  # the login form's limit is 4 KiB


async def chunked(c: Console, path: str, chunks: int, size: int = 8192) -> int:
    """Stream `chunks` chunks of a body with no length and never its last chunk: the
    status the console answers with meanwhile (a server reading to the end would not)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(c))
    try:
        writer.write((f"POST {path} HTTP/1.1\r\nHost: {urlsplit(c.url).netloc}\r\n"
                      "Content-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n").encode())
        for _ in range(chunks):
            writer.write(f"{size:x}\r\n".encode() + b" " * size + b"\r\n")
            await writer.drain()
        answer = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    return int(answer.split(b" ", 2)[1])


async def test_a_streamed_body_is_cut_at_the_limit(console: Console, db: AsyncDatabase[Document],
                                                   nc: nats.NATS) -> None:
    write = "/api/decisions/01JD8X0000000000000000000A/dry-run"
    assert await chunked(console, write, 9) == 413  # 72 KiB of a 64 KiB limit
    async with serve_console(db, nc, token=TOKEN) as guarded:  # its form reads the body
        assert await chunked(guarded, "/login", 1) == 413  # 8 KiB of 4 KiB
    async with httpx.AsyncClient(base_url=console.url, timeout=10) as http:
        # Under the limit, streamed or not, a body reaches the route.
        under = b'{"mode": "revert", "padding": "' + b"x" * 60_000 + b'"}'

        async def streamed() -> AsyncIterator[bytes]:
            yield under

        for body in (under, streamed()):
            r = await http.post(write, content=body,
                                headers={"Content-Type": "application/json"})
            assert r.status_code == 404, r.text


# --- logging in -------------------------------------------------------------------------


async def test_login_attempts_are_rate_limited(db: AsyncDatabase[Document],
                                               nc: nats.NATS) -> None:
    async with serve_console(db, nc, token=TOKEN) as c:
        async with httpx.AsyncClient(base_url=c.url, timeout=10) as http:
            for _ in range(5):
                assert (await http.post("/login", data={"token": "guess"})).status_code == 401
            held = await http.post("/login", data={"token": "guess"})
            assert held.status_code == 429 and 1 <= int(held.headers["retry-after"]) <= 12
            right = await http.post("/login", data={"token": TOKEN}, follow_redirects=False)
            assert right.status_code == 429  # the rate is judged before the token
            # The bearer token still works for scripts while the form is held.
            assert (await http.get("/api/plans", headers={
                "Authorization": f"Bearer {TOKEN}"})).status_code == 200
        # Overall: 30 a minute whatever the address (127.0.0.2 to .7 are this machine
        # too). 25 are left; five more addresses use them up, and the sixth, whose own
        # five are untouched, is held too (but for the one or two refilled meanwhile).
        for n in range(2, 8):
            transport = httpx.AsyncHTTPTransport(local_address=f"127.0.0.{n}")
            async with httpx.AsyncClient(base_url=c.url, timeout=10,
                                         transport=transport) as other:
                codes = [(await other.post("/login", data={"token": "guess"})).status_code
                         for _ in range(5)]
        assert codes.count(429) >= 3, codes


async def test_the_cookie_holds_a_session_not_the_token(db: AsyncDatabase[Document],
                                                        nc: nats.NATS) -> None:
    async with serve_console(db, nc, token=TOKEN) as c, \
            httpx.AsyncClient(base_url=c.url, timeout=10) as http:
        first = await http.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert first.status_code == 303
        cookie = first.headers["set-cookie"]
        session = http.cookies["console_session"]
        assert TOKEN not in cookie and len(session) >= 40
        flags = {f.strip().split("=")[0].lower() for f in cookie.split(";")}
        assert {"httponly", "samesite", "max-age"} <= flags and "secure" not in flags
        assert "samesite=strict" in cookie.lower()
        assert (await http.get("/api/plans")).status_code == 200
        http.cookies.clear()
        again = await http.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert again.status_code == 303 and http.cookies["console_session"] != session
        # Logging out ends the session on the server, not only in this browser.
        kept = http.cookies["console_session"]
        out = await http.post("/logout", headers={"Origin": c.url.rstrip("/")},
                              follow_redirects=False)
        assert out.status_code == 303
        # The token itself in a cookie opens nothing, nor does a closed session.
        for name, value in (("console_session", TOKEN), ("console_token", TOKEN),
                            ("console_session", kept)):
            async with httpx.AsyncClient(base_url=c.url, timeout=10,
                                         cookies={name: value}) as fresh:
                assert (await fresh.get("/api/plans")).status_code == 401, name


# --- the principal it acts as -------------------------------------------------------------


OPS_CONSOLE = member("ops-console", Role.OPERATOR, "*")
WORKER = member("ledger-worker", Role.WORKER)


@pytest.mark.parametrize("signed", [False, True], ids=["no-key", "own-key"])
async def test_the_console_acts_as_its_principal(
        signed: bool, nats_server: ManagedServer, mongo_uri: str, db_name: str,
        db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a key its requests carry its name as a claim only; with its own key
    (CONSOLE_NKEY_SEED) listed in the workers' principals file they are signed, and the
    ledger records the console as the verified requester."""
    verifying: dict[str, str] = {}
    if signed:
        principals = write_principals(tmp_path / "principals.toml", OPS_CONSOLE, WORKER)
        verifying = {"LEDGER_PRINCIPALS": str(principals),
                     "NATS_NKEY_SEED": str(write_seed(tmp_path / "w.seed", WORKER))}
        monkeypatch.setenv("CONSOLE_NKEY_SEED",
                           str(write_seed(tmp_path / "console.seed", OPS_CONSOLE)))
    workers = InProcessWorkers(worker_env(nats_server.url, mongo_uri, db_name, **verifying,
                                          ARCHIVE_ROOT=str(tmp_path / "archive")),
                               tmp_path / "workers.log")
    await workers.start(nats_server.url)
    settings = Settings(nats_url=nats_server.url, mongodb_uri=mongo_uri, mongodb_db=db_name)

    @asynccontextmanager
    async def wired(config: ConsoleConfig) -> AsyncIterator[Deps]:
        async with open_deps(settings, config.principal) as deps:  # the console's own wiring
            yield deps

    try:
        tree = await seed_plan(nc.jetstream(), db, size=4)
        async with serve_console(db, nc, connect=wired, principal=OPS_CONSOLE.name) as c, \
                httpx.AsyncClient(base_url=c.url, timeout=30) as http:
            page = (await http.get("/")).text
            assert 'id="principal"' in page and "as ops-console" in page
            asked = await http.post(f"/api/decisions/{tree[1]['decision_id']}/corrections",
                                    json={"mode": "revert"})
            assert asked.status_code == 202, asked.text
            cid = asked.json()["correction_id"]
            found = await until(lambda: db.corrections.find_one({"_id": cid}), 30)
    finally:
        await workers.stop()
    assert found["claimed_by"] == OPS_CONSOLE.name
    if signed:
        assert found["requested_by"] == OPS_CONSOLE.name and found["verified"] is True
        assert found["signature"]["key"] == OPS_CONSOLE.public
        assert found["signature"]["principal"] == OPS_CONSOLE.name
    else:  # without a principals file nothing is verified: the name is the body's claim
        assert found["requested_by"] is None and found["verified"] is False
        assert found["signature"] is None
