"""The SQLite store: one database file, durable, shared safely by several processes.

The store contract itself runs in ``test_store_conformance.py``; these pin
what is particular to keeping memory in SQLite.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio

from memfs.core.errors import ConfigError, InvalidName, StoreUnavailable
from memfs.core.models import (
    By,
    ChangeSet,
    FileMeta,
    Forgot,
    Provenance,
    SpaceRef,
    Stored,
    Trace,
    TraceFile,
    TraceMount,
    digest,
)
from memfs.core.review import ReviewMode
from memfs.stores.base import ManagedStore
from memfs.stores.open import open_store
from memfs.stores.sqlite import MIGRATIONS, SCHEMA_VERSION, SqliteStore
from memfs.stores.sqlite.schema import _add_file_metadata

ORG = SpaceRef(layer="org", space="lending-rules", org="bank-1")
DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
PROV = Provenance(
    session="s1",
    turn="t1",
    prompt="remember this",
    by=By(id="dana", label="Dana", role="underwriter"),
    at=datetime(2025, 3, 4, 5, 6, 7, 890123, tzinfo=UTC),
)


@contextlib.contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to the store's file, to look at (or tamper with) it directly."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


async def propose(store: SqliteStore, ref: SpaceRef, changes: ChangeSet) -> Stored:
    """Conversation s1's edit to an org space, waiting for a person."""
    loaded = await store.load(ref, "s1")
    stored = await store.store(ref, changes, cursor=loaded.cursor, provenance=PROV, review="person")
    assert stored.status == "waiting", stored
    return stored


def schema_at(path: Path, version: int) -> None:
    """A database file as the memfs of schema ``version`` left it: its migrations only."""
    with raw(path) as conn:
        conn.execute("BEGIN IMMEDIATE")
        for step in MIGRATIONS[:version]:
            step(conn)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")


async def save(store: SqliteStore, ref: SpaceRef, changes: ChangeSet) -> Stored:
    loaded = await store.load(ref, "s1")
    stored = await store.store(ref, changes, cursor=loaded.cursor, provenance=PROV)
    assert stored.status == "saved", stored
    return stored


async def test_sqlite_store_is_a_managed_store_opened_from_its_url(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path}/memfs.db")
    assert isinstance(store, SqliteStore)
    assert isinstance(store, ManagedStore)
    assert store.path == tmp_path / "memfs.db"
    await store.aclose()


async def test_sqlite_store_creates_the_file_on_first_use(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    assert not (tmp_path / "memfs.db").exists()
    assert (await store.load(ORG, "s1")).cursor == "0"
    assert (tmp_path / "memfs.db").is_file()
    await store.aclose()


async def test_sqlite_store_uses_wal_mode(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    with raw(tmp_path / "memfs.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    await store.aclose()


async def test_sqlite_store_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    first = await save(store, ORG, ChangeSet(created={"a.md": b"a1", "b.md": b"b"}))
    await save(store, ORG, ChangeSet(updated={"a.md": b"a2"}, deleted=("b.md",)))
    await save(store, DANA, ChangeSet(created={"mine.md": b"dana"}))
    before = await store.load(ORG, "s1")
    await store.aclose()

    reopened = SqliteStore(path)
    after = await reopened.load(ORG, "s2")
    assert after == before
    assert after.files == {"a.md": b"a2"}
    assert await reopened.files(DANA) == {"mine.md": b"dana"}
    assert await reopened.spaces() == sorted([ORG, DANA], key=str)
    history = await reopened.history(ORG, "a.md")
    assert history[0].id == first.revisions["a.md"]
    assert [r.deleted for r in history] == [False, False]
    assert history[0].provenance == PROV  # every field, the time to the microsecond
    assert history[0].approved_by is None
    assert [r.deleted for r in await reopened.history(ORG, "b.md")] == [False, True]
    await reopened.aclose()


async def test_sqlite_store_keeps_empty_files_apart_from_deletions(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    await save(store, ORG, ChangeSet(created={"empty.md": b""}))
    assert (await store.load(ORG, "s1")).files == {"empty.md": b""}
    (revision,) = await store.history(ORG, "empty.md")
    assert not revision.deleted
    assert revision.size == 0
    assert revision.sha256 is not None
    await store.aclose()


async def test_sqlite_store_missing_directory_is_config_error(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "memfs.db"
    with pytest.raises(ConfigError) as caught:
        SqliteStore(path)
    assert caught.value.path == str(path)
    assert not path.parent.exists()  # never created behind the operator's back


def test_sqlite_store_path_that_is_a_folder_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        SqliteStore(tmp_path)


async def test_sqlite_store_database_error_becomes_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    path.write_bytes(b"this is not a database, just garbage bytes\n" * 100)
    store = SqliteStore(path)
    with pytest.raises(StoreUnavailable) as caught:
        await store.load(ORG, "s1")
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    assert caught.value.path == str(path)
    await store.aclose()


async def test_sqlite_store_refuses_a_database_from_a_newer_memfs(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    with raw(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    store = SqliteStore(path)
    with pytest.raises(ConfigError, match="newer"):
        await store.load(ORG, "s1")
    await store.aclose()


async def test_sqlite_store_two_connections_same_file_conflict_per_file(tmp_path: Path) -> None:
    # Two store objects on one file stand for two daemons sharing the embedded store.
    path = tmp_path / "memfs.db"
    one, two = SqliteStore(path), SqliteStore(path)
    await save(one, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    seen_by_one = await one.load(ORG, "s1")
    seen_by_two = await two.load(ORG, "s2")
    assert seen_by_two == seen_by_one

    ok = await one.store(
        ORG, ChangeSet(updated={"a.md": b"from one"}), cursor=seen_by_one.cursor, provenance=PROV
    )
    assert ok.status == "saved"
    late = await two.store(
        ORG,
        ChangeSet(updated={"a.md": b"from two"}, created={"c.md": b"c"}),
        cursor=seen_by_two.cursor,
        provenance=PROV,
    )
    assert late.status == "conflict"
    assert late.conflicts == ("a.md",)
    assert late.cursor == ok.cursor
    other = await two.store(
        ORG, ChangeSet(updated={"b.md": b"from two"}), cursor=seen_by_two.cursor, provenance=PROV
    )
    assert other.status == "saved"
    assert await one.files(ORG) == {"a.md": b"from one", "b.md": b"from two"}
    await one.aclose()
    await two.aclose()


async def test_sqlite_store_concurrent_stores_from_two_connections_serialize(
    tmp_path: Path,
) -> None:
    # Both check and write at once; the write lock taken at BEGIN lets exactly one through.
    path = tmp_path / "memfs.db"
    stores = [SqliteStore(path) for _ in range(4)]
    snapshot = await stores[0].load(ORG, "s1")
    results: list[Stored] = []

    async def write(store: SqliteStore, n: int) -> None:
        results.append(
            await store.store(
                ORG,
                ChangeSet(created={"x.md": str(n).encode()}),
                cursor=snapshot.cursor,
                provenance=PROV,
            )
        )

    async with trio.open_nursery() as nursery:
        for n, store in enumerate(stores):
            nursery.start_soon(write, store, n)
    assert sorted(r.status for r in results) == ["conflict", "conflict", "conflict", "saved"]
    assert len(await stores[0].history(ORG, "x.md")) == 1
    for store in stores:
        await store.aclose()


async def test_sqlite_store_failed_store_writes_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    await save(store, ORG, ChangeSet(created={"keep.md": b"k"}))
    before = await store.load(ORG, "s1")
    with pytest.raises(InvalidName):
        await store.store(
            ORG,
            ChangeSet(created={"new.md": b"n"}, updated={"keep.md": b"k2"}, deleted=("gone.md",)),
            cursor=before.cursor,
            provenance=PROV,
        )
    assert await store.load(ORG, "s1") == before
    assert await store.history(ORG, "new.md") == []
    assert len(await store.history(ORG, "keep.md")) == 1
    with pytest.raises(InvalidName):
        await store.put(DANA, ChangeSet(created={"a.md": b"a"}, deleted=("b.md",)), provenance=PROV)
    assert await store.spaces() == [ORG]  # not even the new space's row survives
    await store.aclose()


async def test_sqlite_store_database_error_mid_store_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await save(store, ORG, ChangeSet(created={"keep.md": b"k"}))
    before = await store.load(ORG, "s1")
    with raw(path) as conn:
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON revisions WHEN NEW.path = 'z.md'"
            " BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
        )
    with pytest.raises(StoreUnavailable) as caught:
        await store.store(
            ORG,
            ChangeSet(created={"a.md": b"a", "z.md": b"z"}, updated={"keep.md": b"k2"}),
            cursor=before.cursor,
            provenance=PROV,
        )
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    assert await store.load(ORG, "s1") == before
    # The store is still usable after the failure.
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    await store.aclose()


async def test_sqlite_store_cursor_is_the_spaces_latest_revision_id(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    assert (await store.load(ORG, "s1")).cursor == "0"
    stored = await save(store, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    assert stored.revisions == {"a.md": "1", "b.md": "2"}
    assert stored.cursor == "2"
    await save(store, DANA, ChangeSet(created={"a.md": b"a"}))
    # Another space's write does not move this space's cursor.
    assert (await store.load(ORG, "s1")).cursor == "2"
    assert (await store.load(DANA, "s1")).cursor == "3"
    with pytest.raises(ConfigError):
        await store.store(ORG, ChangeSet(), cursor="not-ours", provenance=PROV)
    await store.aclose()


async def test_sqlite_store_aclose_is_idempotent_and_final(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreUnavailable):
        await store.load(ORG, "s1")


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _sealed_heads(path: Path) -> list[bytes]:
    """The first bytes of every sealed content in the file: what forgetting must zero.

    A person's content is never in the file in the clear (it is sealed under
    their key), so what the tests of forgetting look for in the raw bytes is
    its ciphertext. The head of each: a large one runs on in overflow pages.
    """
    with raw(path) as conn:
        rows = conn.execute(
            "SELECT content FROM revisions WHERE sealed = 1 AND content IS NOT NULL"
        ).fetchall()
    return [bytes(content)[:32] for (content,) in rows]


def _file_bytes(path: Path) -> bytes:
    """The database file's bytes and its write-ahead log's, as anyone with the files sees them."""
    wal = _wal(path)
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


async def test_forgotten_user_file_cannot_be_read_back_from_the_database_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Some SQLite builds (Debian's) zero freed space by default. Start every
    # connection without that, so this proves the store turns it on itself.
    connect = sqlite3.connect

    def connect_without_secure_delete(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_without_secure_delete)
    path = tmp_path / "memfs.db"
    said = PROV.model_copy(update={"prompt": "quokka-91d2: remember my diagnosis"})
    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={"keep.md": b"capybara-kept"}))
    loaded = await store.load(DANA, "s1")
    await store.store(
        DANA,
        ChangeSet(created={"health.md": b"zebra-7f3a9c"}),
        cursor=loaded.cursor,
        provenance=said,
    )
    # Closing the last connection checkpoints: this revision is now in the main
    # file's pages, as everything is in a store that has run for a while.
    await store.aclose()
    # Sealed: the content and the prompt are not in the file even before the forget.
    assert b"zebra-7f3a9c" not in path.read_bytes()
    assert b"quokka-91d2" not in path.read_bytes()
    heads = _sealed_heads(path)
    assert heads and all(head in path.read_bytes() for head in heads)

    store = SqliteStore(path)
    # Larger than a page, so it lives in overflow pages; and only in the log so far.
    large = b"".join(b"okapi-%06d-4be1 " % n for n in range(1500))
    loaded = await store.load(DANA, "s1")
    await store.store(
        DANA, ChangeSet(updated={"health.md": large}), cursor=loaded.cursor, provenance=said
    )
    assert b"okapi-001234-4be1" not in _wal(path).read_bytes()
    heads = _sealed_heads(path)
    assert all(head in _file_bytes(path) for head in heads)
    with raw(path) as conn:
        # Rows keep a person's paths by name: keep.md is the 13-byte file.
        kept = conn.execute(
            "SELECT content FROM revisions WHERE size = ? AND content IS NOT NULL",
            (len(b"capybara-kept"),),
        ).fetchone()[0]
    heads.remove(bytes(kept)[:32])

    await store.forget_file(DANA, "health.md", by=By(id="dana"))

    assert await store.history(DANA, "health.md") == []
    assert not _wal(path).exists() or _wal(path).stat().st_size == 0
    after = _file_bytes(path)
    for marker in (b"zebra-7f3a9c", b"okapi-", b"quokka-91d2", b"health.md", *heads):
        assert marker not in after, marker
    assert bytes(kept)[:32] in after  # what was not forgotten is still there, sealed
    assert await store.files(DANA) == {"keep.md": b"capybara-kept"}
    await store.aclose()


async def test_forget_says_so_when_a_reader_keeps_old_content_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The log can only be emptied once no one reads an older state; until then
    # the caller is told the content may still be in it, not that all is well.
    monkeypatch.setattr("memfs.stores.sqlite.store.BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={"health.md": b"zebra-7f3a9c"}))
    with raw(path) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM revisions").fetchone()
        with pytest.raises(StoreUnavailable, match="write-ahead log"):
            await store.forget_file(DANA, "health.md", by=None)
        reader.execute("COMMIT")
    # The purge itself was committed.
    assert await store.history(DANA, "health.md") == []
    assert await store.files(DANA) == {}
    await store.aclose()


async def test_forgotten_user_cannot_be_read_back_from_the_database_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As for a forgotten file: switch off the zeroing some SQLite builds do by
    # default, so this proves the store itself leaves nothing behind.
    connect = sqlite3.connect

    def connect_without_secure_delete(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_without_secure_delete)
    path = tmp_path / "memfs.db"
    who = "wombat-55e1"  # the person's id: nothing but the audit entry may name them afterwards
    mine = SpaceRef(layer="user", space="me", org="bank-1", user=who)
    drafts = mine.model_copy(update={"space": "drafts"})
    said = PROV.model_copy(
        update={"prompt": "quokka-91d2: remember my diagnosis", "by": By(id=who, label="W")}
    )
    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={"keep.md": b"capybara-kept"}))
    for ref, content in [(mine, b"zebra-7f3a9c"), (drafts, b"ibex-2c5d")]:
        loaded = await store.load(ref, "s1")
        await store.store(
            ref, ChangeSet(created={"health.md": content}), cursor=loaded.cursor, provenance=said
        )
    # Into the main file's pages, as in a store that has run for a while.
    await store.aclose()
    assert b"zebra-7f3a9c" not in path.read_bytes()  # sealed under their key
    assert b"health.md" not in path.read_bytes()  # and so is the file's name
    assert who.encode() in path.read_bytes()

    store = SqliteStore(path)
    # Larger than a page (overflow pages), and only in the write-ahead log so far.
    large = b"".join(b"okapi-%06d-4be1 " % n for n in range(1500))
    loaded = await store.load(mine, "s1")
    await store.store(
        mine, ChangeSet(updated={"health.md": large}), cursor=loaded.cursor, provenance=said
    )
    assert b"okapi-001234-4be1" not in _wal(path).read_bytes()
    with raw(path) as conn:
        # Rows keep a person's paths by name: keep.md is the 13-byte file.
        keep = conn.execute(
            "SELECT content FROM revisions WHERE size = ? AND content IS NOT NULL",
            (len(b"capybara-kept"),),
        ).fetchone()[0]
    heads = [head for head in _sealed_heads(path) if head != bytes(keep)[:32]]
    assert len(heads) == 3 and all(head in _file_bytes(path) for head in heads)

    forgot = await store.forget_user(who, "bank-1", by=None)
    assert forgot == Forgot(spaces=tuple(sorted([mine, drafts], key=str)), files=2)

    assert not _wal(path).exists() or _wal(path).stat().st_size == 0
    after = _file_bytes(path)
    for marker in (b"zebra-7f3a9c", b"ibex-2c5d", b"okapi-", b"quokka-91d2", *heads):
        assert marker not in after, marker
    # The one trace of them left is the audit entry recording the erasure, on purpose.
    assert after.count(who.encode()) == 1
    [entry] = await store.audit()
    assert (entry.action, entry.target) == ("forget-user", who)
    assert bytes(keep)[:32] in after  # another person's memory is still there, sealed
    assert await store.user_files(who, "bank-1") == {}
    assert await store.files(DANA) == {"keep.md": b"capybara-kept"}
    await store.aclose()


async def test_forgotten_user_file_names_cannot_be_read_back_from_stored_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above: switch off the zeroing some SQLite builds do by default, so
    # this proves the store itself leaves no old trace bytes behind.
    connect = sqlite3.connect

    def connect_without_secure_delete(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_without_secure_delete)
    path = tmp_path / "memfs.db"
    secret = "diagnosis-gecko-8e21.md"  # a file name of the person's memory
    rules = SpaceRef(layer="org", space="lending-rules", org="bank-1")

    def trace(turn: str, org_path: str) -> Trace:
        return Trace(
            session="s1",
            turn=turn,
            prompt="check the rules",
            mounts={
                "me": TraceMount(
                    ref=DANA,
                    read_only=False,
                    from_last_known_copy=False,
                    snapshot={secret: "7"},
                    status="saved",
                    saved=(secret,),
                ),
                "rules": TraceMount(
                    ref=rules,
                    read_only=True,
                    from_last_known_copy=False,
                    snapshot={org_path: "3"},
                    status="saved",
                ),
            },
            files={f"me/{secret}": TraceFile(wrote=True), f"rules/{org_path}": TraceFile(read="3")},
        )

    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={secret: b"x"}))
    await store.record_trace(trace("t1", "heron-rules.md"))
    # Into the main file's pages, as in a store that has run for a while.
    await store.aclose()
    # Sealed under her key from the start: the file's name, in her rows and her part of the trace.
    assert secret.encode() not in path.read_bytes()
    assert b"heron-rules.md" in path.read_bytes()  # the org's part is the org's record

    store = SqliteStore(path)
    await store.record_trace(trace("t2", "egret-rules.md"))  # only in the log so far
    assert secret.encode() not in _wal(path).read_bytes()
    assert {tuple(t.mounts) for t in await store.traces()} == {("rules", "me")}

    await store.forget_user("dana", "bank-1", by=None)

    after = _file_bytes(path)
    assert secret.encode() not in after
    # The org's part of each trace is still there, in the file and through the store.
    assert b"heron-rules.md" in after and b"egret-rules.md" in after
    kept = await store.traces()
    assert [set(t.mounts) for t in kept] == [{"rules"}, {"rules"}]
    assert [set(t.files) for t in kept] == [{"rules/heron-rules.md"}, {"rules/egret-rules.md"}]
    await store.aclose()


async def test_migration_from_v3_adds_an_empty_trace_table_and_keeps_files(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    schema_at(path, 3)
    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={"a.md": b"a"}))
    assert await store.traces() == []
    assert await store.files(DANA) == {"a.md": b"a"}
    await store.aclose()
    with raw(path) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        assert version == SCHEMA_VERSION == len(MIGRATIONS)


async def test_migration_to_v5_indexes_the_manifest_and_lean_loads_use_it(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    schema_at(path, 4)
    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={"a.md": b"a", "b.md": b"bb"}))
    lean = await store.load_lean(DANA, "s1", {digest(b"a")})
    assert lean.files == {"b.md": b"bb"}
    assert lean.sizes == {"a.md": 1, "b.md": 2}
    assert lean.shas == {"a.md": digest(b"a"), "b.md": digest(b"bb")}
    assert lean.lean and lean.paths() == ["a.md", "b.md"]
    assert await store.contents(DANA, [digest(b"a"), "0" * 64]) == {digest(b"a"): b"a"}
    await store.aclose()
    with raw(path) as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT revisions.sha256, revisions.size FROM live"
                " JOIN revisions INDEXED BY revisions_manifest"
                " ON revisions.id = live.revision_id WHERE live.space_id = 1"
            )
        )
        assert "COVERING INDEX revisions_manifest" in plan


async def test_a_lean_load_brings_a_conversations_waiting_edit_with_its_bytes(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    try:
        ref = SpaceRef(layer="org", space="rules", org="bank")
        await save(store, ref, ChangeSet(created={"a.md": b"a\n", "b.md": b"b\n"}))
        await propose(store, ref, ChangeSet(updated={"b.md": b"waiting\n"}, deleted=("a.md",)))
        have = {digest(b"a\n"), digest(b"b\n")}
        mine = await store.load_lean(ref, "s1", have)
        assert mine.files == {"b.md": b"waiting\n"} and mine.paths() == ["b.md"]
        assert mine.sizes == {"b.md": 8} and mine.shas == {}
        theirs = await store.load_lean(ref, "s2", have)
        assert theirs.files == {} and theirs.paths() == ["a.md", "b.md"]
    finally:
        await store.aclose()


REVIEWER = By(id="ada", label="Ada", role="member")


async def test_waiting_changes_survive_reopen(tmp_path: Path) -> None:
    # A change waits for a person for days: it must outlive the daemon that took it.
    path = tmp_path / "memfs.db"
    first = SqliteStore(path)
    await save(first, ORG, ChangeSet(created={"a.md": b"v1"}))
    loaded = await first.load(ORG, "s1")
    held = await first.store(
        ORG,
        ChangeSet(updated={"a.md": b"\x00binary\xff"}, created={"b.md": b"b"}),
        cursor=loaded.cursor,
        provenance=PROV,
        review="person",
    )
    assert held.status == "waiting"
    assert held.change is not None
    await first.aclose()

    again = SqliteStore(path)
    own = await again.load(ORG, "s1")
    assert own.files == {"a.md": b"\x00binary\xff", "b.md": b"b"}
    assert own.revisions["b.md"].startswith(f"c{held.change}.")
    assert (await again.load(ORG, "s2")).files == {"a.md": b"v1"}
    [change] = await again.list_changes()
    assert (change.id, change.state, change.stale_paths) == (held.change, "waiting", ())
    # A live write to one of its files after the turn loaded makes that file stale.
    await save(again, ORG, ChangeSet(updated={"a.md": b"v2"}))
    assert (await again.get_change(held.change)).stale_paths == ("a.md",)
    decided = await again.decide(held.change, "approve", by=REVIEWER, paths=["b.md"])
    assert set(decided.files) == {"a.md"}
    [revision] = await again.history(ORG, "b.md")
    assert revision.approved_by == REVIEWER
    assert revision.provenance.at == PROV.at  # who taught it, and when, survive the JSON
    await again.aclose()


async def test_migration_from_v1_keeps_revisions_and_cursors(tmp_path: Path) -> None:
    # A database written by the schema-1 memfs: two live files, and a third
    # whose revision (id 3) was purged, so ids and cursors up to 3 were handed out.
    path = tmp_path / "memfs.db"
    with raw(path) as conn:
        conn.execute("BEGIN IMMEDIATE")
        MIGRATIONS[0](conn)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            'INSERT INTO spaces (id, layer, org, "user", space)'
            " VALUES (1, 'org', 'bank-1', '', 'lending-rules')"
        )
        for n, name in ((1, "a.md"), (2, "b.md"), (3, "gone.md")):
            conn.execute(
                "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin,"
                " created_at) VALUES (?, 1, ?, ?, ?, 1, 'code', ?)",
                (n, name, name[:1].encode(), digest(name[:1].encode()), PROV.at.isoformat()),
            )
        conn.execute("INSERT INTO live VALUES (1, 'a.md', 1), (1, 'b.md', 2)")
        conn.execute("DELETE FROM revisions WHERE id = 3")
        conn.execute("COMMIT")

    store = SqliteStore(path)
    loaded = await store.load(ORG, "s1")
    assert loaded.files == {"a.md": b"a", "b.md": b"b"}
    assert (loaded.revisions, loaded.cursor) == ({"a.md": "1", "b.md": "2"}, "2")
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # The shared sequence starts after every id schema 1 handed out, purged ones too.
    stored = await store.store(
        ORG, ChangeSet(updated={"a.md": b"a2"}), cursor=loaded.cursor, provenance=PROV
    )
    assert stored.revisions == {"a.md": "4"}
    late = await store.store(
        ORG, ChangeSet(updated={"a.md": b"a3"}), cursor=loaded.cursor, provenance=PROV
    )
    assert late.conflicts == ("a.md",)
    held = await store.store(
        ORG,
        ChangeSet(updated={"b.md": b"b2"}),
        cursor=stored.cursor,
        provenance=PROV,
        review="person",
    )
    assert held.status == "waiting"
    assert held.change is not None
    [change] = await store.list_changes()
    assert (change.files["b.md"].loaded, change.files["b.md"].edited) == (4, 5)
    assert change.files["b.md"].base == "2"
    await store.aclose()


async def test_load_gives_each_live_files_sha_but_not_a_waiting_edits(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    try:
        ref = SpaceRef(layer="org", space="rules", org="bank")
        await save(store, ref, ChangeSet(created={"a.md": b"a\n", "b.md": b"b\n"}))
        await propose(store, ref, ChangeSet(updated={"b.md": b"waiting\n"}))
        again = await store.load(ref, "s1")
        assert again.files["b.md"] == b"waiting\n"
        assert again.shas == {"a.md": digest(b"a\n")}
        assert (await store.load(ref, "s2")).shas == {
            "a.md": digest(b"a\n"),
            "b.md": digest(b"b\n"),
        }
    finally:
        await store.aclose()


async def test_migration_to_file_metadata_gives_older_revisions_mode_0644_and_their_own_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    schema_at(path, MIGRATIONS.index(_add_file_metadata))
    with raw(path) as conn:
        conn.execute(
            'INSERT INTO spaces (layer, org, "user", space)'
            " VALUES ('org', 'bank-1', '', 'lending-rules')"
        )
        conn.execute(
            "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin, created_at)"
            " VALUES (7, 1, 'old.md', x'6f6c64', ?, 3, 'conversation', ?)",
            (digest(b"old"), "2025-03-04T05:06:07.250000+00:00"),
        )
        conn.execute("INSERT INTO live (space_id, path, revision_id) VALUES (1, 'old.md', 7)")
    store = SqliteStore(path)
    try:
        loaded = await store.load(ORG, "s1")
        expected_ns = (
            int(datetime(2025, 3, 4, 5, 6, 7, 250000, tzinfo=UTC).timestamp() * 1000) * 1_000_000
        )
        assert loaded.meta_of("old.md") == FileMeta(
            mode=0o644, mtime_ns=expected_ns, ctime_ns=expected_ns
        )
        lean = await store.load_lean(ORG, "s1", {digest(b"old")})
        assert lean.files == {} and lean.meta == loaded.meta
        assert loaded.folders == ()
    finally:
        await store.aclose()


async def test_a_lean_load_carries_modes_times_and_folders_from_the_covering_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    meta = FileMeta(
        mode=0o755, mtime_ns=1_700_000_000_000_000_001, ctime_ns=1_700_000_000_000_000_002
    )
    try:
        await save(
            store,
            ORG,
            ChangeSet(
                created={"run.sh": b"#!/bin/sh\n"},
                meta={"run.sh": meta},
                folders_created=("empty",),
            ),
        )
        lean = await store.load_lean(ORG, "s1", {digest(b"#!/bin/sh\n")})
        assert lean.files == {} and lean.meta == {"run.sh": meta}
        assert lean.folders == ("empty",)
    finally:
        await store.aclose()
    with raw(path) as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT revisions.sha256, revisions.size, revisions.mode,"
                " revisions.mtime_ns, revisions.ctime_ns FROM live"
                " JOIN revisions INDEXED BY revisions_manifest"
                " ON revisions.id = live.revision_id WHERE live.space_id = 1"
            )
        )
        assert "COVERING INDEX revisions_manifest" in plan


async def test_forgetting_a_person_removes_their_stored_folders(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    try:
        await save(store, DANA, ChangeSet(folders_created=("secret-project",)))
        await store.forget_user("dana", "bank-1", by=None)
        assert (await store.load(DANA, "s1")).folders == ()
    finally:
        await store.aclose()
    with raw(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM folders").fetchone()[0] == 0


async def test_statement_journals_and_sorts_stay_in_memory_never_in_a_temp_file(
    tmp_path: Path,
) -> None:
    # A group commit's savepoint per turn spills its statement journal past
    # 64 KiB; on disk that was a file in /var/tmp per store, holding page
    # images of the store's rows beyond secure_delete's and forgetting's reach.
    store = SqliteStore(tmp_path / "memfs.db")
    try:
        await store.put(ORG, ChangeSet(created={"a.md": b"a"}), provenance=PROV)
        (temp_store,) = store._run(
            lambda conn: conn.execute("PRAGMA temp_store").fetchone(), write=False
        )
        assert temp_store == 2  # MEMORY
    finally:
        await store.aclose()


@pytest.mark.parametrize("review", ["none", "person"])
async def test_a_turn_that_loaded_before_a_backup_was_put_back_conflicts_instead_of_writing_over(
    tmp_path: Path, review: ReviewMode
) -> None:
    # The backup (SQLite's backup API: the same file, counts and numbers gone
    # back) lacks what the turn loaded; writes after it reuse the numbers, so
    # comparing them with the turn's cursor would let it write over them.
    path, backup = tmp_path / "memfs.db", tmp_path / "backup.db"
    rules = SpaceRef(layer="org", space="rules")
    store = SqliteStore(path)
    try:
        loaded = await store.load(rules, "a")
        await store.store(
            rules, ChangeSet(created={"r.md": b"v1"}), cursor=loaded.cursor, provenance=Provenance()
        )
        with sqlite3.connect(path) as live, sqlite3.connect(backup) as copy:
            live.backup(copy)
        for version in range(2, 7):
            loaded = await store.load(rules, "a")
            await store.store(
                rules,
                ChangeSet(updated={"r.md": b"v%d" % version}),
                cursor=loaded.cursor,
                provenance=Provenance(),
            )
        old_turn = await store.load(rules, "b")  # loads v6
        with sqlite3.connect(backup) as copy, sqlite3.connect(path) as live:
            copy.backup(live)
        loaded = await store.load(rules, "a")
        saved = await store.store(
            rules,
            ChangeSet(updated={"r.md": b"after"}),
            cursor=loaded.cursor,
            provenance=Provenance(),
        )
        assert saved.status == "saved"

        # Held for a reviewer, it would look fresh (its cursor past every
        # number there is) and be approved over the write after the restore.
        late = await store.store(
            rules,
            ChangeSet(updated={"r.md": b"from the old turn"}),
            cursor=old_turn.cursor,
            provenance=Provenance(session="b", turn="t-old"),
            review=review,
        )

        assert (late.status, late.conflicts) == ("conflict", ("r.md",))
        assert await store.list_changes() == []
        assert await store.files(rules) == {"r.md": b"after"}
    finally:
        await store.aclose()
