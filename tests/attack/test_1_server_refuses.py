"""Every principal, each with its own nkey and the permissions generated for it, tries
the whole catalog (tests/attack/catalog.py) against nats-server: each attempt is
refused. The deployment keeps its streams and the workers' durables as declared."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from deploy.grants import workers_durables
from tests.attack.attacks import Attack, Attacker
from tests.attack.catalog import STREAMS, attacks_for
from tests.attack.deployment import PRINCIPALS, Deployment
from tests.conftest import DECISIONS_STREAM

pytestmark = pytest.mark.attack


@pytest.mark.parametrize("name", [name for name, _, _ in PRINCIPALS])
async def test_every_attack_is_refused(name: str, deployment: Deployment,
                                       attacker: Callable[[str], Awaitable[Attacker]]) -> None:
    a = await attacker(name)
    attacks = attacks_for(deployment, name)
    assert attacks
    failed = await a.tried_all(attacks)
    assert failed == [], f"{name} was not refused: {failed}"


async def test_the_streams_and_the_workers_durables_are_untouched(
        deployment: Deployment) -> None:
    nc = await deployment.connect("ledger-workers")
    try:
        js = nc.jetstream()
        names = sorted(info.config.name or "" for info in await js.streams_info())
        assert names == sorted(STREAMS)
        assert (await js.stream_info(DECISIONS_STREAM)).config.subjects == ["decisions.>"]
        # The workers' durables that exist (a partition count's recorders, the webhooks'
        # dispatcher only while a webhook is active): none had to be re-created.
        existing = {(stream, c.name) for stream in STREAMS
                    for c in await js.consumers_info(stream)}
        assert {("CORRECTIONS", "corrector"), ("INVARIANTS", "invariant-violations")} <= existing
        for stream, durable in set(workers_durables()) & existing:
            info = await js.consumer_info(stream, durable)
            assert not (info.config.metadata or {}).get("ledger_recreated_from"), durable
    finally:
        await nc.close()
    assert "re-creating it" not in deployment.workers.log()


async def test_what_a_principal_may_do_is_not_mistaken_for_a_refusal(
        attacker: Callable[[str], Awaitable[Attacker]]) -> None:
    """The check itself: allowed requests and subscriptions are answered, not refused
    (not counted in the tally)."""
    agent, operator = await attacker("billing-agent"), await attacker("alice")
    for who, allowed in ((agent, Attack("", "$JS.API.STREAM.MSG.GET.DECISIONS",
                                        body=b'{"seq": 1}')),
                         (agent, Attack("", "_INBOX_billing-agent.x.>", op="sub")),
                         (operator, Attack("", "$JS.API.STREAM.INFO.DECISIONS")),
                         (operator, Attack("", "corrections.events.>", op="sub"))):
        assert not await who.refused(allowed), allowed
