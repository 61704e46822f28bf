"""Rotating the store key: every person's key wrapped again, and only the new key opens the store.

What rotation is for: a backup of the database taken before it opens only
with the old key, so destroying the old key file ends every such copy (and
the people forgotten since stay forgotten in them).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner

from memfs.cli import main
from memfs.core.errors import ConfigError
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.postgres import PostgresStore
from memfs.stores.sql.store import SqlStore
from memfs.stores.sqlite import SqliteStore
from tests.postgres_fixtures import Databases

DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
CAROL = SpaceRef(layer="user", space="me", org="bank-1", user="carol")
RULES = SpaceRef(layer="org", space="rules", org="bank-1")

# (where the store is, key file) -> a store there; one place per test.
Opener = Callable[[Path], SqlStore]


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if request.param == "sqlite":
        return lambda key: SqliteStore(tmp_path / "memfs.db", key_file=key)
    databases: Databases = request.getfixturevalue("postgres_databases")
    url = databases.url()
    return lambda key: PostgresStore(url, key_file=key)


async def remember(store: SqlStore) -> None:
    await store.put(RULES, ChangeSet(created={"r.md": b"org rule"}), provenance=Provenance())
    await store.put(DANA, ChangeSet(created={"d.md": b"dana's own"}), provenance=Provenance())


async def seeded(store: SqlStore) -> None:
    try:
        await remember(store)
    finally:
        await store.aclose()


async def test_a_rotated_store_opens_with_the_new_key_only_and_keeps_every_persons_memory(
    opener: Opener, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.key", tmp_path / "new.key"
    store = opener(old)
    try:
        await remember(store)
        assert await store.rotate_key(new) == 1  # one person's key wrapped again
        assert new.is_file() and (new.stat().st_mode & 0o777) == 0o600
        # The rotating process goes on under the new key.
        assert await store.files(DANA) == {"d.md": b"dana's own"}
        await store.put(CAROL, ChangeSet(created={"c.md": b"carol"}), provenance=Provenance())
    finally:
        await store.aclose()
    fresh = opener(new)
    try:
        assert await fresh.files(DANA) == {"d.md": b"dana's own"}
        assert await fresh.files(CAROL) == {"c.md": b"carol"}
        assert await fresh.files(RULES) == {"r.md": b"org rule"}
    finally:
        await fresh.aclose()
    stale = opener(old)
    try:
        with pytest.raises(ConfigError, match="store_key_file holds another key"):
            await stale.files(RULES)
    finally:
        await stale.aclose()


async def test_a_process_still_open_with_the_old_key_is_told_to_restart_and_writes_nothing(
    opener: Opener, tmp_path: Path
) -> None:
    old = tmp_path / "old.key"
    ours, theirs = opener(old), opener(old)
    try:
        await remember(ours)
        assert await theirs.files(DANA) == {"d.md": b"dana's own"}  # open, with the old key
        await ours.rotate_key(tmp_path / "new.key")
        with pytest.raises(ConfigError, match="rotated"):
            await theirs.files(DANA)
        # A new person's key wrapped under the old key would open for nobody: refused.
        with pytest.raises(ConfigError, match="rotated"):
            await theirs.put(CAROL, ChangeSet(created={"c.md": b"c"}), provenance=Provenance())
        assert await ours.files(CAROL) == {}
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_rotating_to_the_key_the_store_has_is_refused(opener: Opener, tmp_path: Path) -> None:
    key = tmp_path / "store.key"
    store = opener(key)
    try:
        await remember(store)
        same = tmp_path / "copy.key"
        shutil.copy(key, same)
        with pytest.raises(ConfigError, match="holds the key the store has now"):
            await store.rotate_key(same)
        assert await store.files(DANA) == {"d.md": b"dana's own"}
    finally:
        await store.aclose()


async def test_a_backup_from_before_the_rotation_does_not_open_with_the_new_key(
    tmp_path: Path,
) -> None:
    db, old, new = tmp_path / "memfs.db", tmp_path / "old.key", tmp_path / "new.key"
    store = SqliteStore(db, key_file=old)
    await remember(store)
    await store.aclose()
    backup = tmp_path / "backup" / "memfs.db"
    backup.parent.mkdir()
    shutil.copy(db, backup)
    store = SqliteStore(db, key_file=old)
    try:
        await store.rotate_key(new)
    finally:
        await store.aclose()
    restored = SqliteStore(backup, key_file=new)
    try:
        with pytest.raises(ConfigError, match="another key"):
            await restored.files(DANA)
    finally:
        await restored.aclose()


def test_memfs_db_rotate_key_prints_how_many_and_the_old_key_no_longer_opens(
    tmp_path: Path,
) -> None:
    db, old, new = tmp_path / "memfs.db", tmp_path / "old.key", tmp_path / "new.key"
    url = f"sqlite://{db}"
    trio.run(seeded, SqliteStore(db, key_file=old))
    runner = CliRunner()
    rotate = ["db", "rotate-key", "--store", url, "--store-key-file", str(old)]
    done = runner.invoke(main, [*rotate, "--new-key-file", str(new)], env={})
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {"rotated": 1, "store_key_file": str(new)}
    refused = runner.invoke(
        main, ["db", "migrate", "--store", url, "--store-key-file", str(old)], env={}
    )
    assert refused.exit_code == 78 and "another key" in refused.output
    assert (
        runner.invoke(
            main, ["db", "migrate", "--store", url, "--store-key-file", str(new)], env={}
        ).exit_code
        == 0
    )


def test_memfs_db_rotate_key_on_a_store_without_a_key_is_a_clear_error(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        main,
        ["db", "rotate-key", "--store", "memory://", "--new-key-file", str(tmp_path / "k")],
        env={},
    )
    assert done.exit_code == 78 and "seal under a store key" in done.output
