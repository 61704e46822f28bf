"""The in-process store: managed semantics (revisions, per-file conflicts) in plain dicts.

Used by ``memfs.testing`` and for tests of apps built on memfs. Every method
runs without awaiting in between reads and writes, so each is atomic with
respect to other trio tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memfs.core.errors import InvalidName, NotFound
from memfs.core.models import (
    By,
    ChangeSet,
    Loaded,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
    digest,
)
from memfs.core.names import check_path
from memfs.core.policy import moved_on, parse_cursor, purged_since


@dataclass
class _Space:
    live: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # path -> (revision, content)
    last_change: dict[str, int] = field(default_factory=dict)  # path -> seq of last revision
    history: dict[str, list[Revision]] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)  # revision -> content, for restore
    seq: int = 0


@dataclass(frozen=True)
class StoredEvent:
    """One change a store made, as ``memfs.testing`` reports it.

    ``status`` is ``saved`` for change sets, restores and forgetting an org
    file, and ``purged`` for forgetting a file of a person's own memory.
    """

    ref: SpaceRef
    changes: ChangeSet
    provenance: Provenance
    status: str


class MemoryStore:
    """A managed store that lives and dies with the process."""

    def __init__(self) -> None:
        self._spaces: dict[SpaceRef, _Space] = {}
        self._seq = 0
        self.events: list[StoredEvent] = []
        self.closed = False

    def _space(self, ref: SpaceRef) -> _Space:
        return self._spaces.setdefault(ref, _Space())

    async def load(self, ref: SpaceRef, session: str) -> Loaded:
        space = self._spaces.get(ref, _Space())
        return Loaded(
            files={path: content for path, (_, content) in space.live.items()},
            cursor=str(space.seq),
            revisions={path: rev for path, (rev, _) in space.live.items()},
        )

    async def store(
        self, ref: SpaceRef, changes: ChangeSet, *, cursor: str | None, provenance: Provenance
    ) -> Stored:
        space = self._space(ref)
        base = parse_cursor(cursor)
        if base is not None:
            conflicts = sorted(
                {
                    *moved_on(changes.paths, space.last_change, base),
                    *purged_since(changes, space.last_change),
                }
            )
            if conflicts:
                return Stored(status="conflict", conflicts=tuple(conflicts), cursor=str(space.seq))
        return self._apply(ref, space, changes, provenance)

    async def put(self, ref: SpaceRef, changes: ChangeSet, *, provenance: Provenance) -> Stored:
        return self.put_nowait(ref, changes, provenance=provenance)

    def _apply(
        self, ref: SpaceRef, space: _Space, changes: ChangeSet, provenance: Provenance
    ) -> Stored:
        for path in changes.deleted:
            check_path(path)
            if path not in space.live:
                raise InvalidName("cannot delete a file the space does not hold", path=path)
        written: dict[str, str] = {}
        for path, content in sorted({**changes.created, **changes.updated}.items()):
            written[path] = self._record(space, path, content, provenance)
        for path in changes.deleted:
            written[path] = self._record(space, path, None, provenance)
        self.events.append(StoredEvent(ref, changes, provenance, "saved"))
        return Stored(status="saved", revisions=written, cursor=str(space.seq))

    def _record(
        self, space: _Space, path: str, content: bytes | None, provenance: Provenance
    ) -> str:
        rev = self._next(space)
        space.history.setdefault(path, []).append(
            Revision(
                id=rev,
                path=path,
                sha256=None if content is None else digest(content),
                size=0 if content is None else len(content),
                deleted=content is None,
                provenance=provenance,
            )
        )
        space.last_change[path] = self._seq
        if content is None:
            del space.live[path]
        else:
            space.contents[rev] = content
            space.live[path] = (rev, content)
        return rev

    def _next(self, space: _Space) -> str:
        """Take the next sequence number, which becomes the space's cursor."""
        self._seq += 1
        space.seq = self._seq
        return str(self._seq)

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        check_path(path)
        return list(self._spaces.get(ref, _Space()).history.get(path, []))

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        return self.files_nowait(ref)

    def files_nowait(self, ref: SpaceRef) -> dict[str, bytes]:
        space = self._spaces.get(ref, _Space())
        return {path: content for path, (_, content) in space.live.items()}

    def put_nowait(self, ref: SpaceRef, changes: ChangeSet, *, provenance: Provenance) -> Stored:
        return self._apply(ref, self._space(ref), changes, provenance)

    async def restore(self, ref: SpaceRef, path: str, revision: str, *, by: By | None) -> Stored:
        check_path(path)
        space = self._spaces.get(ref, _Space())
        found = next((r for r in space.history.get(path, []) if r.id == revision), None)
        if found is None:
            raise NotFound(f"{path!r} in {ref} has no revision {revision!r}", path=path)
        if found.deleted:
            raise NotFound(f"revision {revision!r} deleted {path!r}; it has no content", path=path)
        content = space.contents[revision]
        changes = (
            ChangeSet(updated={path: content})
            if path in space.live
            else ChangeSet(created={path: content})
        )
        return self._apply(ref, space, changes, Provenance(origin="edited", by=by))

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        check_path(path)
        if ref.layer == "user":
            return self._purge(ref, path, by)
        space = self._spaces.get(ref, _Space())
        if path not in space.live:
            raise NotFound(f"{ref} holds no file {path!r} to forget", path=path)
        return self._apply(
            ref, space, ChangeSet(deleted=(path,)), Provenance(origin="edited", by=by)
        )

    def _purge(self, ref: SpaceRef, path: str, by: By | None) -> Stored:
        space = self._spaces.get(ref)
        if space is None or path not in space.history:
            raise NotFound(f"{ref} holds nothing of {path!r} to forget", path=path)
        for revision in space.history.pop(path):
            space.contents.pop(revision.id, None)
        space.live.pop(path, None)
        space.last_change.pop(path, None)
        # The space changed, so its cursor moves on, though no revision records it.
        self._next(space)
        # The event log is part of the store: earlier events must not keep the
        # content either. Events that touched only this file go entirely, with
        # the prompt that came with them.
        scrubbed: list[StoredEvent] = []
        for event in self.events:
            if event.ref == ref and event.status != "purged" and path in event.changes.paths:
                rest = event.changes.without([path])
                if rest.is_empty():
                    continue
                event = StoredEvent(event.ref, rest, event.provenance, event.status)
            scrubbed.append(event)
        scrubbed.append(
            StoredEvent(
                ref, ChangeSet(deleted=(path,)), Provenance(origin="edited", by=by), "purged"
            )
        )
        self.events = scrubbed
        return Stored(status="saved", cursor=str(space.seq))

    async def spaces(self) -> list[SpaceRef]:
        return sorted((ref for ref, space in self._spaces.items() if space.history), key=str)

    async def aclose(self) -> None:
        self.closed = True


__all__ = ["MemoryStore", "StoredEvent"]
