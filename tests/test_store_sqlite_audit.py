"""The SQLite store's audit log: append-only in the file itself, and kept through a migration.

The audit contract (which acts are recorded, with whom and when) runs for
every managed store in ``test_store_conformance.py``; these pin what is
particular to keeping the log in SQLite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memfs.core.models import By, ChangeSet, Provenance, SpaceRef
from memfs.stores.sqlite import SCHEMA_VERSION, SqliteStore
from tests.test_store_sqlite import raw, schema_at

ORG = SpaceRef(layer="org", space="lending-rules", org="bank-1")
DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
ADA = By(id="ada", label="Ada", role="admin")
PROV = Provenance(session="s1", turn="t1", by=By(id="dana"))


async def _save(store: SqliteStore, ref: SpaceRef, changes: ChangeSet) -> None:
    loaded = await store.load(ref, "s1")
    stored = await store.store(ref, changes, cursor=loaded.cursor, provenance=PROV)
    assert stored.status == "saved", stored


@pytest.mark.parametrize(
    "statement", ["UPDATE audit SET actor_id = 'someone-else'", "DELETE FROM audit"]
)
async def test_the_database_refuses_to_change_or_remove_audit_entries(
    tmp_path: Path, statement: str
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await _save(store, DANA, ChangeSet(created={"p.md": b"p"}))
    await store.open_person("dana", "bank-1", by=ADA)
    before = await store.audit()
    await store.aclose()

    with raw(path) as conn, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(statement)

    again = SqliteStore(path)
    assert await again.audit() == before
    await again.aclose()


async def test_forgetting_a_person_keeps_the_audit_entries_about_them(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    await _save(store, DANA, ChangeSet(created={"p.md": b"p"}))
    await store.open_person("dana", "bank-1", by=ADA)
    await store.forget_file(DANA, "p.md", by=ADA)
    # The purge deletes rows of every other table; the audit's triggers must not stop it.
    assert await store.forget_user("dana", "bank-1", by=ADA) == []
    assert [(e.action, e.target) for e in await store.audit()] == [
        ("open", "dana"),
        ("forget", "dana"),  # whose file, never its path
        ("forget-user", "dana"),
    ]
    await store.aclose()


async def test_migration_from_v2_adds_an_empty_audit_log_and_keeps_files(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    schema_at(path, 2)
    store = SqliteStore(path)
    await _save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    assert await store.audit() == []
    await store.forget_file(ORG, "a.md", by=ADA)
    assert [e.action for e in await store.audit()] == ["forget"]
    await store.aclose()
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
