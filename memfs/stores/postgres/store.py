"""``PostgresStore``: a managed store in a PostgreSQL database, shared by many daemons.

psycopg 3's sync API over a ``psycopg_pool.ConnectionPool``; every call runs
in a worker thread (``trio.to_thread.run_sync``: psycopg's async API does not
run under trio), in one transaction per store operation:

- reads run ``REPEATABLE READ READ ONLY``: the files, the cursor and the
  waiting change of a load come from one snapshot;
- writes run ``READ COMMITTED`` and first take the store's write lock (a
  transaction-level advisory lock, ``rows.WRITE_LOCK``), so writers from
  every process serialize as SQLite's do on its write lock: a store's
  conflict check and its writes see every earlier commit, and the clock's
  numbers commit in the order they were taken (``rows.py``). A conflicting
  or failing change set writes nothing.

Errors are mapped once (``_map_exceptions``): whatever psycopg or the pool
raises (connection refused, server gone, a lock not had within
``lock_timeout_seconds``, a constraint or trigger that refused a write) is
``StoreUnavailable`` with the original as its cause; a serialization failure
or deadlock is retried first (``RETRIES``). memfs's own errors (``NotFound``,
``Forgotten``, ...) pass through and roll the transaction back.

The schema is migrated on first use (``schema._migrate``), over a connection
of its own, so a server that refuses says why at once (not after the pool's
timeout). A pooled connection the server dropped (a restart) is found by
the transaction's first statement, which fails before anything ran: the
pool then checks its other idle connections and the call goes again on a
good one, instead of failing. (Checking each connection as it leaves the
pool would cost a round trip per call.) A transaction's opening statements
go in one round trip, and so do a write's ``BEGIN`` and its lock.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TypeVar

import psycopg
import psycopg_pool
import trio
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from memfs.core import sealing
from memfs.core.defaults import DEFAULT_STATE_DIR
from memfs.core.errors import ConfigError, StoreUnavailable
from memfs.core.policy import is_shared
from memfs.stores.keyfile import default_key_file, load_store_key
from memfs.stores.manifests import DEFAULT_MAX_FILES
from memfs.stores.postgres.db import Conn, PostgresDb
from memfs.stores.postgres.listen import SpaceListener, SpaceNotice
from memfs.stores.postgres.schema import LOCK_CLASS, WRITE_LOCK, _migrate
from memfs.stores.sql.db import Db
from memfs.stores.sql.store import SqlStore
from memfs.stores.sql.upgrade import _check_store_key, _key_is_current

T = TypeVar("T")

DEFAULT_POOL_SIZE = 8  # connections per store (per daemon); the server's max_connections bounds all
DEFAULT_CONNECT_TIMEOUT_SECONDS = 5.0  # to connect, or to get a pooled connection
DEFAULT_LOCK_TIMEOUT_SECONDS = 5.0  # to get the write lock: SQLite's busy timeout
# The tables sealing at open may rewrite (``memfs.stores.sql.upgrade``).
SEALED_TABLES = ("revisions", "live", "folders", "stored_turns", "traces", "changes")
RETRIES = 3  # tries of a transaction that hit a serialization failure or a deadlock

_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)

# A transaction's opening, one round trip each (no parameters: the simple
# protocol, which takes two statements at once). A write takes the store's
# write lock before anything is read: the conflict check must see every
# earlier write.
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_BEGIN_WRITE = (
    "BEGIN ISOLATION LEVEL READ COMMITTED;"
    f" SELECT pg_advisory_xact_lock({LOCK_CLASS:d}, {WRITE_LOCK:d})"
)


class _DroppedConnection(Exception):
    """A pooled connection was found dead at a transaction's first statement: nothing ran."""


def redacted(url: str) -> str:
    """``url`` without its password, for messages and ``repr``."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparsable URL)"
    if "password" not in info:
        return url
    user, host, port = info.get("user", ""), info.get("host", ""), info.get("port", "")
    return f"postgresql://{user}:***@{host}:{port}/{info.get('dbname', '')}"


@contextlib.contextmanager
def _map_exceptions(where: str) -> Iterator[None]:
    """Report any psycopg or pool failure as the store being unavailable, cause attached."""
    try:
        yield
    except (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as exc:
        raise StoreUnavailable(f"the postgresql store failed: {exc}", path=where) from exc


def _roll_back(conn: Conn) -> None:
    if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
        with contextlib.suppress(psycopg.Error):
            # The pool discards a connection it gets back broken or mid-transaction.
            conn.execute("ROLLBACK")


class PostgresStore(SqlStore):
    """A managed store in the PostgreSQL database ``url`` names (``postgresql://...``).

    Nothing connects until the first call, which migrates the schema (once,
    however many processes start at once). ``pool_size`` bounds this store's
    connections; ``connect_timeout_seconds`` how long a call waits to connect
    or for a free connection; ``lock_timeout_seconds`` how long a write waits
    for the write lock. Past either, the call is ``StoreUnavailable``.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
        manifest_cache_files: int = DEFAULT_MAX_FILES,
        key_file: Path | None = None,
    ) -> None:
        super().__init__(manifest_cache_files=manifest_cache_files)
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"not a PostgreSQL URL: {exc}", path=redacted(url)) from None
        if pool_size < 1:
            raise ConfigError(f"pool_size must be 1 or more, not {pool_size}", path=redacted(url))
        self.url = url
        self._where = redacted(url)
        # The store key (``store_key_file``), read or made now, so a key file that
        # cannot be read fails at start. Every process on one database names the
        # same file; the database refuses another key at first use.
        named = key_file if key_file is not None else default_key_file(Path(DEFAULT_STATE_DIR))
        self.key_file = Path(os.path.abspath(named))
        self._store_key = load_store_key(self.key_file)
        self._connect_timeout = connect_timeout_seconds
        self._lock_timeout_ms = max(1, round(lock_timeout_seconds * 1000))
        self._pool: psycopg_pool.ConnectionPool[Conn] = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            kwargs=self._connect_kwargs(),
            configure=self._configure,
            timeout=connect_timeout_seconds,
            name="memfs",
        )
        self._state_lock = threading.Lock()
        self._ready = False
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    def _connect_kwargs(self) -> dict[str, object]:
        # autocommit: every transaction here is begun explicitly, with the mode it needs.
        return {
            "autocommit": True,
            "connect_timeout": max(1, round(self._connect_timeout)),
        }

    def _configure(self, conn: Conn) -> None:
        # UTC: timestamps read back as the instants written, whatever the server's zone.
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute(f"SET lock_timeout = {self._lock_timeout_ms:d}")
        # A new connection may be to another database behind the same URL (a restored
        # backup); manifests read before must not be served from it.
        self._lean.clear()

    def _ensure_ready(self) -> None:
        """Migrate on first use, then open the pool. Raises StoreUnavailable while it can't."""
        with self._state_lock:
            if self._closed:
                raise StoreUnavailable("the postgresql store is closed", path=self._where)
            if self._ready:
                return
            with _map_exceptions(self._where):
                with psycopg.connect(self.url, **self._connect_kwargs()) as conn:  # type: ignore[arg-type]
                    self._configure(conn)
                    _migrate(conn, self._where)
                    self._checked_key(conn)
                self._pool.open(wait=False)
            self._ready = True

    def check_key(self) -> None:
        # A read only: migrating and sealing an older database wait for the
        # first use, as they always did (on a large database they take longer
        # than a service manager waits for a start).
        with self._connection() as conn:
            row = conn.execute("SELECT to_regclass('store_key_check') IS NOT NULL").fetchone()
            if row is None or not row[0]:
                return  # not migrated that far: the first use checks it
            check = conn.execute("SELECT value FROM store_key_check WHERE id = 1").fetchone()
            if check is not None:
                sealing.require_key_check(str(check[0]), self._store_key, path=str(self.key_file))

    def migrate(self) -> int:
        """Apply pending migrations now (``memfs db migrate``); how many. Blocking."""
        with self._connection() as conn:
            applied = _migrate(conn, self._where)
            self._checked_key(conn)
            return applied

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Conn]:
        """A connection of its own, outside the pool, configured; failures unavailable."""
        with self._state_lock, _map_exceptions(self._where):
            if self._closed:
                raise StoreUnavailable("the postgresql store is closed", path=self._where)
            with psycopg.connect(self.url, **self._connect_kwargs()) as conn:  # type: ignore[arg-type]
                self._configure(conn)
                yield conn

    def _checked_key(self, conn: Conn) -> bool:
        """Check the store key at open; seal what is in the clear. Whether it sealed any."""
        where = str(self.key_file)
        if self._transaction(conn, lambda db: _key_is_current(db, where), write=False):
            return False  # the common case: no write lock taken just to open
        sealed = self._transaction(conn, lambda db: _check_store_key(db, where), write=True)
        if sealed:
            # Sealing updated rows in place: their clear versions stay in the tables'
            # and indexes' pages until rewritten. VACUUM FULL writes each table and
            # index anew and removes the old files (the WAL of before is beyond reach).
            conn.execute(f"VACUUM FULL {', '.join(SEALED_TABLES)}")
        return sealed

    def _run(self, fn: Callable[[Db], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction; in a worker thread, never on the trio loop."""
        self._ensure_ready()
        for attempt in range(1, RETRIES + 1):
            try:
                with _map_exceptions(self._where), self._pool.connection() as conn:
                    return self._transaction(conn, fn, write=write)
            except _DroppedConnection as exc:
                # The pool discarded that one; the others idle since may be dead too.
                with _map_exceptions(self._where):
                    self._pool.check()
                if attempt == RETRIES:
                    cause = exc.__cause__
                    raise StoreUnavailable(
                        f"the postgresql store failed: {cause}", path=self._where
                    ) from cause
            except StoreUnavailable as exc:
                if attempt == RETRIES or not isinstance(exc.__cause__, _RETRYABLE):
                    raise
        raise AssertionError("unreachable: the last try returns or raises")

    def _transaction(self, conn: Conn, fn: Callable[[Db], T], *, write: bool) -> T:
        try:
            conn.execute(_BEGIN_WRITE if write else _BEGIN_READ)
        except psycopg.OperationalError as exc:
            if conn.broken or conn.closed:
                raise _DroppedConnection() from exc
            _roll_back(conn)  # begun, and the lock not had in time
            raise
        try:
            result = fn(PostgresDb(conn, self._store_key))
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise
        return result

    def listener(self) -> SpaceListener:
        """A connection of its own that listens for other processes' changes (``listen.py``)."""
        return SpaceListener(
            self.url, where=self._where, connect_timeout_seconds=self._connect_timeout
        )

    def notified(self, notices: Collection[SpaceNotice]) -> None:
        """Other processes changed these spaces: drop what is cached of people's.

        Only a hint: a lean load reads the space's version in its own
        transaction and never serves a manifest of another version, notice or
        not. A person's file names leave this process as soon as it hears
        (they may have been forgotten); shared memory's manifest stays, to be
        refreshed from the rows that moved at the next load, where a drop
        would have it read every file again and start a new lineage.
        """
        for notice in notices:
            if not is_shared(notice.ref.layer):
                self._lean.drop(notice.id)

    def missed_notices(self) -> None:
        """Notices may have been lost (no one listened): drop every cached manifest.

        As :meth:`notified` drops a person's at once, for every space a lost
        notice may have named; shared memory's goes too, since which spaces
        are people's is not kept beside the cache. A manifest is only read
        again where a load needs it.
        """
        self._lean.clear()

    async def aclose(self) -> None:
        """Close the pool; later calls raise ``StoreUnavailable``. Safe to call twice."""
        await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._state_lock:
            self._closed = True
            if self._ready:
                self._pool.close()
                self._ready = False
