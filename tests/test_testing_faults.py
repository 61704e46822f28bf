"""``memfs.testing.FaultyStore``: any store, with chosen methods failing, blocked or slowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from memfs.core.errors import InvalidName, StoreUnavailable
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.base import LeanStore, ManagedStore, ReviewingStore, Store
from memfs.stores.folder import FolderStore
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore
from memfs.testing import FaultyStore, run_check

RULES = SpaceRef(layer="org", space="rules")


async def _store(store: Any, changes: ChangeSet) -> Any:
    loaded = await store.load(RULES, "s1")
    return await store.store(RULES, changes, cursor=loaded.cursor, provenance=Provenance())


def test_the_wrapper_has_exactly_the_capabilities_of_the_store_it_wraps(tmp_path: Path) -> None:
    memory = FaultyStore(MemoryStore())
    folder = FaultyStore(FolderStore(tmp_path / "folder"))
    sqlite = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    assert isinstance(memory, ReviewingStore) and isinstance(memory, ManagedStore)
    assert not isinstance(memory, LeanStore)
    assert isinstance(sqlite, LeanStore) and isinstance(sqlite, ReviewingStore)
    assert isinstance(folder, Store)
    assert not isinstance(folder, ManagedStore)
    assert isinstance(memory, FaultyStore) and repr(memory).startswith("FaultyStore(")


async def test_an_unfaulted_wrapper_passes_the_store_contract() -> None:
    await run_check(lambda: FaultyStore(MemoryStore()), "update_and_delete_apply")
    await run_check(
        lambda: FaultyStore(MemoryStore()),
        "a_space_switched_from_after_to_person_holds_the_next_edit_apart",
    )


async def test_a_failing_method_raises_until_healed_and_sync_helpers_pass_through() -> None:
    down = StoreUnavailable("database is down")
    store = FaultyStore(MemoryStore(), fail={"load": down})
    with pytest.raises(StoreUnavailable) as raised:
        await store.load(RULES, "s1")
    assert raised.value is down
    store.inner.put_nowait(RULES, ChangeSet(created={"a.md": b"a"}), provenance=Provenance())
    assert store.files_nowait(RULES) == {"a.md": b"a"}  # sync helpers are the inner store's
    store.heal("load")
    assert (await store.load(RULES, "s1")).files == {"a.md": b"a"}
    assert store.calls["load"] == 2


async def test_times_and_when_choose_which_calls_fail() -> None:
    store = FaultyStore(MemoryStore())
    store.fail(
        "store",
        lambda: InvalidName("refused", path="bad.md"),  # a fresh error per call
        times=1,
        when=lambda ref, changes, **kwargs: "bad.md" in changes.paths,
    )
    assert (await _store(store, ChangeSet(created={"ok.md": b"ok"}))).status == "saved"
    with pytest.raises(InvalidName):
        await _store(store, ChangeSet(created={"bad.md": b"x"}))
    # Failed once as asked, then healed itself.
    assert (await _store(store, ChangeSet(created={"bad.md": b"x"}))).status == "saved"
    assert store.calls["store"] == 3
    assert store.inner.files_nowait(RULES) == {"ok.md": b"ok", "bad.md": b"x"}


async def test_a_blocked_method_waits_for_its_gate() -> None:
    store = FaultyStore(MemoryStore())
    gate = store.block("load")
    done: list[str] = []

    async def load() -> None:
        await store.load(RULES, "s1")
        done.append("loaded")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(load)
        await trio.testing.wait_all_tasks_blocked()
        assert done == [] and store.calls["load"] == 1
        gate.set()
    assert done == ["loaded"]
    # heal() lets blocked calls go too.
    store.block("store")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_store, store, ChangeSet(created={"a.md": b"a"}))
        await trio.testing.wait_all_tasks_blocked()
        store.heal()
    assert store.inner.files_nowait(RULES) == {"a.md": b"a"}


async def test_a_delayed_method_takes_that_much_longer(autojump_clock: trio.abc.Clock) -> None:
    store = FaultyStore(MemoryStore(), delay={"load": 5.0})
    start = trio.current_time()
    await store.load(RULES, "s1")
    assert trio.current_time() - start == pytest.approx(5.0)


def test_naming_a_method_the_store_lacks_or_a_bad_count_is_refused(tmp_path: Path) -> None:
    store = FaultyStore(FolderStore(tmp_path / "folder"))
    for name in ("lod", "history", "aclose_", "folder"):  # "folder" is sync: nothing to fault
        with pytest.raises(AttributeError):
            store.fail(name, StoreUnavailable("x"))
    with pytest.raises(ValueError):
        store.fail("load", StoreUnavailable("x"), times=0)
    with pytest.raises(ValueError):
        store.delay("load", -1)
    with pytest.raises(AttributeError):
        store.history  # noqa: B018 - the folder store keeps none, so neither does its wrapper
