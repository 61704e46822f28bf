"""The SQLite store's audit log: append-only in the file itself, and kept through a migration.

The audit contract (which acts are recorded, with whom and when) runs for
every managed store in ``test_store_conformance.py``; these pin what is
particular to keeping the log in SQLite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memfs.core.audit import AuditCheck
from memfs.core.errors import AuditTampered
from memfs.core.models import AuditEntry, By, ChangeSet, Forgot, Provenance, SpaceRef
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
    assert await store.forget_user("dana", "bank-1", by=ADA) == Forgot()
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


async def _logged(path: Path) -> list[AuditEntry]:
    """A store with four audit entries, closed again; its entries."""
    store = SqliteStore(path)
    first = await _store_and_get(store)
    await store.restore(ORG, "a.md", first, by=ADA)
    await store.open_person("dana", "bank-1", by=ADA)
    await store.set_review(ORG, "after", by=ADA)
    await store.open_person("dana", "bank-1", by=ADA)
    entries = await store.audit()
    assert (await store.verify_audit()).entries == 4
    await store.aclose()
    return entries


async def _store_and_get(store: SqliteStore) -> str:
    loaded = await store.load(ORG, "s1")
    stored = await store.store(
        ORG, ChangeSet(created={"a.md": b"a"}), cursor=loaded.cursor, provenance=PROV
    )
    return stored.revisions["a.md"]


async def _verify(path: Path) -> AuditCheck:
    store = SqliteStore(path)
    try:
        return await store.verify_audit()
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit SET detail = 'x' WHERE id = 2",
        "DELETE FROM audit WHERE id = 2",
        # REPLACE's implicit delete fires no delete trigger: the insert trigger refuses it.
        "INSERT OR REPLACE INTO audit (id, at, action, org, prev_hash, hash)"
        " SELECT id, at, 'open', org, prev_hash, hash FROM audit WHERE id = 2",
        "REPLACE INTO audit SELECT * FROM audit WHERE id = 2",
        "INSERT INTO audit (id, at, action, org, prev_hash, hash)"
        " SELECT id, at, 'open', org, prev_hash, hash FROM audit WHERE id = 2"
        " ON CONFLICT (id) DO UPDATE SET detail = 'x'",
        # An insert must append, linked to the last entry's hash.
        "INSERT INTO audit (id, at, action, org, prev_hash, hash)"
        " VALUES (100, '2026-01-01T00:00:00+00:00', 'open', 'bank-1', 'forged', 'forged')",
        "INSERT INTO audit (at, action, org) VALUES ('2026-01-01T00:00:00+00:00', 'open', 'x')",
    ],
)
async def test_sql_that_rewrites_the_audit_log_is_refused_by_the_database(
    tmp_path: Path, statement: str
) -> None:
    path = tmp_path / "memfs.db"
    before = await _logged(path)
    with raw(path) as conn, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(statement)
    again = SqliteStore(path)
    assert await again.audit() == before
    assert (await again.verify_audit()).head == before[-1].hash
    await again.aclose()


@pytest.mark.parametrize(
    ("statements", "broken", "why"),
    [
        (["UPDATE audit SET detail = 'none' WHERE id = 2"], "2", "changed"),
        (["UPDATE audit SET actor_id = 'eve' WHERE id = 1"], "1", "changed"),
        (["DELETE FROM audit WHERE id = 2"], "3", "chain is broken"),
        (["DELETE FROM audit WHERE id = 4"], "4", "removed"),
        (["DELETE FROM audit"], "1", "removed"),
        (
            [
                "INSERT OR REPLACE INTO audit (id, at, action, org, prev_hash, hash)"
                " SELECT id, at, 'open', org, prev_hash, hash FROM audit WHERE id = 3"
            ],
            "3",
            "changed",
        ),
        # Swapping two entries' contents (hashes moved along) breaks the links.
        (
            [
                "UPDATE audit SET id = 10 WHERE id = 2",
                "UPDATE audit SET id = 2 WHERE id = 3",
                "UPDATE audit SET id = 3 WHERE id = 10",
            ],
            "2",
            "changed",
        ),
    ],
)
async def test_verify_names_the_first_entry_rewritten_by_sql_with_the_triggers_dropped(
    tmp_path: Path, statements: list[str], broken: str, why: str
) -> None:
    path = tmp_path / "memfs.db"
    await _logged(path)
    with raw(path) as conn:
        for trigger in ("audit_no_update", "audit_no_delete", "audit_append_only"):
            conn.execute(f"DROP TRIGGER {trigger}")
        for statement in statements:
            conn.execute(statement)
    with pytest.raises(AuditTampered, match=why) as caught:
        await _verify(path)
    assert caught.value.path == broken


async def test_migration_to_the_chain_links_old_entries_and_drops_a_persons_paths(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    schema_at(path, 5)
    with raw(path) as conn:
        conn.execute(
            "INSERT INTO spaces (layer, org, \"user\", space) VALUES ('org', 'bank-1', '', 'rules')"
        )
        conn.execute(
            "INSERT INTO revisions (id, space_id, path, size, origin, created_at)"
            " VALUES (1, 1, 'org-file.md', 0, 'edited', '2026-01-01T00:00:00+00:00')"
        )
        for target, space in (("org-file.md", "rules"), ("my-diagnosis.md", "me")):
            conn.execute(
                "INSERT INTO audit (at, actor_id, action, org, space, target)"
                " VALUES ('2026-01-01T00:00:00+00:00', 'ada', 'forget', 'bank-1', ?, ?)",
                (space, target),
            )
    migrated = SqliteStore(path)
    entries = await migrated.audit()
    assert [(e.space, e.target, e.detail) for e in entries] == [
        ("rules", "org-file.md", None),  # an org forget keeps its path (a deletion revision)
        ("me", None, "1 file"),  # a person's: the path is gone
    ]
    assert (await migrated.verify_audit()).entries == 2
    await migrated.open_person("dana", "bank-1", by=ADA)
    assert (await migrated.verify_audit()).entries == 3
    await migrated.aclose()
    assert b"my-diagnosis" not in path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or b"my-diagnosis" not in wal.read_bytes()
