"""The composition root: `open_ledger` opens the ledger from its settings, once per process.

The workers call it at startup, the web console at startup, each CLI command when it
runs (never at import, so `agents --help` touches nothing). It makes the clients (a
MongoDB client; NATS from the source the caller gives, connected on first use), every
repository once (store.mongo_store.MongoStore), one publisher, and the services over
them, and returns them as one typed `Ledger`. Nothing else in the product builds a
repository or a service.

Opening does no I/O: the MongoDB client connects on its first command and NATS on the
first publish or `nats.client()`, so what a process checks at startup, and when, stays
its own (the workers ping MongoDB and connect NATS within a deadline; a CLI command
that only reads works with NATS down).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from bootstrap.identity import own_signer
from bootstrap.nats_source import NatsSource
from bootstrap.publisher import Publisher, PublisherOnDemand
from bootstrap.settings import Settings
from clients._publish import RetryPolicy
from clients.operator import CorrectionClient
from services.append_forecast import InvariantForecaster
from services.approvals import ApprovalService
from services.archive.writer import Archive
from services.bulk import BulkService
from services.corrections.policy import CorrectionPolicy, CrashHook, no_crash
from services.corrections.service import CorrectionService
from services.dead_letters import DeadLetterService
from services.invariant_gate import GateService
from services.invariants import InvariantService
from services.judging import JudgeService
from services.plan_templates import PlanTemplateService
from services.ports.publishing import CorrectionObserver
from services.read_ports import LedgerReads
from services.recorder import RecorderService
from services.recorder_policy import RecorderPolicy
from services.upkeep import ReadFacts, UpkeepService
from services.webhook_secrets import Sealer, parse_key
from services.webhooks import WebhookService, outbox_flusher
from store.mongo_store import MongoStore

__all__ = ["OPERATOR", "Ledger", "Role", "open_ledger"]

OPERATOR_RETRY = RetryPolicy(attempts=3, ack_timeout=2.0)
"""An operator's command that cannot be published says so within seconds (3 tries,
about 5 s) rather than riding out a leader election as an agent would."""


@dataclass(frozen=True)
class Role:
    """What differs between the processes that open the ledger."""

    mongo_timeout_ms: int | None
    """Server selection and connect timeout; None: the driver's (the workers ping
    within CONNECT_TIMEOUT_SECONDS at startup and then ride out an outage)."""
    publish_ack_timeout: float
    worker_id: str | None = None
    """The correction lease owner; None: a fresh ID (a process that never drives)."""
    observer: CorrectionObserver | None = None
    crash: CrashHook = no_crash


OPERATOR = Role(mongo_timeout_ms=3000, publish_ack_timeout=5.0)
"""The CLI and the web console: a server that is not there is reported within seconds."""


@dataclass(frozen=True)
class Ledger:
    """Everything a process uses, opened once: close it with `close()`."""

    settings: Settings
    store: MongoStore
    nats: NatsSource
    publisher: Publisher
    recorder: RecorderService
    corrections: CorrectionService
    invariants: InvariantService
    dead_letters: DeadLetterService
    webhooks: WebhookService
    upkeep: UpkeepService
    """Comments, plan endings, dead-letter discards (the workers apply them)."""
    templates: PlanTemplateService | None = None
    """`agents plan use`: action templates applied to plans."""
    judge: JudgeService | None = None
    """The judge of word-only invariants; None unless JUDGE_URL is set."""
    approvals: ApprovalService | None = None
    """Operators' verdicts on held decisions, and their expiry."""
    bulk: BulkService | None = None
    """Bulk correction batches (`agents bulk`, the console's Bulk page)."""

    @property
    def reads(self) -> LedgerReads:
        """What the console and the CLI read (services/read_ports.py)."""
        return self.store

    async def operator(self, requested_by: str) -> CorrectionClient:
        """The operator client over this ledger's NATS connection: every correction
        command (request, dry run, cancel, fail, retry) is sent by it, as by any client."""
        return CorrectionClient(await self.nats.client(), requested_by=requested_by,
                                retry=OPERATOR_RETRY, signer=own_signer(self.settings))

    async def close(self) -> None:
        """NATS first (its drain may still publish), then MongoDB."""
        try:
            await self.nats.close()
        finally:
            if self.judge is not None:
                await self.judge.judge.close()
            await self.store.close()


def open_ledger(settings: Settings, nats: NatsSource, role: Role = OPERATOR) -> Ledger:
    """The ledger over the settings' MongoDB and `nats` (see the module's docstring)."""
    store = MongoStore.connect(settings.mongodb_uri, settings.mongodb_db,
                               lease_seconds=settings.corrections_lease_seconds,
                               timeout_ms=role.mongo_timeout_ms,
                               approval_ttl_seconds=settings.approval_ttl_seconds)
    store.dead_letters.redaction = settings.redaction
    publisher = PublisherOnDemand(nats, role.publish_ack_timeout, own_signer(settings),
                                  settings.cloudevents_schema_base)
    recorder = RecorderService(
        store.recorder, store.dead_letters, publisher,
        RecorderPolicy(parent_wait_seconds=settings.recorder_parent_wait_seconds,
                       max_payload_bytes=settings.max_payload_bytes,
                       created_at_max_skew_seconds=settings.created_at_max_skew_seconds,
                       redaction=settings.redaction),
        waits=store.parent_waits,
        gates=GateService(store.gate_source(judge=settings.judge.enabled), store.outbox,
                          publisher, settings.invariant_eval_budget_ms))
    corrections = CorrectionService(
        store, publisher, Archive(settings.resolved_archive_root(), settings.artifacts_root,
                                  settings.archive_limits),
        policy=CorrectionPolicy(max_attempts=settings.corrections_max_attempts,
                                max_decisions=settings.corrections_max_decisions),
        crash=role.crash, worker_id=role.worker_id, observer=role.observer,
        forecaster=InvariantForecaster(invariants=store.invariants, violations=store.violations,
                                       plans=store.plans, judged=settings.judge.enabled))
    invariants = InvariantService.from_store(store, publisher)
    return Ledger(settings=settings, store=store, nats=nats, publisher=publisher,
                  recorder=recorder, corrections=corrections, invariants=invariants,
                  dead_letters=DeadLetterService(store.dead_letters, publisher, store),
                  upkeep=UpkeepService(store.upkeep, ReadFacts(store)),
                  webhooks=WebhookService(store.webhooks, publisher,
                                          Sealer(parse_key(settings.webhook_secret_key)),
                                          outbox_flusher(store.outbox, publisher)),
                  templates=PlanTemplateService(invariants, plans=store.plans,
                                                uses=store.plan_uses,
                                                decisions=store.decisions,
                                                publisher=publisher),
                  judge=_judge(settings, store, publisher),
                  approvals=ApprovalService(
                      store.approvals, holds=store.holds, decisions=store.decisions,
                      plans=store.plans, outbox=store.outbox, publisher=publisher,
                      unsigned_ok=settings.ledger_principals is None),
                  bulk=BulkService(store, store.bulk, bound=settings.bulk_max_matches,
                                   scan_max=settings.search_scan_max,
                                   max_decisions=settings.corrections_max_decisions))


def _judge(settings: Settings, store: MongoStore, publisher: Publisher) -> JudgeService | None:
    """The judge, when JUDGE_URL is set. A claim outlives the longest a decision can be
    asked about (its invariants asked JUDGE_CONCURRENCY at a time, each bounded)."""
    judge = settings.judge
    if not judge.enabled:
        return None
    from bootstrap.judge import OpenAIChatJudge  # noqa: PLC0415  httpx: only with a judge

    return JudgeService(OpenAIChatJudge(judge), holds=store.holds, decisions=store.decisions,
                        invariants=store.invariants, outbox=store.outbox, publisher=publisher,
                        lease=timedelta(seconds=judge.timeout_seconds * 4 + 10),
                        max_attempts=judge.max_attempts)
