"""The in-process store: managed semantics (revisions, per-file conflicts) in plain dicts.

Used by ``memfs.testing`` and for tests of apps built on memfs. Every method
runs without awaiting in between reads and writes, so each is atomic with
respect to other trio tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memfs.core.errors import InvalidName
from memfs.core.models import (
    ChangeSet,
    Loaded,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
    digest,
)
from memfs.core.names import check_path
from memfs.core.policy import moved_on, parse_cursor


@dataclass
class _Space:
    live: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # path -> (revision, content)
    last_change: dict[str, int] = field(default_factory=dict)  # path -> seq of last revision
    history: dict[str, list[Revision]] = field(default_factory=dict)
    seq: int = 0


@dataclass(frozen=True)
class StoredEvent:
    """One change set a store accepted, as ``memfs.testing`` reports it."""

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
            conflicts = moved_on(changes.paths, space.last_change, base)
            if conflicts:
                return Stored(status="conflict", conflicts=conflicts, cursor=str(space.seq))
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
        self._seq += 1
        space.seq = self._seq
        rev = str(self._seq)
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
            space.live[path] = (rev, content)
        return rev

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

    async def spaces(self) -> list[SpaceRef]:
        return sorted((ref for ref, space in self._spaces.items() if space.history), key=str)

    async def aclose(self) -> None:
        self.closed = True


__all__ = ["MemoryStore", "StoredEvent"]
