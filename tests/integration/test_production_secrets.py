"""A production worker whose secrets were not delivered stops before connecting, in one
line: `python -m workers` exits 1 and `agents workers` 2, as for any bad setting. No
server is started: the point is that none is reached."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

# Addresses nothing listens on: a worker that tried to connect would time out instead.
ENV = {"STREAM_PROFILE": "production", "NATS_URL": "nats://127.0.0.1:9",
       "MONGODB_URI": "mongodb://127.0.0.1:9/?directConnection=true",
       "CONNECT_TIMEOUT_SECONDS": "60", "PYTHONPATH": str(ROOT)}
CLEARED = ("NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY_SEED",
           "NATS_TLS_CERT", "NATS_TLS_KEY", "ALLOW_UNAUTHENTICATED")


@pytest.mark.parametrize(("command", "code"), [(["-m", "workers"], 1),
                                               (["-m", "cli.main", "workers"], 2)])
def test_missing_secrets_stop_the_start_in_one_line(command: list[str], code: int) -> None:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED} | ENV
    done = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    # Rich may wrap the CLI's line at the terminal width; the message is one line.
    text = " ".join(" ".join(lines).split())
    assert text.startswith("error: bad value in the environment: STREAM_PROFILE=production "
                           "needs credentials"), done.stderr
    assert "missing for NATS" in text and "MongoDB" in text
