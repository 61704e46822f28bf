"""``memfs.testing.test_memory()``: an in-memory store for an app's tests, with sync helpers.

Pass ``.store`` to ``memfs.Memory``; the helpers look inside it (live files,
every accepted change set, what waits for review) and act as a person would
(put, approve, reject, set review) without an event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memfs.core.models import DEFAULT_ORG, By, ChangeSet, Provenance, SpaceRef
from memfs.core.review import ReviewMode
from memfs.stores.memory import MemoryStore


class TestMemory:
    """An in-memory store for an app's tests, with sync helpers to look inside it."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self) -> None:
        self.store = MemoryStore()

    @staticmethod
    def _ref(space: str, org: str, user: str | None) -> SpaceRef:
        return SpaceRef(layer="org" if user is None else "user", space=space, org=org, user=user)

    def files(
        self, space: str, *, org: str = DEFAULT_ORG, user: str | None = None
    ) -> dict[str, bytes]:
        """The live files of an org space, or of ``user``'s space when given."""
        return self.store.files_nowait(self._ref(space, org, user))

    def changes(self) -> list[dict[str, Any]]:
        """Every change set the store accepted, oldest first."""
        return [
            {
                "space": event.ref.space,
                "layer": event.ref.layer,
                "org": event.ref.org,
                "user": event.ref.user,
                "status": event.status,
                "created": dict(event.changes.created),
                "updated": dict(event.changes.updated),
                "deleted": list(event.changes.deleted),
                "session": event.provenance.session,
                "turn": event.provenance.turn,
                "prompt": event.provenance.prompt,
                "origin": event.provenance.origin,
                "by": None if event.provenance.by is None else event.provenance.by.model_dump(),
            }
            for event in self.store.events
        ]

    def put(
        self,
        space: str,
        files: Mapping[str, bytes | str | None],
        *,
        org: str = DEFAULT_ORG,
        user: str | None = None,
        by: Mapping[str, Any] | str | None = None,
    ) -> None:
        """A person's edit: write (or, with ``None``, delete) files at once, origin ``edited``."""
        ref = self._ref(space, org, user)
        live = self.store.files_nowait(ref)
        created: dict[str, bytes] = {}
        updated: dict[str, bytes] = {}
        deleted: list[str] = []
        for path, content in files.items():
            if content is None:
                deleted.append(path)
                continue
            data = content.encode() if isinstance(content, str) else content
            (updated if path in live else created)[path] = data
        self.store.put_nowait(
            ref,
            ChangeSet(created=created, updated=updated, deleted=tuple(deleted)),
            provenance=Provenance(origin="edited", by=By.coerce(by)),
        )

    def waiting(self, *, org: str | None = None) -> list[dict[str, Any]]:
        """Changes that wait for (or, under review ``after``, are listed for) a person."""
        return [
            {
                "id": change.id,
                "space": change.ref.space,
                "org": change.ref.org,
                "session": change.session,
                "state": change.state,
                "files": {path: file.content for path, file in change.files.items()},
                "stale": list(change.stale_paths),
                # What the reviewer saw, for approve/reject to name back.
                "version": change.version,
                "live_version": change.live_version,
                "prompt": change.provenance.prompt,
                "by": None if change.provenance.by is None else change.provenance.by.model_dump(),
            }
            for change in self.store.list_changes_nowait(org=org)
        ]

    def approve(
        self,
        id: str,
        *,
        paths: list[str] | None = None,
        by: Mapping[str, Any] | str = "reviewer",
        force: bool = False,
        version: str | None = None,
        live_version: str | None = None,
    ) -> None:
        """A person approves a change (or some of its files); a stale file needs ``force``.

        ``version`` and ``live_version``, as :meth:`waiting` listed them: the
        change and the live files the person saw; either moved since is a
        ``Conflict`` (:func:`memfs.core.review.decide`).
        """
        self.store.decide_nowait(
            id,
            "approve",
            by=By.coerce(by),
            paths=paths,
            force=force,
            version=version,
            live_version=live_version,
        )

    def reject(
        self,
        id: str,
        *,
        paths: list[str] | None = None,
        by: Mapping[str, Any] | str = "reviewer",
        version: str | None = None,
    ) -> None:
        """A person rejects a change (or some of its files), as listed at ``version`` if named."""
        self.store.decide_nowait(id, "reject", by=By.coerce(by), paths=paths, version=version)

    def set_review(
        self, space: str, mode: ReviewMode, *, org: str = DEFAULT_ORG, by: str = "admin"
    ) -> None:
        """An admin sets an org space's review: ``person``, ``after`` or ``none``."""
        self.store.set_review_nowait(self._ref(space, org, None), mode, by=By.coerce(by))


def test_memory() -> TestMemory:
    """A fresh in-memory store with helpers; pass ``.store`` to ``memfs.Memory``."""
    return TestMemory()


test_memory.__test__ = False  # type: ignore[attr-defined]


__all__ = ["TestMemory", "test_memory"]
