"""deploy/nats-auth.conf is what the declared families say each role may do."""

from __future__ import annotations

import pytest

from contracts.families import FAMILIES
from contracts.shared.families import Direction
from contracts.shared.roles import Role
from deploy.grants import grants, workers_own
from deploy.permissions import CONF_PATH, render

pytestmark = pytest.mark.unit


def test_committed_permissions_match_the_declarations() -> None:
    assert CONF_PATH.read_text() == render(), "stale: run python -m deploy.permissions"


def test_only_the_workers_publish_events_and_only_what_they_announce() -> None:
    events = {f.wildcard for f in FAMILIES if f.direction is Direction.EVENT}
    for role in (Role.AGENT, Role.OPERATOR, Role.SUBSCRIBER):
        assert not events & set(grants(role).publish), role
    # The operator announces one part of one event family: the resolutions it writes.
    assert "invariants.events.*.resolved" in grants(Role.OPERATOR).publish
    worker = grants(Role.WORKER).publish
    assert events <= set(worker)
    assert not any(s.startswith("corrections.requested") for s in worker)


def test_every_other_role_is_denied_the_workers_durables() -> None:
    publish, subscribe = workers_own()
    assert "$JS.API.CONSUMER.*.CORRECTIONS.corrector" in publish
    assert "$JS.API.CONSUMER.*.*.DECISIONS.recorder" in publish
    assert "$JS.EVENT.ADVISORY.CONSUMER.*.INVARIANTS.invariant-violations" in subscribe
    assert render().count("deny: $WORKERS_OWN_PUBLISH") == 3


def test_a_durable_named_at_run_time_is_permitted_as_any_name() -> None:
    agent = grants(Role.AGENT).publish
    assert "$JS.API.CONSUMER.DURABLE.CREATE.CORRECTIONS.*" in agent
    assert not any("DECISIONS" in s and "DURABLE" in s for s in agent)
    assert "$JS.API.CONSUMER.CREATE.DECISIONS" in agent  # wait_persisted's ordered consumer
