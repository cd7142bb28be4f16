"""What the services need from the outside world, as protocols: the store and the publisher
(`publishing`), the records every service reads (`records`), and each service's store
(`corrections`, `invariants`).

The ports belong to the services that use them, so each says exactly what they call and
no more. The bootstrap (bootstrap/ledger.py) wires in the MongoDB implementation
(store.mongo_store.MongoStore, every repository once) and a JetStream publisher; the
tests also run the services over the in-memory store (tests/memory_store.py), and one
contract suite (tests/contract/) holds both stores to the same rules.

Errors are part of the contract (contracts.shared.persistence): a conditional write that
finds the record changed raises `ConcurrentChange` (`LeaseLost` when the plan's lease is
gone), a unique key already taken `DuplicateRecord`, and a database that fails or does
not answer `StoreFailure`; a message no stream stored raises `NotStored` (publishing); the
services never see a driver's exception.
"""

