"""Login attempts, rate-limited per client address and overall.

A token of 16 characters or more cannot be guessed at any rate, but an endless stream
of guesses costs CPU and fills logs, and a short-ish token should not be worth trying.
So every failed attempt takes a token from two buckets, the client address's and the
console's: 5 per minute per address (refilled one every 12 s) and 30 per minute for all
of them. A login refused for the rate is answered 429 with `Retry-After` before the
form is read, and the attempt is taken *before* the token is checked (given back when
it was right), so concurrent guesses cannot outrun the count.

Memory is bounded: at most `max_clients` addresses are remembered, the least recently
seen forgotten first; forgetting one only resets that address, and the overall bucket
still holds. Behind a reverse proxy every request comes from the proxy's address: the
per-address limit then acts as a second overall one (the proxy's forwarded headers are
not trusted, since any client can write them).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Bucket:
    capacity: float
    per_second: float
    tokens: float
    at: float

    def refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.per_second)
        self.at = now

    def wait(self, now: float) -> float:
        """Seconds until one attempt is allowed (0: now)."""
        self.refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.per_second


@dataclass(frozen=True)
class Rate:
    attempts: int
    per_seconds: float

    def bucket(self, now: float) -> Bucket:
        return Bucket(self.attempts, self.attempts / self.per_seconds, self.attempts, now)


PER_CLIENT = Rate(5, 60.0)
OVERALL = Rate(30, 60.0)
MAX_CLIENTS = 4096


class LoginThrottle:
    def __init__(self, per_client: Rate = PER_CLIENT, overall: Rate = OVERALL,
                 max_clients: int = MAX_CLIENTS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._per_client = per_client
        self._max_clients = max_clients
        self._clock = clock
        self._overall = overall.bucket(clock())
        self._clients: OrderedDict[str, Bucket] = OrderedDict()

    def attempt(self, client: str) -> float:
        """Take one attempt for `client`: 0 if it may go ahead, else the seconds to wait
        (nothing taken then)."""
        now = self._clock()
        mine = self._clients.get(client)
        if mine is None:
            mine = self._per_client.bucket(now)
            self._clients[client] = mine
            while len(self._clients) > self._max_clients:
                self._clients.popitem(last=False)
        self._clients.move_to_end(client)
        wait = max(mine.wait(now), self._overall.wait(now))
        if wait == 0:
            mine.tokens -= 1
            self._overall.tokens -= 1
        return wait

    def succeeded(self, client: str) -> None:
        """The attempt was right: it does not count against anyone."""
        mine = self._clients.get(client)
        if mine is not None:
            mine.tokens = min(mine.capacity, mine.tokens + 1)
        self._overall.tokens = min(self._overall.capacity, self._overall.tokens + 1)

    def __len__(self) -> int:
        return len(self._clients)
