"""One deployment as production would run it, for the attacks: a principals file with
several principals per role, the authorization `python -m deploy.permissions
--principals` writes from it, nats-server with that block included, and the workers
(`python -m workers`) authenticated with their own nkey."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import nats
from nats.aio.client import Client

from clients.credentials import NatsCredentials
from clients.inbox import inbox_prefix_for
from contracts.shared.roles import Role
from contracts.trust.keys import new_user_seed, public_of_seed
from contracts.trust.principals import Directory, Principal, PrincipalKey, render_directory
from deploy.embedded import ManagedServer, free_port, start_nats
from deploy.grants import Holder, owned, workers_durables
from deploy.permissions import render_principals
from tests.conftest import Workers, worker_env

PRINCIPALS: list[tuple[str, Role, dict[str, list[str]]]] = [
    ("ledger-workers", Role.WORKER, {}),
    ("billing-agent", Role.AGENT, {"consumers": ["billing-batch"]}),
    ("search-agent", Role.AGENT, {}),
    ("alice", Role.OPERATOR, {"projects": ["billing"]}),
    ("bob", Role.OPERATOR, {"projects": ["*"]}),
    ("console", Role.OPERATOR, {"projects": ["*"]}),
    ("pager", Role.SUBSCRIBER, {"consumers": ["pager-outcomes", "pager-violations"]}),
]
"""Two agents of two teams, two operators and the console's, a subscriber, the workers."""


@dataclass
class Deployment:
    directory: Directory
    seeds: dict[str, Path]
    principals_file: Path
    server: ManagedServer
    workers: Workers
    health: str
    mongo_uri: str
    db_name: str

    @property
    def url(self) -> str:
        return self.server.url

    def principal(self, name: str) -> Principal:
        found = self.directory.by_name(name)
        assert found is not None, name
        return found

    def names(self, *roles: Role) -> list[str]:
        return [p.name for p in self.directory.principals if not roles or p.role in roles]

    def credentials(self, name: str) -> NatsCredentials:
        return NatsCredentials(nkey_seed_file=self.seeds[name],
                               inbox_prefix=inbox_prefix_for(name))

    async def connect(self, name: str, error_cb: Callable[[Exception], Awaitable[None]]
                      | None = None) -> Client:
        """A connection as `name`: its nkey, its own inbox prefix."""
        extra = {"error_cb": error_cb} if error_cb else {}
        return await nats.connect(self.url, allow_reconnect=False,
                                  nkeys_seed=str(self.seeds[name]),
                                  inbox_prefix=inbox_prefix_for(name), **extra)

    def durables_of_others(self, name: str) -> list[tuple[str, str]]:
        """(stream, durable) of every durable someone else owns: the workers' and the
        other principals'."""
        mine = set(owned(Holder.of(self.principal(name))))
        theirs = [*workers_durables(), *(d for p in self.directory.principals
                                         if p.name != name for d in owned(Holder.of(p)))]
        return [d for d in dict.fromkeys(theirs) if d not in mine]

    def violations(self) -> list[str]:
        return [line for line in self.server.log_path.read_text().splitlines()
                if "Violation" in line]


def make_principals(root: Path) -> tuple[Directory, dict[str, Path]]:
    seeds: dict[str, Path] = {}
    principals: list[Principal] = []
    for name, role, extra in PRINCIPALS:
        seed = new_user_seed()
        path = root / f"{name}.seed"
        path.write_bytes(seed)
        path.chmod(0o600)
        seeds[name] = path
        key = PrincipalKey(public=public_of_seed(seed))
        principals.append(Principal.model_validate(
            {"name": name, "role": role, "keys": [key], **extra}))
    return Directory(principals=tuple(principals)), seeds


async def deploy(root: Path, mongo_uri: str, db_name: str) -> Deployment:
    root.mkdir(parents=True, exist_ok=True)
    directory, seeds = make_principals(root)
    principals_file = root / "principals.toml"
    principals_file.write_text(render_directory(directory.principals))
    (root / "nats-principals.conf").write_text(render_principals(directory))
    (root / "server.conf").write_text('include "nats-principals.conf"\n')
    server = start_nats(root, port=free_port(), config=root / "server.conf")
    health = f"127.0.0.1:{free_port()}"
    env = worker_env(server.url, mongo_uri, db_name, NATS_NKEY_SEED=str(seeds["ledger-workers"]),
                     LEDGER_PRINCIPALS=str(principals_file), HEALTH_ADDR=health)
    workers = Workers(env, root / "workers.log")
    try:
        await workers.start(server.url, nkeys_seed=str(seeds["ledger-workers"]),
                            inbox_prefix=inbox_prefix_for("ledger-workers"))
    except BaseException:
        server.stop()
        raise
    return Deployment(directory, seeds, principals_file, server, workers, health, mongo_uri,
                      db_name)
