"""The deployment files ship no secret and expose nothing by default: every secret is a
required variable (compose stops on a missing one), MongoDB sits on an internal network
with authentication, and NATS monitoring never leaves the node. Read from the files
themselves, so an edit that brings a default password back fails here. (The files are
checked against their schemas by `scripts/lint`; nats-server's refusal of a missing
variable by tests/integration/test_nats_cluster_config.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SECRET_NAME = re.compile(r"PASSWORD|KEYFILE|TOKEN|SECRET|SEED", re.IGNORECASE)
LITERAL = re.compile(r"(?i)(?<![a-z])(password|passwd|token|secret)\s*(=|:(?![?-]))"
                     r"\s*[\"']?(?![\s$<{\"'])\S")
"""A secret-named key followed by a written value (not `$VAR`, `<< $VAR >>`, `${VAR}`)."""
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?")


def test_every_secret_of_compose_is_required_and_none_has_a_default() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    used: dict[str, set[str]] = {}
    for m in INTERPOLATION.finditer(text):
        used.setdefault(m["name"], set()).add(m["op"] or "")
    secrets = {name: ops for name, ops in used.items() if SECRET_NAME.search(name)}
    assert set(secrets) >= {"NATS_ROUTE_PASSWORD", "LEDGER_WORKER_PASSWORD",
                            "LEDGER_MONGO_PASSWORD", "LEDGER_MONGO_ADMIN_PASSWORD",
                            "LEDGER_MONGO_KEYFILE"}
    for name, ops in secrets.items():
        # `:?` somewhere makes compose refuse the whole file when it is unset; no
        # occurrence may fall back to a value.
        assert ":?" in ops and not ops & {"-", ":-", "+", ":+"}, (name, ops)


def environments() -> list[tuple[str, str, str]]:
    out = []
    for name, service in COMPOSE["services"].items():
        for key, value in (service.get("environment") or {}).items():
            out.append((name, key, str(value)))
    return out


def test_no_secret_is_written_in_compose() -> None:
    for service, key, value in environments():
        if SECRET_NAME.search(key):
            assert value.startswith("${"), (service, key)
        # A URL's password comes from a variable too.
        for password in re.findall(r"://[^:/@\s]+:([^@\s]+)@", value):
            assert password.startswith("${"), (service, key)


def test_mongodb_is_internal_and_authenticated() -> None:
    services = COMPOSE["services"]
    assert COMPOSE["networks"]["db"] == {"internal": True}
    for name in ("mongo-1", "mongo-2", "mongo-3"):
        mongo = services[name]
        assert mongo["networks"] == ["db"] and "ports" not in mongo
        command = " ".join(mongo["entrypoint"])
        assert "--keyFile" in command and "--bind_ip_all" not in command
        assert '--bind_ip "localhost,$$MONGO_NAME"' in command
    assert services["mongo-init"]["network_mode"] == "service:mongo-1"
    workers = services["workers"]["environment"]
    assert workers["MONGODB_URI"].startswith(
        "mongodb://ledger:${LEDGER_MONGO_PASSWORD:?")
    assert "authSource=admin" in workers["MONGODB_URI"]


def published(service: dict[str, Any]) -> list[str]:
    return [str(p) for p in service.get("ports", [])]


def test_monitoring_and_databases_are_never_published() -> None:
    for name, service in COMPOSE["services"].items():
        for port in published(service):
            assert not re.search(r"(^|:)(8222|27017|6222)$", port), (name, port)
            host = port.rsplit(":", 2)[0] if port.count(":") >= 2 else ""
            assert host and not host.startswith("0.0.0.0"), (name, port)
        env = service.get("environment") or {}
        if "NATS_HTTP" in env:
            assert env["NATS_HTTP"].startswith("127.0.0.1:"), name
    nats_env = (DEPLOY / "nats-server.env").read_text()
    assert "NATS_HTTP=127.0.0.1:8222" in nats_env


def test_no_deploy_file_carries_a_default_password() -> None:
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_dir() or path.suffix == ".py" or "__pycache__" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if line.lstrip().startswith("#"):
                continue
            assert "change-me" not in line, (path, number)
            assert not LITERAL.search(line), (path, number, line)


def test_k8s_nats_keeps_monitoring_out_of_its_service() -> None:
    values = yaml.safe_load((DEPLOY / "k8s" / "nats-values.yaml").read_text())
    assert values["service"]["ports"]["monitor"] == {"enabled": False}
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in values["container"]["env"]}
    assert {"NATS_ROUTE_PASSWORD", "NATS_CLUSTER_ROUTES"} <= set(env)
    policy = yaml.safe_load((DEPLOY / "k8s" / "network-policies.yaml").read_text())
    ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert ports == {4222, 6222}
