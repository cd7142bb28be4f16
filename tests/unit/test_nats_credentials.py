"""NatsCredentials: one way to authenticate, files checked at start, secrets kept out of repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootstrap.settings import Settings
from clients.credentials import NatsCredentials
from workers.connections import broker_security


def test_from_env_reads_every_variable_and_repr_hides_the_secrets(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until connecting")
    creds = NatsCredentials.from_env({"NATS_USER": "agent", "NATS_PASSWORD": "hunter2",
                                      "NATS_TLS_CA": str(ca)})
    assert (creds.user, creds.password, creds.tls_ca) == ("agent", "hunter2", ca)
    assert "hunter2" not in repr(creds)
    assert "hunter2" not in repr(Settings(nats_credentials=creds))
    token = NatsCredentials.from_env({"NATS_TOKEN": "s3cr3t"})
    assert "s3cr3t" not in repr(token)
    assert token.options() == {"token": "s3cr3t"}
    assert NatsCredentials.from_env({}).options() == {}
    assert broker_security(NatsCredentials()) is None


@pytest.mark.parametrize(("env", "message"), [
    ({"NATS_USER": "agent"}, "NATS_USER and NATS_PASSWORD go together"),
    ({"NATS_TOKEN": "t", "NATS_USER": "a", "NATS_PASSWORD": "p"}, "one way to authenticate"),
    ({"NATS_CREDS": "/nowhere/agent.creds"}, "NATS_CREDS=/nowhere/agent.creds: no such file"),
    ({"NATS_NKEY_SEED": "/nowhere/seed"}, "NATS_NKEY_SEED=/nowhere/seed: no such file"),
    ({"NATS_TLS_CERT": "/nowhere/c.pem"}, "NATS_TLS_CERT and NATS_TLS_KEY go together"),
])
def test_a_bad_combination_is_one_message_naming_the_variables(env: dict[str, str],
                                                               message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NatsCredentials.from_env(env)


def test_settings_read_the_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_USER", "worker")
    monkeypatch.setenv("NATS_PASSWORD", "pw")
    settings = Settings.from_env()
    assert settings.nats_credentials.user == "worker"
    security = broker_security(settings.nats_credentials)
    assert security is not None and type(security).__name__ == "NatsUserPassword"
