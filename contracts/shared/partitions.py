"""A partitioned family: its messages spread over N durables by plan, so N workers can
each read a share while every plan stays in one partition (its messages in order, read
by one worker at a time).

The stream rewrites the subject as it stores a message, with NATS's own deterministic
mapping function (a JetStream subject transform; the same `{{partition(n,1)}}` as
nats-server's `mappings`): `decisions.recorded.<plan_id>` is stored as
`decisions.recorded.<k>.<plan_id>`, k = FNV-1a(plan_id) mod N. Publishers keep
publishing the family's subject, and every role's permissions stay as they are: the
stored subject is never one anybody publishes to (an account mapping in the server
config would be applied before the permission check, so every publisher would need the
partitioned subjects too, and could then pick a partition itself).

Partition k is read by the durable `<durable>-<k>` over `<name>.<k>.*`. With N = 1
nothing is rewritten and the one durable is the reader's own (`<durable>` over
`<name>.*`), so a ledger that never set N reads as it always did. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_PARTITIONS = 32
"""Most partitions of one family: the permissions file names each possible durable
(the workers' own durables are denied to every other role by name)."""

_PARTITION = re.compile(r"\{\{\s*partition\(\s*(\d+)\s*,\s*1\s*\)\s*\}\}")
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


@dataclass(frozen=True, slots=True)
class Partition:
    """One durable of a partitioned family: its name, its filter and its lease."""

    durable: str
    filter_subject: str
    index: int | None
    """None: the family is not partitioned (N = 1), this is the reader's own durable."""

    @property
    def lease(self) -> str:
        """The lease (`plan_locks` `_id`) the one replica reading it holds; plan IDs are
        ULIDs, so it can meet none."""
        return f"role:{self.durable}"


def check_count(n: int) -> int:
    if not 1 <= n <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be 1 to {MAX_PARTITIONS}, not {n}")
    return n


def partitions(name: str, durable: str, n: int) -> tuple[Partition, ...]:
    """The durables of a family named `name` read through `durable`, in `n` partitions."""
    if check_count(n) == 1:
        return (Partition(durable, f"{name}.*", None),)
    return tuple(Partition(f"{durable}-{k}", f"{name}.{k}.*", k) for k in range(n))


def every_partition(name: str, durable: str) -> tuple[Partition, ...]:
    """Every durable any N could have made: the unpartitioned one and each `-k`."""
    return (partitions(name, durable, 1)[0],
            *partitions(name, durable, MAX_PARTITIONS))


def transform(name: str, n: int) -> tuple[str, str] | None:
    """(source, destination) of the stream's subject transform for `n` partitions of the
    family `name`; None for one partition (nothing rewritten)."""
    if check_count(n) == 1:
        return None
    return f"{name}.*", f"{name}.{{{{partition({n},1)}}}}.{{{{wildcard(1)}}}}"


def count_of(destination: str | None) -> int:
    """The partition count a transform's destination says (1 without a transform)."""
    if not destination:
        return 1
    found = _PARTITION.search(destination)
    return int(found.group(1)) if found else 1


def partition_of(token: str, n: int) -> int:
    """The partition the stream puts a subject token in: FNV-1a 32 of its bytes mod `n`,
    as nats-server's `partition()` computes it."""
    h = _FNV_OFFSET
    for byte in token.encode():
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h % check_count(n)


def unpartitioned(name: str, subject: str) -> str:
    """`<name>.<k>.<token>` as published (`<name>.<token>`); any other subject as is.

    Only a short number between the name and exactly one more token is a partition, so
    a plan token (a ULID, 26 characters) is never taken for one."""
    head = name + "."
    if not subject.startswith(head):
        return subject
    parts = subject[len(head):].split(".")
    if len(parts) == 2 and parts[0].isdigit() and len(parts[0]) <= 3:
        return head + parts[1]
    return subject
