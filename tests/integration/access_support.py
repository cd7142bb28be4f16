"""A nats-server with deploy/nats-auth.conf included, for the access-control tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer, free_port, start_nats

ROOT = Path(__file__).resolve().parents[2]
AUTH_CONF = ROOT / "deploy" / "nats-auth.conf"
ROLES = ("worker", "agent", "operator", "subscriber")
PLAN = new_id()


def password(role: str) -> str:
    return f"{role}-secret-{PLAN[-6:]}"


@dataclass
class Secured:
    server: ManagedServer
    port: int

    def url(self, role: str, secret: str | None = None) -> str:
        return f"nats://{role}:{secret or password(role)}@127.0.0.1:{self.port}"

    def violations(self) -> list[str]:
        return [line for line in self.server.log_path.read_text().splitlines()
                if "Violation" in line]


def start_secured(data_dir: Path) -> Secured:
    """nats-server with the production auth file included, passwords in its environment."""
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(AUTH_CONF, data_dir / AUTH_CONF.name)
    (data_dir / "server.conf").write_text(f'include "{AUTH_CONF.name}"\n')
    port = free_port()
    env = {f"LEDGER_{r.upper()}_PASSWORD": password(r) for r in ROLES}
    return Secured(start_nats(data_dir, port=port, config=data_dir / "server.conf", env=env),
                   port)




@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A nats-server with the four roles, for a whole test module."""
    s = start_secured(tmp_path_factory.mktemp("secured-nats"))
    try:
        yield s
    finally:
        s.server.stop()
