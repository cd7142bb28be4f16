"""The recorder's partitions, each recorded by one replica at a time under its own lease,
spread over the live replicas.

Why one replica per partition: several replicas pulling one durable split each plan's
messages between them, and a child pulled by one replica while its parent sits in
another's batch waits a redelivery for it, level after level, until a deep plan
outlasts the parent wait and acknowledged decisions are dead-lettered as
`parent_exists` with nothing killed at all (ADR 0029). So the decisions are
stored by partition (a plan always in the same one: contracts.shared.partitions), and
each partition's durable is pulled by the one replica holding its lease
(`role:recorder-<k>` in `plan_locks`, the findAndModify lease of store.leases).

Every replica runs a `LeadingPullers` with a round every third of the lease (at most a
second): it renews the leases it holds, reads who holds the others and which workers
are alive (store.lease_view), and takes or lets go of partitions so that each live
worker holds its share (contracts.shared.balance). A replica that stops gracefully
stops its pullers (each finishes the batch in hand) and releases its leases, so the
others take them within a round or two; one that dies lets them expire
(`RECORDER_LEASE_SECONDS`), and JetStream redelivers what it held after the ack wait,
which the replica taking over waits for before its first pull (`hold_off`); a replica
that joins is given its share by the others letting go of theirs. With one
partition this is the active/standby recorder it always was.

A replica that cannot renew (the database is unreachable) keeps its pullers until the
leases it last renewed expire (their batches fail and are retried meanwhile), then
stops them; another may take over only after that expiry. The leases' expiry is the
database server's clock (store.leases, ADR 0027), so replicas whose clocks disagree
still agree on who holds what; the step-down counts a lease's length on this process's
monotonic clock from just before the renewal was sent, which ends no later than the
server's expiry.

A process can stall past its expiry with a batch in hand (paused, starved of CPU) and
wake up unaware that another replica took over. So a partition's lease is taken with
its fence record, and every batch's transaction writes that record on the condition
that this replica was the last to take it (`LeaseFence`, store.leases): the database
orders that write against a take-over's, so a partition's batches commit under one
holder at a time, whatever the clocks and stalls. A batch refused so is not written;
its messages go back to the durable (workers.recorder) and this replica stops pulling
it.

Durables of partitions no longer in use (the count was changed: docs/operations.md,
Partitions) that still hold messages are found every DRAIN_PROBE_ROUNDS rounds and
shared out like the others until they are empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from contracts.shared.balance import moves
from contracts.shared.partitions import Partition
from contracts.shared.persistence import LeaseFence
from services.tasks import stop_task, wait_event
from store.lease_view import LeaseView
from store.leases import Leases, Taken
from workers.batch import HeldLease
from workers.metrics import Metrics
from workers.pull import BatchPuller

log = logging.getLogger(__name__)

DRAIN_PROBE_ROUNDS = 20
"""Rounds between two looks for durables of partitions no longer in use that still hold
messages (one consumer lookup per possible durable)."""

MakePuller = Callable[[Partition], BatchPuller[Any]]
ReadView = Callable[[Sequence[str]], Awaitable[LeaseView]]
Probe = Callable[[], Awaitable[list[Partition]]]


class LeadingPullers:
    """The `BatchPuller`s of the partitions this replica holds the leases of.

    Two loops: one renews every lease this replica holds, including those of partitions
    it is letting go of (until their pullers have settled what they hold and the lease
    is released), so a slow hand-over never lets a lease expire under a puller still
    recording; the other balances. Looks like a puller to the app (stream, consumers,
    running, metrics, start, stop), so readiness, metrics and shutdown treat it like the
    others: a replica holding no partition is ready."""

    def __init__(self, make: MakePuller, partitions: Sequence[Partition], leases: Leases,
                 view: ReadView, *, owner: str, stream: str, graceful_timeout: float,
                 probe: Probe | None = None) -> None:
        self._make = make
        self._partitions = list(partitions)
        self._leftover: list[Partition] = []
        self._leases = leases
        self._view = view
        self._probe = probe
        self._owner = owner
        self._graceful = graceful_timeout
        self.stream = stream
        self.metrics: Metrics | None = None
        self._held: dict[str, tuple[Partition, BatchPuller[Any]]] = {}
        self._leaving: dict[str, asyncio.Task[None]] = {}
        """Partitions being handed over: still leased (and renewed) until released."""
        self._valid_until = time.monotonic()
        self._rounds = 0
        self._loop: asyncio.Task[None] | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.every = max(0.2, min(1.0, leases.ttl.total_seconds() / 3))
        self._renew_every = max(0.2, leases.ttl.total_seconds() / 3)

    @property
    def consumers(self) -> list[tuple[str, str]]:
        return [(self.stream, p.durable) for p in self._partitions]

    @property
    def held(self) -> list[str]:
        """The durables this replica records now."""
        return sorted(p.durable for p, _ in self._held.values())

    @property
    def problem(self) -> str | None:
        """The first held partition's durable's problem (workers.consumer_watch); a
        replica holding none has none."""
        return next((p.problem for _, p in self._held.values() if p.problem), None)

    @property
    def running(self) -> bool:
        """The lease loops are alive, and so is every puller of a partition held."""
        if any(t is None or t.done() for t in (self._loop, self._renewer)):
            return False
        return all(puller.running for _, puller in self._held.values())

    async def start(self) -> None:
        # The first round here, so a lone replica records once `start` returns (a failed
        # one is tried again by the loop, like any round).
        self._renewer = asyncio.create_task(self._renew_forever(),
                                            name=f"lease-renewal:{self.stream}")
        try:
            await self._round()
        except Exception:
            log.exception("first partition round failed; trying again")
        self._loop = asyncio.create_task(self._run(), name=f"leases:{self.stream}")

    async def stop(self, timeout: float) -> None:
        self._stopping.set()
        # The round under way is let end (it takes nothing more once stopping): one
        # cancelled in the middle of a take could leave a lease the database granted
        # held by nobody's puller until it expired, and then the next holder would wait
        # out the ack wait as if this replica had died.
        if self._loop is not None:
            await asyncio.wait({self._loop}, timeout=timeout)
        await stop_task(self._loop)
        # Together: each finishes its batch in hand, its lease still renewed; then
        # handed over at once.
        for lease in list(self._held):
            self._hand_over(lease, "stopping", timeout)
        await asyncio.gather(*self._leaving.values(), return_exceptions=True)
        await stop_task(self._renewer)
        # A take cut short anyway (its answer never came) may still have been granted:
        # whatever of these partitions is still leased to this replica goes too.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(
                *(self._leases.release(p.lease, self._owner) for p in self._in_use()),
                return_exceptions=True), timeout)

    async def _run(self) -> None:
        while not await wait_event(self._stopping, self.every):
            try:
                await self._round()
            except Exception:  # a bug here must not end the recording for good
                log.exception("partition round failed; trying again")

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self._renew_every)
            try:
                await self._renew()
            except Exception as exc:  # the database is unreachable: nothing is known
                if self._held and time.monotonic() >= self._valid_until:
                    log.warning("cannot renew the %s leases (%s) and they have expired: "
                                "recording stops", self.stream, type(exc).__name__)
                    for lease in list(self._held):
                        self._hand_over(lease, "lease expired", self._graceful,
                                        release=False)

    async def _renew(self) -> None:
        """Every lease held or being handed over, at once; within the lease's length, so a
        renewal the database never answers counts as a failed one (and the pullers stop
        once the leases it last renewed have expired) instead of hanging."""
        sent = time.monotonic()
        leaving, held = list(self._leaving), list(self._held)
        renewed = await asyncio.wait_for(self._leases.renew_all(leaving + held, self._owner),
                                         self._leases.ttl.total_seconds())
        for lease in held:
            if lease not in renewed:  # a lost lease being handed over is simply not renewed
                self._lost(lease)
        self._valid_until = sent + self._leases.ttl.total_seconds()

    def _in_use(self) -> list[Partition]:
        return [*self._partitions, *self._leftover]

    async def _round(self) -> None:
        if self._probe is not None and self._rounds % DRAIN_PROBE_ROUNDS == 0:
            try:
                self._leftover = await self._probe()
            except Exception as exc:  # NATS unreachable: look again next time
                log.debug("looking for durables left to drain failed: %s", exc)
        self._rounds += 1
        try:
            view = await self._view([p.lease for p in self._in_use()])
        except Exception as exc:  # the renewals decide what an outage stops
            log.debug("reading the %s leases failed: %s", self.stream, exc)
            return
        await self._balance(view)

    async def _balance(self, view: LeaseView) -> None:
        in_use = {p.lease: p for p in self._in_use()}
        for lease in [x for x in self._held if x not in in_use]:
            self._hand_over(lease, "no longer in use", self._graceful)
        todo = moves(self._owner, list(in_use), set(self._held), view.holders, view.live)
        for lease in todo.release:
            self._hand_over(lease, f"its share went to another of {len(view.live)} live "
                            "workers", self._graceful)
        wanted = todo.wanted
        for lease in todo.take:
            if wanted <= 0 or self._stopping.is_set():
                return
            if lease not in self._leaving and await self._take(in_use[lease]):
                wanted -= 1

    async def _take(self, partition: Partition) -> bool:
        taken = await self._leases.take(partition.lease, self._owner, fenced=True)
        if taken is Taken.REFUSED:
            return False
        puller = self._make(partition)
        hold_off = (self.hold_off(puller.ack_wait) if taken is Taken.EXPIRED else 0.0)
        # Said before anything is pulled, and "let go" after everything pulled is
        # settled: the lines bound the time this replica records the partition.
        log.info("this replica took %s%s", partition.lease,
                 f" from a holder whose lease expired; pulling in {hold_off:.1f} s, once "
                 "what it had pulled is redelivered" if hold_off else "")
        puller.metrics = self.metrics
        puller.lease = HeldLease(LeaseFence(partition.lease, self._owner),
                                 partial(self._lost, partition.lease))
        try:
            await puller.start(hold_off)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await puller.stop(0.0)
            log.warning("this replica let go of %s (could not start recording %s: %s)",
                        partition.lease, partition.durable, type(exc).__name__)
            with contextlib.suppress(Exception):
                await self._leases.release(partition.lease, self._owner)
            return False
        self._held[partition.lease] = (partition, puller)
        log.info("this replica now holds %s: recording %s", partition.lease,
                 partition.durable)
        return True

    def hold_off(self, ack_wait: float) -> float:
        """How long a replica that takes a partition from a holder whose lease expired
        waits before its first pull: until what the holder had pulled and not settled
        is due for redelivery, so it comes back before anything newer.

        Why: JetStream redelivers a dead holder's messages only after their ack wait,
        and serves redeliveries before new messages, in stream order. Pulling sooner
        gets the children of the decisions still out with the dead holder first: they
        wait for their parents (ADR 0037).

        The holder renewed its lease every `_renew_every`, so it has been silent for at
        least the lease's length less that (and less a second for a slow renewal); its
        messages' ack waits ran from before then. A holder starved of CPU may have
        pulled later, between late renewals (a waiting full ack wait did no better in
        runs under load): then some children still come first, wait, and are woken
        once their parents are stored (workers.parent_wakes)."""
        silent = self._leases.ttl.total_seconds() - self._renew_every - 1.0
        return max(0.0, ack_wait - silent)

    def _lost(self, lease: str) -> None:
        """A fenced write found the lease another replica's: stop pulling at once, rather
        than at the next renewal."""
        if lease in self._held:
            log.warning("the %s lease passed to another replica: recording it stops", lease)
            self._hand_over(lease, "lease lost", self._graceful, release=False)

    def _hand_over(self, lease: str, why: str, timeout: float, *,
                   release: bool = True) -> None:
        """Stop recording the partition in the background (its batch in hand is settled
        meanwhile, its lease renewed), then release the lease (unless it is no longer
        ours)."""
        held = self._held.pop(lease, None)
        if held is None:
            return
        self._leaving[lease] = asyncio.create_task(
            self._let_go(lease, held, why, timeout, release=release),
            name=f"hand-over:{lease}")

    async def _let_go(self, lease: str, held: tuple[Partition, BatchPuller[Any]],
                      why: str, timeout: float, *, release: bool) -> None:
        partition, puller = held
        try:
            await puller.stop(timeout)
            log.info("this replica let go of %s (%s): recording %s stopped", lease, why,
                     partition.durable)
            if release:
                with contextlib.suppress(Exception):
                    await self._leases.release(lease, self._owner)
        finally:
            self._leaving.pop(lease, None)
