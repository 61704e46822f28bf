"""The SQLite store's members and tokens: what the file keeps of them, and the migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memfs.core.errors import StoreUnavailable
from memfs.core.members import Member, token_hash
from memfs.core.models import By, ChangeSet, SpaceRef
from memfs.stores.sqlite import SCHEMA_VERSION, SqliteStore
from tests.test_store_sqlite import _file_bytes, raw, save, schema_at

OPERATOR = By(id="operator:0", role="admin")
ADA = Member(id="ada", org="bank-1", role="admin", label="Ada")
RULES = SpaceRef(layer="org", space="rules", org="bank-1")


async def test_the_file_keeps_only_the_tokens_hash_never_the_token(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await store.add_member(ADA, by=OPERATOR)
    issued = await store.create_token("ada", "bank-1", by=OPERATOR)
    await store.aclose()
    data = _file_bytes(path)
    assert issued.token.encode() not in data
    assert issued.token.removeprefix("memfs_").encode() not in data
    with raw(path) as conn:
        rows = conn.execute("SELECT hash, org, member FROM tokens").fetchall()
    assert rows == [(token_hash(issued.token), "bank-1", "ada")]
    reopened = SqliteStore(path)  # resolves from what the file holds
    assert await reopened.resolve_token(issued.token) == ADA
    await reopened.aclose()


async def test_a_revoked_tokens_hash_is_gone_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await store.add_member(ADA, by=OPERATOR)
    issued = await store.create_token("ada", "bank-1", by=OPERATOR)
    assert await store.revoke_tokens("ada", "bank-1", by=OPERATOR) == 1
    await store.aclose()
    with raw(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert token_hash(issued.token).encode() not in _file_bytes(path)


async def test_the_file_refuses_a_member_with_tokens_deleted_underneath_and_a_bad_role(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await store.add_member(ADA, by=OPERATOR)
    await store.create_token("ada", "bank-1", by=OPERATOR)
    await store.aclose()
    with raw(path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM members WHERE id = 'ada'")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE members SET role = 'root' WHERE id = 'ada'")


async def test_migration_from_v9_adds_empty_member_tables_and_keeps_files(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    schema_at(path, 9)
    store = SqliteStore(path)
    await save(store, RULES, ChangeSet(created={"a.md": b"a"}))
    assert await store.members("bank-1") == []
    await store.add_member(ADA, by=OPERATOR)
    issued = await store.create_token("ada", "bank-1", by=OPERATOR)
    assert await store.resolve_token(issued.token) == ADA
    assert await store.files(RULES) == {"a.md": b"a"}
    await store.verify_audit()
    await store.aclose()
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 10


async def test_a_closed_store_resolves_no_token_and_says_so(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    await store.add_member(ADA, by=OPERATOR)
    issued = await store.create_token("ada", "bank-1", by=OPERATOR)
    await store.aclose()
    with pytest.raises(StoreUnavailable):
        await store.resolve_token(issued.token)
