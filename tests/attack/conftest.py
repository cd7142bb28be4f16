"""The attack suite's deployment (one for the session) and its tally, printed at the end:
`scripts/test -q -p no:cacheprovider -m attack -n 0` (what .ci/run runs)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from ulid import ULID

from tests.attack.attacks import TALLY, Attacker
from tests.attack.deployment import Deployment, deploy


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.tried:
        terminalreporter.write_sep("=", TALLY.line())
        for failure in TALLY.not_refused[:50]:
            terminalreporter.write_line(f"NOT REFUSED: {failure}")


@pytest.fixture(scope="session")
async def deployment(mongo_uri: str, tmp_path_factory: pytest.TempPathFactory
                     ) -> AsyncIterator[Deployment]:
    dep = await deploy(tmp_path_factory.mktemp("attacked"), mongo_uri,
                       f"t_{str(ULID()).lower()}")
    try:
        yield dep
    finally:
        dep.workers.stop()
        dep.server.stop()


@pytest.fixture
async def attacker(deployment: Deployment) -> AsyncIterator[Callable[[str],
                                                                     Awaitable[Attacker]]]:
    opened: list[Attacker] = []

    async def connect(name: str) -> Attacker:
        a = Attacker(name)
        a.nc = await deployment.connect(name, a.on_error)
        opened.append(a)
        return a

    yield connect
    for a in opened:
        if a.nc is not None:
            await a.nc.close()
