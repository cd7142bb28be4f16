"""The production profile refuses to start without credentials for NATS and MongoDB, in
one line naming what is missing and how to give it; the development profile (and
ALLOW_UNAUTHENTICATED=1) starts without."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootstrap.required_secrets import missing_secrets
from bootstrap.settings import Settings
from clients.credentials import NatsCredentials

pytestmark = pytest.mark.unit

OPEN_NATS = "nats://n1:4222,nats://n2:4222"
OPEN_MONGO = "mongodb://m1:27017,m2:27017/?replicaSet=ledger"
SCRAM = "mongodb://ledger:pw@m1:27017,m2:27017/?replicaSet=ledger&authSource=admin"


@pytest.mark.parametrize(("nats_url", "creds", "uri", "missing"), [
    (OPEN_NATS, NatsCredentials(), OPEN_MONGO, ["NATS", "MongoDB"]),
    (OPEN_NATS, NatsCredentials(user="worker", password="pw"), OPEN_MONGO, ["MongoDB"]),
    (OPEN_NATS, NatsCredentials(token="t"), SCRAM, []),
    ("nats://worker:pw@n1:4222,nats://worker:pw@n2:4222", NatsCredentials(), SCRAM, []),
    # One server of the list without a user would be reached without one.
    ("nats://worker:pw@n1:4222,nats://n2:4222", NatsCredentials(), SCRAM, ["NATS"]),
    (OPEN_NATS, NatsCredentials(user="w", password="p"),
     "mongodb://m1/?tls=true&authMechanism=MONGODB-X509&tlsCertificateKeyFile=/c.pem", []),
    (OPEN_NATS, NatsCredentials(user="w", password="p"), "mongodb://m1/?tls=true", ["MongoDB"]),
])
def test_what_is_missing(nats_url: str, creds: NatsCredentials, uri: str,
                         missing: list[str]) -> None:
    found = missing_secrets(nats_url, creds, uri)
    assert [m.split(" ", 1)[0] for m in found] == missing


def test_nkey_seeds_creds_and_client_certificates_count(tmp_path: Path) -> None:
    seed, cert, key = (tmp_path / n for n in ("w.nk", "c.pem", "c.key"))
    for path in (seed, cert, key):
        path.write_text("x")
    for creds in (NatsCredentials(nkey_seed_file=seed), NatsCredentials(creds_file=seed),
                  NatsCredentials(tls_cert=cert, tls_key=key)):
        assert missing_secrets(OPEN_NATS, creds, SCRAM) == []


def production(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    for name in ("NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY_SEED",
                 "NATS_TLS_CA", "NATS_TLS_CERT", "NATS_TLS_KEY", "ALLOW_UNAUTHENTICATED",
                 "REQUIRE_SIGNATURES", "LEDGER_PRINCIPALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STREAM_PROFILE", "production")
    monkeypatch.setenv("NATS_URL", OPEN_NATS)
    monkeypatch.setenv("MONGODB_URI", OPEN_MONGO)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_the_production_profile_refuses_to_start_without_secrets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    production(monkeypatch)
    with pytest.raises(ValueError) as refused:
        Settings.from_env()
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("STREAM_PROFILE=production needs credentials")
    assert "NATS (NATS_NKEY_SEED" in message and "MongoDB (a user in MONGODB_URI" in message

    production(monkeypatch, NATS_USER="worker", NATS_PASSWORD="pw", MONGODB_URI=SCRAM)
    # Signatures are required in production: the principals to verify them against too.
    with pytest.raises(ValueError, match="needs LEDGER_PRINCIPALS"):
        Settings.from_env()
    production(monkeypatch, NATS_USER="worker", NATS_PASSWORD="pw", MONGODB_URI=SCRAM,
               REQUIRE_SIGNATURES="0")
    assert Settings.from_env().nats_credentials.user == "worker"
    production(monkeypatch, ALLOW_UNAUTHENTICATED="1")
    assert Settings.from_env().allow_unauthenticated
    production(monkeypatch, STREAM_PROFILE="development")
    assert Settings.from_env().mongodb_uri == OPEN_MONGO
