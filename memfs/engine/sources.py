"""Where one mount's files come from and go to: a store's space, or an app's own load/store.

The turn engine talks to every mount through this one small shape, so an
app-defined persistent dir and a managed space end a turn by the same rules.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Container, Mapping
from typing import Any, Protocol, cast

from memfs.core.errors import Conflict, InvalidName
from memfs.core.models import (
    ChangeSet,
    Loaded,
    Provenance,
    SpaceRef,
    Stored,
    Trace,
    TurnContext,
    digest,
)
from memfs.core.names import check_path
from memfs.core.review import ReviewMode, effective_mode
from memfs.core.specs import PersistentDir
from memfs.engine.commits import GroupCommit
from memfs.stores.base import LeanStore, ReviewingStore, Store

# (store class, protocol) -> whether the class has the protocol's methods.
_KINDS: dict[tuple[type[Any], type[Any]], bool] = {}


def store_is(store: object, kind: type[Any]) -> bool:
    """``isinstance(store, kind)`` for a store protocol, worked out once per store class.

    A runtime protocol check looks up every method of the protocol on each
    call (tens of microseconds for ``ReviewingStore``), and a turn asks
    several at every start and end; a store's class decides the answer.
    """
    key = (type(store), kind)
    known = _KINDS.get(key)
    if known is None:
        known = _KINDS[key] = isinstance(store, kind)
    return known


class Source(Protocol):
    async def load(self, have: Container[str] | None = None) -> Loaded:
        """The space's files; with ``have``, the source may leave out the bytes of files
        whose sha256 is in it (a lean load: see ``LeanStore``)."""
        ...

    async def store(
        self,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        """Store a change set; ``review`` is the mount's (org spaces of a reviewing store)."""
        ...


class StoreSource:
    """A space held by a memfs store.

    It carries no review mode of its own: the turn's ``Mount`` does, and
    hands it to each ``store``. With ``commits``, a store goes through the
    memory's group commit (:mod:`memfs.engine.commits`).
    """

    def __init__(
        self, store: Store, ref: SpaceRef, session: str, *, commits: GroupCommit | None = None
    ) -> None:
        self.store_ = store
        self.ref = ref
        self.session = session
        self.commits = commits

    async def load(self, have: Container[str] | None = None) -> Loaded:
        if have is not None and store_is(self.store_, LeanStore):
            return await cast(LeanStore, self.store_).load_lean(self.ref, self.session, have)
        return await self.store_.load(self.ref, self.session)

    @property
    def traces_with_store(self) -> bool:
        """Whether :meth:`store` can record the turn's trace in the store's own transaction."""
        return self.commits is not None

    async def review_mode(self, default: ReviewMode, loaded: Loaded | None = None) -> ReviewMode:
        """The space's review mode: its own setting in the store, or else ``default``.

        Set by a person in the store, it wins over the spec's default; asked
        at load so the note can tell the agent. A load that read the setting
        (``Loaded.review``) answers without asking the store again.
        """
        if self.ref.layer != "org":
            return "none"
        if loaded is not None and loaded.review is not None:
            return effective_mode(loaded.review.mode, default)
        if store_is(self.store_, ReviewingStore):
            mode = await cast(ReviewingStore, self.store_).review_mode(self.ref)
            return effective_mode(mode, default)
        return default

    async def fetch(self, shas: Collection[str]) -> dict[str, bytes]:
        """The bytes a lean load left out, by sha256 (``{}`` from a store that cannot)."""
        if isinstance(self.store_, LeanStore):
            return await self.store_.contents(self.ref, shas)
        return {}

    async def store(
        self,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
        trace: Callable[[Stored], Trace] | None = None,
    ) -> Stored:
        """Store ``changes``; with ``trace`` (where :attr:`traces_with_store`), the trace too."""
        if self.commits is not None:
            return await self.commits.store_changes(
                self.ref, changes, cursor=cursor, provenance=provenance, review=review, trace=trace
            )
        return await self.store_.store(
            self.ref, changes, cursor=cursor, provenance=provenance, review=review
        )


def _as_bytes(path: str, content: Any) -> bytes:
    if isinstance(content, bytes):
        return content
    if isinstance(content, str):
        return content.encode("utf-8")
    raise InvalidName(
        f"load returned {type(content).__name__} content; use str or bytes", path=path
    )


def normalize_loaded(result: Any) -> Loaded:
    """Accept what an app's ``load`` returns: ``{path: str|bytes}`` or ``(files, cursor)``."""
    if isinstance(result, Loaded):
        # Content addresses are trusted only from stores: a wrong one from an
        # app would make the daemon serve another file's cached bytes.
        # An app's load is never lean: every file comes with its bytes.
        revisions = {p: r for p, r in result.revisions.items() if p in result.files}
        return result.model_copy(update={"shas": {}, "sizes": {}, "revisions": revisions})
    cursor: Any = None
    files: Any = result
    if isinstance(result, tuple):
        if len(result) != 2:
            raise InvalidName("load must return a mapping of files or a (files, cursor) pair")
        files, cursor = result
    if files is None:
        files = {}
    if not isinstance(files, Mapping):
        raise InvalidName("load must return a mapping of file paths to contents")
    out = {check_path(path): _as_bytes(path, content) for path, content in files.items()}
    return Loaded(
        files=out,
        cursor=None if cursor is None else str(cursor),
        revisions={path: digest(content) for path, content in out.items()},
    )


class AppSource:
    """An app-defined persistent dir: the app's ``load(ctx)`` and ``store(ctx, changes, cursor)``.

    ``store`` may return nothing (saved), a ``Stored``, or raise ``memfs.Conflict``
    (with ``paths``) when its own cursor check fails.
    """

    def __init__(self, spec: PersistentDir, ctx: TurnContext) -> None:
        self.spec = spec
        self.ctx = ctx

    async def load(self, have: Container[str] | None = None) -> Loaded:
        return normalize_loaded(await self.spec.load(self.ctx))

    async def store(
        self,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        # An app-defined dir is never reviewed: ``review`` is not the app's.
        try:
            result = self.spec.store(self.ctx, changes, cursor)
            if inspect.isawaitable(result):
                result = await result
        except Conflict as exc:
            return Stored(status="conflict", conflicts=exc.paths or changes.paths)
        if isinstance(result, Stored):
            return result
        return Stored(
            status="saved",
            revisions={p: digest(c) for p, c in {**changes.created, **changes.updated}.items()},
        )


__all__ = ["AppSource", "Source", "StoreSource", "normalize_loaded", "store_is"]
