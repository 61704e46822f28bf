"""``memfs.open_store``: store URLs, and mistakes in them failing loudly."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import memfs
from memfs.stores.memory import MemoryStore


async def test_memory_url_opens_an_in_process_store() -> None:
    store = memfs.open_store("memory://")
    assert isinstance(store, MemoryStore)
    assert isinstance(store, memfs.ManagedStore)


async def test_folder_url_opens_a_folder_store_at_that_absolute_path(tmp_path: Path) -> None:
    from memfs.stores.folder import FolderStore

    store = memfs.open_store(f"folder://{tmp_path}/mem")
    assert isinstance(store, FolderStore)
    assert not isinstance(store, memfs.ManagedStore)
    await store.aclose()


async def test_sqlite_url_opens_a_database_file(tmp_path: Path) -> None:
    from memfs.stores.sqlite import SqliteStore

    store = memfs.open_store(f"sqlite://{tmp_path}/memfs.db")
    assert isinstance(store, SqliteStore)
    await store.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql-ish://x",
        "s3://bucket/key",
        "folder://relative/path",
        "sqlite://memfs.db",
        "folder:relative",
        "sqlite:///",
        "memory://somewhere",
        "",
    ],
)
def test_unknown_schemes_and_relative_paths_are_config_errors(url: str) -> None:
    with pytest.raises(memfs.ConfigError):
        memfs.open_store(url)


async def test_sqlite_url_in_a_folder_not_made_yet_makes_it_0700(tmp_path: Path) -> None:
    # The README's quick start on a fresh machine: no folder for the file yet.
    store = memfs.open_store(f"sqlite://{tmp_path}/fresh/state/memfs.db")
    try:
        for folder in (tmp_path / "fresh", tmp_path / "fresh" / "state"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
        await store.load(memfs.SpaceRef(layer="org", space="rules"), "s1")
        assert (tmp_path / "fresh" / "state" / "memfs.db").is_file()
    finally:
        await store.aclose()


async def test_postgresql_url_opens_a_postgres_store_without_connecting(tmp_path: Path) -> None:
    from memfs.stores.postgres import PostgresStore

    # Nothing listens there: making the store must not connect.
    key = tmp_path / "keys" / "store.key"
    store = memfs.open_store(
        "postgresql://memfs@/memfs?host=/nonexistent-socket-folder", key_file=key
    )
    assert isinstance(store, PostgresStore)
    assert isinstance(store, memfs.ManagedStore)
    # The store key is read, or made, at once: a key file that cannot be read fails at start.
    assert store.key_file == key and key.is_file()
    await store.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://host/db?no_such_option=1",
        "postgres-ish://host/db",
    ],
)
def test_postgresql_urls_libpq_cannot_read_are_config_errors(url: str) -> None:
    from memfs.stores.open import parse_store_url

    with pytest.raises(memfs.ConfigError):
        parse_store_url(url)
    with pytest.raises(memfs.ConfigError):
        memfs.open_store(url)
