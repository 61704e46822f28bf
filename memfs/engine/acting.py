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

Names are checked here, first, for every door (the CLI, Python callers and
the web API alike): a space name (:func:`memfs.core.names.check_space_name`),
a file path (:func:`~memfs.core.names.check_path`; a path ``put`` creates is
a new name, :func:`~memfs.core.names.check_new_name` for each segment) and a
person's id (:func:`memfs.core.members.check_member_id`) that break the rules
are ``InvalidName`` before the role is asked or the store is touched, so a bad
name changes nothing.

``put`` writes one file of an org space live at once (members and admins):
no review, a new revision of origin ``edited`` authored by the actor, within
``limits``, and the store records it in its audit log (``put``) in the same
transaction as the write.

What turns carried and did (:mod:`memfs.core.story`) is read from the
store's traces and its as-of answers: ``session_story``, ``carried`` (one
turn, exactly as of its cursors), ``life`` (one file), ``usage`` (a space's
files, opens in the last 30 days) and ``inbox`` (waiting changes and spaces
with "No room in the note"). Viewers and up read them for the org's
memory; a session or turn is this org's when its trace mounted this org's
spaces (another org's reads as missing). A person's mounts show counts
only, and whose they are only to admins; an admin's ``carried(open=True)``
or ``life(user=...)`` shows their files, audited as every look at a person.
"""

from __future__ import annotations

from typing import Literal

from memfs.core import story
from memfs.core.audit import AUDIT_PAGE, AuditCheck, AuditPage, check_limit
from memfs.core.errors import BadRequest, ConfigError, NotFound
from memfs.core.members import check_member_id
from memfs.core.models import (
    DEFAULT_ORG,
    AsOfFile,
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
    Trace,
    now,
)
from memfs.core.names import check_identity, check_new_name, check_path, check_space_name
from memfs.core.review import ReviewMode, WaitingChange
from memfs.core.roles import Role, allowed, people_view, require, require_same_org
from memfs.stores.base import ManagedStore, PersonForgetting, ReviewingStore, Store

_UNMANAGED = "this store keeps no history or review; use sqlite, postgresql or memory"


def _check_file(space: str, path: str, user: str | None = None) -> None:
    """A file named by a caller obeys the name rules (and its person's id, if any)."""
    check_space_name(space)
    check_path(path)
    if user is not None:
        check_member_id(user, what="user id")


def _check_paths(paths: list[str] | None) -> None:
    for path in paths or ():
        check_path(path)


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
        # Checked as any id is: it goes into revisions and the audit log.
        self.by = By(id=check_identity(actor, what="actor id"), role=role)
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
        version: str | None = None,
        live_version: str | None = None,
    ) -> WaitingChange:
        """A reviewer's move; applying a stale file needs ``force`` (else ``Conflict``).

        ``version``: the change's version the reviewer was shown; a change
        that has changed since is a ``Conflict`` (:func:`memfs.core.review.decide`).
        ``live_version``: the change's live version the reviewer was shown; a
        chosen file whose live file changed since is a ``Conflict``, forced or not.
        """
        _check_paths(paths)
        _check_paths(list(edits or ()))
        require(self.role, "review")
        # A change never moves to another org, so checking it first is enough.
        await self._own_change(id)
        return await self._reviewing().decide(
            id,
            action,
            by=self.by,
            paths=paths,
            edits=edits,
            force=force,
            limits=self.limits,
            version=version,
            live_version=live_version,
        )

    async def approve(
        self,
        id: str,
        *,
        paths: list[str] | None = None,
        force: bool = False,
        version: str | None = None,
        live_version: str | None = None,
    ) -> WaitingChange:
        return await self.decide(
            id, "approve", paths=paths, force=force, version=version, live_version=live_version
        )

    async def reject(
        self, id: str, *, paths: list[str] | None = None, version: str | None = None
    ) -> WaitingChange:
        return await self.decide(id, "reject", paths=paths, version=version)

    async def edit(
        self,
        id: str,
        edits: dict[str, bytes | None],
        *,
        force: bool = False,
        version: str | None = None,
        live_version: str | None = None,
    ) -> WaitingChange:
        return await self.decide(
            id,
            "edit",
            paths=list(edits),
            edits=edits,
            force=force,
            version=version,
            live_version=live_version,
        )

    async def set_review(self, space: str, mode: ReviewMode) -> None:
        check_space_name(space)
        require(self.role, "set-review")
        await self._reviewing().set_review(self.org_space(space), mode, by=self.by)

    async def history(self, space: str, path: str, *, user: str | None = None) -> list[Revision]:
        _check_file(space, path, user)
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
        _check_file(space, path)
        require(self.role, "restore")
        return await self.store.restore(self.org_space(space), path, revision, by=self.by)

    async def forget(self, space: str, path: str, *, user: str | None = None) -> Stored:
        _check_file(space, path, user)
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
        check_member_id(user, what="user id")
        require(self.role, "forget-user")
        return await self._store.forget_user(user, self.org, by=self.by)

    async def put(self, space: str, path: str, content: bytes) -> Stored:
        """Add or replace one live file of an org space, at once and audited; within ``limits``."""
        _check_file(space, path)
        # The file may be new, so its name is a new name: no control characters.
        for segment in path.split("/"):
            check_new_name(segment, what="file path segment")
        require(self.role, "put")
        ref = self.org_space(space)
        changes = ChangeSet(created={path: content})
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
        check_space_name(space)
        require(self.role, "read")
        return await self.store.files(self.org_space(space))

    async def file(self, space: str, path: str) -> bytes:
        """One live file of an org space; ``NotFound`` if the space holds none at ``path``."""
        _check_file(space, path)
        files = await self.files(space)
        if path not in files:
            raise NotFound("no such file", path=f"{space}/{path}")
        return files[path]

    async def live_origins(self, space: str) -> dict[str, LiveOrigin]:
        """Each live file of an org space: its size and its latest revision's origin (the map)."""
        check_space_name(space)
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
        """An admin opens a person's memory; the store records it in the audit log.

        A person whose own memory holds no file in this org (another org's
        among them) is ``NotFound``, the same for both, and nothing is audited:
        there is nothing to look at.
        """
        check_member_id(user, what="user id")
        require(self.role, "open")
        store = self.store
        if not any(ref.user == user for ref in await store.people(self.org)):
            raise NotFound("nobody of this id has memory in this org", path=user)
        return await store.open_person(user, self.org, by=self.by)

    async def audit(
        self, *, before: str | None = None, limit: int | None = None
    ) -> list[AuditEntry]:
        """The org's audit log, oldest first; a page of it with ``before`` and ``limit``."""
        require(self.role, "open")
        return await self.store.audit(org=self.org, before=before, limit=limit)

    async def audit_page(self, *, before: str | None = None, limit: int = AUDIT_PAGE) -> AuditPage:
        """The newest ``limit`` entries before entry ``before``, and where older ones start."""
        # One more than shown: whether an older page exists, without counting the log.
        entries = await self.audit(before=before, limit=check_limit(limit) + 1)
        if len(entries) <= limit:
            return AuditPage(entries=entries, older=None)
        shown = entries[1:]
        return AuditPage(entries=shown, older=shown[0].id)

    async def verify_audit(self) -> AuditCheck:
        """Check the store's whole audit chain (every org: the chain is one); admins only."""
        require(self.role, "verify-audit")
        return await self.store.verify_audit()

    # -- what turns carried and did (memfs.core.story) ------------------------------

    def _org_traces(self, traces: list[Trace], missing: NotFound) -> list[Trace]:
        """The traces of this org's turns; ``missing`` if none (another org's read the same)."""
        mine = [t for t in traces if t.org() == self.org]
        if not mine:
            raise missing
        return mine

    async def _as_of(
        self, ref: SpaceRef, cursor: str | None, *, look: bool = False
    ) -> dict[str, AsOfFile] | None:
        """The space as of ``cursor``; None when the store cannot say (no cursor, not its own).

        ``look``: an admin opening a person's memory, so the read is audited.
        """
        if look:
            # Even a mount without a cursor is a look inside, and recorded as one:
            # "0" is before anything the store ever numbered, so it reads nothing.
            try:
                return await self.store.open_files_as_of(ref, cursor or "0", by=self.by)
            except NotFound:
                return None
        if cursor is None:
            return None
        try:
            return await self.store.files_as_of(ref, cursor)
        except NotFound:
            return None

    async def session_story(
        self, session: str, *, before: str | None = None, limit: int = story.STORY_PAGE
    ) -> story.SessionStory:
        """Each turn of a session: prompt, time, and per mount what it carried and did.

        A page of it: the latest ``limit`` turns before turn ``before``
        (:func:`memfs.core.story.story_page`). A person's mounts name no file
        here (counts only), and whose they are only to admins; ``carried``
        with ``open`` shows an admin their files.
        """
        check_identity(session, what="session id")
        require(self.role, "read")
        missing = NotFound("no such session", path=session)
        every = self._org_traces(await self.store.traces(session=session), missing)
        traces, earlier = story.story_page(every, before, limit)
        known: dict[tuple[SpaceRef, str | None], dict[str, AsOfFile] | None] = {}
        show_user = allowed(self.role, "open")
        turns = []
        for trace in traces:
            lines = []
            for name, mount in trace.mounts.items():
                key = (mount.ref, mount.cursor)
                if key not in known:  # turns between two writes share a cursor
                    known[key] = await self._as_of(mount.ref, mount.cursor)
                as_of = known[key]
                carried = None if as_of is None else story.carried_count(mount, as_of)
                lines.append(
                    story.mount_line(
                        trace,
                        name,
                        carried=carried,
                        closed=mount.ref.layer == "user",
                        show_user=show_user,
                    )
                )
            turns.append(
                story.TurnLine(
                    session=trace.session,
                    turn=trace.turn,
                    prompt=trace.prompt,
                    at=trace.at,
                    mounts=tuple(lines),
                )
            )
        return story.SessionStory(session=session, turns=tuple(turns), earlier=earlier)

    async def carried(
        self, turn: str, *, session: str | None = None, open: bool = False
    ) -> story.Carried:
        """Exactly what one turn carried, as of its cursors, with what it opened and saved.

        A turn id is unique within its session only: without ``session``, a
        turn id that several of this org's sessions used is a ``BadRequest``.
        A person's mount shows counts only, unless an admin asks ``open``,
        which is audited (an ``open`` entry per person's mount, as
        ``open_history`` records a look).
        """
        check_identity(turn, what="turn id")
        if session is not None:
            check_identity(session, what="session id")
        require(self.role, "read")
        if open:
            require(self.role, "open")
        missing = NotFound("no such turn", path=turn)
        found = self._org_traces(await self.store.find_traces(turn=turn), missing)
        if session is not None:
            found = [t for t in found if t.session == session]
            if not found:
                raise missing
        if len(found) > 1:
            raise BadRequest(
                "this turn id was used in several sessions; name the session too", path=turn
            )
        [trace] = found
        mounts = []
        for name, mount in trace.mounts.items():
            person = mount.ref.layer == "user"
            as_of = await self._as_of(mount.ref, mount.cursor, look=person and open)
            mounts.append(
                story.carried_mount(
                    trace,
                    name,
                    as_of,
                    closed=person and not open,
                    show_user=allowed(self.role, "open"),
                )
            )
        return story.Carried(
            session=trace.session,
            turn=trace.turn,
            prompt=trace.prompt,
            at=trace.at,
            mounts=tuple(mounts),
        )

    async def life(self, space: str, path: str, *, user: str | None = None) -> story.FileLife:
        """The Life of one file: turns that carried and opened it per day, last open, timeline.

        Of an org space for every reader; of a person's (``user``) for admins
        only, and the look is audited (``open_history``).
        """
        _check_file(space, path, user)
        if user is None:
            require(self.role, "read")
            ref = self.org_space(space)
            history = await self.store.history(ref, path)
        else:
            require(self.role, "open")
            ref = SpaceRef(layer="user", space=space, org=self.org, user=user)
            history = await self.store.open_history(ref, path, by=self.by)
        traces = await self.store.find_traces(space=ref)
        life = story.file_life(ref, path, history, traces)
        if not history and life.carried_turns == 0 and life.opened_turns == 0:
            raise NotFound("no such file", path=f"{space}/{path}")
        return life

    async def usage(self, space: str, *, days: int = story.USAGE_DAYS) -> story.SpaceUsage:
        """Per live file of an org space: the turns that opened it in the last ``days`` days.

        ``days`` is 1 to :data:`memfs.core.story.MAX_USAGE_DAYS`; past that, ``BadRequest``.
        """
        check_space_name(space)
        if not 1 <= days <= story.MAX_USAGE_DAYS:
            raise BadRequest(
                f"usage counts over 1 to at most {story.MAX_USAGE_DAYS} days, not {days}",
                path=space,
            )
        require(self.role, "read")
        if space not in await self.spaces():
            raise NotFound("no such space", path=space)
        ref = self.org_space(space)
        paths = await self.store.files(ref)
        traces = await self.store.find_traces(space=ref)
        return story.space_usage(ref, paths, traces, at=now(), days=days)

    async def inbox(self) -> story.Inbox:
        """Waiting changes, and the org spaces whose files no longer fit the note's file list."""
        require(self.role, "read")
        changes = await self.waiting()
        crowded = []
        for space in sorted(await self.spaces()):
            files = await self.store.files(self.org_space(space))
            sizes = {path: len(content) for path, content in files.items()}
            full = story.no_room(space, sizes, self.limits.note_file_list_bytes)
            if full is not None:
                crowded.append(full)
        return story.Inbox(changes=tuple(changes), no_room=tuple(crowded))


def act_as(
    store: Store, actor: str, role: Role, *, org: str = DEFAULT_ORG, limits: Limits | None = None
) -> Acting:
    """A person's hands on ``store``: every method checks the role first."""
    return Acting(store, actor, role, org=org, limits=limits)


__all__ = ["Acting", "act_as"]
