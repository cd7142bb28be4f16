"""`redact` on every URL form a NATS_URL or MONGODB_URI takes, with passwords that break
URL parsers: a property test builds the URL and the exact text it must become, so a
secret that survives and a host that disappears both fail it."""

from __future__ import annotations

import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from contracts.shared.urls import MASK, redact
from tests.properties import examples

pytestmark = pytest.mark.unit

SECRET_CHARS = string.ascii_letters + string.digits + "/@:!$&'()*+,;=~-_.?#[]"
"""What a password or token may hold raw: everything printable but whitespace and `%`
(which comes only as an escape, below). Parsers refuse most of these unescaped; the
redacted error message naming such a URL must hide them all the same."""

escapes = st.builds(lambda b: f"%{b:02X}", st.integers(0, 255))
secrets = st.lists(st.sampled_from(SECRET_CHARS) | escapes, max_size=24).map("".join) \
    .filter(lambda s: "://" not in s)
tokens = secrets.filter(lambda s: s and ":" not in s)
names = st.text(string.ascii_lowercase + string.digits + "-_.", min_size=1, max_size=12)
hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){0,2}", fullmatch=True),
    st.sampled_from(["127.0.0.1", "10.0.0.7", "[::1]", "[fd00::2]"]))
ports = st.none() | st.integers(1, 65535)
PLAIN_PARAMS = ["replicaSet=ledger", "authSource=admin", "tls=true", "w=majority",
                "tlsCAFile=/etc/ledger/ca.pem", "directConnection=true", "appName=workers"]
SECRET_PARAMS = ["password", "tlsCertificateKeyFilePassword", "sslPEMKeyPassword", "token",
                 "authMechanismProperties"]
query_values = st.text(string.ascii_letters + string.digits + "/:!$'()*+,=~-_.?%",
                       max_size=16)


@st.composite
def userinfo(draw: st.DrawFn) -> tuple[str, str]:
    """(userinfo as written, as it must be shown)."""
    kind = draw(st.sampled_from(["none", "password", "token"]))
    if kind == "none":
        return "", ""
    if kind == "token":
        return f"{draw(tokens)}@", f"{MASK}@"
    user = draw(st.just("") | names)
    return f"{user}:{draw(secrets)}@", f"{user}:{MASK}@"


@st.composite
def host_list(draw: st.DrawFn, most: int) -> str:
    pairs = draw(st.lists(st.tuples(hosts, ports), min_size=1, max_size=most))
    return ",".join(h if p is None else f"{h}:{p}" for h, p in pairs)


@st.composite
def query(draw: st.DrawFn) -> tuple[str, str]:
    params: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            params.append((draw(st.sampled_from(PLAIN_PARAMS)),) * 2)
        else:
            name = draw(st.sampled_from(SECRET_PARAMS))
            params.append((f"{name}={draw(query_values)}", f"{name}={MASK}"))
    if not params:
        return "", ""
    return "?" + "&".join(p for p, _ in params), "?" + "&".join(s for _, s in params)


@st.composite
def mongodb_uris(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    scheme = draw(st.sampled_from(["mongodb://", "mongodb+srv://"]))
    written, shown = draw(userinfo())
    hosts_part = draw(host_list(3))
    path = draw(st.sampled_from(["", "/", "/decisions"]))
    q_written, q_shown = draw(query())
    if q_written and not path:
        path = "/"
    return (f"{scheme}{written}{hosts_part}{path}{q_written}",
            f"{scheme}{shown}{hosts_part}{path}{q_shown}", hosts_part.split(","))


@st.composite
def nats_urls(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    """A NATS_URL: one server or a comma-separated list, each with its own userinfo."""
    written, shown, servers = [], [], []
    for _ in range(draw(st.integers(1, 3))):
        scheme = draw(st.sampled_from(["nats://", "tls://", "ws://", "wss://"]))
        info, info_shown = draw(userinfo())
        server = draw(host_list(1))
        written.append(f"{scheme}{info}{server}")
        shown.append(f"{scheme}{info_shown}{server}")
        servers.append(server)
    return ",".join(written), ",".join(shown), servers


contexts = st.sampled_from(["{}", "cannot reach {} (MONGODB_URI): refused",
                            "NATS at NATS_URL={} did not answer", "[{} ]"])


@settings(max_examples=examples(200))
@given(url=mongodb_uris() | nats_urls(), context=contexts)
@example(url=("mongodb://ledger:p/a@ss:w%2Fo@rd@h1:27017,h2:27017/?replicaSet=ledger",
              f"mongodb://ledger:{MASK}@h1:27017,h2:27017/?replicaSet=ledger", ["h1", "h2"]),
         context="{}")
@example(url=("nats://s3cr@t/t0ken@n1:4222,nats://n2:4222",
              f"nats://{MASK}@n1:4222,nats://n2:4222", ["n1", "n2"]), context="{}")
def test_the_secret_never_survives_and_every_host_stays(url: tuple[str, str, list[str]],
                                                        context: str) -> None:
    written, shown, servers = url
    out = redact(context.format(written))
    assert out == context.format(shown)
    for server in servers:
        assert server in out


@pytest.mark.parametrize(("url", "shown"), [
    # A raw `@` after the hosts (here in a query value) hides what precedes it, hosts
    # included: never the other way round.
    ("mongodb://u:pw@h/?appName=a@b", f"mongodb://u:{MASK}@b"),
    ("mongodb://h/?password=A@B&w=1", f"mongodb://{MASK}&w=1"),
    ("mongodb://h/?password=A@B", f"mongodb://{MASK}"),
    ("mongodb://u:@h", f"mongodb://u:{MASK}@h"),
    ("http://127.0.0.1:8222/healthz?js-enabled-only=true",
     "http://127.0.0.1:8222/healthz?js-enabled-only=true"),
    ("no url here: password=x", "no url here: password=x"),
])
def test_edge_cases_hide_more_rather_than_less(url: str, shown: str) -> None:
    assert redact(url) == shown
