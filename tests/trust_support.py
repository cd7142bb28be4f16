"""Principals, keys and signed messages for the tests of verified identity."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from contracts.shared.roles import Role
from contracts.trust.keys import new_user_seed, public_of_seed
from contracts.trust.principals import Directory, Principal, PrincipalKey, render_directory
from contracts.trust.signing import Signer


@dataclass(frozen=True)
class Member:
    """A principal of the test deployment with its seed."""

    name: str
    role: Role
    seed: bytes
    projects: tuple[str, ...] = ()

    @property
    def public(self) -> str:
        return public_of_seed(self.seed)

    @property
    def signer(self) -> Signer:
        return Signer(self.seed)

    def principal(self, **key: Any) -> Principal:
        return Principal(name=self.name, role=self.role, projects=self.projects,
                         keys=(PrincipalKey(public=self.public, **key),))

    def signed(self, kind: str, subject: str, msg_id: str, body: Mapping[str, Any] | bytes,
               now: datetime | None = None) -> tuple[bytes, dict[str, str]]:
        """(body bytes, headers with Nats-Msg-Id and the signature)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return data, {"Nats-Msg-Id": msg_id, **self.signer.headers(
            kind=kind, subject=subject, msg_id=msg_id, body=data, now=now)}


def member(name: str, role: Role, *projects: str) -> Member:
    return Member(name, role, new_user_seed(), tuple(projects))


def directory(*members: Member) -> Directory:
    return Directory(principals=tuple(m.principal() for m in members))


def write_principals(path: Path, *members: Member, revoked: Mapping[str, datetime] = {}
                     ) -> Path:
    """A principals file (`revoked`: name -> when that member's key was revoked)."""
    path.write_text(render_directory(
        m.principal(**({"revoked_at": revoked[m.name]} if m.name in revoked else {}))
        for m in members))
    return path


def write_seed(path: Path, m: Member) -> Path:
    path.write_bytes(m.seed)
    return path


def ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)
