"""The suite's PostgreSQL: one throwaway server per session, a fresh schema per store.

``postgres_server`` starts a ``ThrowawayPostgres`` once for the whole run
(the first test that asks) and stops and removes it at the end, passing or
failing. ``postgres_databases`` gives each store a test makes a schema of its
own in one shared database (its URL sets ``search_path``), which the store
migrates on first use. Schemas, not databases: a database costs a checkpoint
to drop and some hundred files to remove, and a session makes hundreds.
Where PostgreSQL is missing the tests that need it skip, and under ``CI``
they fail (``memfs.testing.postgres.missing_postgres_action``).

Every store on the server seals people's memory under one store key, the
file ``key_file`` names (``store_key_file``), as every daemon and command on
one shared store must: a store opened with another key is refused.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memfs.stores.postgres import PostgresStore
from memfs.stores.sql.store import SqlStore
from memfs.stores.sqlite import SqliteStore
from memfs.testing.mount import under_ci
from memfs.testing.postgres import (
    ThrowawayPostgres,
    missing_postgres_action,
    postgres_bindir,
    postgres_missing_reason,
    postgres_user_exists,
    throwaway_postgres,
)

DATABASE = "memfs_tests"
_schemas = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[ThrowawayPostgres]:
    bindir = postgres_bindir()
    action = missing_postgres_action(
        bindir, under_ci=under_ci(), root=os.geteuid() == 0, user_exists=postgres_user_exists()
    )
    if action == "fail":
        pytest.fail(postgres_missing_reason(bindir) + " (under CI this fails the run)")
    if action == "skip" or bindir is None:
        pytest.skip(postgres_missing_reason(bindir))
    with throwaway_postgres(bindir) as server:
        server.execute(f'CREATE DATABASE "{DATABASE}"')
        yield server


@dataclass
class Databases:
    """Fresh, empty schemas on the session's server, each named by a store URL of its own."""

    server: ThrowawayPostgres
    key_file: Path
    made: list[str] = field(default_factory=list)

    def url(self) -> str:
        schema = f"s{next(_schemas)}"
        self.server.execute(f'CREATE SCHEMA "{schema}"', database=DATABASE)
        url = f"{self.server.url(DATABASE)}?options=-c%20search_path%3D{schema}"
        self.made.append(url)
        return url

    def store(self, **options: object) -> PostgresStore:
        return self.open(self.url(), **options)

    def open(self, url: str, **options: object) -> PostgresStore:
        """A store on ``url`` (one of these schemas) under the suite's store key."""
        return PostgresStore(url, key_file=self.key_file, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def postgres_key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store key file every store of the session's server is opened with."""
    return tmp_path_factory.mktemp("store-key") / "store.key"


@pytest.fixture
def postgres_databases(postgres_server: ThrowawayPostgres, postgres_key_file: Path) -> Databases:
    return Databases(postgres_server, postgres_key_file)


SqlOpener = Callable[[], SqlStore]


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_opener(request: pytest.FixtureRequest, tmp_path: Path) -> SqlOpener:
    """Opens one store of each SQL kind (SQLite, then PostgreSQL), the same one each call."""
    return open_sql(request.param, request, tmp_path)


def open_sql(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> SqlOpener:
    """An opener of one ``kind`` of SQL store (``sqlite``, ``postgresql``): one store each call."""
    if kind == "sqlite":
        return lambda: SqliteStore(tmp_path / "memfs.db")
    databases: Databases = request.getfixturevalue("postgres_databases")
    url = databases.url()
    return lambda: databases.open(url)
