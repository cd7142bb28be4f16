"""The console's login sessions: what its cookie holds instead of the token.

Why not the token: a cookie is sent with every request and sits in the browser's store,
so the token in it would leak the one secret that opens every console session, for as
long as the token lives. A session is a random ID (256 bits) the server maps to an
expiry: it ends by itself, on logout, or when the console restarts, and never reveals
the token.

The map is bounded (`max_sessions`; the oldest is dropped first) and keyed by the ID's
SHA-256, so a lookup's timing says nothing about a guessed ID's prefix.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

COOKIE = "console_session"
LIFETIME_SECONDS = 8 * 3600.0
"""A working day: an operator signs in again the next morning."""
MAX_SESSIONS = 1000
ID_MAX_CHARS = 64
"""A cookie value longer than any ID this console issues is not looked up."""


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()


class Sessions:
    def __init__(self, lifetime: float = LIFETIME_SECONDS, max_sessions: int = MAX_SESSIONS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lifetime = lifetime
        self._max = max_sessions
        self._clock = clock
        self._expiry: OrderedDict[bytes, float] = OrderedDict()
        """Oldest first: every session lives as long, so the first to end is first."""

    def open(self) -> str:
        """A new session; its ID goes into the cookie and nowhere else."""
        self._forget_ended()
        while len(self._expiry) >= self._max:
            self._expiry.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        self._expiry[_key(session_id)] = self._clock() + self.lifetime
        return session_id

    def valid(self, session_id: str | None) -> bool:
        if not session_id or len(session_id) > ID_MAX_CHARS:
            return False
        key = _key(session_id)
        ends = self._expiry.get(key)
        if ends is None:
            return False
        if ends <= self._clock():
            del self._expiry[key]
            return False
        return True

    def close(self, session_id: str | None) -> None:
        if session_id and len(session_id) <= ID_MAX_CHARS:
            self._expiry.pop(_key(session_id), None)

    def __len__(self) -> int:
        return len(self._expiry)

    def _forget_ended(self) -> None:
        now = self._clock()
        while self._expiry:
            key, ends = next(iter(self._expiry.items()))
            if ends > now:
                return
            del self._expiry[key]
