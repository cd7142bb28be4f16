"""The workers' app run inside the test's event loop instead of as `python -m workers`.

What `python -m workers` runs (workers.__main__: Settings read from the environment,
workers.app.build_app, its startup and shutdown hooks, so the same bootstrap, ledger,
streams and pullers), without a process of its own. A child process costs each test an
interpreter start and the imports of the whole stack (about 1.5 s of CPU, which the
test process has paid already); the suite started over a hundred of them.

Only for tests that do not need the process itself: a test that kills or signals the
workers, reads their exit code, their log lines or their crash hook keeps
tests.conftest.Workers. The log file here gets the same lines (from every logger of
this process while the app runs), but the root logger's level and handlers are the
test process's, not the production configuration (workers.logs.configure).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from faststream import FastStream

from bootstrap.settings import Settings
from workers.app import build_app
from workers.logs import TEXT_FORMAT
from workers.runtime import Runtime


def settings_from(env: dict[str, str]) -> Settings:
    """The settings a process given `env` would read (workers.__main__), read from
    `env` in place of this process's environment for the moment it takes."""
    with mock.patch.dict(os.environ, env, clear=True):
        return Settings.from_env()


@dataclass
class InProcessWorkers:
    """Started by `start`, stopped by `stop` (both awaited, in the test's loop)."""

    env: dict[str, str]
    log_path: Path
    app: FastStream | None = None
    runtime: Runtime | None = None
    _handler: logging.Handler | None = None
    _level: int = logging.NOTSET

    async def start(self, nats_url: str, **_connect: Any) -> None:
        """Returns once every consumer is pulling (the app's after-startup hook has run).
        `nats_url` and `_connect` are the readiness probe's in tests.conftest.Workers;
        the app's own settings come from `env`, as the process's do."""
        assert self.app is None, "started twice without a stop"
        settings = settings_from({**self.env, "NATS_URL": nats_url})
        self._log_to_file()
        self.runtime = Runtime()
        self.app = build_app(settings, runtime=self.runtime)
        try:
            await self.app.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """The app's shutdown hooks (consumers finish their batch, clients closed)."""
        app, self.app = self.app, None
        try:
            if app is not None:
                await app.stop()
        finally:
            self._unlog()

    @property
    def alive(self) -> bool:
        """Started, not stopped, and every consumer's loop still running (what the
        readiness endpoint asks of a process)."""
        runtime = self.runtime
        return (self.app is not None and runtime is not None and runtime.consuming
                and all(p.running for p in runtime.pullers))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _log_to_file(self) -> None:
        handler = logging.FileHandler(self.log_path)
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
        handler.setLevel(logging.INFO)
        root = logging.getLogger()
        self._level = root.level
        if root.level > logging.INFO:
            root.setLevel(logging.INFO)
        root.addHandler(handler)
        self._handler = handler

    def _unlog(self) -> None:
        if self._handler is None:
            return
        root = logging.getLogger()
        root.removeHandler(self._handler)
        root.setLevel(self._level)
        self._handler.close()
        self._handler = None
