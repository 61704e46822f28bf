"""``SqlStore``: the methods of a managed store, over the transactions its subclass runs.

A managed store is one SQL database (SQLite's file, a PostgreSQL server)
holding the tables of :mod:`memfs.stores.sql`. This class turns each store
method into one transaction running a function of those modules; the
subclass owns the connection: how a transaction begins and commits, which
errors mean the store is unavailable, and what forgetting must do past the
rows (``_run_purge``: SQLite empties its write-ahead log). Every call runs in
a worker thread (``trio.to_thread.run_sync``), never on the trio loop, and is
not cancellable once started: the transaction commits or rolls back before
the call returns.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Container, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal, TypeVar

import trio

from memfs.core import members as member_rules
from memfs.core import review
from memfs.core import signin as signin_rules
from memfs.core.audit import AuditCheck
from memfs.core.errors import ConfigError, NotFound, StoreUnavailable
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
from memfs.stores.base import StoreRequest
from memfs.stores.keyfile import load_store_key
from memfs.stores.sql.asof import _files_as_of, _open_files_as_of
from memfs.stores.sql.audit import _audit, _verify_audit
from memfs.stores.sql.db import Db
from memfs.stores.sql.files import (
    _contents,
    _history,
    _load,
    _load_lean,
    _put,
    _restore,
    _spaces,
    _store_batch,
    _store_turn,
)
from memfs.stores.sql.lean import LeanCache
from memfs.stores.sql.members import (
    _add_member,
    _create_token,
    _member,
    _members,
    _record_signin,
    _remove_member,
    _resolve_token,
    _revoke_tokens,
)
from memfs.stores.sql.privacy import (
    _forget,
    _forget_user,
    _forgotten_files,
    _open_history,
    _open_person,
    _people,
    _purge,
    _user_files,
)
from memfs.stores.sql.review import (
    _decide,
    _get_change,
    _list_changes,
    _review_setting,
    _set_review,
)
from memfs.stores.sql.rows import (
    _forgotten_at,
    _live_origins,
    _person_forgotten_at,
)
from memfs.stores.sql.sealed import _rotate_store_key
from memfs.stores.sql.spaces import _space_id
from memfs.stores.sql.traces import _find_traces, _record_trace, _traces

T = TypeVar("T")
log = logging.getLogger(__name__)


def _check_member(id: str, org: str) -> None:
    member_rules.check_member_id(id)
    member_rules.check_member_id(org, what="org id")


class SqlStore(ABC):
    """The store methods of a managed store; the subclass runs the transactions."""

    def __init__(self, *, manifest_cache_files: int) -> None:
        # Lean loads' manifests by space version (``lean.py``).
        self._lean = LeanCache(manifest_cache_files)

    @abstractmethod
    def _run(self, fn: Callable[[Db], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction (a write one takes the store's write lock). Blocking."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the store's connections; later calls raise ``StoreUnavailable``."""

    @abstractmethod
    def check_key(self) -> None:
        """Open the store now, so a wrong ``store_key_file`` is refused at start. Blocking.

        ``ConfigError`` names the key file; a store that cannot be reached
        now is ``StoreUnavailable``, which a daemon or ``memfs web`` starts
        through (the key is checked again at every open).
        """

    async def check_at_start(self) -> None:
        """:meth:`check_key` for a process starting (a daemon, ``memfs web``).

        A wrong key is raised: the start stops there, naming the key file.
        A store that cannot be reached now is logged and started through.
        """
        try:
            await trio.to_thread.run_sync(self.check_key)
        except StoreUnavailable as exc:
            log.warning("the store could not be opened at start: %s", exc)

    def _run_purge(self, fn: Callable[[Db], T], *, what: str) -> T:
        """Run a purge (forgetting a person's memory) in one write transaction. Blocking.

        ``what`` says what was done (``'a.md' is forgotten``), for a store that
        must add that it could not yet scrub every copy.
        """
        return self._run(fn, write=True)

    # The subclass opens the store with these: the store key and the file it came from.
    key_file: Path
    _store_key: bytes

    async def rotate_key(self, new_key_file: Path) -> int:
        """Seal the store under the key in ``new_key_file`` (made if missing); how many people.

        Every person's key is wrapped again under the new store key in one
        transaction, and the store's key check moves with it: from then on
        only the new key file opens the store (give every host the new file,
        restart every daemon), and a copy of the database from before opens
        only with the old one, so destroying the old key file ends them all.
        """
        new_key = await trio.to_thread.run_sync(load_store_key, new_key_file)
        if new_key == self._store_key:
            raise ConfigError(
                "the new key file holds the key the store has now", path=str(new_key_file)
            )
        rotated = await trio.to_thread.run_sync(
            lambda: self._run_purge(
                lambda db: _rotate_store_key(db, new_key), what="the store key is rotated"
            )
        )
        self._store_key, self.key_file = new_key, new_key_file
        return rotated

    async def _call(self, fn: Callable[[Db], T], *, write: bool) -> T:
        return await trio.to_thread.run_sync(lambda: self._run(fn, write=write))

    async def load(self, ref: SpaceRef, session: str) -> Loaded:
        return await self._call(lambda db: _load(db, ref, session), write=False)

    async def load_lean(self, ref: SpaceRef, session: str, have: Container[str]) -> Loaded:
        return await self._call(
            lambda db: _load_lean(db, ref, session, have, self._lean), write=False
        )

    async def contents(self, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
        return await self._call(lambda db: _contents(db, ref, shas), write=False)

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
            lambda db: _store_turn(db, ref, changes, base, provenance, review), write=True
        )

    async def store_batch(
        self, items: Sequence[StoreRequest | Trace]
    ) -> list[Stored | Exception | None]:
        # One write transaction for all: one commit, one disk flush (GroupCommitStore).
        return await self._call(lambda db: _store_batch(db, items), write=True)

    async def put(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        provenance: Provenance,
        limits: Limits | None = None,
    ) -> Stored:
        within = limits or Limits()
        return await self._call(lambda db: _put(db, ref, changes, provenance, within), write=True)

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        check_path(path)
        return await self._call(lambda db: _history(db, ref, path), write=False)

    async def open_history(self, ref: SpaceRef, path: str, *, by: By | None) -> list[Revision]:
        check_path(path)
        # A write transaction: the revisions are read and the look recorded together.
        return await self._call(lambda db: _open_history(db, ref, path, by), write=True)

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        return (await self._call(lambda db: _load(db, ref, None), write=False)).files

    async def spaces(self) -> list[SpaceRef]:
        return await self._call(_spaces, write=False)

    async def restore(self, ref: SpaceRef, path: str, revision: str, *, by: By | None) -> Stored:
        check_path(path)
        provenance = Provenance(origin="edited", by=by)
        return await self._call(
            lambda db: _restore(db, ref, path, revision, provenance), write=True
        )

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        check_path(path)
        if ref.layer == "user":
            return await trio.to_thread.run_sync(
                lambda: self._run_purge(
                    lambda db: _purge(db, ref, path, by), what=f"{path!r} is forgotten"
                )
            )
        provenance = Provenance(origin="edited", by=by)
        return await self._call(lambda db: _forget(db, ref, path, provenance), write=True)

    async def forget_user(self, user: str, org: str, *, by: By | None) -> Forgot:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._run_purge(
                lambda db: _forget_user(db, user, org, by), what="that person's memory is forgotten"
            )
        )

    async def forgotten_since(self, ref: SpaceRef, cursor: str | None) -> bool:
        base = parse_cursor(cursor)
        if base is None:
            return False
        return await self._call(lambda db: _forgotten_at(db, ref), write=False) > base

    async def forgotten_files_since(
        self, ref: SpaceRef, cursor: str | None, paths: Collection[str]
    ) -> Forgetting:
        base = parse_cursor(cursor)
        if base is None:
            return Forgetting()
        return await self._call(lambda db: _forgotten_files(db, ref, base, paths), write=False)

    async def person_forgotten_since(self, org: str, user: str, cursor: str | None) -> bool:
        base = parse_cursor(cursor)
        if base is None:
            return False
        return await self._call(lambda db: _person_forgotten_at(db, org, user), write=False) > base

    async def person_forgotten_at(self, org: str, user: str) -> str | None:
        seq = await self._call(lambda db: _person_forgotten_at(db, org, user), write=False)
        return str(seq) if seq else None

    async def record_trace(self, trace: Trace) -> None:
        await self._call(lambda db: _record_trace(db, trace), write=True)

    async def traces(self, *, session: str | None = None) -> list[Trace]:
        return await self._call(lambda db: _traces(db, session), write=False)

    async def find_traces(
        self,
        *,
        turn: str | None = None,
        space: SpaceRef | None = None,
        since: datetime | None = None,
    ) -> list[Trace]:
        return await self._call(lambda db: _find_traces(db, turn, space, since), write=False)

    async def files_as_of(self, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
        return await self._call(lambda db: _files_as_of(db, ref, cursor), write=False)

    async def open_files_as_of(
        self, ref: SpaceRef, cursor: str, *, by: By | None
    ) -> dict[str, AsOfFile]:
        # A write transaction: the files are read and the look recorded together.
        found = await self._call(lambda db: _open_files_as_of(db, ref, cursor, by), write=True)
        if isinstance(found, NotFound):
            raise found  # after the look was recorded
        return found

    async def live_origins(self, ref: SpaceRef) -> dict[str, LiveOrigin]:
        return await self._call(lambda db: _live_origins(db, _space_id(db, ref)), write=False)

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await self._call(lambda db: _user_files(db, user, org), write=False)

    async def open_person(
        self, user: str, org: str, *, by: By | None
    ) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await self._call(lambda db: _open_person(db, user, org, by), write=True)

    async def people(self, org: str) -> dict[SpaceRef, int]:
        check_identity(org, what="org id")
        return await self._call(lambda db: _people(db, org), write=False)

    async def audit(
        self, *, org: str | None = None, before: str | None = None, limit: int | None = None
    ) -> list[AuditEntry]:
        return await self._call(lambda db: _audit(db, org, before, limit), write=False)

    async def verify_audit(self) -> AuditCheck:
        return await self._call(_verify_audit, write=False)

    async def set_review(self, ref: SpaceRef, mode: ReviewMode, *, by: By | None) -> None:
        mode = review.check_mode(mode)
        await self._call(lambda db: _set_review(db, ref, mode, by), write=True)

    async def review_mode(self, ref: SpaceRef) -> ReviewMode | None:
        return await self._call(lambda db: _review_setting(db, _space_id(db, ref)), write=False)

    async def list_changes(
        self, *, org: str | None = None, open_only: bool = True
    ) -> list[WaitingChange]:
        return await self._call(lambda db: _list_changes(db, org, open_only), write=False)

    async def get_change(self, id: str) -> WaitingChange:
        return await self._call(lambda db: _get_change(db, id), write=False)

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
        version: str | None = None,
        live_version: str | None = None,
    ) -> WaitingChange:
        for path in [*(paths or ()), *(edits or {})]:
            check_path(path)
        within = limits or Limits()
        return await self._call(
            lambda db: _decide(
                db, id, action, by, paths, edits, force, within, version, live_version
            ),
            write=True,
        )

    async def add_member(self, member: Member, *, by: By | None) -> Member:
        return await self._call(lambda db: _add_member(db, member, by), write=True)

    async def member(self, id: str, org: str) -> Member:
        _check_member(id, org)
        return await self._call(lambda db: _member(db, id, org), write=False)

    async def members(self, org: str) -> list[Member]:
        member_rules.check_member_id(org, what="org id")
        return await self._call(lambda db: _members(db, org), write=False)

    async def remove_member(self, id: str, org: str, *, by: By | None) -> Member:
        _check_member(id, org)
        return await self._call(lambda db: _remove_member(db, id, org, by), write=True)

    async def create_token(self, id: str, org: str, *, by: By | None) -> IssuedToken:
        _check_member(id, org)
        return await self._call(lambda db: _create_token(db, id, org, by), write=True)

    async def revoke_tokens(self, id: str, org: str, *, by: By | None) -> int:
        _check_member(id, org)
        return await self._call(lambda db: _revoke_tokens(db, id, org, by), write=True)

    async def resolve_token(self, token: str) -> Member | None:
        if not member_rules.looks_like_token(token):
            return None  # not a token at all: no need to ask the database
        hashed = member_rules.token_hash(token)
        return await self._call(lambda db: _resolve_token(db, hashed), write=False)

    async def record_signin(self, member: Member | None, *, client: str) -> None:
        key = signin_rules.client_key(client)
        await self._call(lambda db: _record_signin(db, member, key), write=True)
