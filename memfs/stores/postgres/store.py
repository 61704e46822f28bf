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
timeout). A pooled connection is checked before each use, so one the server
dropped (a restart) is replaced instead of failing the call.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Container, Iterator
from datetime import datetime
from typing import Literal, TypeVar

import psycopg
import psycopg_pool
import trio
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from memfs.core import members as member_rules
from memfs.core import review
from memfs.core import signin as signin_rules
from memfs.core.audit import AuditCheck
from memfs.core.errors import ConfigError, StoreUnavailable
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
from memfs.stores.manifests import DEFAULT_MAX_FILES
from memfs.stores.postgres.asof import (
    _files_as_of,
    _find_traces,
    _live_origins,
    _open_files_as_of,
)
from memfs.stores.postgres.audit import _audit, _verify_audit
from memfs.stores.postgres.files import (
    LeanCache,
    _contents,
    _history,
    _load,
    _load_lean,
    _put,
    _restore,
    _spaces,
    _store_turn,
)
from memfs.stores.postgres.listen import SpaceListener, SpaceNotice
from memfs.stores.postgres.members import (
    _add_member,
    _create_token,
    _member,
    _members,
    _record_signin,
    _remove_member,
    _resolve_token,
    _revoke_tokens,
)
from memfs.stores.postgres.privacy import (
    _forget,
    _forget_user,
    _forgotten_files,
    _open_history,
    _open_person,
    _people,
    _purge,
    _user_files,
)
from memfs.stores.postgres.review import (
    _decide,
    _get_change,
    _list_changes,
    _review_setting,
    _set_review,
)
from memfs.stores.postgres.rows import LOCK_CLASS, WRITE_LOCK, Conn, _forgotten_at, _space_id
from memfs.stores.postgres.schema import _migrate
from memfs.stores.postgres.traces import _record_trace, _traces

T = TypeVar("T")

DEFAULT_POOL_SIZE = 8  # connections per store (per daemon); the server's max_connections bounds all
DEFAULT_CONNECT_TIMEOUT_SECONDS = 5.0  # to connect, or to get a pooled connection
DEFAULT_LOCK_TIMEOUT_SECONDS = 5.0  # to get the write lock: SQLite's busy timeout
RETRIES = 3  # tries of a transaction that hit a serialization failure or a deadlock

_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


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


def _check_member(id: str, org: str) -> None:
    member_rules.check_member_id(id)
    member_rules.check_member_id(org, what="org id")


class PostgresStore:
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
    ) -> None:
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"not a PostgreSQL URL: {exc}", path=redacted(url)) from None
        if pool_size < 1:
            raise ConfigError(f"pool_size must be 1 or more, not {pool_size}", path=redacted(url))
        self.url = url
        self._where = redacted(url)
        self._connect_timeout = connect_timeout_seconds
        self._lock_timeout_ms = max(1, round(lock_timeout_seconds * 1000))
        self._pool: psycopg_pool.ConnectionPool[Conn] = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            kwargs=self._connect_kwargs(),
            configure=self._configure,
            check=psycopg_pool.ConnectionPool.check_connection,
            timeout=connect_timeout_seconds,
            name="memfs",
        )
        self._state_lock = threading.Lock()
        self._ready = False
        self._closed = False
        self._lean = LeanCache(manifest_cache_files)

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
                self._pool.open(wait=False)
            self._ready = True

    def migrate(self) -> int:
        """Apply pending migrations now (``memfs db migrate``); how many. Blocking."""
        with self._state_lock, _map_exceptions(self._where):
            if self._closed:
                raise StoreUnavailable("the postgresql store is closed", path=self._where)
            with psycopg.connect(self.url, **self._connect_kwargs()) as conn:  # type: ignore[arg-type]
                self._configure(conn)
                return _migrate(conn, self._where)

    def _run(self, fn: Callable[[Conn], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction; in a worker thread, never on the trio loop."""
        self._ensure_ready()
        for attempt in range(1, RETRIES + 1):
            try:
                with _map_exceptions(self._where), self._pool.connection() as conn:
                    return self._transaction(conn, fn, write=write)
            except StoreUnavailable as exc:
                if attempt == RETRIES or not isinstance(exc.__cause__, _RETRYABLE):
                    raise
        raise AssertionError("unreachable: the last try returns or raises")

    @staticmethod
    def _transaction(conn: Conn, fn: Callable[[Conn], T], *, write: bool) -> T:
        if write:
            conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            # Before anything is read: the conflict check must see every earlier write.
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, WRITE_LOCK))
        else:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
                with contextlib.suppress(psycopg.Error):
                    # The pool discards a connection it gets back broken or mid-transaction.
                    conn.execute("ROLLBACK")
            raise
        return result

    async def _call(self, fn: Callable[[Conn], T], *, write: bool) -> T:
        # Not cancellable once started (run_sync's default): the transaction
        # either commits or rolls back before this returns.
        return await trio.to_thread.run_sync(lambda: self._run(fn, write=write))

    async def load(self, ref: SpaceRef, session: str) -> Loaded:
        return await self._call(lambda conn: _load(conn, ref, session), write=False)

    async def load_lean(self, ref: SpaceRef, session: str, have: Container[str]) -> Loaded:
        return await self._call(
            lambda conn: _load_lean(conn, ref, session, have, self._lean), write=False
        )

    async def contents(self, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
        return await self._call(lambda conn: _contents(conn, ref, shas), write=False)

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
        # The review setting is read in the same transaction as the write.
        return await self._call(
            lambda conn: _store_turn(conn, ref, changes, base, provenance, review), write=True
        )

    async def put(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        provenance: Provenance,
        limits: Limits | None = None,
    ) -> Stored:
        within = limits or Limits()
        return await self._call(
            lambda conn: _put(conn, ref, changes, provenance, within), write=True
        )

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        check_path(path)
        return await self._call(lambda conn: _history(conn, ref, path), write=False)

    async def open_history(self, ref: SpaceRef, path: str, *, by: By | None) -> list[Revision]:
        check_path(path)
        # A write transaction: the revisions are read and the look recorded together.
        return await self._call(lambda conn: _open_history(conn, ref, path, by), write=True)

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        return (await self._call(lambda conn: _load(conn, ref, None), write=False)).files

    async def spaces(self) -> list[SpaceRef]:
        return await self._call(_spaces, write=False)

    async def restore(self, ref: SpaceRef, path: str, revision: str, *, by: By | None) -> Stored:
        check_path(path)
        provenance = Provenance(origin="edited", by=by)
        return await self._call(
            lambda conn: _restore(conn, ref, path, revision, provenance), write=True
        )

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        check_path(path)
        if ref.layer == "user":
            return await self._call(lambda conn: _purge(conn, ref, path, by), write=True)
        provenance = Provenance(origin="edited", by=by)
        return await self._call(lambda conn: _forget(conn, ref, path, provenance), write=True)

    async def forget_user(self, user: str, org: str, *, by: By | None) -> Forgot:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await self._call(lambda conn: _forget_user(conn, user, org, by), write=True)

    async def forgotten_since(self, ref: SpaceRef, cursor: str | None) -> bool:
        base = parse_cursor(cursor)
        if base is None:
            return False
        return await self._call(lambda conn: _forgotten_at(conn, ref), write=False) > base

    async def forgotten_files_since(
        self, ref: SpaceRef, cursor: str | None, paths: Collection[str]
    ) -> Forgetting:
        base = parse_cursor(cursor)
        if base is None:
            return Forgetting()
        return await self._call(lambda conn: _forgotten_files(conn, ref, base, paths), write=False)

    async def record_trace(self, trace: Trace) -> None:
        await self._call(lambda conn: _record_trace(conn, trace), write=True)

    async def traces(self, *, session: str | None = None) -> list[Trace]:
        return await self._call(lambda conn: _traces(conn, session), write=False)

    async def find_traces(
        self,
        *,
        turn: str | None = None,
        space: SpaceRef | None = None,
        since: datetime | None = None,
    ) -> list[Trace]:
        return await self._call(lambda conn: _find_traces(conn, turn, space, since), write=False)

    async def files_as_of(self, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
        return await self._call(lambda conn: _files_as_of(conn, ref, cursor), write=False)

    async def open_files_as_of(
        self, ref: SpaceRef, cursor: str, *, by: By | None
    ) -> dict[str, AsOfFile]:
        # A write transaction: the files are read and the look recorded together.
        return await self._call(lambda conn: _open_files_as_of(conn, ref, cursor, by), write=True)

    async def live_origins(self, ref: SpaceRef) -> dict[str, LiveOrigin]:
        return await self._call(lambda conn: _live_origins(conn, ref), write=False)

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await self._call(lambda conn: _user_files(conn, user, org), write=False)

    async def open_person(
        self, user: str, org: str, *, by: By | None
    ) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await self._call(lambda conn: _open_person(conn, user, org, by), write=True)

    async def people(self, org: str) -> dict[SpaceRef, int]:
        check_identity(org, what="org id")
        return await self._call(lambda conn: _people(conn, org), write=False)

    async def audit(self, *, org: str | None = None) -> list[AuditEntry]:
        return await self._call(lambda conn: _audit(conn, org), write=False)

    async def verify_audit(self) -> AuditCheck:
        return await self._call(_verify_audit, write=False)

    async def set_review(self, ref: SpaceRef, mode: ReviewMode, *, by: By | None) -> None:
        mode = review.check_mode(mode)
        await self._call(lambda conn: _set_review(conn, ref, mode, by), write=True)

    async def review_mode(self, ref: SpaceRef) -> ReviewMode | None:
        return await self._call(
            lambda conn: _review_setting(conn, _space_id(conn, ref)), write=False
        )

    async def list_changes(
        self, *, org: str | None = None, open_only: bool = True
    ) -> list[WaitingChange]:
        return await self._call(lambda conn: _list_changes(conn, org, open_only), write=False)

    async def get_change(self, id: str) -> WaitingChange:
        return await self._call(lambda conn: _get_change(conn, id), write=False)

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
        return await self._call(
            lambda conn: _decide(conn, id, action, by, paths, edits, force, within), write=True
        )

    async def add_member(self, member: Member, *, by: By | None) -> Member:
        return await self._call(lambda conn: _add_member(conn, member, by), write=True)

    async def member(self, id: str, org: str) -> Member:
        _check_member(id, org)
        return await self._call(lambda conn: _member(conn, id, org), write=False)

    async def members(self, org: str) -> list[Member]:
        member_rules.check_member_id(org, what="org id")
        return await self._call(lambda conn: _members(conn, org), write=False)

    async def remove_member(self, id: str, org: str, *, by: By | None) -> Member:
        _check_member(id, org)
        return await self._call(lambda conn: _remove_member(conn, id, org, by), write=True)

    async def create_token(self, id: str, org: str, *, by: By | None) -> IssuedToken:
        _check_member(id, org)
        return await self._call(lambda conn: _create_token(conn, id, org, by), write=True)

    async def revoke_tokens(self, id: str, org: str, *, by: By | None) -> int:
        _check_member(id, org)
        return await self._call(lambda conn: _revoke_tokens(conn, id, org, by), write=True)

    async def resolve_token(self, token: str) -> Member | None:
        if not member_rules.looks_like_token(token):
            return None  # not a token at all: no need to ask the database
        hashed = member_rules.token_hash(token)
        return await self._call(lambda conn: _resolve_token(conn, hashed), write=False)

    async def record_signin(self, member: Member | None, *, client: str) -> None:
        key = signin_rules.client_key(client)
        await self._call(lambda conn: _record_signin(conn, member, key), write=True)

    def listener(self) -> SpaceListener:
        """A connection of its own that listens for other processes' changes (``listen.py``)."""
        return SpaceListener(
            self.url, where=self._where, connect_timeout_seconds=self._connect_timeout
        )

    def notified(self, notices: Collection[SpaceNotice]) -> None:
        """Other processes changed these spaces: drop what is cached of them.

        Only a hint: a lean load reads the space's version in its own
        transaction and never serves a manifest of another version, notice or not.
        """
        for notice in notices:
            self._lean.drop(notice.id)

    async def aclose(self) -> None:
        """Close the pool; later calls raise ``StoreUnavailable``. Safe to call twice."""
        await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._state_lock:
            self._closed = True
            if self._ready:
                self._pool.close()
                self._ready = False
