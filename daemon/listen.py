"""Following a shared store: other daemons' changes heard at once, and the store's health.

Over a ``postgresql://`` store the daemon keeps one connection of its own
that LISTENs for notices of changed spaces (``memfs.stores.postgres.listen``).
A notice is a hint to look now, never what a turn relies on:

- the store drops what it caches of that space (a lean load reads the
  space's version in its own transaction anyway, so a cached manifest of
  another version is never served, notice or not; the blob cache is
  addressed by sha256, so a blob is never another file's);
- a notice of a person's space asks the store, for each open turn over it,
  whether it was forgotten after the turn loaded it (``poll_forgets``), so a
  forget made through another daemon reaches this one's open turns at once,
  not ``forget_poll_seconds`` later.

Notices sent while the connection is down are lost, so each time it is
(re)opened the store drops every manifest it caches (a person's file names
among them, as a notice would have) and the daemon catches up by asking the
store about every open turn's person spaces, exactly as the periodic poll
does. A lost connection is tried again every ``listen_retry_seconds``. Every
``WAIT_SECONDS`` the connection is asked whether it is still there; what it
finds is the store's health in ``memfs status`` (``store_health``).
"""

from __future__ import annotations

import logging

import trio

from memfs.api.models import StoreHealth
from memfs.core.errors import MemfsError, StoreUnavailable
from memfs.core.models import SpaceRef
from memfs.stores.postgres import PostgresStore
from memfsd.service import DaemonService

log = logging.getLogger("memfsd.listen")

# Seconds a wait for notices lasts before the connection is checked (and how
# long a stopping daemon may wait for the listener's thread to come back).
WAIT_SECONDS = 0.5


async def follow_store(service: DaemonService, store: PostgresStore, retry_seconds: float) -> None:
    """Listen for other processes' changes until cancelled; never raises for the store's sake."""
    listener = store.listener()
    try:
        while True:
            try:
                await trio.to_thread.run_sync(listener.open)
            except StoreUnavailable as exc:
                _unhealthy(service, exc)
                await trio.sleep(retry_seconds)
                continue
            if service.store_health is not None and not service.store_health.ok:
                log.info("listening for other daemons' changes again")
            service.store_health = StoreHealth(ok=True)
            # Whatever was sent while no one listened is lost: ask instead.
            store.missed_notices()
            await _catch_up(service)
            try:
                while True:
                    notices = await trio.to_thread.run_sync(listener.wait, WAIT_SECONDS)
                    service.store_health = StoreHealth(ok=True)
                    if notices:
                        store.notified(notices)
                        await _catch_up(service, {notice.ref for notice in notices})
            except StoreUnavailable as exc:
                _unhealthy(service, exc)
                await trio.sleep(retry_seconds)
    finally:
        listener.close()


def _unhealthy(service: DaemonService, exc: StoreUnavailable) -> None:
    if service.store_health is None or service.store_health.ok:
        log.warning("the store is unavailable: %s", exc)
    service.store_health = StoreHealth(ok=False, error=str(exc))


async def _catch_up(service: DaemonService, refs: set[SpaceRef] | None = None) -> None:
    try:
        await service.poll_forgets(only=refs)
    except MemfsError as exc:
        log.warning("could not ask the store about forgets: %s", exc)
    except Exception:
        log.exception("could not apply forgets found in the store")


__all__ = ["WAIT_SECONDS", "follow_store"]
