"""The generated authorization files are what the declared families and the principals
say each holder may do."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.families import FAMILIES
from contracts.shared.families import Direction
from contracts.shared.roles import Reader, Role, Via
from contracts.trust.keys import new_user_seed, public_of_seed
from contracts.trust.principals import Directory, Principal, PrincipalKey, load_directory
from deploy.grants import Holder, grants, owned, workers_durables
from deploy.permissions import (
    CONF_PATH,
    EXAMPLE_AT,
    EXAMPLE_CONF,
    EXAMPLE_PRINCIPALS,
    render,
    render_principals,
    variable,
)
from deploy.roles_table import DOC, with_table

pytestmark = pytest.mark.unit

ROLES = [Holder.of_role(r) for r in Role]
OTHERS = (Role.AGENT, Role.OPERATOR, Role.SUBSCRIBER)


def principal(name: str, role: Role, **extra: object) -> Principal:
    key = PrincipalKey(public=public_of_seed(new_user_seed()))
    return Principal.model_validate({"name": name, "role": role, "keys": [key], **extra})


def test_committed_files_match_the_declarations() -> None:
    assert CONF_PATH.read_text() == render(), "stale: run python -m deploy.permissions"
    example = load_directory(EXAMPLE_PRINCIPALS.read_text())
    assert EXAMPLE_CONF.read_text() == render_principals(example, EXAMPLE_AT)
    assert DOC.read_text() == with_table(DOC.read_text()), "stale roles table in " + str(DOC)


def test_only_the_workers_publish_events_and_only_what_they_announce() -> None:
    events = {f.wildcard for f in FAMILIES if f.direction is Direction.EVENT}
    for role in OTHERS:
        assert not events & set(grants(Holder.of_role(role)).publish), role
    # The operator announces one part of one event family: the resolutions it writes.
    assert "invariants.events.*.resolved" in grants(Holder.of_role(Role.OPERATOR)).publish
    worker = grants(Holder.of_role(Role.WORKER)).publish
    assert events <= set(worker)
    assert not any(s.startswith("corrections.requested") for s in worker)


def test_every_other_holder_is_denied_the_workers_durables_by_name() -> None:
    for role in OTHERS:
        g = grants(Holder.of_role(role), ROLES)
        assert "$JS.API.CONSUMER.*.CORRECTIONS.corrector" in g.deny_publish
        assert "$JS.API.CONSUMER.*.*.DECISIONS.recorder" in g.deny_publish
        assert "$JS.API.CONSUMER.CREATE.DECISIONS.plan-reconciler.>" in g.deny_publish
        assert ("$JS.EVENT.ADVISORY.CONSUMER.*.INVARIANTS.invariant-violations"
                in g.deny_subscribe)
    assert grants(Holder.of_role(Role.WORKER), ROLES).deny_publish == []


def test_no_holder_but_the_workers_may_create_a_consumer_without_naming_it() -> None:
    """A create subject without a name (`$JS.API.CONSUMER.CREATE.<stream>`) takes the
    name from the body, and a body naming an existing durable updates it; the legacy
    DURABLE.CREATE carries no filter."""
    for role in OTHERS:
        for subject in grants(Holder.of_role(role), ROLES).publish:
            parts = subject.split(".")
            if subject.startswith("$JS.API.CONSUMER.CREATE."):
                assert len(parts) > 6, subject  # stream, name, then the filter's tokens
            assert not subject.startswith("$JS.API.CONSUMER.DURABLE."), subject
            assert not subject.startswith("$JS.FC."), subject


def test_each_principal_reads_its_own_inbox_and_owns_its_own_durables() -> None:
    a = principal("billing-agent", Role.AGENT)
    b = principal("search-agent", Role.AGENT, consumers=["batch"])
    s = principal("pager", Role.SUBSCRIBER, consumers=["pager-outcomes"])
    holders = [Holder.of(p) for p in (a, b, s)]
    ga = grants(holders[0], holders)
    assert "_INBOX_billing-agent.>" in ga.subscribe
    assert not any(x.startswith("_INBOX") and "billing" not in x for x in ga.subscribe)
    assert ("$JS.API.CONSUMER.CREATE.CORRECTIONS.resume_billing-agent.corrections.resume.*"
            in ga.publish)
    assert "$JS.API.CONSUMER.MSG.NEXT.CORRECTIONS.resume_billing-agent" in ga.publish
    assert not any(x.endswith(".*") and "CONSUMER" in x for x in ga.publish
                   if "CREATE" not in x)  # no durable permitted as any name
    assert "$JS.API.CONSUMER.*.*.CORRECTIONS.resume_search-agent" in ga.deny_publish
    assert "$JS.API.CONSUMER.*.CORRECTIONS.batch" in ga.deny_publish
    assert "$JS.API.CONSUMER.*.CORRECTIONS.pager-outcomes" in ga.deny_publish
    assert not any("billing-agent" in x for x in ga.deny_publish)
    assert owned(holders[1]) == [("CORRECTIONS", "resume_search-agent"),
                                 ("CORRECTIONS", "batch")]
    assert owned(holders[2]) == [("CORRECTIONS", "pager-outcomes"),
                                 ("INVARIANTS", "pager-outcomes"),
                                 ("DECISIONS", "pager-outcomes"),
                                 ("WEBHOOKS", "pager-outcomes")]
    gs = grants(holders[2], holders)
    assert ("$JS.API.CONSUMER.CREATE.CORRECTIONS.pager-outcomes.corrections.events.*.*"
            in gs.publish)
    assert "$JS.API.CONSUMER.*.CORRECTIONS.resume_billing-agent" in gs.deny_publish


def test_the_nkey_users_are_the_usable_keys_each_with_its_principals_permissions() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    keys = [public_of_seed(new_user_seed()) for _ in range(4)]
    alice = Principal(name="alice", role=Role.OPERATOR, projects=("*",), keys=(
        PrincipalKey(public=keys[0]),
        PrincipalKey(public=keys[1], revoked_at=datetime(2026, 1, 1, tzinfo=UTC)),
        PrincipalKey(public=keys[2], valid_from=datetime(2027, 1, 1, tzinfo=UTC)),
        PrincipalKey(public=keys[3], valid_until=datetime(2027, 1, 1, tzinfo=UTC))))
    text = render_principals(Directory(principals=(alice,)), now)
    assert f"{{ nkey: {keys[0]}, permissions: $P1_ALICE }}" in text
    assert f"{{ nkey: {keys[3]}, permissions: $P1_ALICE }}" in text
    assert keys[1] not in text and keys[2] not in text
    assert "2 revoked or out of their window left out" in text
    assert "_INBOX.>" not in text and "password" not in text


def test_variables_of_similar_names_stay_apart() -> None:
    a, b = Holder("a-b", Role.AGENT), Holder("a_b", Role.AGENT)
    assert variable(1, a) != variable(2, b)


@pytest.mark.parametrize("durable", ["resume-{plan_id}", "{name}", "x.{principal}"])
def test_a_durable_name_is_owned_only_by_being_written_out(durable: str) -> None:
    with pytest.raises(ValueError):
        Reader(Role.AGENT, Via.DURABLE, "t", durable=durable)


def test_the_workers_durables_have_fixed_names() -> None:
    assert ("DECISIONS", "recorder") in workers_durables()
    with pytest.raises(ValueError):
        Reader(Role.WORKER, Via.DURABLE, "t", durable="w_{principal}")


@pytest.mark.parametrize(("consumers", "why"), [
    (["corrector"], "is the workers'"),
    (["resume_billing-agent"], "is billing-agent's"),
    (["*"], "is not"),
    (["a.b"], "is not"),
    ([">"], "is not"),
])
def test_a_principal_cannot_declare_a_durable_someone_else_owns_or_a_pattern(
        consumers: list[str], why: str) -> None:
    agent = principal("billing-agent", Role.AGENT)
    sub = principal("pager", Role.SUBSCRIBER, consumers=consumers)
    with pytest.raises(ValueError, match=why):
        render_principals(Directory(principals=(agent, sub)))
