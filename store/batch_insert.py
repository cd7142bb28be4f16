"""The recorder's batch write: number and chain the accepted decisions per plan and insert
them, with their plans' claim records, in one transaction that aborts if a correction or
a concurrent claim changed what the batch was triaged against. Each decision's chain link
(contracts.trust.chain) is computed here from its document, between reading the plan's
counter and writing it, so the chain costs no round trip of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.recording.claims import claim_refused
from contracts.recording.message import Candidate, Laid, laid_from
from contracts.redaction.decisions import marks_document
from contracts.trust.chain import DECISION, content_of, decision_digests, field_digests
from contracts.trust.ownership import Ownership
from contracts.trust.policy import principal_name, provenance
from store.batch_facts import plan_claim
from store.cache import CounterGuesses
from store.database import DECISIONS, PLANS, Document
from store.decisions import to_document
from store.sequences import Counter, CounterMoved, read_counters, write_counters, write_guessed


class StaleFacts(Exception):
    """A correction changed a plan after the batch's facts were read: plan again."""


def _check_unchanged(plan_id: str, counter: Document | None, epoch: int) -> None:
    """Raise StaleFacts (aborting the insert's transaction) if a revert moved the plan's
    epoch since the facts were read, or rolled it back."""
    if counter is None:
        return
    if int(counter.get("epoch", 0)) != epoch \
            or counter.get("status") == PlanStatus.ROLLED_BACK.value:
        raise StaleFacts(f"plan {plan_id} was corrected after its facts were read")


async def insert_batch(db: AsyncDatabase[Document], accepted: Sequence[Candidate],
                       now: datetime, session: AsyncClientSession, *,
                       epochs: Mapping[str, int] | None = None,
                       ownership: Mapping[str, Ownership] | None = None,
                       guesses: CounterGuesses | None = None) -> list[Decision]:
    """The transaction's body. Runs again from the top if the transaction is retried, so
    it keeps no state (but what it leaves in `guesses.pending`)."""
    per_plan: dict[str, list[Candidate]] = {}
    for c in accepted:
        per_plan.setdefault(c.decision.plan_id, []).append(c)
    rooted = {c.decision.plan_id: c for c in accepted if c.decision.is_root}
    numbered, after, counters = await _numbered(db[PLANS], per_plan, now, session, guesses)
    for plan_id in per_plan:
        before = counters[plan_id]
        if epochs is not None:
            _check_unchanged(plan_id, before, epochs.get(plan_id, 0))
        if ownership is not None and plan_id not in rooted:
            _check_owner(plan_id, before, ownership.get(plan_id, Ownership()))
    await db[DECISIONS].insert_many([doc for _, _, doc in numbered], session=session)
    owners = {**(ownership or {}),
              **{p: _owning(c) for p, c in rooted.items()}}
    roots: list[tuple[Decision, str | None]] = []
    for c, d, _ in numbered:
        if d.is_root:
            roots.append((d, principal_name(c.identity)))
        if d.downstream_plan_ids:  # the batch's order: the roots before this claim first
            await _record_roots(db, roots, session)
            roots = []
        for p in d.downstream_plan_ids:
            await _record_claim(db, d, p, claimer=owners.get(d.plan_id, Ownership()), now=now,
                                session=session)
    await _record_roots(db, roots, session)
    if guesses is not None:
        guesses.pending = after
    return [d for _, d, _ in numbered]


Numbered = list[tuple[Candidate, Decision, Document]]


async def _numbered(plans: AsyncCollection[Document], per_plan: Mapping[str, list[Candidate]],
                    now: datetime, session: AsyncClientSession,
                    guesses: CounterGuesses | None
                    ) -> tuple[Numbered, dict[str, Counter], dict[str, Document | None]]:
    """The batch's documents numbered and chained per plan, and the plans' counters
    written: from a guess in one round trip, else read and then written (two, as the
    batch of several plans always took)."""
    guess = guesses.guess(per_plan) if guesses is not None else None
    if guess is not None:
        plan_id, counter = guess
        numbered, after = _number(per_plan, {plan_id: counter})
        try:
            return numbered, after, {plan_id: await write_guessed(
                plans, plan_id, counter, after[plan_id], session)}
        except CounterMoved:
            pass
    read = await read_counters(plans, list(per_plan), session)
    numbered, after = _number(per_plan, {p: Counter.of(doc) for p, doc in read.items()})
    try:
        await write_counters(plans, {p: (read[p], after[p]) for p in per_plan}, now, session)
    except CounterMoved as exc:
        raise StaleFacts(str(exc)) from None
    return numbered, after, read


def _number(per_plan: Mapping[str, list[Candidate]], counters: Mapping[str, Counter]
            ) -> tuple[Numbered, dict[str, Counter]]:
    """Each decision's sequence number and chain link, in the batch's order per plan."""
    numbered: Numbered = []
    after: dict[str, Counter] = {}
    for plan_id, group in per_plan.items():
        start, head = counters[plan_id].next_sequence, counters[plan_id].chain
        for i, c in enumerate(group):
            n = start + i
            d = c.decision.model_copy(update={"sequence_number": n})
            laid = laid_for(c)
            doc = {**laid.document, SEQUENCE: n}  # a copy: a retried transaction numbers again
            content = content_of({**laid.digests, **field_digests({SEQUENCE: n})})
            link = head.link(plan_id, DECISION, d.decision_id, content)
            doc["chain"] = link.as_document()
            head = head.after(link)
            numbered.append((c, d, doc))
        after[plan_id] = Counter(start + len(group), head)
    return numbered, after


SEQUENCE = "sequence_number"


def lay_out(c: Candidate) -> Laid:
    """`c`'s document but for its sequence number, and the chain's digests of its
    fields: everything of the write that does not need the plan's counter (Laid).

    The document as it is: each field digest equals its `plain` form's
    (contracts.trust.chain._digest), without walking the whole document first."""
    doc = (to_document(c.decision, c.content_hash, c.stream_sequence,
                       principal_name(c.identity))
           | provenance(c.identity, "recorded_by"))
    if c.redactions:
        doc["redactions"] = marks_document(c.redactions)
    digests = decision_digests(doc)
    digests.pop(SEQUENCE, None)  # the numbering's (recorder-owned: None as sent)
    return Laid(doc, digests, laid_from(c))


def laid_for(c: Candidate) -> Laid:
    """`c`'s record as laid out ahead, if that still fits it; else laid out now."""
    return c.laid if c.laid is not None and c.laid.fits(c) else lay_out(c)


def laid_out(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Each candidate with its record laid out (RecordedDecisions.lay_out)."""
    return [c if (laid := laid_for(c)) is c.laid else replace(c, laid=laid)
            for c in candidates]


def _owning(c: Candidate) -> Ownership:
    name = principal_name(c.identity)
    return Ownership(name, tuple(c.decision.delegates)) if name else Ownership()


def _check_owner(plan_id: str, counter: Document | None, seen: Ownership) -> None:
    """Raise StaleFacts if the plan's root (and so its owner) was recorded since the
    facts were read: the batch's decisions into it are judged again against it."""
    if counter is not None and counter.get("owner") != seen.owner:
        raise StaleFacts(f"plan {plan_id} got its owner after its facts were read")


async def _record_roots(db: AsyncDatabase[Document], roots: Sequence[tuple[Decision, str | None]],
                        session: AsyncClientSession) -> None:
    """Each root on its plan's record, with its owner and delegates, conditional on the
    claim the facts saw: a claim committed since (by a decision created after this
    root, from another plan than the root names, or from a plan whose owner and
    delegates do not include this root's signer) makes the batch plan again.

    One round trip for all of them (a batch that starts sixty plans wrote sixty updates
    one after another inside its transaction, each waiting its turn on a busy server).
    The conditions are field predicates, never `$or`/`$and`: SecantusDB reads every
    plan for a filter with a logical operator beside `_id` (an update 254 ms at 20,000
    plans, against 2 to 3 ms for these; ADR 0038). `spawned_at` holds a date
    or null, for which "not after the root" is "null or not after it"."""
    if not roots:
        return
    res = await db[PLANS].bulk_write([_root_update(d, owner) for d, owner in roots],
                                     ordered=False, session=session)
    if res.matched_count != len(roots):
        raise StaleFacts(f"{len(roots) - res.matched_count} of the batch's {len(roots)} "
                         "plans were claimed since their facts were read")


def _root_update(d: Decision, owner: str | None) -> UpdateOne:
    cond: dict[str, Any] = {
        "spawned_at": {"$not": {"$gt": d.created_at}},
        "claim_owners": {"$in": [None, owner]} if owner else None}
    if d.parent_plan_id is not None:
        cond["parent_plan_id"] = {"$in": [None, d.parent_plan_id]}
    return UpdateOne(
        {"_id": d.plan_id, **cond},
        {"$set": {"root_decision_id": d.decision_id, "project": d.project,
                  "action_template": d.action_template, "root_created_at": d.created_at,
                  "named_parent_plan_id": d.parent_plan_id, "owner": owner,
                  "delegates": list(d.delegates) if owner else []}})


async def _record_claim(db: AsyncDatabase[Document], d: Decision, plan_id: str, *,
                        claimer: Ownership, now: datetime,
                        session: AsyncClientSession) -> None:
    """`d` spawned `plan_id`: its parent on the child's record, with who may sign its
    root (the claiming plan's owner and delegates). The child's record is read in the
    transaction and the claim rules asked of it again (`_claim_open`), so a claim or
    root committed since the facts were read (or a root signed by someone the claiming
    plan's owner does not admit) makes the batch plan again (StaleFacts); one committed
    after this transaction's snapshot makes its write conflict, and the transaction
    runs again. Two claims of one plan can never both stand, and no plan is adopted by
    a stranger.

    Read, then written by `_id`, rather than one update whose filter holds the rules:
    they need `$or`, and SecantusDB reads every plan for a filter with a logical
    operator beside `_id` (ADR 0038)."""
    doc = await db[PLANS].find_one({"_id": plan_id}, CLAIM_FIELDS, session=session)
    if doc is not None and not _claim_open(doc, d, claimer):
        raise StaleFacts(f"plan {plan_id} was claimed or began since its facts were read")
    await db[PLANS].update_one(
        {"_id": plan_id},
        {"$set": {"parent_plan_id": d.plan_id, "spawned_from_decision_id": d.decision_id,
                  "spawned_at": d.created_at,
                  "claim_owners": list(claimer.principals) if claimer.owner else None},
         "$setOnInsert": {"created_at": now, "status": PlanStatus.ACTIVE.value,
                          "next_sequence": 0}},
        upsert=True, session=session)


CLAIM_FIELDS = {"parent_plan_id": 1, "spawned_from_decision_id": 1,
                "named_parent_plan_id": 1, "root_created_at": 1, "owner": 1}
"""What `_claim_open` reads of a child plan's record."""


def _claim_open(doc: Document, d: Decision, claimer: Ownership) -> bool:
    """Whether `d` may (still) claim the plan `doc` records: the claim rules
    (contracts.recording.claims.claim_refused) and, once its root is recorded, a root
    signed by one of the claiming plan's principals (`Ownership.admits_name`)."""
    began = doc.get("root_created_at")
    if began is not None and not isinstance(began, datetime):
        return False  # not what the recorder writes: never read as "not begun"
    link = plan_claim(doc)
    return (claim_refused(d, str(doc.get("_id")), link) is None
            and (link.began_at is None or claimer.admits_name(doc.get("owner"))))
