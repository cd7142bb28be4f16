"""Real servers for the tests: nats-server and secantusd-py from their wheels.

MongoDB is started once per session and each test gets its own database; NATS is
cheap to start, so each test that needs it gets its own server (streams and durable
consumers never leak between tests). With MONGODB_URI_TEST set, the tests use that
server instead (a real mongod replica set, say).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from _pytest.mark.expression import Expression
from nats.js.errors import NotFoundError, ServiceUnavailableError
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from ulid import ULID

from clients.inbox import connection_inbox_prefix
from contracts.decisions.subjects import DECISIONS_STREAM, RECORDED_PREFIX, RECORDER_DURABLE
from contracts.shared.partitions import partitions
from deploy.embedded import ManagedServer, die_with_parent, free_port, start_mongo, start_nats
from store.database import Document, connect, ensure_indexes
from tests import properties
from tests.in_process_workers import InProcessWorkers
from tests.warm_caches import warm_in_background
from workers.collector import tune

# The default profile and the deep one (`--hypothesis-profile=deep`): tests/properties.py.
properties.register()

ROOT = Path(__file__).resolve().parent.parent


BROWSER_TESTS = ROOT / "tests" / "browser"


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built lives as long as the session: frozen, no collection walks
    it again (the thresholds were set in tests/__init__.py, before the imports)."""
    tune()


def _only_browser(name: str, /, **_: str | int | bool | None) -> bool:
    return name == "browser"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The browser tests are not even imported when the marker expression leaves them
    out (the default run): importing Playwright cost each xdist worker's collection
    time for tests it would deselect anyway. The expression is judged for a test marked
    `browser` and nothing else, as every test in tests/browser is."""
    if collection_path != BROWSER_TESTS:
        return None
    try:
        wanted = Expression.compile(config.getoption("markexpr") or "browser")
        return not wanted.evaluate(_only_browser) or None
    except Exception:  # pytest's expression API moved: collect them as before
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, each test marked `long` goes first in one worker's share.

    xdist's work-stealing cuts the collection into one contiguous share per worker
    and steals only what has not started, so a test of minutes near the end of a share
    can run alone after every other worker has finished: started first, it runs beside
    the rest. Every worker collects the same order, as xdist requires; without xdist
    the order is left alone."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        items[:] = long_first(items, int(workerinput["workercount"]))


def long_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The items cut into shares as xdist's work-stealing cuts them (each idle worker
    takes len(pending) // workers left), the `long` ones dealt one per share, each at
    the start of its share."""
    long = [item for item in items if item.get_closest_marker("long") is not None]
    if not long or workers < 2:
        return items
    rest = iter([item for item in items if item.get_closest_marker("long") is None])
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for k, item in enumerate(long):
        shares[k % workers].append(item)
    left = len(items)
    for k, share in enumerate(shares):
        size = left // (workers - k)
        left -= size
        share.extend(islice(rest, max(0, size - len(share))))
    shares[-1].extend(rest)
    return [item for share in shares for item in share]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller of an xdist run fills Hypothesis's caches once while its workers
    start (tests/warm_caches.py); trylast, so after Hypothesis's own session start,
    which is when it allows touching the disk."""
    config = session.config
    if not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("dsession"):
        warm_in_background()


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("MONGODB_URI_TEST")
    if external:
        yield external
        return
    server = start_mongo(tmp_path_factory.mktemp("mongo"), port=free_port(), test_commands=True)
    try:
        yield server.url
    finally:
        server.discard()  # its data goes with the session; a clean stop was 2 s of the run's end


@pytest.fixture
async def mongo_client(mongo_uri: str) -> AsyncIterator[AsyncMongoClient[Document]]:
    # The workers' durable options (store.database), so every store test runs with them.
    client: AsyncMongoClient[Document] = connect(mongo_uri)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def db_name() -> str:
    return f"t_{str(ULID()).lower()}"


@pytest.fixture
async def db(mongo_client: AsyncMongoClient[Document],
             db_name: str) -> AsyncIterator[AsyncDatabase[Document]]:
    database = mongo_client[db_name]
    await ensure_indexes(database)
    try:
        yield database
    finally:
        # The session's own server is thrown away whole at the end, and SecantusDB's
        # dropDatabase walks every key the server holds (seen taking minutes late in a
        # run); only a server we were lent (MONGODB_URI_TEST) is tidied.
        if os.environ.get("MONGODB_URI_TEST"):
            await mongo_client.drop_database(db_name)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[ManagedServer]:
    server = start_nats(tmp_path, port=free_port())
    try:
        yield server
    finally:
        server.discard()  # the test's stream data goes with tmp_path


@pytest.fixture
async def nc(nats_server: ManagedServer) -> AsyncIterator[nats.NATS]:
    client = await nats.connect(nats_server.url)
    try:
        yield client
    finally:
        await client.drain()


@dataclass
class Workers:
    """`python -m workers` as a child process, as production runs it: for the tests that
    kill, signal or restart it, or read its exit code or crash hook; the others run the
    same app in their own loop (tests/in_process_workers.py)."""

    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: list[int] = field(default_factory=list)

    async def start(self, nats_url: str, **connect: Any) -> None:
        """`connect`: what the readiness probe needs beyond the URL (`tls=` a context)."""
        log = self.log_path.open("ab")
        # With CORRECTIONS_CRASH_AT, the same workers with the crash hook of the tests.
        module = "tests.crashing_workers" if self.env.get("CORRECTIONS_CRASH_AT") else "workers"
        self.proc = subprocess.Popen([sys.executable, "-m", module], cwd=ROOT, env=self.env,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     preexec_fn=die_with_parent)
        self.starts.append(self.proc.pid)
        try:
            await wait_for_consumer(nats_url, self.proc, self.log_path,
                                    durable=first_recorder(self.env), **connect)
        except BaseException:
            # No fixture stops a start that never got ready: killed here, or it keeps
            # running (and using CPU) after the test run has ended.
            self.kill()
            raise

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def first_recorder(env: dict[str, str]) -> str:
    """The recorder's first durable under the environment's RECORDER_PARTITIONS
    (`recorder` when it is not partitioned)."""
    n = int(env.get("RECORDER_PARTITIONS") or 1)
    return partitions(RECORDED_PREFIX, RECORDER_DURABLE, n)[0].durable


async def wait_for_consumer(nats_url: str, proc: subprocess.Popen[bytes], log: Path,
                            timeout: float = 30.0, *, durable: str = RECORDER_DURABLE,
                            **connect: Any) -> None:
    """Ready when the recorder's (first) durable consumer has a pull waiting (an idle
    worker), or has delivered more than before this start (a worker busy with a
    backlog: its pulls are answered at once, so none is ever seen waiting). The probe
    reads its replies under the URL's user's inbox prefix, as the clients do
    (clients.inbox)."""
    connect.setdefault("inbox_prefix", connection_inbox_prefix(nats_url, None, None))
    client = await nats.connect(nats_url, **connect)
    try:
        js = client.jetstream()

        async def delivered() -> int | None:
            try:
                info = await js.consumer_info(DECISIONS_STREAM, durable, timeout=2)
            except (NotFoundError, ServiceUnavailableError, nats.errors.TimeoutError):
                # Not there yet, or a JetStream cluster still electing its leaders (a
                # fresh 3-node cluster's API timed out once in a fresh-clone CI run).
                return None
            if (info.num_waiting or 0) > 0:
                return -1
            return info.delivered.consumer_seq if info.delivered else 0

        before = max(0, await delivered() or 0)
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"workers exited early:\n{log.read_text()[-3000:]}")
            now = await delivered()
            if now is not None and (now == -1 or now > before):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"workers not ready in {timeout}s:\n{log.read_text()[-3000:]}")
    finally:
        await client.close()


def start_cost(env: dict[str, str]) -> float:
    """Seconds this machine needs now to start the interpreter and import the workers
    and the CLI.

    Tests that check a process "exits fast" bound it by its own deadline plus this: a
    fixed allowance for the start failed on a loaded machine (starts took 12-20 s with
    6 test processes beside 3 other sessions' runs), while the deadline is what the
    tests are about."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import workers.app, cli.main"], cwd=ROOT, env=env,
                   capture_output=True, timeout=60, check=True)
    return time.monotonic() - started


def worker_env(nats_url: str, mongo_uri: str, db_name: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "NATS_URL": nats_url, "MONGODB_URI": mongo_uri, "MONGODB_DB": db_name,
            "RECORDER_PARENT_WAIT_SECONDS": "3", "PYTHONPATH": str(ROOT),
            # Each stop waits for the idle pulls to end: hundreds of stops in a run.
            "PULL_WAIT_SECONDS": "0.2",
            # SecantusDB reports a replica set; the flag is for a plain mongod given as
            # MONGODB_URI_TEST (tests/integration/test_durability.py runs without it).
            "ALLOW_STANDALONE_MONGODB": "1", **extra}


@pytest.fixture
async def workers(nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
                  db_name: str, tmp_path: Path) -> AsyncIterator[InProcessWorkers]:
    """The workers' app in the test's event loop (tests/in_process_workers.py): a test
    that kills them or reads their process makes its own `Workers`."""
    w = InProcessWorkers(worker_env(nats_server.url, mongo_uri, db_name),
                         tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        yield w
    finally:
        await w.stop()


@pytest.fixture
async def workers_process(nats_server: ManagedServer, mongo_uri: str,
                          db: AsyncDatabase[Document], db_name: str,
                          tmp_path: Path) -> AsyncIterator[Workers]:
    """`python -m workers` as its own process, for a test that must not share this
    process with them (its telemetry exporters would see the workers' spans too)."""
    w = Workers(worker_env(nats_server.url, mongo_uri, db_name), tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        yield w
    finally:
        w.stop()
