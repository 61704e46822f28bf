"""``memfs db status`` and ``memfs db migrate``: versioned migrations, shown and applied."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
from click.testing import CliRunner, Result

from memfs.cli import main
from memfs.stores.postgres import MIGRATIONS as PG_MIGRATIONS
from memfs.stores.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tests.postgres_fixtures import Databases


def db(*args: str) -> Result:
    return CliRunner().invoke(main, ["db", *args], catch_exceptions=False, env={})


def status(url: str) -> dict[str, object]:
    done = db("status", "--store", url)
    assert done.exit_code == 0, done.output
    shown: dict[str, object] = json.loads(done.output)
    return shown


def versions(steps: object) -> list[int]:
    assert isinstance(steps, list)
    return [step["version"] for step in steps]


def test_status_of_a_sqlite_store_not_made_yet_shows_every_step_pending_and_makes_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path}/state/memfs.db"
    shown = status(url)
    assert shown["version"] == 0 and shown["latest"] == len(SQLITE_MIGRATIONS)
    assert versions(shown["pending"]) == list(range(1, len(SQLITE_MIGRATIONS) + 1))
    assert shown["applied"] == []
    assert list(tmp_path.iterdir()) == []


def test_migrate_brings_an_older_sqlite_file_up_to_date(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for number, step in enumerate(SQLITE_MIGRATIONS[:-1], start=1):
        step(conn)
        conn.execute(f"PRAGMA user_version = {number:d}")
    conn.close()
    before = status(f"sqlite://{path}")
    assert before["version"] == len(SQLITE_MIGRATIONS) - 1
    assert versions(before["pending"]) == [len(SQLITE_MIGRATIONS)]

    done = db("migrate", "--store", f"sqlite://{path}")
    assert done.exit_code == 0, done.output
    after = json.loads(done.output)
    assert after["version"] == len(SQLITE_MIGRATIONS) and after["pending"] == []
    assert status(f"sqlite://{path}") == after


def test_status_and_migrate_of_a_postgresql_store(postgres_databases: Databases) -> None:
    url = postgres_databases.url()
    before = status(url)
    assert before["kind"] == "postgresql" and before["version"] == 0
    assert [s["name"] for s in before["pending"]] == [m.name for m in PG_MIGRATIONS]  # type: ignore[attr-defined]

    done = db("migrate", "--store", url, "--store-key-file", str(postgres_databases.key_file))
    assert done.exit_code == 0, done.output
    after = json.loads(done.output)
    assert after["version"] == len(PG_MIGRATIONS) and after["pending"] == []
    assert versions(after["applied"]) == list(range(1, len(PG_MIGRATIONS) + 1))
    assert status(url) == after
    assert (
        db(
            "migrate", "--store", url, "--store-key-file", str(postgres_databases.key_file)
        ).exit_code
        == 0
    )  # nothing pending: nothing happens


def test_a_database_newer_than_this_memfs_is_shown_and_never_migrated(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    assert (
        db(
            "migrate", "--store", url, "--store-key-file", str(postgres_databases.key_file)
        ).exit_code
        == 0
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO memfs_migrations (version, name) VALUES (99, 'from the future')")
    shown = status(url)
    assert shown["version"] == 99 and shown["newer_than_this_memfs"] is True
    done = db("migrate", "--store", url, "--store-key-file", str(postgres_databases.key_file))
    assert done.exit_code == 78 and "newer than this memfs" in done.output


def test_stores_without_a_schema_and_unreachable_servers_are_clear_errors(tmp_path: Path) -> None:
    done = db("status", "--store", "memory://")
    assert done.exit_code == 78 and "keep no schema" in done.output
    socket_dir = str(tmp_path).replace("/", "%2F")
    done = db("status", "--store", f"postgresql://memfs@{socket_dir}/memfs")
    assert done.exit_code == 7 and "postgresql store failed" in done.output
