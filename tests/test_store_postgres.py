"""The PostgreSQL store beyond the shared contract: migrations, outages, locks, lean loads, audit.

``check_store`` runs against it in test_store_conformance.py; these pin what
only a server store has: two processes opening one new database migrate it
once, every driver failure is ``StoreUnavailable``, writers from two stores
serialize, the triggers move space versions and guard the audit log.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest
import trio

from memfs.core.errors import AuditTampered, ConfigError, StoreUnavailable
from memfs.core.models import ChangeSet, Provenance, Stored
from memfs.stores.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresStore
from memfs.stores.postgres.store import redacted
from memfs.testing.postgres import (
    ThrowawayPostgres,
    missing_postgres_action,
    postgres_bindir,
    throwaway_postgres,
)
from tests.postgres_fixtures import Databases
from tests.test_store_manifests import ADA, DANA, ORG, WRITES, comparable, save


def sql(url: str, statement: str) -> list[tuple[object, ...]]:
    """Run one statement on ``url`` outside the store, as another client would."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement.encode())
        return cur.fetchall() if cur.description is not None else []


# The rule for a machine without PostgreSQL (pure: no server needed).


@pytest.mark.parametrize(
    ("found", "ci", "root", "user", "action"),
    [
        (True, False, True, True, "run"),
        (True, True, True, True, "run"),
        (True, False, False, False, "run"),  # not root: runs as the caller, no postgres user needed
        (False, False, True, True, "skip"),
        (False, True, True, True, "fail"),
        (True, False, True, False, "skip"),  # root without the postgres user: initdb can't run
        (True, True, True, False, "fail"),
    ],
)
def test_missing_postgresql_skips_except_under_ci_where_it_fails(
    found: bool, ci: bool, root: bool, user: bool, action: str
) -> None:
    bindir = Path("/usr/lib/postgresql/15/bin") if found else None
    assert missing_postgres_action(bindir, under_ci=ci, root=root, user_exists=user) == action


# The throwaway server.


def test_the_throwaway_server_lives_in_its_own_folder_and_is_removed_after_a_failure() -> None:
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed here")
    seen: ThrowawayPostgres | None = None
    with pytest.raises(RuntimeError, match="the test failed"), throwaway_postgres(bindir) as server:
        seen = server
        assert sql(server.url(), "SHOW data_directory") == [(str(server.data),)]
        # The socket is in its own folder, never the system's /var/run/postgresql.
        assert sql(server.url(), "SHOW unix_socket_directories") == [(str(server.root),)]
        assert (server.root / f".s.PGSQL.{server.port}").exists()
        assert sql(server.tcp_url(), "SELECT 1") == [(1,)]
        assert server.root.stat().st_mode & 0o077 == 0
        raise RuntimeError("the test failed")
    assert seen is not None and not seen.root.exists()


# Migrations.


def test_two_stores_opening_one_new_database_at_once_migrate_it_once(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    stores = [postgres_databases.open(url), postgres_databases.open(url)]
    start = threading.Barrier(len(stores))
    applied: list[int] = []

    def migrate(store: PostgresStore) -> None:
        start.wait()
        applied.append(store.migrate())

    threads = [threading.Thread(target=migrate, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(applied) == [0, SCHEMA_VERSION]
    rows = sql(url, "SELECT version, name FROM memfs_migrations ORDER BY version")
    assert rows == [(n, step.name) for n, step in enumerate(MIGRATIONS, start=1)]


async def test_a_database_newer_than_this_memfs_is_refused(postgres_databases: Databases) -> None:
    url = postgres_databases.url()
    postgres_databases.open(url).migrate()
    sql(url, f"INSERT INTO memfs_migrations (version, name) VALUES ({SCHEMA_VERSION + 1}, 'x')")
    store = postgres_databases.open(url)
    try:
        with pytest.raises(ConfigError, match="newer than this memfs"):
            await store.load(ORG, "s1")
    finally:
        await store.aclose()


def test_a_failing_migration_step_leaves_the_database_as_it_was(
    postgres_databases: Databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memfs.stores.postgres import schema

    broken = (*MIGRATIONS, schema.Migration("a broken step", ("CREATE TABLE half (",)))
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(broken))
    url = postgres_databases.url()
    with pytest.raises(StoreUnavailable, match="syntax error"):
        postgres_databases.open(url).migrate()
    # One transaction: the steps before the broken one are not there either.
    assert sql(url, "SELECT to_regclass('spaces'), to_regclass('memfs_migrations')") == [
        (None, None)
    ]


# Failures are StoreUnavailable.


async def test_a_server_that_refuses_connections_is_store_unavailable(tmp_path: Path) -> None:
    # A socket folder with no server in it: the connection is refused at once.
    store = PostgresStore(
        f"postgresql://postgres@{str(tmp_path).replace('/', '%2F')}/memfs",
        key_file=tmp_path / "store.key",
    )
    try:
        with pytest.raises(StoreUnavailable, match="postgresql store failed") as raised:
            await store.load(ORG, "s1")
        assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    finally:
        await store.aclose()


async def test_a_closed_store_is_unavailable(postgres_databases: Databases) -> None:
    store = postgres_databases.store()
    await store.load(ORG, "s1")
    await store.aclose()
    await store.aclose()  # twice is fine
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.load(ORG, "s1")


async def test_connections_the_server_dropped_are_replaced_not_failed(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    store = postgres_databases.open(url)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
        sql(
            url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        assert (await store.load(ORG, "s1")).files == {"a.md": b"a"}
    finally:
        await store.aclose()


@pytest.fixture(scope="module")
def own_server() -> object:
    """A server of this module's own, to stop and start (the session's must stay up)."""
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed here")
    with throwaway_postgres(bindir) as server:
        yield server


async def test_the_first_call_after_a_server_restart_gets_a_fresh_connection_not_an_error(
    postgres_server: ThrowawayPostgres, own_server: ThrowawayPostgres, tmp_path: Path
) -> None:
    # The pool's connections died with the server; the first statement of the
    # next call finds that before anything ran, and the call goes on a new one.
    url = await trio.to_thread.run_sync(own_server.new_database)
    store = PostgresStore(url, pool_size=2, key_file=tmp_path / "store.key")
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
        await store.load(ORG, "s1")
        await trio.to_thread.run_sync(own_server.stop_server)
        await trio.to_thread.run_sync(own_server.start_server)
        assert (await store.load(ORG, "s1")).files == {"a.md": b"a"}
        await save(store, ORG, ChangeSet(created={"b.md": b"b"}))
        assert set((await store.load(ORG, "s1")).files) == {"a.md", "b.md"}
    finally:
        await store.aclose()


async def test_a_stopped_server_is_unavailable_and_the_store_works_again_when_it_is_back(
    postgres_server: ThrowawayPostgres, own_server: ThrowawayPostgres, tmp_path: Path
) -> None:
    store = PostgresStore(
        own_server.url(), connect_timeout_seconds=1, key_file=tmp_path / "store.key"
    )
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
        await trio.to_thread.run_sync(own_server.stop_server)
        with pytest.raises(StoreUnavailable):
            await store.load(ORG, "s1")
        with pytest.raises(StoreUnavailable):
            await store.store(
                ORG, ChangeSet(created={"b.md": b"b"}), cursor=None, provenance=Provenance()
            )
        await trio.to_thread.run_sync(own_server.start_server)
        # Back: the pool reconnects on its own schedule (a backoff that a busy
        # machine stretches past one connect timeout), and then serves again.
        with trio.fail_after(30):
            while True:
                try:
                    loaded = await store.load(ORG, "s1")
                    break
                except StoreUnavailable:
                    await trio.sleep(0.2)
        assert loaded.files == {"a.md": b"a"}
    finally:
        await store.aclose()


async def test_a_write_that_cannot_get_the_write_lock_in_time_is_unavailable(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    store = postgres_databases.open(url, lock_timeout_seconds=0.2)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
        with psycopg.connect(url) as holder:  # another writer, in a transaction that lasts
            holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (0x6D656D66, 1))
            with pytest.raises(StoreUnavailable, match="lock timeout") as raised:
                await store.store(
                    ORG, ChangeSet(updated={"a.md": b"b"}), cursor=None, provenance=Provenance()
                )
            assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
            # Reads take no lock: they go on while the writer holds it.
            assert (await store.load(ORG, "s1")).files == {"a.md": b"a"}
        await save(store, ORG, ChangeSet(updated={"a.md": b"b"}))  # released: writes go on
    finally:
        await store.aclose()


def test_a_password_never_shows_in_the_stores_name(tmp_path: Path) -> None:
    key = tmp_path / "store.key"
    store = PostgresStore("postgresql://memfs:s3cret@db.example/memfs", key_file=key)
    assert "s3cret" not in repr(store) and "s3cret" not in redacted(store.url)
    with pytest.raises(ConfigError):
        PostgresStore("postgresql://db.example/memfs?no_such_option=1", key_file=key)


# Two stores on one database (two daemons, in one process).


async def test_two_stores_writing_one_file_from_one_cursor_conflict_exactly_once(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    ours, theirs = postgres_databases.open(url), postgres_databases.open(url)
    try:
        await save(ours, ORG, ChangeSet(created={"a.md": b"a"}))
        for round_ in range(5):
            cursor = (await ours.load(ORG, "s1")).cursor
            results: list[Stored] = []

            async def write(
                store: PostgresStore, who: str, n: int, cursor: str | None, into: list[Stored]
            ) -> None:
                change = ChangeSet(updated={"a.md": f"{who} {n}".encode()})
                prov = Provenance(session=who, turn=str(n))
                into.append(await store.store(ORG, change, cursor=cursor, provenance=prov))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write, ours, "ours", round_, cursor, results)
                nursery.start_soon(write, theirs, "theirs", round_, cursor, results)
            assert sorted(r.status for r in results) == ["conflict", "saved"]
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_a_cursor_covers_every_revision_at_or_below_it_under_concurrent_writers(
    postgres_databases: Databases,
) -> None:
    # What as-of queries rely on: numbers commit in the order they were taken,
    # so a load's cursor names exactly the revisions that load saw.
    url = postgres_databases.url()
    stores = [postgres_databases.open(url) for _ in range(3)]
    seen: list[tuple[int, set[str]]] = []
    try:

        async def writer(store: PostgresStore, n: int) -> None:
            for i in range(8):
                change = ChangeSet(created={f"w{n}-{i}.md": b"x"})
                await store.store(ORG, change, cursor=None, provenance=Provenance())

        async def reader(store: PostgresStore) -> None:
            for _ in range(12):
                loaded = await store.load(ORG, "r")
                seen.append((int(loaded.cursor or 0), set(loaded.revisions.values())))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer, stores[0], 0)
            nursery.start_soon(writer, stores[1], 1)
            nursery.start_soon(reader, stores[2])
        final = await stores[2].load(ORG, "r")
        for cursor, revisions in seen:
            upto = {r for r in final.revisions.values() if int(r) <= cursor}
            assert revisions == upto
    finally:
        for store in stores:
            await store.aclose()


# Lean loads and space versions.


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
async def test_a_write_through_another_store_shows_in_the_next_lean_load(
    postgres_databases: Databases, write: str
) -> None:
    url = postgres_databases.url()
    ours, theirs = postgres_databases.open(url), postgres_databases.open(url)
    try:
        await save(ours, ORG, ChangeSet(created={"a.md": b"a1", "b.md": b"b1"}))
        await save(ours, ORG, ChangeSet(updated={"a.md": b"a1 again"}))
        before = await ours.load_lean(ORG, "s1", set())
        assert await ours.load_lean(ORG, "s1", set()) == before

        await WRITES[write](theirs)

        after = await ours.load_lean(ORG, "s1", set())
        fresh = postgres_databases.open(url, manifest_cache_files=0)
        try:
            truth = await fresh.load_lean(ORG, "s1", set())
        finally:
            await fresh.aclose()
        assert comparable(after) == comparable(truth) != comparable(before)
        assert after.files == truth.files
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_an_unchanged_space_is_loaded_lean_from_the_manifest_read_before(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    store = postgres_databases.open(url)
    try:
        await save(store, ORG, ChangeSet(created={f"n{i}.md": b"x" for i in range(20)}))
        first = await store.load_lean(ORG, "s1", set())
        # Rows changed with the triggers off: a load that read them again would show it.
        sql(url, "ALTER TABLE revisions DISABLE TRIGGER revisions_moves_version")
        sql(url, "UPDATE revisions SET size = 999")
        assert (await store.load_lean(ORG, "s1", set())).sizes == first.sizes
        # A raw write to the live files moves the version (a trigger): read afresh.
        sql(url, "ALTER TABLE revisions ENABLE TRIGGER revisions_moves_version")
        sql(url, "DELETE FROM live WHERE path = 'n0.md'")
        assert sorted((await store.load_lean(ORG, "s1", set())).sizes) == sorted(
            path for path in first.sizes if path != "n0.md"
        )
    finally:
        await store.aclose()


async def test_a_space_moved_by_writes_alone_reads_no_live_row_of_an_unchanged_file(
    postgres_databases: Databases,
) -> None:
    # As in SQLite (tests/test_store_manifests.py): an update counts one
    # write, not two, so a turn's edits are found from the rows that moved.
    url = postgres_databases.url()
    store = postgres_databases.open(url)
    try:
        await save(store, ORG, ChangeSet(created={f"n{i}.md": b"x" for i in range(20)}))
        before = await store.load_lean(ORG, "s1", set())
        sql(url, "ALTER TABLE live DISABLE TRIGGER live_moves_version")
        sql(
            url,
            "UPDATE live SET revision_id = (SELECT revision_id FROM live WHERE path = 'n4.md')"
            " WHERE path = 'n3.md'",
        )
        sql(url, "ALTER TABLE live ENABLE TRIGGER live_moves_version")
        await save(store, ORG, ChangeSet(updated={"n1.md": b"yy"}, created={"new.md": b"zzz"}))
        after = await store.load_lean(ORG, "s1", set())
        assert after.revisions["n3.md"] == before.revisions["n3.md"]
        assert after.sizes["n1.md"] == 2 and after.sizes["new.md"] == 3
        assert after.files["n1.md"] == b"yy" and after.files["new.md"] == b"zzz"
        assert set(after.shas) == set(after.sizes) == set(after.revisions) == set(after.meta)
        assert before.lineage is not None and after.lineage is not None
        moved = after.lineage.moved_since(before.lineage.line, before.lineage.version)
        assert moved == frozenset({"n1.md", "new.md"})
    finally:
        await store.aclose()


async def test_a_person_forgotten_and_written_again_is_never_served_the_old_manifest(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    ours, theirs = postgres_databases.open(url), postgres_databases.open(url)
    try:
        await save(ours, DANA, ChangeSet(created={"secret.md": b"s"}))
        assert (await ours.load_lean(DANA, "s1", set())).paths() == ["secret.md"]
        await theirs.forget_user("dana", "bank", by=ADA)
        await save(theirs, DANA, ChangeSet(created={"new.md": b"n"}))
        again = await ours.load_lean(DANA, "s1", set())
        assert again.paths() == ["new.md"] and again.files == {"new.md": b"n"}
    finally:
        await ours.aclose()
        await theirs.aclose()


# The audit log, guarded by the database itself.


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit SET detail = 'nothing happened'",
        "DELETE FROM audit",
        "TRUNCATE audit",
        "INSERT INTO audit (id, at, action, org, prev_hash, hash)"
        " VALUES (1, now(), 'forget', 'bank', 'x', 'y')",
        "UPDATE audit_head SET last_id = 0",
        "DELETE FROM audit_head",
    ],
)
async def test_sql_that_rewrites_the_audit_log_is_refused_by_the_database(
    postgres_databases: Databases, statement: str
) -> None:
    url = postgres_databases.url()
    store = postgres_databases.open(url)
    try:
        await store.set_review(ORG, "after", by=ADA)
        before = await store.audit()
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            sql(url, statement)
        assert await store.audit() == before
        await store.verify_audit()
    finally:
        await store.aclose()


async def test_verify_names_an_entry_rewritten_and_a_tail_cut_with_the_triggers_off(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    store = postgres_databases.open(url)
    try:
        for mode in ("after", "person", "none"):
            await store.set_review(ORG, mode, by=ADA)
        assert (await store.verify_audit()).entries == 3
        sql(url, "ALTER TABLE audit DISABLE TRIGGER USER")
        sql(url, "UPDATE audit SET detail = 'none' WHERE id = 2")
        with pytest.raises(AuditTampered) as rewritten:
            await store.verify_audit()
        assert rewritten.value.path == "2"
        sql(url, "DELETE FROM audit WHERE id >= 2")
        with pytest.raises(AuditTampered, match="last entries were removed"):
            await store.verify_audit()
    finally:
        await store.aclose()
