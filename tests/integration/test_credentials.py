"""Credentials reach workers, clients and the CLI through settings, and no secret is printed.

NATS: a user and password in NATS_USER/NATS_PASSWORD (the URL holds none), an nkey seed
file, a token. MongoDB: a SCRAM user in MONGODB_URI against `secantusd-py --auth`. Each
wrong secret ends in one line that names the server without the secret.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nkeys  # type: ignore[import-untyped]
import pytest
from pymongo import AsyncMongoClient

from clients.credentials import NatsCredentials
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer, free_port, start_mongo, start_nats
from store.database import Document
from tests.conftest import ROOT, Workers, worker_env
from tests.integration.access_support import Secured, password, secured
from workers.streams import ensure_streams

__all__ = ["secured"]

pytestmark = pytest.mark.e2e

WINDOW = "system: you are a coding agent\nuser: add rate limiting"
MONGO_PASSWORD = "mongo-pw-" + new_id()[-8:]


@pytest.fixture(scope="module")
def scram_mongo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """secantusd-py with --auth and one SCRAM user `ledger`; yields its address (no user)."""
    data = tmp_path_factory.mktemp("scram-mongo")
    port = free_port()
    first = start_mongo(data, port=port)
    try:
        async def create_user() -> None:
            client: AsyncMongoClient[Document] = AsyncMongoClient(first.url)
            try:
                await client.admin.command("createUser", "ledger", pwd=MONGO_PASSWORD,
                                           roles=[{"role": "root", "db": "admin"}])
            finally:
                await client.close()
        asyncio.run(create_user())
    finally:
        first.stop()
    server = start_mongo(data, port=port, auth=True)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop()


def scram_uri(address: str, secret: str) -> str:
    return f"mongodb://ledger:{secret}@{address}/?authSource=admin&directConnection=true"


def bare_url(secured: Secured) -> str:
    return f"nats://127.0.0.1:{secured.port}"


def run_workers(env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m workers` that is expected to exit (a refused start)."""
    return subprocess.run([sys.executable, "-m", "workers"], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout, check=False)


async def test_workers_use_nats_user_and_password_and_a_scram_user_in_mongodb_uri(
        secured: Secured, scram_mongo: str, tmp_path: Path) -> None:
    """The URLs hold no NATS password; the MongoDB one is a SCRAM user. A decision goes
    through, and the log names both servers without a secret."""
    env = worker_env(bare_url(secured), scram_uri(scram_mongo, MONGO_PASSWORD),
                     f"t_{new_id().lower()}", NATS_USER="worker",
                     NATS_PASSWORD=password("worker"), HEALTH_ADDR="")
    workers = Workers(env, tmp_path / "workers.log")
    try:
        await workers.start(secured.url("worker"))
        creds = NatsCredentials(user="agent", password=password("agent"))
        async with DecisionRecorder.connect(bare_url(secured), credentials=creds) as rec:
            root = await rec.root("Add rate limiting", context=WINDOW)
            await rec.wait_persisted(root, timeout=20)
    finally:
        workers.stop()
    log = workers.log()
    assert "workers connected to" in log
    for secret in (MONGO_PASSWORD, password("worker"), password("agent")):
        assert secret not in log
    assert "ledger:***@" in log
    assert secured.violations() == []


async def test_a_wrong_mongodb_password_fails_the_start_in_one_redacted_line(
        secured: Secured, scram_mongo: str) -> None:
    wrong = "wrong-" + MONGO_PASSWORD
    env = worker_env(secured.url("worker"), scram_uri(scram_mongo, wrong), "t_wrong",
                     CONNECT_TIMEOUT_SECONDS="5")
    done = await asyncio.to_thread(run_workers, env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: "), done.stderr
    assert "MONGODB_URI" in lines[-1] and "ledger:***@" in lines[-1]
    assert wrong not in done.stderr + done.stdout
    assert password("worker") not in done.stderr + done.stdout


@pytest.mark.parametrize("how", ["url", "variables"])
async def test_a_wrong_nats_password_fails_the_start_in_one_redacted_line(
        secured: Secured, how: str, mongo_uri: str) -> None:
    wrong = "wrong-" + password("worker")
    extra = {"NATS_USER": "worker", "NATS_PASSWORD": wrong} if how == "variables" else {}
    url = secured.url("worker", wrong) if how == "url" else bare_url(secured)
    env = worker_env(url, mongo_uri, "t_wrong", CONNECT_TIMEOUT_SECONDS="5", **extra)
    done = await asyncio.to_thread(run_workers, env)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "NATS_URL" in last and "authorization violation" in last, done.stderr
    assert wrong not in done.stderr + done.stdout


async def test_clients_name_the_server_without_the_secret(secured: Secured) -> None:
    wrong = "wrong-" + password("operator")
    with pytest.raises(ConnectionError) as refused:
        await CorrectionClient.connect(secured.url("operator", wrong), connect_timeout=3)
    assert wrong not in str(refused.value)
    assert "operator:***@" in str(refused.value)
    with pytest.raises(ConnectionError) as refused:
        await CorrectionClient.connect(
            bare_url(secured), connect_timeout=3,
            credentials=NatsCredentials(user="operator", password=wrong))
    assert wrong not in str(refused.value)
    assert "authorization violation" in str(refused.value).lower()


async def test_an_nkey_seed_file_and_a_token_authenticate_clients(tmp_path: Path) -> None:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    seed_file = tmp_path / "agent.nk"
    seed_file.write_bytes(seed)
    token = "tok-" + new_id()
    conf = tmp_path / "server.conf"
    results: list[tuple[str, str]] = []
    for auth in (f'authorization {{ users: [ {{ nkey: "{public}" }} ] }}',
                 f'authorization {{ token: "{token}" }}'):
        conf.write_text(auth + "\n")
        server = start_nats(tmp_path / str(len(results)), port=free_port(), config=conf)
        try:
            results.append(await _publish_with(server, seed_file, token))
        finally:
            server.stop()
    assert results == [("stored", "refused"), ("refused", "stored")]


async def _publish_with(server: ManagedServer, seed_file: Path, token: str) -> tuple[str, str]:
    outcomes = []
    for creds in (NatsCredentials(nkey_seed_file=seed_file), NatsCredentials(token=token)):
        try:
            async with DecisionRecorder.connect(server.url, credentials=creds,
                                                connect_timeout=3) as rec:
                await ensure_streams(rec.connection.jetstream())
                await rec.root("Add rate limiting", context=WINDOW)
            outcomes.append("stored")
        except ConnectionError as exc:
            assert token not in str(exc) and seed_file.read_text() not in str(exc)
            outcomes.append("refused")
    return outcomes[0], outcomes[1]


async def test_a_token_in_nats_url_is_masked_in_the_workers_error(tmp_path: Path,
                                                                   mongo_uri: str) -> None:
    token = "tok-" + new_id()
    conf = tmp_path / "server.conf"
    conf.write_text(f'authorization {{ token: "{token}" }}\n')
    server = start_nats(tmp_path, port=free_port(), config=conf)
    try:
        url = server.url.replace("nats://", f"nats://{token}x@")
        done = await asyncio.to_thread(run_workers, worker_env(
            url, mongo_uri, "t_tok", CONNECT_TIMEOUT_SECONDS="5"))
    finally:
        server.stop()
    assert done.returncode == 1
    assert "nats://***@" in done.stderr
    assert token not in done.stderr + done.stdout


async def test_nats_client_error_from_a_garbage_creds_file_does_not_echo_it(
        secured: Secured, tmp_path: Path) -> None:
    creds = tmp_path / "agent.creds"
    secret = "SUAGARBAGE" + new_id()
    creds.write_text(f"-----BEGIN USER NKEY SEED-----\n{secret}\n------END USER NKEY SEED------\n")
    with pytest.raises(Exception) as refused:
        await DecisionRecorder.connect(bare_url(secured), connect_timeout=3,
                                       credentials=NatsCredentials(creds_file=creds))
    assert secret not in str(refused.value)
    assert secret not in repr(refused.value)


def _tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 it signed (openssl, no Python deps)."""
    ca_key, ca, key, csr, cert = (folder / n for n in
                                  ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    ext = folder / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for args in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
             "-days", "1", "-subj", "/CN=ledger-test-ca"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
             "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", "1", "-extfile", ext]):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
    return ca, cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_nats_tls_ca_verifies_the_server(tmp_path: Path) -> None:
    ca, cert, key = _tls_files(tmp_path)
    conf = tmp_path / "server.conf"
    conf.write_text(f'tls {{ cert_file: "{cert}", key_file: "{key}" }}\n')
    server = start_nats(tmp_path, port=free_port(), config=conf)
    try:
        trusted = NatsCredentials.from_env({"NATS_TLS_CA": str(ca)})
        async with DecisionRecorder.connect(server.url, credentials=trusted,
                                            connect_timeout=5) as rec:
            await ensure_streams(rec.connection.jetstream())
            await rec.root("Add rate limiting", context=WINDOW)
        # Without the CA, the system's CAs do not trust the server: no connection.
        system = NatsCredentials(tls_cert=None)
        with pytest.raises(ConnectionError):
            await DecisionRecorder.connect(server.url.replace("nats://", "tls://"),
                                           connect_timeout=3, credentials=system)
    finally:
        server.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_workers_reach_a_tls_nats_with_nats_tls_ca_and_a_user(
        tmp_path: Path, mongo_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers' broker gets the same TLS and user as the clients (FastStream takes
    them as its `security`): a decision recorded over TLS."""
    ca, cert, key = _tls_files(tmp_path)
    conf = tmp_path / "server.conf"
    conf.write_text(f'tls {{ cert_file: "{cert}", key_file: "{key}" }}\n'
                    'authorization { user: worker, password: "tls-pw" }\n')
    server = start_nats(tmp_path, port=free_port(), config=conf)
    env = worker_env(server.url, mongo_uri, f"t_{new_id().lower()}", NATS_TLS_CA=str(ca),
                     NATS_USER="worker", NATS_PASSWORD="tls-pw")
    env.pop("SSL_CERT_FILE", None)  # the workers trust the CA through NATS_TLS_CA alone
    # The test fixture's readiness probe connects with the default context.
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    probe_url = server.url.replace("nats://", "tls://worker:tls-pw@")
    workers = Workers(env, tmp_path / "workers.log")
    try:
        await workers.start(probe_url)
        creds = NatsCredentials(user="worker", password="tls-pw", tls_ca=ca)
        async with DecisionRecorder.connect(server.url, credentials=creds) as rec:
            root = await rec.root("Add rate limiting", context=WINDOW)
            await rec.wait_persisted(root, timeout=20)
    finally:
        workers.stop()
        server.stop()
    assert "tls-pw" not in workers.log()
