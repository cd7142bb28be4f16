"""What nats-server lets through, and the ledger's readers refuse.

nats-server does not check a reply subject against the sender's permissions: a request
can have the server deliver its answer, or what a pull of the sender's own durable
delivers, anywhere. Each reader checks what reaches it: a feed takes only what its own
consumer delivers on its own subjects, an event feed and a follow skip what is not an
event of their plan, and the dry-run responder answers inboxes only. The real console,
as a principal of its own, gets its dry-run answer where nobody else can read it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import BadRequestError, NotFoundError

from bootstrap.settings import Settings
from clients.credentials import NatsCredentials
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.subscriber import outcomes
from console.app import run_console
from console.config import ConsoleConfig
from console.wiring import open_deps
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.states import CorrectionMode
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from deploy.embedded import free_port
from tests.attack.attacks import TALLY, Attack, Attacker
from tests.attack.deployment import Deployment
from tests.integration.wire import until
from tests.unit.test_resume_contract import applied
from tests.unit.test_write_sets import revert, target

pytestmark = pytest.mark.attack

WINDOW = "system: you are a billing agent\nuser: refund the duplicate charge"


def forged_instruction(plan_id: str) -> bytes:
    """A well-formed resume instruction that says it is for `plan_id`."""
    plan = revert()
    real = ResumeInstruction.after_revert(applied(CorrectionMode.REVERT, plan), target(), plan)
    return real.model_copy(update={"plan_id": plan_id}).model_dump_json().encode()


async def test_a_message_pushed_into_another_runtimes_inbox_is_dropped(
        deployment: Deployment) -> None:
    """billing-agent has the server deliver, from its own durable over every plan's
    instructions, an instruction naming search-agent's plan into search-agent's pull
    inbox (learnt here from the object; a real attacker would have to guess it)."""
    victim_plan, other_plan = new_id(), new_id()
    search = await deployment.connect("search-agent")
    billing = await deployment.connect("billing-agent")
    workers = await deployment.connect("ledger-workers")
    got: list[ResumeInstruction] = []

    async def resume(instruction: ResumeInstruction) -> None:
        got.append(instruction)

    try:
        sub = await DecisionRecorder(search).on_resume(resume, plan_id=victim_plan,
                                                       from_start=True)
        assert sub.durable == "resume_search-agent"
        inbox = sub._pull._sub._sub.subject.replace("*", "x")
        mine = await DecisionRecorder(billing).on_resume(resume, plan_ids=[other_plan, new_id()])
        await mine.stop()  # its durable stays, over every plan's instructions
        await workers.jetstream().publish(f"corrections.resume.{other_plan}",
                                          forged_instruction(victim_plan))
        await billing.publish("$JS.API.CONSUMER.MSG.NEXT.CORRECTIONS.resume_billing-agent",
                              b'{"batch": 1, "expires": 2000000000}', reply=inbox)
        await billing.flush()
        await until(lambda: asyncio.sleep(0, result=sub._pull.guard.dropped > 0), 30)
        await asyncio.sleep(0.5)
        TALLY.note("billing-agent", "an instruction delivered into another runtime's pull "
                   "inbox", refused=got == [], by="readers")
        assert got == []
        await sub.stop(delete=True)
        await billing.jetstream().delete_consumer("CORRECTIONS", "resume_billing-agent")
    finally:
        for nc in (search, billing, workers):
            await nc.close()


async def test_an_api_answer_stored_as_an_event_is_never_taken_for_one(
        deployment: Deployment) -> None:
    """billing-agent names `corrections.events.<plan>.applied` as the reply subject of a
    request it may make: the server stores its answer in CORRECTIONS there. The
    subscriber's feed terminates it and an operator's follow skips it."""
    plan = new_id()
    pager = await deployment.connect("pager")
    billing = await deployment.connect("billing-agent")
    workers = await deployment.connect("ledger-workers")
    try:
        feed = outcomes(pager, durable="pager-violations", statuses=["applied"],
                        plan_id=plan, limit=1, from_start=True)
        await feed.open()
        subject = f"corrections.events.{plan}.applied"
        await billing.publish("$JS.API.STREAM.MSG.GET.DECISIONS", b'{"seq": 1}', reply=subject)
        await billing.flush()
        async def stored() -> bytes | None:
            try:
                return (await workers.jetstream().get_msg("CORRECTIONS", subject=subject)).data
            except NotFoundError:
                return None  # the answer is published after the request was read

        assert b"stream_msg_get_response" in await until(stored, 30)  # not refused by NATS
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(3):
                _ = [e async for e in feed]
        async with CorrectionClient(await deployment.connect("alice"),
                                    requested_by="alice", owns_connection=True) as ops:
            with pytest.raises(TimeoutError):
                await ops.wait_for_outcome(new_id(), plan, timeout=2)
        TALLY.note("billing-agent", "an API answer stored as a plan's applied event",
                   refused=True, by="readers")
        await pager.jetstream().delete_consumer("CORRECTIONS", "pager-violations")
    finally:
        for nc in (pager, billing, workers):
            await nc.close()


async def test_the_workers_answer_a_dry_run_only_to_an_inbox(deployment: Deployment) -> None:
    """alice may ask for dry runs; one whose reply subject is an event subject is not
    answered, so no report is stored as an event."""
    plan = new_id()
    alice = await deployment.connect("alice")
    workers = await deployment.connect("ledger-workers")
    subject = f"corrections.events.{plan}.applied"
    try:
        body = json.dumps({"correction_id": new_id(), "plan_id": plan, "decision_id": new_id(),
                           "mode": "revert", "guidance": "x", "requested_by": "alice"})
        await alice.publish(f"corrections.dryrun.{plan}", body.encode(), reply=subject)
        await alice.flush()
        await asyncio.sleep(2)
        with pytest.raises(Exception, match="no message found"):
            await workers.jetstream().get_msg("CORRECTIONS", subject=subject)
        TALLY.note("alice", "a dry run answered into an event subject", refused=True,
                   by="readers")
    finally:
        await alice.close()
        await workers.close()


@asynccontextmanager
async def real_console(deployment: Deployment) -> AsyncIterator[str]:
    """The console as production opens it (console.wiring, through the bootstrap), as
    the `console` principal: its seed, its inbox looked up in the principals file."""
    creds = NatsCredentials.from_env({"NATS_NKEY_SEED": str(deployment.seeds["console"]),
                                      "LEDGER_PRINCIPALS": str(deployment.principals_file)})
    assert creds.inbox_prefix == "_INBOX_console"
    settings = dataclasses.replace(Settings.from_env(), nats_url=deployment.url,
                                   mongodb_uri=deployment.mongo_uri,
                                   mongodb_db=deployment.db_name, nats_credentials=creds)
    config = ConsoleConfig(port=free_port())
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_console(config, lambda: open_deps(settings, "console"),
                                           stop, ready.set))
    await asyncio.wait({task, asyncio.create_task(ready.wait())}, timeout=15,
                       return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    try:
        yield config.url.rstrip("/")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def test_the_consoles_dry_run_answer_reaches_the_console_alone(
        deployment: Deployment, attacker: Callable[[str], Awaitable[Attacker]]) -> None:
    spy = await attacker("search-agent")
    async with DecisionRecorder.connect(deployment.url,
                                        credentials=deployment.credentials("billing-agent")
                                        ) as rec:
        root = await rec.root("Refund duplicate charges", context=WINDOW, project="billing")
        child = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                 question="Refund how?", chosen_option="Stripe API",
                                 context=WINDOW)
        await rec.wait_all_persisted([root, child], timeout=30)
    listening = [Attack("read the console's replies", "_INBOX_console.>", op="sub"),
                 Attack("read every reply", "_INBOX.>", op="sub")]
    assert await spy.tried_all(listening) == []
    heard: list[bytes] = []
    assert spy.nc is not None
    await _listen_where_allowed(spy.nc, heard)
    async with real_console(deployment) as url, httpx.AsyncClient(base_url=url,
                                                                  timeout=60) as http:
        r = await http.post(f"/api/decisions/{child.decision_id}/dry-run",
                            json={"mode": "revert"})
        assert r.status_code == 200, r.text
        assert child.decision_id in r.json()["impact"]["affected_decision_ids"]
    assert heard == []


async def _listen_where_allowed(nc: Client, heard: list[bytes]) -> None:
    async def note(msg: object) -> None:
        heard.append(getattr(msg, "data", b""))

    await nc.subscribe("_INBOX_search-agent.>", cb=note)


async def test_its_own_durable_made_a_push_consumer_into_a_stream_is_refused(
        deployment: Deployment) -> None:
    """billing-agent creates a durable it owns with a deliver subject in CORRECTIONS
    (`corrections.requested.<plan>`): no permission checks a deliver subject, and the
    server refuses it anyway (a deliver subject its stream captures forms a cycle)."""
    plan = new_id()
    billing = await deployment.connect("billing-agent")
    workers = await deployment.connect("ledger-workers")
    try:
        await workers.jetstream().publish(f"corrections.resume.{plan}", b'{"plan": 1}')
        with pytest.raises(BadRequestError, match="cycle"):
            await billing.jetstream().add_consumer("CORRECTIONS", ConsumerConfig(
                name="billing-batch", durable_name="billing-batch",
                filter_subject="corrections.resume.*",
                deliver_subject=f"corrections.requested.{plan}",
                deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.EXPLICIT))
        with pytest.raises(NotFoundError):
            await workers.jetstream().get_msg("CORRECTIONS",
                                              subject=f"corrections.requested.{plan}")
        TALLY.note("billing-agent", "its own durable pushing into a command subject",
                   refused=True)
    finally:
        await billing.close()
        await workers.close()
