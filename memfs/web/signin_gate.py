"""One sign-in at a time per client: the throttle's count is right however many tries come at once.

A sign-in awaits the store to look its token up. Tries of one client sent
together would all pass :meth:`memfs.core.signin.SigninThrottle.check` before
the first of them failed, so a burst would get past the limit. Counting each
try as failed until it resolved instead would throttle a client by its own
good requests sent at once (an API script), and leave a count behind for a
try the store never answered. So each client's tries are looked at one after
another: a try checks the throttle, looks its token up and records its
failure while no other try of that client does, and a burst meets the limit
exactly as tries sent one by one do.

A lock is kept only while a try of its client holds or waits for it, so the
gate's memory is bounded by the requests in flight.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


class ClientGate:
    """Per-client locks for sign-in tries (``throttle_key`` names the client)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[trio.Lock, int]] = {}

    @asynccontextmanager
    async def one_at_a_time(self, client: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(client, (trio.Lock(), 0))
        self._locks[client] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[client]
            if users == 1:
                del self._locks[client]
            else:
                self._locks[client] = (lock, users - 1)

    def __len__(self) -> int:
        """How many clients have a try in flight."""
        return len(self._locks)


__all__ = ["ClientGate"]
