"""A store whose file or folder is missing is unavailable: never a conflict, never a fresh store.

"Missing" is judged against what existed: a SQLite file or folder-store root
that does not exist when the store is made is created by its first use; one
that existed then (or was created since) and is gone is ``StoreUnavailable``
on every call, and the path is not made again behind the operator's back.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import memfs
from memfs.core.errors import StoreUnavailable
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.base import Store
from memfs.stores.folder import FolderStore
from memfs.stores.postgres import PostgresStore
from memfs.stores.sqlite import SqliteStore

RULES = SpaceRef(layer="org", space="rules", org="acme")
PROV = Provenance(session="s1", turn="t1")


async def _save(store: Store, content: bytes) -> None:
    loaded = await store.load(RULES, "s1")
    stored = await store.store(
        RULES,
        ChangeSet(created={f"{content.decode()}.md": content}),
        cursor=loaded.cursor,
        provenance=PROV,
    )
    assert stored.status == "saved", stored


async def _unavailable(store: Store) -> None:
    """Both a load and a store (with a cursor from before) fail as unavailable."""
    with pytest.raises(StoreUnavailable):
        await store.load(RULES, "s1")
    with pytest.raises(StoreUnavailable):
        await store.store(
            RULES, ChangeSet(created={"late.md": b"late"}), cursor="1", provenance=PROV
        )


def _remove_file(db: Path) -> None:
    for part in db.parent.glob(db.name + "*"):  # with its -wal and -shm
        part.unlink()


def _replace_file(db: Path) -> None:
    db.unlink()
    db.write_bytes(b"")


SQLITE_REMOVALS: dict[str, Callable[[Path], None]] = {
    "file": _remove_file,
    "folder": lambda db: shutil.rmtree(db.parent),
    "file replaced": _replace_file,
}


@pytest.mark.parametrize("removal", list(SQLITE_REMOVALS))
async def test_a_sqlite_file_removed_while_open_is_unavailable_and_not_made_again(
    tmp_path: Path, removal: str
) -> None:
    db = tmp_path / "state" / "memfs.db"
    db.parent.mkdir()
    store = SqliteStore(db)  # a new file: made by the first use
    await _save(store, b"one")
    SQLITE_REMOVALS[removal](db)
    await _unavailable(store)
    await _unavailable(store)  # and stays so: no fresh database appeared
    assert not db.exists() or db.read_bytes() == b""
    await store.aclose()


async def test_a_sqlite_file_removed_before_its_store_first_opens_it_is_unavailable(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memfs.db"
    first = SqliteStore(db)
    await _save(first, b"one")
    await first.aclose()
    store = SqliteStore(db)  # made on an existing file
    for part in tmp_path.glob("memfs.db*"):
        part.unlink()
    await _unavailable(store)
    assert not db.exists()
    await store.aclose()


async def test_a_sqlite_store_is_available_again_once_its_file_is_back(tmp_path: Path) -> None:
    db = tmp_path / "memfs.db"
    store = SqliteStore(db)
    await _save(store, b"one")
    backup = tmp_path / "backup.db"
    shutil.copy(db, backup)
    os.unlink(db)
    await _unavailable(store)
    shutil.copy(backup, db)
    assert (await store.load(RULES, "s1")).files == {"one.md": b"one"}
    await store.aclose()


async def test_a_removed_folder_store_root_is_unavailable_not_a_conflict(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = FolderStore(root)  # a new root: made by the first store
    assert (await store.load(RULES, "s1")).files == {}
    assert not root.exists()  # a load makes nothing
    await _save(store, b"one")
    shutil.rmtree(root)
    await _unavailable(store)
    assert not root.exists()
    # A store made on the root that existed: the same, from its first call.
    root.mkdir()
    again = FolderStore(root)
    root.rmdir()
    await _unavailable(again)
    assert not root.exists()


async def test_a_turn_over_a_removed_store_ends_unavailable_not_conflict(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = FolderStore(root)
    await _save(store, b"one")
    memory = memfs.Memory(
        store, [memfs.org_memory(space="rules", org="orgId")], workdir=tmp_path / "work"
    )
    turn = await memory.start_turn("s1", {"orgId": "acme", "userId": "u"}, prompt="p")
    (turn.root / "rules" / "two.md").write_text("two")
    shutil.rmtree(root)
    result = await turn.end()
    space = result.spaces["rules"]
    assert space.status == "not_saved"
    assert space.conflicts == ()
    assert space.error is not None and "root is missing" in space.error
    assert not root.exists()


async def test_a_store_that_cannot_be_reached_at_start_is_logged_and_started_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A daemon and ``memfs web`` check the store key at start; a store that
    # is down then is no reason not to start (it is checked at every open).
    store = PostgresStore(
        "postgresql://memfs@127.0.0.1:1/nowhere",
        connect_timeout_seconds=1,
        key_file=tmp_path / "store.key",
    )
    try:
        with caplog.at_level("WARNING"):
            await store.check_at_start()
        assert "could not be opened at start" in caplog.text
    finally:
        await store.aclose()
