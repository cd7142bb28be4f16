"""The correction service: the operator's API (`service.CorrectionService`), and the
runner that takes each correction of a plan from PENDING to APPLIED, FAILED or CANCELLED.

Exactly-once events come from the transactional outbox (store.outbox): every step
commits its state change together with the events announcing it, then publishes
them under fixed Nats-Msg-Ids and deletes them (`committing`). A process dying between
the commit and the publish leaves them for the next flush of that correction or the
relay.

Ordering: a plan's corrections are worked one at a time by whoever holds the plan's
lease (store.leases), a started one first, then oldest arrival
(contracts.corrections.running.next_to_run); a heartbeat renews the lease while the
runner holds it, and every step's transaction renews it conditionally on its owner,
so a runner that stalled past its lease cannot commit (`runner`).

Nothing wedges: a step that fails for anything but a database outage or a concurrent
change (an archive it cannot write, a document too large, a correction over
CORRECTIONS_MAX_DECISIONS) ends the attempt FAILED with the error, and the correction
FAILED once its attempts are used; a concurrent change is retried with a fresh read
(and a fresh impact), with a growing pause, a bounded number of times (`policy`,
`steps`). A revert or append is one transaction, so the tree is either fully corrected
or untouched; a runner that dies mid-way leaves the correction ANALYZING or EXECUTING
and the next lease holder resumes it.
"""
