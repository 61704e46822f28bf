"""``SqliteStore``: one database file, one connection used from worker threads under a lock.

Trio never blocks on the database. Every SQLite error (and an ``OSError``
about the file) leaves the store as ``StoreUnavailable`` with the original as
its cause; so does a database file that existed and is missing or was
replaced, rather than a fresh empty database in its place. The file is made
0600 (and narrowed to 0600 if this user owns a wider one), with its ``-wal``
and ``-shm``: it holds people's memory and prompts, whoever opens the store.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import trio

from memfs.core.errors import ConfigError, StoreUnavailable
from memfs.private import create_private_file, narrow_if_ours
from memfs.stores.keyfile import default_key_file, load_store_key
from memfs.stores.manifests import DEFAULT_MAX_FILES
from memfs.stores.sql.db import Db
from memfs.stores.sql.store import SqlStore
from memfs.stores.sql.upgrade import _check_store_key, _key_is_current
from memfs.stores.sqlite.db import SqliteDb
from memfs.stores.sqlite.schema import _migrate

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000


@contextlib.contextmanager
def _map_exceptions(path: Path) -> Iterator[None]:
    """Report any SQLite failure as the store being unavailable, cause attached."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(f"the sqlite store failed: {exc}", path=str(path)) from exc


class SqliteStore(SqlStore):
    """A managed store in the SQLite database file ``path``.

    The file is created on first use if it does not exist when the store is
    made; its folder must already exist (``ConfigError`` otherwise). Once the
    file exists (it did when the store was made, or this store created it),
    it is never created again: if it, or its folder, is missing later (before
    the first connection, or while open), or is an empty file, every call is
    ``StoreUnavailable`` until the file is back, never a fresh empty database
    in its place. A file replaced by another while open fails the call that
    finds it (writes never go to a file nobody will read again); the next
    call opens what is at the path now, if it is a memfs store (a restore).
    """

    def __init__(
        self,
        path: Path,
        *,
        manifest_cache_files: int = DEFAULT_MAX_FILES,
        key_file: Path | None = None,
    ) -> None:
        self.path = Path(os.path.abspath(path))
        # Checked now, not on first use, so a mistyped state dir fails at start.
        if not self.path.parent.is_dir():
            raise ConfigError(
                "the sqlite store's folder does not exist; create it first", path=str(self.path)
            )
        if self.path.is_dir():
            raise ConfigError("the sqlite store's path is a folder", path=str(self.path))
        # The store key (``store_key_file``): read, or made, now, so a key file
        # that cannot be read fails at start. Beside the database by default.
        named = key_file if key_file is not None else default_key_file(self.path.parent)
        self.key_file = Path(os.path.abspath(named))
        self._store_key = load_store_key(self.key_file)
        super().__init__(manifest_cache_files=manifest_cache_files)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # Whether the file must exist from now on: it did, or we made it.
        # (An empty file, as ``touch`` leaves, is no store yet: SQLite makes one in it.)
        self._must_exist = self.path.exists() and self.path.stat().st_size > 0
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        """The store's connection, opened and migrated on first use. Call with the lock held."""
        if self._closed:
            raise StoreUnavailable("the sqlite store is closed", path=str(self.path))
        if self._conn is not None:
            if self._same_file():
                return self._conn
            # Removed or replaced under us: writes to this connection would land
            # in a file nobody opens again. Drop it; reopen only the real path.
            conn, self._conn = self._conn, None
            conn.close()
            raise StoreUnavailable(
                "the sqlite store's database file was removed or replaced while open",
                path=str(self.path),
            )
        if self._must_exist and not self.path.exists():
            raise StoreUnavailable(
                "the sqlite store's database file is missing; memfs does not start an empty "
                "one in place of a store that existed",
                path=str(self.path),
            )
        # The file holds people's memory: 0600 before SQLite makes it (SQLite
        # gives -wal and -shm the database file's mode), whoever opens the store.
        if not self._must_exist:
            create_private_file(self.path)
        for suffix in ("", "-wal", "-shm"):
            narrow_if_ours(self.path.with_name(self.path.name + suffix))
        # mode=rw once the file must exist, so a file removed after the check
        # above is an error too, not silently created afresh.
        mode = "rw" if self._must_exist else "rwc"
        uri = f"file:{urllib.parse.quote(str(self.path))}?mode={mode}"
        # isolation_level=None: the sqlite3 module must not open transactions of
        # its own; every transaction here is begun explicitly, with the mode it needs.
        conn = sqlite3.connect(
            uri,
            uri=True,
            check_same_thread=False,
            isolation_level=None,
        )
        try:
            # First, before any pragma that writes: an empty file where the store
            # was would otherwise be made into a fresh one.
            if self._must_exist and conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                raise StoreUnavailable(
                    "the sqlite store's database file was replaced by one that holds no "
                    "memfs store; memfs does not start an empty one in its place",
                    path=str(self.path),
                )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
            # WAL: loads read a consistent snapshot without blocking writers, and
            # writers from other processes queue on the write lock.
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL, not NORMAL: under WAL, NORMAL may lose the last commits on power
            # loss, and a store answers "saved" only for what is durable.
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            # Deleted content is overwritten with zeros, not just unlinked, so a
            # forgotten file cannot be read back from the database file's free space.
            conn.execute("PRAGMA secure_delete = ON")
            # Statement journals (a group commit's savepoint per turn spills one
            # past 64 KiB) and sorts stay in memory: on disk they were a file in
            # /var/tmp made and unlinked per store, holding page images of the
            # store's rows where neither secure_delete nor forgetting reaches.
            conn.execute("PRAGMA temp_store = MEMORY")
            _migrate(conn, self.path)
            if self._checked_key(conn):
                # The clear copies were overwritten (secure_delete); none may stay in the log.
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            info = os.stat(self.path)
        except BaseException:
            conn.close()
            raise
        self._must_exist = True
        self._identity = (info.st_dev, info.st_ino)
        # The file opened may be another than before (a restored backup).
        self._lean.clear()
        self._conn = conn
        return conn

    def migrate(self) -> None:
        """Open the database now, applying pending migrations (``memfs db migrate``). Blocking."""
        with self._lock, _map_exceptions(self.path):
            self._connect()

    def check_key(self) -> None:
        self.migrate()

    def _checked_key(self, conn: sqlite3.Connection) -> bool:
        """Check the store key at open; seal what is in the clear. Whether it sealed any."""
        where = str(self.key_file)
        if self._transaction(conn, lambda db: _key_is_current(db, where), write=False):
            return False  # the common case: no write lock taken just to open
        return self._transaction(conn, lambda db: _check_store_key(db, where), write=True)

    def _same_file(self) -> bool:
        """Whether ``path`` is still the file the connection has open (one stat)."""
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._identity

    def _run(self, fn: Callable[[Db], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction; in a worker thread, never on the trio loop."""
        with self._lock, _map_exceptions(self.path):
            return self._transaction(self._connect(), fn, write=write)

    def _transaction(self, conn: sqlite3.Connection, fn: Callable[[Db], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction on ``conn``. Call with the lock held."""
        # IMMEDIATE takes the write lock before the conflict check reads, so no
        # other process can write between the check and our writes.
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = fn(SqliteDb(conn, self._store_key))
            conn.execute("COMMIT")
        except BaseException:
            self._abandon(conn)
            raise
        return result

    def _abandon(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            # Closing rolls back too; the next call opens a fresh connection. The
            # error that got us here is the one worth reporting, so this one is dropped.
            conn.close()
            self._conn = None

    def _run_purge(self, fn: Callable[[Db], T], *, what: str) -> T:
        """Run the purge ``fn`` in one write transaction, then empty the write-ahead log."""
        # One lock hold for the purge and the checkpoint, so no other call of
        # this store runs in between and the log is emptied right after the delete.
        with self._lock, _map_exceptions(self.path):
            conn = self._connect()
            result = self._transaction(conn, fn, write=True)
            # The purge wrote zeroed pages to the write-ahead log; the older
            # frames there may still hold the content. TRUNCATE copies the log
            # into the database and cuts the log file to nothing.
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise StoreUnavailable(
                f"{what}, but another connection kept reading an older state of the "
                "database, so the old rows may stay in the write-ahead log until the next "
                "checkpoint",
                path=str(self.path),
            )
        return result

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``StoreUnavailable``. Safe to call twice."""
        await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._lock, _map_exceptions(self.path):
            self._closed = True
            if self._conn is not None:
                conn, self._conn = self._conn, None
                conn.close()
