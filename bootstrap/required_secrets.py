"""The production profile starts only with credentials for both servers.

The settings' defaults hold no secret (`nats://127.0.0.1:4222`, a MongoDB URI without a
user), which is right for `agents up` and wrong for a deployment: a production worker
whose secret was not delivered (an empty Secret, a variable misspelled in a manifest)
would connect to whatever answers without one, and a server left open would accept it
silently. So with `STREAM_PROFILE=production` a missing secret stops the start in one
line, as every other bad setting does, and `ALLOW_UNAUTHENTICATED=1` is the visible,
deliberate way to run a test rig without them.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from clients.credentials import NatsCredentials
from contracts.shared.urls import nats_servers

NATS_WAYS = "NATS_NKEY_SEED, NATS_CREDS, NATS_USER/NATS_PASSWORD, NATS_TOKEN or a user in NATS_URL"
MONGODB_WAYS = ("a user in MONGODB_URI, mongodb://ledger:<password>@host/?authSource=admin, "
                "or an authMechanism")


def _has_userinfo(url: str) -> bool:
    return "@" in urlsplit(url.strip()).netloc


def nats_authenticates(nats_url: str, credentials: NatsCredentials) -> bool:
    """Whether the workers present anything to NATS: a secret, or a client certificate
    (a server with `verify_and_map` takes it for the user)."""
    given = (credentials.user, credentials.token, credentials.creds_file,
             credentials.nkey_seed_file, credentials.tls_cert)
    return any(given) or all(_has_userinfo(u) for u in nats_servers(nats_url))


def mongodb_authenticates(mongodb_uri: str) -> bool:
    """A user in the URI, or an `authMechanism` that brings its own (MONGODB-X509 with
    the client certificate, MONGODB-AWS, MONGODB-OIDC)."""
    parts = urlsplit(mongodb_uri.strip())
    mechanisms = {k.lower(): v for k, v in parse_qs(parts.query).items()}
    return "@" in parts.netloc or bool(mechanisms.get("authmechanism"))


def missing_secrets(nats_url: str, credentials: NatsCredentials, mongodb_uri: str) -> list[str]:
    """What the workers would connect without, each with the ways to give it."""
    missing = []
    if not nats_authenticates(nats_url, credentials):
        missing.append(f"NATS ({NATS_WAYS})")
    if not mongodb_authenticates(mongodb_uri):
        missing.append(f"MongoDB ({MONGODB_WAYS})")
    return missing


def require_secrets(nats_url: str, credentials: NatsCredentials, mongodb_uri: str) -> None:
    """Raise ValueError (one line) when a server would be reached without credentials."""
    missing = missing_secrets(nats_url, credentials, mongodb_uri)
    if missing:
        raise ValueError(
            f"STREAM_PROFILE=production needs credentials for every server; missing for "
            f"{' and '.join(missing)}; set ALLOW_UNAUTHENTICATED=1 only for a test rig")
