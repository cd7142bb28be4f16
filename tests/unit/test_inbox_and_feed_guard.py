"""A connection's inbox prefix (clients.inbox) and what a feed accepts
(clients._feed_guard): pure rules, no server."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from clients._feed_guard import FeedGuard, subject_matches
from clients.credentials import NatsCredentials
from clients.inbox import (
    connection_inbox_prefix,
    inbox_prefix_for,
    inbox_prefix_from_env,
    principal_of,
)
from clients.resume import resume_durable
from clients.subscriber import events_filter
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from contracts.trust.keys import new_user_seed, public_of_seed
from contracts.trust.principals import Principal, PrincipalKey, render_directory

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("pattern", "subject", "matches"), [
    ("corrections.resume.*", "corrections.resume.P", True),
    ("corrections.resume.*", "corrections.resume.P.x", False),
    ("corrections.resume.P", "corrections.resume.Q", False),
    ("corrections.>", "corrections.resume.P", True),
    ("corrections.>", "corrections", False),
    ("corrections.events.*.*", "corrections.events.*.applied", True),
    ("a.b", "a", False),
])
def test_subjects_match_as_nats_matches_them(pattern: str, subject: str, matches: bool) -> None:
    assert subject_matches(pattern, subject) is matches


def token_by_token(pattern: str, subject: str) -> bool:
    """The definition, one token at a time: `*` is one token, a last `>` one or more."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(have) == len(want)


TOKENS = st.sampled_from(["a", "b", "*", ">", "", "a*", "\\", "(", "\n"])


@given(st.lists(TOKENS, max_size=5).map(".".join), st.lists(TOKENS, max_size=6).map(".".join))
def test_the_compiled_matcher_is_the_token_by_token_definition(pattern: str,
                                                               subject: str) -> None:
    assert subject_matches(pattern, subject) is token_by_token(pattern, subject)


def msg(subject: str, reply: str) -> Msg:
    return Msg(_client=None, subject=subject, reply=reply, data=b"{}")  # type: ignore[arg-type]


def test_a_feed_takes_only_what_its_consumer_delivers_on_its_subjects() -> None:
    guard = FeedGuard("durable resume_a", ["corrections.resume.P"], "CORRECTIONS", "resume_a")
    ours = "$JS.ACK.CORRECTIONS.resume_a.1.5.5.1796170731946865283.0"
    assert guard.accepts(msg("corrections.resume.P", ours))
    assert not guard.accepts(msg("corrections.resume.Q", ours))  # not its subject
    theirs = ours.replace("resume_a", "resume_b")
    assert not guard.accepts(msg("corrections.resume.P", theirs))  # another's durable
    assert not guard.accepts(msg("corrections.resume.P", "_INBOX_x.y"))  # not JetStream
    assert not guard.accepts(msg("_INBOX_a.abc", ""))  # a core publish to its inbox
    assert guard.dropped == 4


def test_the_inbox_prefix_is_the_principals() -> None:
    assert inbox_prefix_for("billing-agent") == "_INBOX_billing-agent"
    assert principal_of("_INBOX_billing-agent") == "billing-agent"
    assert principal_of("_INBOX") is None
    with pytest.raises(ValueError):
        inbox_prefix_for("Billing.Agent")
    # Given, else a password user's, else nats-py's default.
    assert connection_inbox_prefix("nats://h:4222", "_INBOX_x", "agent") == "_INBOX_x"
    assert connection_inbox_prefix("nats://h:4222", None, "agent") == "_INBOX_agent"
    assert connection_inbox_prefix("nats://op:pw@h:4222,nats://h2:4222", None, None
                                   ) == "_INBOX_op"
    assert connection_inbox_prefix("nats://h:4222", None, None) == "_INBOX"
    assert NatsCredentials(user="agent", password="pw").inbox_for("nats://h") == "_INBOX_agent"


def test_the_prefix_is_looked_up_from_the_seed_in_the_principals_file(tmp_path: Path) -> None:
    seed = new_user_seed()
    (tmp_path / "a.seed").write_bytes(seed)
    p = Principal(name="billing-agent", role=Role.AGENT,
                  keys=(PrincipalKey(public=public_of_seed(seed)),))
    (tmp_path / "p.toml").write_text(render_directory([p]))
    env = {"NATS_NKEY_SEED": str(tmp_path / "a.seed"),
           "LEDGER_PRINCIPALS": str(tmp_path / "p.toml")}
    assert inbox_prefix_from_env(env) == "_INBOX_billing-agent"
    assert NatsCredentials.from_env(env).inbox_prefix == "_INBOX_billing-agent"
    assert inbox_prefix_from_env({**env, "NATS_INBOX_PREFIX": "_INBOX_x"}) == "_INBOX_x"
    assert inbox_prefix_from_env({}) is None
    (tmp_path / "b.seed").write_bytes(new_user_seed())
    with pytest.raises(ValueError, match="belongs to no principal"):
        inbox_prefix_from_env({**env, "NATS_NKEY_SEED": str(tmp_path / "b.seed")})
    (tmp_path / "c.seed").write_bytes(b"not a seed")
    with pytest.raises(ValueError, match="NATS_NKEY_SEED"):
        inbox_prefix_from_env({**env, "NATS_NKEY_SEED": str(tmp_path / "c.seed")})


@pytest.mark.parametrize("prefix", ["_INBOX.>", "a b", "x..y", "*"])
def test_a_prefix_with_wildcards_or_spaces_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="NATS_INBOX_PREFIX"):
        NatsCredentials.from_env({"NATS_INBOX_PREFIX": prefix})


def test_durables_and_their_one_filter() -> None:
    plan = new_id()
    assert resume_durable(plan, "billing-agent") == "resume_billing-agent"
    assert resume_durable(plan) == f"resume-{plan.upper()}"
    with pytest.raises(ValueError):
        resume_durable(None)
    assert events_filter(["applied"]) == "corrections.events.*.applied"
    assert events_filter(["applied", "failed"], plan) == f"corrections.events.{plan.upper()}.*"
