"""deploy/nats-auth.conf (one password user per role) enforced by a real nats-server:
what each role may and may not do.

Each forbidden publish, subscribe and stream operation is refused by the server (nats-py
hands its `-ERR 'Permissions Violation ...'` to `error_cb`; a refused JetStream API
request then times out, since its request never reached JetStream), and each allowed one
works. The end-to-end test runs the workers and the three client libraries, each as its
own user, and finds no violation in the server's log. Every role connects with its own
inbox prefix (`_INBOX_<role>`, what the clients derive from the user's name). The
per-principal file is attacked at length by tests/attack.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.js.api import ConsumerConfig, StreamConfig
from nats.js.errors import NotFoundError
from pymongo.asynchronous.database import AsyncDatabase

from clients._replay import StreamReplay
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.subscriber import outcomes
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from store.database import Document
from tests.conftest import ROOT, Workers, worker_env
from tests.integration.access_support import PLAN, Secured, password, secured, start_secured
from tests.integration.cli_support import Agents, assert_one_line_error
from workers.streams import ensure_streams

__all__ = ["secured"]

REFUSAL_WAIT = 2.0
"""Seconds to wait for the server's -ERR after a forbidden operation."""


@dataclass
class Session:
    """One role's connection, with the permission errors the server sent it."""

    nc: Client
    errors: list[str] = field(default_factory=list)
    _seen: asyncio.Event = field(default_factory=asyncio.Event)

    async def on_error(self, exc: Exception) -> None:
        if "permissions violation" in str(exc).lower():
            self.errors.append(str(exc))
            self._seen.set()

    async def refused(self, action: Callable[[Client], Awaitable[object]]) -> str:
        """Run `action`; return the server's refusal (fails if none comes).

        A refused request gets no reply, only the -ERR saying why: the action is not
        waited for once the refusal came (its request would only time out)."""
        self._seen.clear()
        self.errors.clear()

        async def act() -> None:
            try:
                await action(self.nc)
                await self.nc.flush()
            except (nats.errors.TimeoutError, TimeoutError):
                pass

        acting = asyncio.create_task(act())
        try:
            await asyncio.wait_for(self._seen.wait(), REFUSAL_WAIT)
        finally:
            acting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acting
        return self.errors[0]

    async def allowed(self, action: Callable[[Client], Awaitable[object]]) -> object:
        """Run `action`; it must work with no refusal from the server."""
        self.errors.clear()
        result = await action(self.nc)
        await self.nc.flush()
        await asyncio.sleep(0.05)
        assert self.errors == []
        return result


@pytest.fixture
async def connect(secured: Secured) -> AsyncIterator[Callable[[str], Awaitable[Session]]]:
    opened: list[Client] = []
    worker = await nats.connect(secured.url("worker"), inbox_prefix="_INBOX_worker")
    await ensure_streams(worker.jetstream())
    opened.append(worker)

    async def open_session(role: str) -> Session:
        session = Session(nc=None)  # type: ignore[arg-type]
        session.nc = await nats.connect(secured.url(role), error_cb=session.on_error,
                                        allow_reconnect=False, inbox_prefix=f"_INBOX_{role}")
        opened.append(session.nc)
        return session

    yield open_session
    for nc in opened:
        await nc.close()


# --- actions ------------------------------------------------------------------------

def publish(subject: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        await nc.publish(subject, b"{}")
        return None
    return act


def js_publish(subject: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.jetstream().publish(subject, b"{}", timeout=1.0,
                                            headers={"Nats-Msg-Id": new_id()})
    return act


def subscribe(subject: str, queue: str = "") -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.subscribe(subject, queue=queue)
    return act


def request(subject: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        try:
            return await nc.request(subject, b"{}", timeout=1.0)
        except nats.errors.NoRespondersError:
            return "no responders"  # allowed, and nobody answers here
    return act


def purge(stream: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.jetstream(timeout=1.0).purge_stream(stream)
    return act


def delete(stream: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.jetstream(timeout=1.0).delete_stream(stream)
    return act


def create(stream: str, subjects: list[str]) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.jetstream(timeout=1.0).add_stream(StreamConfig(name=stream,
                                                                       subjects=subjects))
    return act


def update(stream: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        js = nc.jetstream(timeout=1.0)
        config = StreamConfig(name=stream, subjects=["decisions.>"], max_msgs=1)
        return await js.update_stream(config)
    return act


def manage_streams() -> Callable[[Client], Awaitable[object]]:
    """Create, update, purge and delete a stream of its own (one action, so the steps
    stay in order wherever the test runs)."""
    async def act(nc: Client) -> object:
        await create("SCRATCH", ["scratch.>"])(nc)
        js = nc.jetstream(timeout=2.0)
        await js.update_stream(StreamConfig(name="SCRATCH", subjects=["scratch.>"],
                                            max_msgs=10))
        await purge("SCRATCH")(nc)
        return await delete("SCRATCH")(nc)
    return act


def status() -> Callable[[Client], Awaitable[object]]:
    """What `agents status` reads: every stream and its consumers."""
    async def act(nc: Client) -> object:
        js = nc.jetstream(timeout=2.0)
        return [await js.consumers_info(info.config.name or "")
                for info in await js.streams_info()]
    return act


def consumer_info(stream: str, durable: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.jetstream(timeout=1.0).consumer_info(stream, durable)
    return act


def delete_consumer(stream: str, durable: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.jetstream(timeout=1.0).delete_consumer(stream, durable)
    return act


def ordered(subject: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        return await nc.jetstream(timeout=1.0).subscribe(subject, ordered_consumer=True)
    return act


def hijack(stream: str, durable: str) -> Callable[[Client], Awaitable[object]]:
    """A consumer create without a name in the subject, whose body names an existing
    durable: the server would update it (its filter, here)."""
    async def act(nc: Client) -> object:
        body = {"stream_name": stream, "config": {"name": durable, "ack_policy": "explicit",
                                                  "filter_subject": f"{stream.lower()}.x"}}
        return await nc.request(f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps(body).encode(),
                                timeout=1.0)
    return act


def msg_get(stream: str) -> Callable[[Client], Awaitable[object]]:
    async def act(nc: Client) -> object:
        try:
            return await nc.jetstream(timeout=1.0).get_msg(stream, seq=1, next=True,
                                                          subject=">")
        except NotFoundError:
            return "no message"  # allowed, and the stream holds none
    return act


EVENT = f"corrections.events.{PLAN}.applied"
WORKERS_OWN = [consumer_info("CORRECTIONS", "corrector"), delete_consumer("DECISIONS", "recorder"),
               request("$JS.API.CONSUMER.MSG.NEXT.CORRECTIONS.correction-canceller"),
               request("$JS.API.CONSUMER.CREATE.DECISIONS.plan-reconciler.decisions.began.*"),
               delete_consumer("INVARIANTS", "invariant-violations"),
               hijack("DECISIONS", "recorder"), hijack("CORRECTIONS", "corrector"),
               delete_consumer("DECISIONS", "plan-reconciler"),
               hijack("DECISIONS", "plan-reconciler"),
               ordered("decisions.>"), subscribe("_INBOX.>")]
"""The workers' own durables are theirs alone: a client that could delete or pull one
would silence (or swallow) a whole family of messages."""
STREAM_OPS = [purge("DECISIONS"), delete("CORRECTIONS"), update("DECISIONS"),
              create("STOLEN", ["stolen.>"])]
FORGERIES = [publish(EVENT), js_publish(EVENT), publish(f"decisions.persisted.{PLAN}"),
             publish(f"decisions.began.{PLAN}"), js_publish(f"decisions.began.{PLAN}"),
             publish(f"corrections.attempts.{PLAN}.failed"),
             publish(f"invariants.events.{PLAN}.violated"), publish(f"corrections.resume.{PLAN}")]

FORBIDDEN: dict[str, list[Callable[[Client], Awaitable[object]]]] = {
    "agent": [*STREAM_OPS, *FORGERIES, *WORKERS_OWN, publish(f"corrections.requested.{PLAN}"),
              publish(f"decisions.recorded.{PLAN}.extra"), subscribe("_INBOX_operator.>"),
              msg_get("CORRECTIONS"),
              publish(f"corrections.cancel.{PLAN}"), request(f"corrections.dryrun.{PLAN}"),
              subscribe("corrections.dryrun.>", "corrections-dryrun"),
              subscribe("decisions.>"), subscribe(">")],
    "operator": [*STREAM_OPS, *FORGERIES, *WORKERS_OWN, publish(f"decisions.rejected.{PLAN}"),
                 ordered(f"decisions.persisted.{PLAN}"), subscribe("_INBOX_worker.>"),
                 delete_consumer("CORRECTIONS", "resume_agent"),
                 subscribe("corrections.dryrun.>", "corrections-dryrun"),
                 subscribe("corrections.>")],
    "subscriber": [*STREAM_OPS, *FORGERIES, *WORKERS_OWN, publish(f"decisions.recorded.{PLAN}"),
                   publish(f"invariants.violations.{PLAN}"),
                   publish(f"corrections.requested.{PLAN}"),
                   request(f"corrections.dryrun.{PLAN}"),
                   subscribe("corrections.dryrun.>", "corrections-dryrun"),
                   subscribe("corrections.events.>"), subscribe("_INBOX_agent.>"),
                   consumer_info("CORRECTIONS", "resume_agent")],
    # The workers publish events, never a command, and read their own replies only.
    "worker": [publish(f"corrections.requested.{PLAN}"), publish(f"corrections.cancel.{PLAN}"),
               subscribe("_INBOX.>"), subscribe("_INBOX_operator.>")],
}

ALLOWED: dict[str, list[Callable[[Client], Awaitable[object]]]] = {
    "operator": [js_publish(f"corrections.requested.{PLAN}"),
                 js_publish(f"corrections.cancel.{PLAN}"),
                 js_publish(f"corrections.fail.{PLAN}"),
                 js_publish(f"corrections.retry.{PLAN}"),
                 request(f"corrections.dryrun.{PLAN}"),
                 js_publish(f"decisions.recorded.{PLAN}"),
                 js_publish(f"invariants.events.{PLAN}.resolved"),
                 # what `agents correction cancel | fail | retry` wait on
                 subscribe(f"corrections.events.{PLAN}.cancelled"),
                 subscribe(f"corrections.cancel_refused.{PLAN}"),
                 subscribe(f"corrections.fail_refused.{PLAN}"),
                 subscribe(f"corrections.retry_refused.{PLAN}"),
                 # the console's live view (console.live)
                 subscribe("decisions.persisted.>"), subscribe("invariants.events.>"),
                 status(), msg_get("CORRECTIONS")],
    "agent": [js_publish(f"decisions.recorded.{PLAN}"),
              js_publish(f"invariants.violations.{PLAN}"), msg_get("DECISIONS"),
              subscribe(f"decisions.persisted.{PLAN}")],
    "worker": [js_publish(EVENT), js_publish(f"decisions.persisted.{PLAN}"),
               subscribe("corrections.dryrun.>", "corrections-dryrun"),
               manage_streams()],
}


def cases(table: dict[str, list[Callable[[Client], Awaitable[object]]]]) -> list[object]:
    return [pytest.param(role, act, id=f"{role}-{i}")
            for role, acts in table.items() for i, act in enumerate(acts)]


@pytest.mark.parametrize(("role", "action"), cases(FORBIDDEN))
async def test_the_server_refuses(role: str, action: Callable[[Client], Awaitable[object]],
                                  connect: Callable[[str], Awaitable[Session]]) -> None:
    session = await connect(role)
    assert "permissions violation" in (await session.refused(action)).lower()


@pytest.mark.parametrize(("role", "action"), cases(ALLOWED))
async def test_the_server_allows(role: str, action: Callable[[Client], Awaitable[object]],
                                 connect: Callable[[str], Awaitable[Session]]) -> None:
    session = await connect(role)
    await session.allowed(action)


async def test_no_stream_was_touched_by_a_refused_operation(
        connect: Callable[[str], Awaitable[Session]]) -> None:
    """After every refusal above: the streams are still there, unpurged and unchanged."""
    worker = await connect("worker")
    js = worker.nc.jetstream()
    names = sorted(info.config.name or "" for info in await js.streams_info())
    assert names == ["CORRECTIONS", "DECISIONS", "INVARIANTS", "WEBHOOKS"]
    assert (await js.stream_info("DECISIONS")).config.max_msgs in (None, -1)


async def test_a_connection_without_credentials_or_with_a_wrong_password_is_refused(
        secured: Secured) -> None:
    for url in (f"nats://127.0.0.1:{secured.port}", secured.url("agent", "wrong")):
        with pytest.raises(nats.errors.Error, match=r"(?i)authorization violation"):
            await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0,
                               connect_timeout=2)


async def test_agent_reads_its_outcomes_and_resume_feed_with_the_clients_own_reads(
        connect: Callable[[str], Awaitable[Session]]) -> None:
    """What wait_persisted and on_resume do: read DECISIONS by sequence, and pull the
    role's own resume durable (`resume_agent`); both allowed to the agent."""
    agent = await connect("agent")
    worker = await connect("worker")
    plan = new_id()
    await worker.nc.jetstream().publish(f"decisions.persisted.{plan}", b"{}")
    await worker.nc.jetstream().publish(f"corrections.resume.{plan}", b"{}")

    async def replay(nc: Client) -> object:
        async with StreamReplay(nc, "DECISIONS", f"decisions.*.{plan}", 1,
                                [f"decisions.persisted.{plan}"]) as r:
            return await asyncio.wait_for(r.next(), 5)

    assert (await agent.allowed(replay)).subject == f"decisions.persisted.{plan}"  # type: ignore[attr-defined]
    got: list[ResumeInstruction] = []
    rec = DecisionRecorder(agent.nc)

    async def note(instruction: ResumeInstruction) -> None:
        got.append(instruction)

    async def resume(nc: Client) -> object:
        # The body above is no instruction: the feed terminates it, and says so.
        sub = await rec.on_resume(note, plan_id=plan, from_start=True)
        assert sub.durable == "resume_agent"
        await asyncio.sleep(0.5)
        await sub.stop(delete=True)
        return sub

    await agent.allowed(resume)
    assert got == []


async def test_subscriber_reads_events_through_its_durable(
        connect: Callable[[str], Awaitable[Session]]) -> None:
    subscriber = await connect("subscriber")
    worker = await connect("worker")
    feed = outcomes(subscriber.nc, durable="acl-feed", statuses=["applied", "failed"],
                    limit=1)
    await feed.open()
    await worker.nc.jetstream().publish(EVENT, b"not an event")  # terminated, then skipped

    async def read(nc: Client) -> object:
        async with asyncio.timeout(3):
            return [e async for e in feed]

    with pytest.raises(TimeoutError):
        await subscriber.allowed(read)
    assert subscriber.errors == []


@pytest.mark.e2e
@pytest.mark.long
async def test_end_to_end_every_role_as_its_own_user(
        tmp_path: Path, mongo_uri: str, db: AsyncDatabase[Document], db_name: str) -> None:
    """Workers, an agent, an operator and a subscriber, each with its own credentials:
    a decision recorded and persisted, a revert dry-run, requested and applied, the
    subscriber and the agent's resume feed told; the server refused nothing."""
    secured = start_secured(tmp_path / "nats")
    workers = Workers(worker_env(secured.url("worker"), mongo_uri, db_name),
                      tmp_path / "workers.log")
    try:
        await workers.start(secured.url("worker"))
        decision = await _run_every_role(secured)
        await _cli_as_operator(secured, decision, mongo_uri, db_name)
        assert secured.violations() == []
        assert password("worker") not in workers.log()
    finally:
        workers.stop()
        secured.server.stop()


async def _cli_as_operator(secured: Secured, decision: str, mongo_uri: str,
                           db_name: str) -> None:
    """`agents plan correct --dry-run` with NATS_USER/NATS_PASSWORD: answered by the
    workers; with a wrong password (in the variable, then in the URL): one line naming
    NATS_URL, and the password nowhere."""
    bare = f"nats://127.0.0.1:{secured.port}"
    agents = Agents({**os.environ, "NATS_URL": bare, "MONGODB_URI": mongo_uri,
                     "MONGODB_DB": db_name, "USER": "tester", "COLUMNS": "200",
                     "PYTHONPATH": str(ROOT), "NATS_USER": "operator",
                     "NATS_PASSWORD": password("operator")}, subprocess=True)
    args = ("plan", "correct", decision, "--mode", "append", "--guidance", "Add metrics",
            "--dry-run")
    r = await agents.ok(*args)
    assert password("operator") not in r.out + r.err
    r = await agents("status")  # 0, or 5 when something needs a person
    assert r.code in (0, 5) and "DECISIONS" in r.out, r.err + r.out
    wrong = "wrong-" + password("operator")
    for extra, shown in (({"NATS_PASSWORD": wrong}, f"NATS_URL={bare} "),
                         ({"NATS_URL": secured.url("operator", wrong), "NATS_USER": "",
                          "NATS_PASSWORD": ""}, "operator:***@")):
        r = await agents(*args, env=extra)
        assert_one_line_error(r, 1, "cannot reach NATS", shown, "authorization violation")
        assert wrong not in r.out + r.err


async def _run_every_role(secured: Secured) -> str:
    """Returns the ID of a decision still current (for the CLI's dry run)."""
    window = "system: you are a coding agent\nuser: add rate limiting"
    # What the operator's console listens to (console.live), with its own credentials.
    live = await nats.connect(secured.url("operator"), inbox_prefix="_INBOX_operator")
    announced = await live.subscribe("decisions.persisted.>")
    async with DecisionRecorder.connect(secured.url("agent")) as rec:
        root = await rec.root("Add rate limiting", context=window)
        strategy = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                    question="Where do counters live?", chosen_option="Redis",
                                    context=window)
        await rec.wait_all_persisted([root, strategy], timeout=20)
        plan = root.plan_id
        # The CloudEvents headers name each decision (filled from what the recorder had
        # at hand, not from the body): the one the event announces, in its plan.
        for d in (root, strategy):
            m = await announced.next_msg(timeout=20)
            assert m.headers is not None
            assert m.headers["ce-subject"] == f"plan/{plan}/decision/{d.decision_id}"
            assert m.headers["ce-id"] == m.headers["Nats-Msg-Id"]
            assert json.loads(m.data)["decision_id"] == d.decision_id
        await live.close()
        resumed: asyncio.Queue[ResumeInstruction] = asyncio.Queue()

        async def on_resume(instruction: ResumeInstruction) -> None:
            await resumed.put(instruction)

        resume = await rec.on_resume(on_resume, plan_id=plan)
        sub_nc = await nats.connect(secured.url("subscriber"), inbox_prefix="_INBOX_subscriber")
        try:
            feed = outcomes(sub_nc, durable="acl-e2e", statuses=["applied"], limit=1)
            await feed.open()
            async with CorrectionClient.connect(secured.url("operator"),
                                                requested_by="alice") as ops:
                report = await ops.dry_run(plan, strategy.decision_id, "revert", "Use Postgres")
                assert report.decisions_to_invalidate == [strategy.decision_id]
                cid = await ops.request(plan, strategy.decision_id, "revert", "Use Postgres",
                                        chosen_option="Postgres")
                outcome = await ops.wait_for_outcome(cid, plan, timeout=30)
            assert outcome.to_status is CorrectionStatus.APPLIED
            async with asyncio.timeout(20):
                got = [e async for e in feed]
            assert [(e.correction_id, e.to_status) for e in got] == [
                (cid, CorrectionStatus.APPLIED)]
            instruction = await asyncio.wait_for(resumed.get(), 20)
            assert instruction.correction_id == cid
        finally:
            await resume.stop(delete=True)
            await sub_nc.close()
    return root.decision_id


async def test_a_push_consumer_aimed_at_a_stream_subject_cannot_be_created(
        connect: Callable[[str], Awaitable[Session]]) -> None:
    """The server does not check a consumer's deliver subject against its creator's
    permissions; no role but the workers may create a consumer without naming it, and
    a named one only with its own name and filter: an agent's push consumer aimed at
    `corrections.events.<plan>.applied` is refused."""
    agent = await connect("agent")
    plan = new_id()

    async def push(nc: Client) -> object:
        return await nc.jetstream(timeout=1.0).add_consumer("DECISIONS", ConsumerConfig(
            deliver_subject=f"corrections.events.{plan}.applied",
            filter_subject=f"decisions.recorded.{plan}"))

    assert "permissions violation" in (await agent.refused(push)).lower()
