"""Every message family of the ledger, and every stream, in one list.

The one place to look up what travels over NATS: each capability declares its own
(`contracts/<capability>/families.py`); this registry is what the workers, the AsyncAPI
document and the permissions file are derived from (contracts.shared.families).
"""

from __future__ import annotations

from contracts.corrections.families import CORRECTIONS
from contracts.corrections.families import FAMILIES as CORRECTION_FAMILIES
from contracts.invariants.families import FAMILIES as INVARIANT_FAMILIES
from contracts.invariants.families import INVARIANTS
from contracts.recording.families import DECISIONS
from contracts.recording.families import FAMILIES as RECORDING_FAMILIES
from contracts.shared.families import MessageFamily, Stream, stream_subjects
from contracts.shared.roles import Grant, Reader, Role

FAMILIES: tuple[MessageFamily, ...] = (*RECORDING_FAMILIES, *CORRECTION_FAMILIES,
                                       *INVARIANT_FAMILIES)
STREAMS: tuple[Stream, ...] = (DECISIONS, CORRECTIONS, INVARIANTS)

GRANTS: dict[Role, tuple[Grant, ...]] = {
    Role.WORKER: (Grant.MANAGE_STREAMS,),
    Role.AGENT: (),
    Role.OPERATOR: (Grant.INSPECT_STREAMS,),
    Role.SUBSCRIBER: (),
}
"""What each role may do beyond the families it publishes and reads."""


def captured(stream: Stream) -> list[str]:
    """The subjects `stream` captures."""
    return stream_subjects(stream, FAMILIES)


def worker_consumers() -> list[tuple[MessageFamily, Reader]]:
    """Every durable the workers pull, with its family, in declaration order."""
    return [(f, r) for f in FAMILIES for r in f.worker_consumers()]


def family(name: str) -> MessageFamily:
    """The family named `name` (`decisions.recorded`); KeyError if there is none."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(name)
