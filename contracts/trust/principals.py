"""The principals of one deployment: who they are, what role, which keys, what scope.

One declaration (a TOML file, `LEDGER_PRINCIPALS`) feeds both sides of trust: the
nats-server authorization (one nkey user per key, with its role's permissions, its own
inbox prefix and its own consumers) and the workers' verification of what is signed.
Keys are kept after rotation or revocation so old records still verify: a key is
judged at the time a message says it was signed, inside its validity window.

    [[principal]]
    name = "billing-agent"
    role = "agent"
    keys = [{ public = "UA...", valid_from = 2026-01-01T00:00:00Z }]

    [[principal]]
    name = "alice"
    role = "operator"
    keys = [{ public = "UB..." }]
    projects = ["billing"]        # or ["*"]

    [[principal]]
    name = "pager"
    role = "subscriber"
    keys = [{ public = "UC..." }]
    consumers = ["pager-applied"]
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import cached_property
from typing import Annotated, Self

from pydantic import AfterValidator, Field, ValidationError, model_validator

from contracts.shared.base import Frozen
from contracts.shared.roles import Role
from contracts.shared.timestamps import UtcTime
from contracts.trust.keys import BadKey, raw_public_key

ALL_PROJECTS = "*"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"
"""Lower case, digits, `-` and `_`: a principal's name is also a NATS subject token (its
inbox prefix `_INBOX_<name>`) and part of consumer names, so no dots or wildcards."""


def _public_key(value: str) -> str:
    try:
        raw_public_key(value)
    except BadKey as exc:
        raise ValueError(str(exc)) from None
    return value


PublicKey = Annotated[str, AfterValidator(_public_key)]


class PrincipalKey(Frozen):
    public: PublicKey = Field(description="The public user nkey (U...).")
    valid_from: UtcTime | None = Field(default=None, description="Not valid before.")
    valid_until: UtcTime | None = Field(default=None, description="Not valid after.")
    revoked_at: UtcTime | None = Field(
        default=None, description="Revoked: nothing it signed at or after this time is "
        "accepted (what it signed before still verifies).")

    def refusal_at(self, at: datetime) -> str | None:
        """Why this key does not vouch for something signed at `at`, or None."""
        if self.revoked_at is not None and at >= self.revoked_at:
            return f"revoked at {self.revoked_at.isoformat()}"
        if self.valid_from is not None and at < self.valid_from:
            return f"not valid before {self.valid_from.isoformat()}"
        if self.valid_until is not None and at > self.valid_until:
            return f"not valid after {self.valid_until.isoformat()}"
        return None


class Principal(Frozen):
    name: str = Field(pattern=NAME_PATTERN, description="Unique name; what records show.")
    role: Role
    keys: tuple[PrincipalKey, ...] = Field(min_length=1)
    projects: tuple[str, ...] = Field(
        default=(), description="Operators: the projects whose plans they may act on "
        "('*': all). Plans without a project are in scope only for '*'.")
    consumers: tuple[str, ...] = Field(
        default=(), description="Subscribers: the durable consumer names they own.")

    def covers_project(self, project: str | None) -> bool:
        """Whether an operator's scope includes a plan of `project`."""
        return ALL_PROJECTS in self.projects or (project is not None
                                                 and project in self.projects)


class KeyRefused(Frozen):
    """Why a key does not identify a principal at a time: the rule and the sentence."""

    rule: str
    message: str


class Directory(Frozen):
    """Every principal of a deployment, looked up by the public key that signed."""

    principals: tuple[Principal, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> Self:
        names = [p.name for p in self.principals]
        keys = [k.public for p in self.principals for k in p.keys]
        for what, values in (("name", names), ("key", keys)):
            seen = {v for v in values if values.count(v) > 1}
            if seen:
                raise ValueError(f"principal {what}s must be unique: {sorted(seen)}")
        return self

    def by_name(self, name: str) -> Principal | None:
        return next((p for p in self.principals if p.name == name), None)

    def of_role(self, role: Role) -> list[Principal]:
        return [p for p in self.principals if p.role is role]

    def key_index(self) -> Mapping[str, tuple[Principal, PrincipalKey]]:
        return self._index

    @cached_property
    def _index(self) -> dict[str, tuple[Principal, PrincipalKey]]:
        # Built once: every inbound message looks its key up here.
        return {k.public: (p, k) for p in self.principals for k in p.keys}

    def lookup(self, public: str, at: datetime) -> Principal | KeyRefused:
        """The principal whose key `public` vouched for something signed at `at`."""
        found = self._index.get(public)
        if found is None:
            return KeyRefused(rule="unknown_key",
                              message=f"key {public[:12]}… belongs to no known principal")
        principal, key = found
        why = key.refusal_at(at)
        if why is not None:
            return KeyRefused(rule="key_revoked",
                              message=f"key {public[:12]}… of {principal.name} is {why}")
        return principal


def load_directory(text: str) -> Directory:
    """Parse a principals file; raises ValueError with one readable line."""
    try:
        raw = tomllib.loads(text)
        return Directory(principals=tuple(raw.get("principal", ())))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"principals file is not TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = list(first["loc"])
        if len(loc) >= 2 and loc[0] == "principals" and isinstance(loc[1], int):
            loc[:2] = [f"principal #{loc[1] + 1}"]
        where = ".".join(str(p) for p in loc)
        raise ValueError(f"principals file: {where}: {first['msg']}") from None


def render_directory(principals: Iterable[Principal]) -> str:
    """A principals file for `principals` (what `agents up` writes for development)."""
    lines: list[str] = []
    for p in principals:
        lines += ["[[principal]]", f'name = "{p.name}"', f'role = "{p.role.value}"']
        lines.append("keys = [" + ", ".join(_render_key(k) for k in p.keys) + "]")
        if p.projects:
            lines.append("projects = [" + ", ".join(f'"{x}"' for x in p.projects) + "]")
        if p.consumers:
            lines.append("consumers = [" + ", ".join(f'"{x}"' for x in p.consumers) + "]")
        lines.append("")
    return "\n".join(lines)


def _render_key(key: PrincipalKey) -> str:
    fields = [f'public = "{key.public}"']
    for name in ("valid_from", "valid_until", "revoked_at"):
        value = getattr(key, name)
        if value is not None:
            fields.append(f"{name} = {value.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z")
    return "{ " + ", ".join(fields) + " }"
