"""Which schema migrations a store's database has, and applying the rest (``memfs db``).

The SQLite and PostgreSQL stores keep their database format as versioned
steps (:mod:`memfs.stores.sqlite.schema`, :mod:`memfs.stores.postgres.schema`)
and apply pending ones whenever a store opens. ``schema_status`` reads which
are applied without changing anything (a SQLite file that does not exist yet
is not made); ``migrate`` applies the pending ones now, as the next open
would (under the same locks: SQLite's write lock, PostgreSQL's advisory
lock), so an operator can upgrade the schema before starting the daemons.
Blocking: for the CLI, not the trio loop.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import trio

from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
    check_pool_size,
    check_timeout,
)
from memfs.core.errors import ConfigError, StoreUnavailable
from memfs.stores.open import parse_store_url


@dataclass(frozen=True)
class Step:
    version: int
    name: str


@dataclass(frozen=True)
class SchemaStatus:
    """A store's schema: the steps applied, those this memfs would apply, the newest it knows."""

    store: str  # the URL, without a password
    kind: str  # "sqlite" or "postgresql"
    version: int  # the database's schema version; 0: none yet
    latest: int  # the newest version this memfs knows
    applied: tuple[Step, ...]
    pending: tuple[Step, ...]

    def as_json(self) -> dict[str, object]:
        return {
            "store": self.store,
            "kind": self.kind,
            "version": self.version,
            "latest": self.latest,
            # A database newer than this memfs: it refuses to open it.
            "newer_than_this_memfs": self.version > self.latest,
            "applied": [{"version": s.version, "name": s.name} for s in self.applied],
            "pending": [{"version": s.version, "name": s.name} for s in self.pending],
        }


def _sqlite_steps() -> tuple[Step, ...]:
    from memfs.stores.sqlite.schema import MIGRATIONS

    # A step is a function; its name says what it does (``_add_review_tables``).
    return tuple(
        Step(n, step.__name__.strip("_").replace("_", " "))
        for n, step in enumerate(MIGRATIONS, start=1)
    )


def _sqlite_version(path: Path) -> int:
    if not path.exists():
        return 0
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"the sqlite store failed: {exc}", path=str(path)) from exc


def _postgres_status(
    url: str, connect_timeout_seconds: float
) -> tuple[int, tuple[Step, ...], tuple[Step, ...]]:
    import psycopg

    from memfs.stores.postgres.schema import MIGRATIONS, applied_migrations
    from memfs.stores.postgres.store import _map_exceptions, redacted

    # libpq counts whole seconds, as the store's own connections do.
    timeout = max(1, round(connect_timeout_seconds))
    with (
        _map_exceptions(redacted(url)),
        psycopg.connect(url, autocommit=True, connect_timeout=timeout) as conn,
    ):
        applied = applied_migrations(conn)
    steps = tuple(Step(n, m.name) for n, m in enumerate(MIGRATIONS, start=1))
    version = applied[-1][0] if applied else 0
    return version, tuple(Step(v, name) for v, name in applied), steps


def schema_status(
    url: str, *, connect_timeout_seconds: float = DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS
) -> SchemaStatus:
    """The schema of the store ``url`` names; nothing is created or changed.

    ``connect_timeout_seconds``: how long to wait to connect to a PostgreSQL
    store (``store_connect_timeout_seconds``).
    """
    connect_timeout_seconds = check_timeout(connect_timeout_seconds, key="connect_timeout_seconds")
    scheme, path = parse_store_url(url)
    if scheme == "sqlite":
        assert path is not None
        steps = _sqlite_steps()
        version = _sqlite_version(path)
        return SchemaStatus(
            store=url,
            kind="sqlite",
            version=version,
            latest=len(steps),
            applied=steps[:version],
            pending=steps[version:],
        )
    if scheme == "postgresql":
        from memfs.stores.postgres.store import redacted

        version, applied, steps = _postgres_status(url, connect_timeout_seconds)
        return SchemaStatus(
            store=redacted(url),
            kind="postgresql",
            version=version,
            latest=len(steps),
            applied=applied,
            pending=steps[version:],
        )
    raise ConfigError(
        f"{scheme}:// stores keep no schema; only sqlite and postgresql stores migrate", path=url
    )


def migrate(
    url: str,
    *,
    key_file: Path | None = None,
    pool_size: int = DEFAULT_STORE_POOL_SIZE,
    connect_timeout_seconds: float = DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    lock_timeout_seconds: float = DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
) -> SchemaStatus:
    """Apply the pending migrations of the store ``url`` names; its status after.

    ``key_file``: the store key file the store is sealed under (its default
    as ``open_store`` has it); sealing what an older memfs kept in the clear
    is part of migrating, and needs the key. The connection settings are a
    PostgreSQL store's, as for ``open_store``; other stores ignore them.
    """
    pool_size = check_pool_size(pool_size, key="pool_size")
    connect_timeout_seconds = check_timeout(connect_timeout_seconds, key="connect_timeout_seconds")
    lock_timeout_seconds = check_timeout(lock_timeout_seconds, key="lock_timeout_seconds")
    scheme, path = parse_store_url(url)
    if scheme == "sqlite":
        from memfs.private import make_private_dirs
        from memfs.stores.sqlite import SqliteStore

        assert path is not None
        make_private_dirs(path.parent)  # as open_store would
        store = SqliteStore(path, key_file=key_file)
        try:
            store.migrate()
        finally:
            trio.run(store.aclose)
    elif scheme == "postgresql":
        from memfs.stores.postgres import PostgresStore

        PostgresStore(
            url,
            key_file=key_file,
            pool_size=pool_size,
            connect_timeout_seconds=connect_timeout_seconds,
            lock_timeout_seconds=lock_timeout_seconds,
        ).migrate()
    return schema_status(url, connect_timeout_seconds=connect_timeout_seconds)


__all__ = ["SchemaStatus", "Step", "migrate", "schema_status"]
