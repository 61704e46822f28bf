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
from collections.abc import Callable, Collection, Container, Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal, TypeVar

import trio

from memfs.core import members as member_rules
from memfs.core import review
from memfs.core import signin as signin_rules
from memfs.core.audit import AuditCheck
from memfs.core.errors import (
    ConfigError,
    StoreUnavailable,
)
from memfs.core.members import IssuedToken, Member
from memfs.core.models import (
    AsOfFile,
    AuditEntry,
    By,
    ChangeSet,
    Forgetting,
    Forgot,
    Limits,
    LiveOrigin,
    Loaded,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
    Trace,
)
from memfs.core.names import check_identity, check_path
from memfs.core.policy import parse_cursor
from memfs.core.review import ReviewMode, WaitingChange
from memfs.private import create_private_file, narrow_if_ours
from memfs.stores.keyfile import default_key_file, load_store_key
from memfs.stores.manifests import DEFAULT_MAX_FILES, ManifestCache
from memfs.stores.sqlite.asof import _files_as_of, _find_traces, _open_files_as_of
from memfs.stores.sqlite.audit import _audit, _verify_audit
from memfs.stores.sqlite.files import (
    _contents,
    _history,
    _load,
    _load_lean,
    _put,
    _restore,
    _spaces,
    _store_turn,
)
from memfs.stores.sqlite.members import (
    _add_member,
    _create_token,
    _member,
    _members,
    _record_signin,
    _remove_member,
    _resolve_token,
    _revoke_tokens,
)
from memfs.stores.sqlite.privacy import (
    _forget,
    _forget_user,
    _forgotten_files,
    _open_history,
    _open_person,
    _people,
    _purge,
    _user_files,
)
from memfs.stores.sqlite.review import (
    _decide,
    _get_change,
    _list_changes,
    _review_setting,
    _set_review,
)
from memfs.stores.sqlite.rows import _forgotten_at, _live_origins, _space_id
from memfs.stores.sqlite.schema import _migrate
from memfs.stores.sqlite.sealed import KeyedConnection, _check_store_key
from memfs.stores.sqlite.traces import _record_trace, _traces

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000


@contextlib.contextmanager
def _map_exceptions(path: Path) -> Iterator[None]:
    """Report any SQLite failure as the store being unavailable, cause attached."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(f"the sqlite store failed: {exc}", path=str(path)) from exc


def _check_member(id: str, org: str) -> None:
    member_rules.check_member_id(id)
    member_rules.check_member_id(org, what="org id")


class SqliteStore:
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
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # Whether the file must exist from now on: it did, or we made it.
        # (An empty file, as ``touch`` leaves, is no store yet: SQLite makes one in it.)
        self._must_exist = self.path.exists() and self.path.stat().st_size > 0
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        # Lean loads' manifests by space version; emptied whenever a connection
        # opens, since the file opened may be another (a restored backup).
        self._manifests = ManifestCache(manifest_cache_files)

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
            factory=KeyedConnection,
        )
        conn.store_key = self._store_key
        try:
            # First, before any pragma that writes: an empty file where the store
            # was would otherwise be made into a fresh one.
            if self._must_exist and conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                raise StoreUnavailable(
                    "the sqlite store's database file was replaced by one that holds no "
                    "memfs store; memfs does not start an empty one in its place",
                    path=str(self.path),
                )
            conn.row_factory = sqlite3.Row
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
            _migrate(conn, self.path)
            _check_store_key(conn, str(self.key_file))
            info = os.stat(self.path)
        except BaseException:
            conn.close()
            raise
        self._must_exist = True
        self._identity = (info.st_dev, info.st_ino)
        self._manifests.clear()
        self._conn = conn
        return conn

    def migrate(self) -> None:
        """Open the database now, applying pending migrations (``memfs db migrate``). Blocking."""
        with self._lock, _map_exceptions(self.path):
            self._connect()

    def check_key(self) -> None:
        """Open the database now, so a wrong ``store_key_file`` is refused at start. Blocking.

        ``ConfigError`` names the key file; a database that cannot be opened
        now is ``StoreUnavailable``, which a daemon starts through (it is
        checked again at every open).
        """
        self.migrate()

    def _same_file(self) -> bool:
        """Whether ``path`` is still the file the connection has open (one stat)."""
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._identity

    def _run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction; in a worker thread, never on the trio loop."""
        with self._lock, _map_exceptions(self.path):
            return self._transaction(self._connect(), fn, write=write)

    def _transaction(
        self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], *, write: bool
    ) -> T:
        """Run ``fn`` in one transaction on ``conn``. Call with the lock held."""
        # IMMEDIATE takes the write lock before the conflict check reads, so no
        # other process can write between the check and our writes.
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = fn(conn)
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

    async def load(self, ref: SpaceRef, session: str) -> Loaded:
        # One read transaction: the files and the cursor come from the same snapshot.
        return await trio.to_thread.run_sync(self._run_load, ref, session)

    def _run_load(self, ref: SpaceRef, session: str | None = None) -> Loaded:
        return self._run(lambda conn: _load(conn, ref, session), write=False)

    async def load_lean(self, ref: SpaceRef, session: str, have: Container[str]) -> Loaded:
        return await trio.to_thread.run_sync(
            lambda: self._run(
                lambda conn: _load_lean(conn, ref, session, have, self._manifests), write=False
            )
        )

    async def contents(self, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _contents(conn, ref, shas), write=False)
        )

    async def store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        base = parse_cursor(cursor)
        # Not cancellable once started (run_sync's default): the transaction
        # either commits or rolls back before this returns.
        return await trio.to_thread.run_sync(
            self._run_store, ref, changes, base, provenance, review
        )

    def _run_store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        base: int | None,
        provenance: Provenance,
        mode: ReviewMode,
    ) -> Stored:
        # The review setting is read in the same transaction as the write, so a
        # setting changed meanwhile cannot let a change skip review.
        return self._run(
            lambda conn: _store_turn(conn, ref, changes, base, provenance, mode), write=True
        )

    async def put(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        provenance: Provenance,
        limits: Limits | None = None,
    ) -> Stored:
        # A person's own edit: never held for review.
        within = limits or Limits()
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _put(conn, ref, changes, provenance, within), write=True)
        )

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        check_path(path)
        return await trio.to_thread.run_sync(self._run_history, ref, path)

    def _run_history(self, ref: SpaceRef, path: str) -> list[Revision]:
        return self._run(lambda conn: _history(conn, ref, path), write=False)

    async def open_history(self, ref: SpaceRef, path: str, *, by: By | None) -> list[Revision]:
        check_path(path)
        # A write transaction: the revisions are read and the look recorded together.
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _open_history(conn, ref, path, by), write=True)
        )

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        return (await trio.to_thread.run_sync(self._run_load, ref)).files

    async def spaces(self) -> list[SpaceRef]:
        return await trio.to_thread.run_sync(self._run_spaces)

    async def live_origins(self, ref: SpaceRef) -> dict[str, LiveOrigin]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _live_origins(conn, _space_id(conn, ref)), write=False)
        )

    async def restore(self, ref: SpaceRef, path: str, revision: str, *, by: By | None) -> Stored:
        check_path(path)
        provenance = Provenance(origin="edited", by=by)
        return await trio.to_thread.run_sync(self._run_restore, ref, path, revision, provenance)

    def _run_restore(
        self, ref: SpaceRef, path: str, revision: str, provenance: Provenance
    ) -> Stored:
        return self._run(lambda conn: _restore(conn, ref, path, revision, provenance), write=True)

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        check_path(path)
        if ref.layer == "user":
            return await trio.to_thread.run_sync(self._run_purge, ref, path, by)
        provenance = Provenance(origin="edited", by=by)
        return await trio.to_thread.run_sync(self._run_forget, ref, path, provenance)

    def _run_forget(self, ref: SpaceRef, path: str, provenance: Provenance) -> Stored:
        return self._run(lambda conn: _forget(conn, ref, path, provenance), write=True)

    def _run_purge(self, ref: SpaceRef, path: str, by: By | None) -> Stored:
        return self._purging(lambda conn: _purge(conn, ref, path, by), what=repr(path))

    def _purging(self, fn: Callable[[sqlite3.Connection], T], *, what: str) -> T:
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
                f"{what} is forgotten, but another connection kept reading an older state "
                "of the database, so its content may stay in the write-ahead log until the "
                "next checkpoint",
                path=str(self.path),
            )
        return result

    async def forget_user(self, user: str, org: str, *, by: By | None) -> Forgot:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._purging(
                lambda conn: _forget_user(conn, user, org, by), what="that person's memory"
            )
        )

    async def forgotten_since(self, ref: SpaceRef, cursor: str | None) -> bool:
        base = parse_cursor(cursor)
        if base is None:
            return False
        at = await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _forgotten_at(conn, ref), write=False)
        )
        return at > base

    async def forgotten_files_since(
        self, ref: SpaceRef, cursor: str | None, paths: Collection[str]
    ) -> Forgetting:
        base = parse_cursor(cursor)
        if base is None:
            return Forgetting()
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _forgotten_files(conn, ref, base, paths), write=False)
        )

    async def record_trace(self, trace: Trace) -> None:
        await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _record_trace(conn, trace), write=True)
        )

    async def traces(self, *, session: str | None = None) -> list[Trace]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _traces(conn, session), write=False)
        )

    async def find_traces(
        self,
        *,
        turn: str | None = None,
        space: SpaceRef | None = None,
        since: datetime | None = None,
    ) -> list[Trace]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _find_traces(conn, turn, space, since), write=False)
        )

    async def files_as_of(self, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _files_as_of(conn, ref, cursor), write=False)
        )

    async def open_files_as_of(
        self, ref: SpaceRef, cursor: str, *, by: By | None
    ) -> dict[str, AsOfFile]:
        # A write transaction: the files are read and the look recorded together.
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _open_files_as_of(conn, ref, cursor, by), write=True)
        )

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _user_files(conn, user, org), write=False)
        )

    async def open_person(
        self, user: str, org: str, *, by: By | None
    ) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        # A write transaction: the files are read and the look recorded together.
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _open_person(conn, user, org, by), write=True)
        )

    async def people(self, org: str) -> dict[SpaceRef, int]:
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _people(conn, org), write=False)
        )

    async def audit(self, *, org: str | None = None) -> list[AuditEntry]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _audit(conn, org), write=False)
        )

    async def verify_audit(self) -> AuditCheck:
        return await trio.to_thread.run_sync(lambda: self._run(_verify_audit, write=False))

    def _run_spaces(self) -> list[SpaceRef]:
        return self._run(_spaces, write=False)

    async def set_review(self, ref: SpaceRef, mode: ReviewMode, *, by: By | None) -> None:
        mode = review.check_mode(mode)
        await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _set_review(conn, ref, mode, by), write=True)
        )

    async def review_mode(self, ref: SpaceRef) -> ReviewMode | None:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _review_setting(conn, _space_id(conn, ref)), write=False)
        )

    async def list_changes(
        self, *, org: str | None = None, open_only: bool = True
    ) -> list[WaitingChange]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _list_changes(conn, org, open_only), write=False)
        )

    async def get_change(self, id: str) -> WaitingChange:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _get_change(conn, id), write=False)
        )

    async def decide(
        self,
        id: str,
        action: Literal["approve", "edit", "reject"],
        *,
        by: By | None,
        paths: list[str] | None = None,
        edits: dict[str, bytes | None] | None = None,
        force: bool = False,
        limits: Limits | None = None,
    ) -> WaitingChange:
        for path in [*(paths or ()), *(edits or {})]:
            check_path(path)
        within = limits or Limits()
        return await trio.to_thread.run_sync(
            lambda: self._run(
                lambda conn: _decide(conn, id, action, by, paths, edits, force, within),
                write=True,
            )
        )

    async def add_member(self, member: Member, *, by: By | None) -> Member:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _add_member(conn, member, by), write=True)
        )

    async def member(self, id: str, org: str) -> Member:
        _check_member(id, org)
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _member(conn, id, org), write=False)
        )

    async def members(self, org: str) -> list[Member]:
        member_rules.check_member_id(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _members(conn, org), write=False)
        )

    async def remove_member(self, id: str, org: str, *, by: By | None) -> Member:
        _check_member(id, org)
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _remove_member(conn, id, org, by), write=True)
        )

    async def create_token(self, id: str, org: str, *, by: By | None) -> IssuedToken:
        _check_member(id, org)
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _create_token(conn, id, org, by), write=True)
        )

    async def revoke_tokens(self, id: str, org: str, *, by: By | None) -> int:
        _check_member(id, org)
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _revoke_tokens(conn, id, org, by), write=True)
        )

    async def resolve_token(self, token: str) -> Member | None:
        if not member_rules.looks_like_token(token):
            return None  # not a token at all: no need to ask the file
        hashed = member_rules.token_hash(token)
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _resolve_token(conn, hashed), write=False)
        )

    async def record_signin(self, member: Member | None, *, client: str) -> None:
        key = signin_rules.client_key(client)
        await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _record_signin(conn, member, key), write=True)
        )

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``StoreUnavailable``. Safe to call twice."""
        await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._lock, _map_exceptions(self.path):
            self._closed = True
            if self._conn is not None:
                conn, self._conn = self._conn, None
                conn.close()
