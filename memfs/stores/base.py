"""The store protocol every backend implements.

``load`` gives a space's files, a cursor and the snapshot (which revision of
each file); ``store`` takes a change set with the cursor back and saves it,
or answers ``conflict`` naming the files that moved on since the snapshot.

Managed stores (memory, sqlite) check conflicts per file and keep every
revision with its provenance; the folder store keeps plain files and checks
the whole space.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from memfs.core.models import ChangeSet, Loaded, Provenance, Revision, SpaceRef, Stored


@runtime_checkable
class Store(Protocol):
    """What the turn engine needs of any store."""

    async def load(self, ref: SpaceRef, session: str) -> Loaded: ...

    async def store(
        self, ref: SpaceRef, changes: ChangeSet, *, cursor: str | None, provenance: Provenance
    ) -> Stored: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ManagedStore(Store, Protocol):
    """A store that keeps history: every revision, with where it came from."""

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        """Every revision of ``path``, oldest first, deletions included."""
        ...

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        """The live files of a space, as turns load them."""
        ...

    async def put(self, ref: SpaceRef, changes: ChangeSet, *, provenance: Provenance) -> Stored:
        """A person's edit outside any turn: applied at once, no snapshot to check."""
        ...

    async def spaces(self) -> list[SpaceRef]:
        """Every space that has ever held a file."""
        ...


__all__ = ["ManagedStore", "Store"]
