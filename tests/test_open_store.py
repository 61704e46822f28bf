"""``memfs.open_store``: store URLs, and mistakes in them failing loudly."""

from __future__ import annotations

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
