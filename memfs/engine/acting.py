"""People acting on memory from Python: an explicit actor with a role, the same rules as the CLI.

``memfs.act_as(store, "ada", "member")`` gives an :class:`Acting` whose every
method first asks :func:`memfs.core.roles.require`; the store records the
sensitive acts (approve, reject, edit, restore, forget, forget-user, open,
review settings) in its audit log with this actor.

An actor acts in one org, and this class is where that holds for every door
(the CLI and Python callers alike): spaces, files and people are looked up in
that org only, and a change of another org is the same ``NotFound``, with the
same message, as a change that does not exist
(:func:`memfs.core.roles.require_same_org`). Reading a person's memory
(their files or a file's history) goes through the store's audited
``open_person``/``open_history``. Reviewer edits obey ``limits``, as turns do.

Every act needs a managed store, except ``forget_user``: any store that
forgets people (``PersonForgetting``, the folder store among them) will do,
still role-checked, and audited where the store keeps an audit log. A store
that cannot even forget people is a ``ConfigError`` at once; a folder store's
other acts are a ``ConfigError`` when asked.

``put`` writes one file of an org space live at once (members and admins):
no review, a new revision of origin ``edited`` authored by the actor, within
``limits``, and the store records it in its audit log (``put``) in the same
transaction as the write.
"""

from __future__ import annotations

from typing import Literal

from memfs.core.audit import AuditCheck
from memfs.core.errors import ConfigError, NotFound
from memfs.core.models import (
    DEFAULT_ORG,
    AuditEntry,
    By,
    ChangeSet,
    Forgot,
    Limits,
    LiveOrigin,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
)
from memfs.core.review import ReviewMode, WaitingChange
from memfs.core.roles import Role, people_view, require, require_same_org
from memfs.stores.base import ManagedStore, PersonForgetting, ReviewingStore, Store

_UNMANAGED = "this store keeps no history or review; use sqlite or memory"


class Acting:
    """One person's hands on a store, in one org."""

    def __init__(
        self,
        store: Store,
        actor: str,
        role: Role,
        *,
        org: str = DEFAULT_ORG,
        limits: Limits | None = None,
    ) -> None:
        # A store that only forgets people (the folder store) may still be
        # acted on for that: ``forget_user``. Everything else needs a managed
        # store, and says so when asked (``store``).
        if not isinstance(store, PersonForgetting):
            raise ConfigError(_UNMANAGED)
        self._store: PersonForgetting = store
        self.by = By(id=actor, role=role)
        self.role: Role = role
        self.org = org
        self.limits = limits or Limits()

    @property
    def store(self) -> ManagedStore:
        """The store, for every act but ``forget_user``: ``ConfigError`` unless it is managed."""
        if not isinstance(self._store, ManagedStore):
            raise ConfigError(_UNMANAGED)
        return self._store

    def _reviewing(self) -> ReviewingStore:
        store = self.store
        if not isinstance(store, ReviewingStore):
            raise ConfigError("this store holds no changes for review")
        return store

    def org_space(self, space: str) -> SpaceRef:
        return SpaceRef(layer="org", space=space, org=self.org)

    async def waiting(self) -> list[WaitingChange]:
        require(self.role, "read")
        return await self._reviewing().list_changes(org=self.org)

    async def _own_change(self, id: str) -> WaitingChange:
        """The change ``id`` if it is of this org; missing and foreign read the same."""
        missing = NotFound("no change is held for review under this id", path=id)
        try:
            change = await self._reviewing().get_change(id)
        except NotFound:
            raise missing from None
        require_same_org(self.org, change.ref.org, missing)
        return change

    async def change(self, id: str) -> WaitingChange:
        require(self.role, "read")
        return await self._own_change(id)

    async def decide(
        self,
        id: str,
        action: Literal["approve", "edit", "reject"],
        *,
        paths: list[str] | None = None,
        edits: dict[str, bytes | None] | None = None,
        force: bool = False,
    ) -> WaitingChange:
        """A reviewer's move; applying a stale file needs ``force`` (else ``Conflict``)."""
        require(self.role, "review")
        # A change never moves to another org, so checking it first is enough.
        await self._own_change(id)
        return await self._reviewing().decide(
            id, action, by=self.by, paths=paths, edits=edits, force=force, limits=self.limits
        )

    async def approve(
        self, id: str, *, paths: list[str] | None = None, force: bool = False
    ) -> WaitingChange:
        return await self.decide(id, "approve", paths=paths, force=force)

    async def reject(self, id: str, *, paths: list[str] | None = None) -> WaitingChange:
        return await self.decide(id, "reject", paths=paths)

    async def edit(
        self, id: str, edits: dict[str, bytes | None], *, force: bool = False
    ) -> WaitingChange:
        return await self.decide(id, "edit", paths=list(edits), edits=edits, force=force)

    async def set_review(self, space: str, mode: ReviewMode) -> None:
        require(self.role, "set-review")
        await self._reviewing().set_review(self.org_space(space), mode, by=self.by)

    async def history(self, space: str, path: str, *, user: str | None = None) -> list[Revision]:
        if user is None:
            require(self.role, "read")
            ref = self.org_space(space)
        else:
            require(self.role, "open")
            ref = SpaceRef(layer="user", space=space, org=self.org, user=user)
            # Reading a person's revisions (their prompts among them) is a look inside.
            return await self.store.open_history(ref, path, by=self.by)
        return await self.store.history(ref, path)

    async def restore(self, space: str, path: str, revision: str) -> Stored:
        require(self.role, "restore")
        return await self.store.restore(self.org_space(space), path, revision, by=self.by)

    async def forget(self, space: str, path: str, *, user: str | None = None) -> Stored:
        if user is None:
            require(self.role, "forget")
            ref = self.org_space(space)
        else:
            require(self.role, "forget-user")
            ref = SpaceRef(layer="user", space=space, org=self.org, user=user)
        return await self.store.forget_file(ref, path, by=self.by)

    async def forget_user(self, user: str) -> Forgot:
        """Erase ``user``'s own memory in this org; says which spaces and how many files went.

        Any store that forgets people will do (the folder store too): the role
        is checked all the same, and a store with an audit log records the act.
        """
        require(self.role, "forget-user")
        return await self._store.forget_user(user, self.org, by=self.by)

    async def put(self, space: str, path: str, content: bytes) -> Stored:
        """Add or replace one live file of an org space, at once and audited; within ``limits``."""
        require(self.role, "put")
        ref = self.org_space(space)
        changes = ChangeSet(created={path: content})  # checks the path before the store is asked
        revisions = await self.store.history(ref, path)
        if revisions and not revisions[-1].deleted:
            changes = ChangeSet(updated={path: content})
        return await self.store.put(
            ref, changes, provenance=Provenance(origin="edited", by=self.by), limits=self.limits
        )

    async def spaces(self) -> dict[str, ReviewMode | None]:
        """This org's spaces that hold history, each with its review setting (None: unset)."""
        require(self.role, "read")
        store = self.store
        found: dict[str, ReviewMode | None] = {}
        for ref in await store.spaces():
            if ref.layer != "org" or ref.org != self.org:
                continue
            mode = await store.review_mode(ref) if isinstance(store, ReviewingStore) else None
            found[ref.space] = mode
        return found

    async def files(self, space: str) -> dict[str, bytes]:
        require(self.role, "read")
        return await self.store.files(self.org_space(space))

    async def live_origins(self, space: str) -> dict[str, LiveOrigin]:
        """Each live file of an org space: its size and its latest revision's origin (the map)."""
        require(self.role, "read")
        return await self.store.live_origins(self.org_space(space))

    async def people(self) -> list[dict[str, object]]:
        """Who has memory and how full it is, as this role may see it."""
        require(self.role, "read")
        return people_view(self.role, await self.store.people(self.org))

    async def people_by_name(self) -> list[dict[str, object]]:
        """Who has memory, by name (the People page): admins only, no files."""
        require(self.role, "open")
        return people_view(self.role, await self.store.people(self.org))

    async def open_person(self, user: str) -> dict[str, dict[str, bytes]]:
        """An admin opens a person's memory; the store records it in the audit log."""
        require(self.role, "open")
        return await self.store.open_person(user, self.org, by=self.by)

    async def audit(self) -> list[AuditEntry]:
        require(self.role, "open")
        return await self.store.audit(org=self.org)

    async def verify_audit(self) -> AuditCheck:
        """Check the store's whole audit chain (every org: the chain is one); admins only."""
        require(self.role, "verify-audit")
        return await self.store.verify_audit()


def act_as(
    store: Store, actor: str, role: Role, *, org: str = DEFAULT_ORG, limits: Limits | None = None
) -> Acting:
    """A person's hands on ``store``: every method checks the role first."""
    return Acting(store, actor, role, org=org, limits=limits)


__all__ = ["Acting", "act_as"]
