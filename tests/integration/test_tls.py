"""TLS end to end, as docs/operations.md "TLS" sets it up: a CA made here signs the
servers' and a client's certificates; nats-server and secantusd-py speak TLS only and
require a client certificate (mutual TLS). The workers, given NATS_TLS_CA/_CERT/_KEY
and a MongoDB URI with `tls=true&tlsCAFile=...&tlsCertificateKeyFile=...`, record a
decision; a client that does not trust the CA, or has no certificate, is refused by
each server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pymongo import AsyncMongoClient
from pymongo.errors import ServerSelectionTimeoutError

from clients.credentials import NatsCredentials
from clients.recorder import DecisionRecorder
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer, MongoTls, free_port, start_mongo, start_nats
from store.database import Document
from tests.conftest import Workers, worker_env
from tests.integration.tls_support import Certificates, make_certificates, needs_openssl

pytestmark = [pytest.mark.e2e, needs_openssl]

WINDOW = "system: you are a coding agent\nuser: add rate limiting"


@dataclass
class TlsServers:
    certs: Certificates
    nats: ManagedServer
    mongo_address: str

    def mongo_uri(self, *, ca: bool = True, client_cert: bool = True) -> str:
        uri = f"mongodb://{self.mongo_address}/?directConnection=true&tls=true"
        if ca:
            uri += f"&tlsCAFile={self.certs.ca}"
        if client_cert:
            uri += f"&tlsCertificateKeyFile={self.certs.client_pem}"
        return uri

    def nats_credentials(self) -> NatsCredentials:
        return NatsCredentials(tls_ca=self.certs.ca, tls_cert=self.certs.client_cert,
                               tls_key=self.certs.client_key)


@pytest.fixture(scope="module")
def tls_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServers]:
    base = tmp_path_factory.mktemp("tls")
    certs = make_certificates(base / "certs")
    conf = base / "nats-tls.conf"
    conf.write_text(f'tls {{ cert_file: "{certs.server_cert}", key_file: "{certs.server_key}"'
                    f', ca_file: "{certs.ca}", verify: true }}\n')
    port = free_port()
    mongo = start_mongo(base, port=port, tls=MongoTls(certs.server_cert, certs.server_key,
                                                      client_ca=certs.ca))
    try:
        nats_server = start_nats(base, port=free_port(), config=conf)
        try:
            yield TlsServers(certs, nats_server, f"127.0.0.1:{port}")
        finally:
            nats_server.stop()
    finally:
        # A throwaway store: after the workers' connections secantusd-py takes 7 s to
        # drain on SIGTERM; killed after 2.
        mongo.stop(timeout=2)


@pytest.mark.slow  # the workers' start: about 7 s with the servers
async def test_workers_record_a_decision_over_tls_to_both_servers(
        tls_servers: TlsServers, tmp_path: Path) -> None:
    certs, db_name = tls_servers.certs, f"t_{new_id().lower()}"
    url = tls_servers.nats.url
    env = worker_env(url, tls_servers.mongo_uri(), db_name, NATS_TLS_CA=str(certs.ca),
                     NATS_TLS_CERT=str(certs.client_cert), NATS_TLS_KEY=str(certs.client_key))
    env.pop("SSL_CERT_FILE", None)  # the CA reaches the workers through the settings alone
    workers = Workers(env, tmp_path / "workers.log")
    creds = tls_servers.nats_credentials()
    try:
        await workers.start(url, tls=creds.tls_context())
        async with DecisionRecorder.connect(url, credentials=creds) as rec:
            root = await rec.root("Add rate limiting", context=WINDOW)
            await rec.wait_persisted(root, timeout=30)
        client: AsyncMongoClient[Document] = AsyncMongoClient(tls_servers.mongo_uri())
        try:
            assert await client[db_name].decisions.count_documents(
                {"plan_id": root.plan_id}) == 1
        finally:
            await client.close()
    finally:
        assert workers.stop() == 0, workers.log()[-3000:]


async def test_nats_refuses_a_client_without_the_ca_or_a_certificate(
        tls_servers: TlsServers) -> None:
    certs, url = tls_servers.certs, tls_servers.nats.url.replace("nats://", "tls://")
    async with DecisionRecorder.connect(url, connect_timeout=3,
                                        credentials=tls_servers.nats_credentials()):
        pass  # the same URL with the CA and the certificate: accepted
    for creds in (
            # The system's CAs do not trust a private CA.
            NatsCredentials(tls_cert=certs.client_cert, tls_key=certs.client_key),
            # The server asks for a client certificate (`verify: true`).
            NatsCredentials(tls_ca=certs.ca)):
        with pytest.raises(ConnectionError):
            await DecisionRecorder.connect(url, connect_timeout=1.5, credentials=creds)


async def ping(uri: str, timeout_ms: int = 1000) -> bool:
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri,
                                                          serverSelectionTimeoutMS=timeout_ms)
    try:
        await client.admin.command("ping")
        return True
    except ServerSelectionTimeoutError:
        return False
    finally:
        await client.close()


async def test_mongodb_refuses_a_client_without_the_ca_or_a_certificate(
        tls_servers: TlsServers) -> None:
    plain = tls_servers.mongo_uri().replace("&tls=true", "&tls=false").split("&tlsCAFile")[0]
    assert await ping(tls_servers.mongo_uri(), 10_000)  # the CA and the certificate
    assert [await ping(uri) for uri in (
        tls_servers.mongo_uri(ca=False),  # the system's CAs do not trust a private CA
        tls_servers.mongo_uri(client_cert=False),  # the server requires a certificate
        plain,  # no TLS at all
    )] == [False, False, False]
