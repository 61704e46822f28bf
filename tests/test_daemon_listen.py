"""The daemon's side of a shared store's notices: catch up at every (re)open, health in status.

``memfsd.listen.follow_store`` driven over a scripted listener: the real
database's side is tests/test_store_postgres_listen.py, real daemons are
tests/test_daemon_process_postgres.py. Here: a notice of a person's space asks
about that space only, every opening of the connection asks about all (what
was sent while it was down is lost), a lost connection is tried again after
``listen_retry_seconds`` and the health says why meanwhile; and the key's
bounds.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from memfs.api.models import StoreHealth
from memfs.core.errors import ConfigError, StoreUnavailable
from memfs.core.models import SpaceRef
from memfs.stores.postgres.listen import SpaceNotice
from memfsd.config import DEFAULT_LISTEN_RETRY_SECONDS, load_config
from memfsd.listen import follow_store

DANA = SpaceRef(layer="user", org="bank", user="dana", space="me")
RULES = SpaceRef(layer="org", org="bank", space="rules")


class ScriptedListener:
    """Opens and waits as ``script`` says: "down" (open fails), "drop" (wait fails), or notices."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.opened = 0
        self.closed = 0

    def open(self) -> None:
        self.opened += 1
        if self.script and self.script[0] == "down":
            self.script.pop(0)
            raise StoreUnavailable("connection refused", path="postgresql://db")

    def wait(self, timeout: float) -> list[SpaceNotice]:
        if not self.script:
            time.sleep(min(timeout, 0.01))  # nothing came within the wait
            return []
        step = self.script.pop(0)
        if step == "drop":
            raise StoreUnavailable("stopped listening for changes: terminated", path="db")
        return cast(list[SpaceNotice], step)

    def close(self) -> None:
        self.closed += 1


class FakeStore:
    def __init__(self, listener: ScriptedListener) -> None:
        self._listener = listener
        self.dropped: list[int] = []
        self.missed = 0

    def listener(self) -> ScriptedListener:
        return self._listener

    def notified(self, notices: Collection[SpaceNotice]) -> None:
        self.dropped += [notice.id for notice in notices]

    def missed_notices(self) -> None:
        self.missed += 1


class FakeService:
    def __init__(self) -> None:
        self.store_health: StoreHealth | None = None
        self.asked: list[set[SpaceRef] | None] = []
        self.asked_again = trio.Event()  # asked twice

    async def poll_forgets(self, only: Collection[SpaceRef] | None = None) -> list[Any]:
        self.asked.append(None if only is None else set(only))
        if len(self.asked) >= 2:
            self.asked_again.set()
        return []


async def run(script: list[Any], seconds: float = 0.5) -> tuple[FakeService, FakeStore]:
    listener = ScriptedListener(script)
    store, service = FakeStore(listener), FakeService()
    with trio.move_on_after(seconds):
        await follow_store(service, store, retry_seconds=0.05)  # type: ignore[arg-type]
    assert listener.closed >= 1  # the connection never outlives the task
    return service, store


async def test_a_notice_of_a_persons_space_asks_about_it_and_drops_the_cached_manifest() -> None:
    notices = [SpaceNotice(7, DANA), SpaceNotice(8, RULES)]
    service, store = await run([notices])
    assert service.asked == [None, {DANA, RULES}]  # at the opening: all; then what was named
    assert store.dropped == [7, 8]
    assert service.store_health == StoreHealth(ok=True)


async def test_a_store_down_at_start_is_unhealthy_until_it_listens_then_it_catches_up() -> None:
    listener = ScriptedListener(["down", "down"])
    store, service = FakeStore(listener), FakeService()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow_store, service, store, 0.2)  # type: ignore[arg-type]
        await trio.sleep(0.1)
        assert service.store_health is not None and not service.store_health.ok
        assert "connection refused" in (service.store_health.error or "")
        assert service.asked == []  # nothing to ask a store that is down
        await trio.sleep(0.5)
        assert service.store_health == StoreHealth(ok=True)
        assert service.asked == [None]
        nursery.cancel_scope.cancel()
    assert listener.opened == 3


async def test_a_dropped_connection_is_opened_again_and_everything_is_asked_about_again() -> None:
    service, _ = await run([[], "drop", [SpaceNotice(7, DANA)]])
    assert service.asked == [None, None, {DANA}]
    assert service.store_health == StoreHealth(ok=True)


def test_listen_retry_seconds_defaults_to_one_and_takes_env_and_fractions(tmp_path: Path) -> None:
    assert load_config(None, env={}).listen_retry_seconds == DEFAULT_LISTEN_RETRY_SECONDS == 1.0
    config = tmp_path / "memfs.toml"
    config.write_text("listen_retry_seconds = 0.25\n")
    assert load_config(config, env={}).listen_retry_seconds == 0.25
    env = {"MEMFS_LISTEN_RETRY_SECONDS": "3"}
    assert load_config(config, env=env).listen_retry_seconds == 3.0


@pytest.mark.parametrize("value", ["0", "-1", "true", '"soon"', "inf"])
def test_a_bad_listen_retry_seconds_is_a_config_error_naming_the_key(
    tmp_path: Path, value: str
) -> None:
    config = tmp_path / "memfs.toml"
    config.write_text(f"listen_retry_seconds = {value}\n")
    with pytest.raises(ConfigError, match="listen_retry_seconds") as raised:
        load_config(config, env={})
    assert "0 turns it off" not in str(raised.value)  # it cannot be turned off


async def test_a_persons_cached_manifest_goes_when_the_listener_catches_up_after_a_lost_connection(
    postgres_databases: Any,
) -> None:
    # Daemon A cached Dana's manifest (her file names) at a lean load. Its
    # listening connection was lost; meanwhile another host forgot her file,
    # and that notice is gone. A heard notice drops a person's cached names
    # at once (``PostgresStore.notified``); the catch-up at the reopening,
    # which stands in for every notice lost, must leave no fewer of them gone:
    # the forgotten name must not stay in this process's cache.
    from memfs.core.models import ChangeSet, Provenance

    store = postgres_databases.store()
    other = postgres_databases.open(store.url)
    dana = SpaceRef(layer="user", space="me", org="bank", user="dana")
    try:
        await other.put(dana, ChangeSet(created={"diagnosis.md": b"x"}), provenance=Provenance())
        await store.load_lean(dana, "s1", set())
        assert store._lean.files == 1
        listener = ScriptedListener(["drop"])  # open, then lost; open again, then quiet

        def listener_of() -> ScriptedListener:
            return listener

        store.listener = listener_of
        service = FakeService()
        async with trio.open_nursery() as nursery:

            async def follow() -> None:
                await follow_store(service, store, retry_seconds=0.05)  # type: ignore[arg-type]

            await other.forget_file(dana, "diagnosis.md", by=None)  # its notice: never heard
            nursery.start_soon(follow)
            with trio.fail_after(10):  # opened, dropped, opened again and caught up
                await service.asked_again.wait()
            nursery.cancel_scope.cancel()
        assert service.asked == [None, None]
        assert store._lean.files == 0
    finally:
        await other.aclose()
        await store.aclose()
