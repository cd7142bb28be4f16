"""Each principal's own inbox prefix: where the replies to its requests arrive.

Every reply on NATS (a PubAck, a JetStream API answer, the messages a pull delivers, a
dry run's report) goes to the requester's inbox, `<prefix>.<random>`. With everyone on
the default `_INBOX`, a user allowed to subscribe to `_INBOX.>` reads them all. The
generated permissions (deploy.permissions) let each principal subscribe to
`_INBOX_<principal>.>` only, so each connects with that prefix:

    NATS_INBOX_PREFIX=_INBOX_billing-agent     # said outright, or
    LEDGER_PRINCIPALS=principals.toml NATS_NKEY_SEED=billing.seed   # looked up, or
    NATS_USER=agent (or nats://agent:pw@host)  # a password user: `_INBOX_<user>`

A password user of deploy/nats-auth.conf is named after its role, and its permissions
allow `_INBOX_<role>.>`, so the user's name gives the prefix. With none of these it is
`_INBOX`, nats-py's default: development (`agents up`, no authorization) is unchanged;
a configuration of your own that allows `_INBOX.>` sets NATS_INBOX_PREFIX=_INBOX. The
prefix also names the principal to the clients that own consumers by name (a runtime's
resume durable is `resume_<principal>`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from contracts.trust.keys import public_of_seed
from contracts.trust.principals import NAME_PATTERN, load_directory

DEFAULT_INBOX_PREFIX = "_INBOX"
PRINCIPAL_PREFIX = "_INBOX_"
_VALID = re.compile(r"^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$")


def inbox_prefix_for(principal: str) -> str:
    """`_INBOX_<principal>`; ValueError for a name no principal can have."""
    if not re.match(NAME_PATTERN, principal):
        raise ValueError(f"{principal!r} is not a principal's name ({NAME_PATTERN})")
    return PRINCIPAL_PREFIX + principal


def check_inbox_prefix(prefix: str) -> str:
    """`prefix` if it is subject tokens without wildcards or spaces; else ValueError."""
    if not _VALID.match(prefix):
        raise ValueError(f"NATS_INBOX_PREFIX={prefix!r}: subject tokens only (no '*', '>', "
                         "spaces or empty tokens), e.g. _INBOX_billing-agent")
    return prefix


def principal_of(prefix: str) -> str | None:
    """The principal an inbox prefix belongs to (`_INBOX_alice` -> alice), or None."""
    if prefix.startswith(PRINCIPAL_PREFIX):
        name = prefix[len(PRINCIPAL_PREFIX):]
        return name if re.match(NAME_PATTERN, name) else None
    return None


def principal_of_connection(nc: Any) -> str | None:
    """The principal a connection's inbox prefix names (nats-py keeps the prefix in
    `_inbox_prefix`; its own JetStream context reads it the same way)."""
    prefix = getattr(nc, "_inbox_prefix", b"")
    return principal_of(bytes(prefix).decode(errors="replace"))


def connection_inbox_prefix(url: str, prefix: str | None, user: str | None) -> str:
    """The prefix a connection uses: `prefix` when one was given or looked up, else the
    password user's (`user`, or the first server's in `url`) `_INBOX_<user>`, else
    `_INBOX`."""
    if prefix is not None:
        return prefix
    if not user:
        try:
            user = urlsplit(url.split(",", 1)[0].strip()).username
        except ValueError:
            user = None
    if user and re.match(NAME_PATTERN, user):
        return PRINCIPAL_PREFIX + user
    return DEFAULT_INBOX_PREFIX


def inbox_prefix_from_env(env: Mapping[str, str]) -> str | None:
    """NATS_INBOX_PREFIX; else the principal whose key NATS_NKEY_SEED holds, looked up in
    LEDGER_PRINCIPALS; else None (`connection_inbox_prefix` decides). A seed whose key no
    principal has is an error."""
    explicit = env.get("NATS_INBOX_PREFIX")
    if explicit:
        return check_inbox_prefix(explicit)
    seed, principals = env.get("NATS_NKEY_SEED"), env.get("LEDGER_PRINCIPALS")
    if not (seed and principals):
        return None
    try:
        public = public_of_seed(Path(seed).expanduser().read_bytes().strip())
        directory = load_directory(Path(principals).expanduser().read_text())
    except Exception as exc:  # unreadable file, bad TOML, not a seed (nkeys' own errors)
        raise ValueError(f"NATS_NKEY_SEED / LEDGER_PRINCIPALS: {type(exc).__name__}: "
                         f"{str(exc)[:200]}") from None
    found = directory.key_index().get(public)
    if found is None:
        raise ValueError(f"NATS_NKEY_SEED={seed}: its key {public[:12]}… belongs to no "
                         f"principal of LEDGER_PRINCIPALS={principals}")
    return inbox_prefix_for(found[0].name)
