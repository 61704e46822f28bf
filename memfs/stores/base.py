"""The store protocol every backend implements.

``load`` gives a space's files, a cursor and the snapshot (which revision of
each file); ``store`` takes a change set with the cursor back and saves it,
or answers ``conflict`` naming the files that moved on since the snapshot.

Managed stores (memory, sqlite) check conflicts per file, keep every
revision with its provenance, restore earlier revisions and forget files; the
folder store keeps plain files and checks the whole space.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from memfs.core.audit import AuditCheck
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
from memfs.core.review import ReviewMode, WaitingChange


@runtime_checkable
class Store(Protocol):
    """What the turn engine needs of any store."""

    async def load(self, ref: SpaceRef, session: str) -> Loaded: ...

    async def store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        """Save ``changes``; ``review`` is the spec's mode for org spaces (stores without review
        save at once)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class LeanStore(Store, Protocol):
    """A store that can load a space without the bytes the caller already holds.

    The daemon keeps every file it has served in a content-addressed cache, so
    a turn start over a space it has seen needs only the names, sizes and
    sha256s: the cost of a turn grows with what changed, not with the space.
    """

    async def load_lean(self, ref: SpaceRef, session: str, have: Container[str]) -> Loaded:
        """``load``, except that a file whose sha256 is in ``have`` comes without its bytes.

        Every path is in ``revisions``, ``shas`` and ``sizes``; ``files`` holds
        the bytes of the rest.
        """
        ...

    async def contents(self, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
        """The bytes of revisions of ``ref`` by sha256; shas it never held are left out."""
        ...


@runtime_checkable
class ForgetLog(Store, Protocol):
    """A store that says whether a person's space was forgotten after a turn loaded it.

    A daemon that was down when a person was forgotten never got the notice;
    on restart it asks this of every open turn over a person's memory, so the
    turn drops what it still holds of them instead of serving it.
    """

    async def forgotten_since(self, ref: SpaceRef, cursor: str | None) -> bool:
        """Whether ``ref`` (a space or the whole person) was forgotten after ``cursor``."""
        ...

    async def forgotten_files_since(
        self, ref: SpaceRef, cursor: str | None, paths: Collection[str]
    ) -> Forgetting:
        """What of ``ref`` was forgotten after ``cursor``: the whole person, or which of ``paths``.

        A daemon asks this when it finds a forget nobody told it of (another
        process made it), so it drops just the forgotten files from an open
        turn, as the notice of a file forget would have, rather than the space.
        """
        ...

    async def person_forgotten_since(self, org: str, user: str, cursor: str | None) -> bool:
        """Whether ``user`` of ``org`` was forgotten whole after ``cursor`` (None: no).

        A daemon asks this of everyone whose words an open turn carries (a
        turn by them, not only one over their memory), to drop those words.
        """
        ...

    async def person_forgotten_at(self, org: str, user: str) -> str | None:
        """Where ``user`` of ``org`` was last forgotten whole (None: never), as an opaque mark.

        A new forget of them gives a new mark. A daemon notes the mark when a
        turn by them starts, and a later mark says a forget came after its words.
        """
        ...


@runtime_checkable
class PersonForgetting(Store, Protocol):
    """A store that can erase a person: every managed store, and the folder store."""

    async def forget_user(self, user: str, org: str, *, by: By | None) -> Forgot:
        """Erase everything ``user``'s own memory holds in ``org``, in every user-layer space.

        Files, every revision and anything else the store keeps of those
        spaces are purged, as ``forget_file`` purges one file, so nothing of
        them can be read back. Stored traces that mounted those spaces are
        rewritten in the same transaction without those mounts and their file
        entries; the rest of each trace (other people, the org) stays.

        Returns what went: the spaces that held anything (sorted) and how
        many files they held; ``Forgot()`` if nothing did (not an error).
        ``InvalidName`` for a user or org id that breaks the name rules.
        Other people and other orgs are untouched.
        """
        ...


@runtime_checkable
class Members(Protocol):
    """The people who may sign in, and their tokens: every managed store keeps them.

    Ids are per org: ``("ada", "bank-1")`` and ``("ada", "bank-2")`` are two
    people, and nothing done to one touches the other. A token belongs to one
    member; the store keeps only its hash (:func:`memfs.core.members.token_hash`)
    and resolves a presented token to the member as the store holds them now,
    so a role changed since applies at once and a removed member's token
    resolves to nothing. Every change below adds one audit entry in the same
    transaction, naming the actor (``by``) and the member id (``target``),
    never a token or its hash.
    """

    async def add_member(self, member: Member, *, by: By | None) -> Member:
        """Add ``member``, or change the role and label of the member of that id in that org.

        Audited as ``add-member`` (detail: the role) or ``change-member``
        (detail: what changed, never the label); a change to nothing is not
        audited. Returns the member as stored.
        """
        ...

    async def member(self, id: str, org: str) -> Member:
        """The member ``id`` of ``org``; ``NotFound`` if there is none."""
        ...

    async def members(self, org: str) -> list[Member]:
        """Every member of ``org``, by id."""
        ...

    async def remove_member(self, id: str, org: str, *, by: By | None) -> Member:
        """Remove a member, revoking every token of theirs (``remove-member``); ``NotFound``."""
        ...

    async def create_token(self, id: str, org: str, *, by: By | None) -> IssuedToken:
        """A new sign-in token for a member (``create-token``); its secret is returned once.

        A member may hold several tokens; each resolves until revoked.
        ``NotFound`` if there is no such member.
        """
        ...

    async def revoke_tokens(self, id: str, org: str, *, by: By | None) -> int:
        """Revoke every token of a member (``revoke-tokens``, detail the count); how many.

        ``NotFound`` if there is no such member; a member with no token is 0.
        """
        ...

    async def resolve_token(self, token: str) -> Member | None:
        """The member ``token`` signs in as, or None: unknown, revoked, malformed, removed."""
        ...

    async def record_signin(self, member: Member | None, *, client: str) -> None:
        """Audit a browser's sign-in: ``sign-in`` by ``member``, or ``sign-in-failed`` (None).

        ``client`` is who knocked (:func:`memfs.core.signin.client_key`), kept
        as the entry's ``detail``. A failed sign-in presented a token the
        store does not know, so it belongs to no org: its entry's org is
        :data:`memfs.core.signin.NO_ORG` and only the operator's unfiltered
        ``memfs audit`` lists it.
        """
        ...


@runtime_checkable
class ManagedStore(PersonForgetting, Members, Protocol):
    """A store that keeps history: every revision, with where it came from."""

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        """Every revision of ``path``, oldest first, deletions included."""
        ...

    async def open_history(self, ref: SpaceRef, path: str, *, by: By | None) -> list[Revision]:
        """``history`` on someone's behalf: of a person's own memory, the look is audited.

        The one way to read a person's revisions for someone else: a user-layer
        ``ref`` leaves an ``open`` entry (space, person, how many revisions,
        never the path) in the same transaction as the read.
        """
        ...

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        """The live files of a space, as turns load them."""
        ...

    async def live_origins(self, ref: SpaceRef) -> dict[str, LiveOrigin]:
        """Each live file of a space, by path: its size and its latest revision's origin.

        One answer for a whole space without reading a byte of content (the
        Memory map marks every file by where it came from). Not a look the
        store audits, like ``files``: the one way to read a person's files
        for someone else is ``open_person``.
        """
        ...

    async def put(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        provenance: Provenance,
        limits: Limits | None = None,
    ) -> Stored:
        """A person's edit outside any turn: applied at once, no snapshot to check.

        Past ``limits`` (the defaults if None) nothing is written: ``TooLarge``
        or ``SpaceFull`` (:func:`memfs.core.limits.require_within`). A put of
        origin ``edited`` (a person's hand) adds a ``put`` entry to the audit
        log, actor ``provenance.by``, in the same transaction as the write
        (:func:`memfs.core.audit.about_put`); one from code does not.
        """
        ...

    async def spaces(self) -> list[SpaceRef]:
        """Every space that holds a revision of any file."""
        ...

    async def restore(self, ref: SpaceRef, path: str, revision: str, *, by: By | None) -> Stored:
        """Make an earlier revision of ``path`` live again, as a new revision.

        The new revision has origin ``edited`` and ``by`` as its author; the
        history keeps every revision before it. A file deleted (or forgotten
        from the org layer) since comes back. ``NotFound`` if ``revision`` is
        not a revision of ``path`` in ``ref`` or is a deletion.
        """
        ...

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        """Take ``path`` out of what turns load; for a person's own memory, erase it entirely.

        Org and dir layers: a deletion revision (origin ``edited``, by ``by``);
        the history stays and ``restore`` brings the file back. ``NotFound``
        if the file is not live.

        User layer: the file and every revision of it are purged, so
        ``history`` is empty and nothing of its content can be read back from
        the store. ``NotFound`` if the store holds no revision of ``path``.
        """
        ...

    async def record_trace(self, trace: Trace) -> None:
        """Keep what one turn saw and did (the turn engine calls this as a turn ends)."""
        ...

    async def traces(self, *, session: str | None = None) -> list[Trace]:
        """Every kept trace (of ``session``, or all), oldest first."""
        ...

    async def find_traces(
        self,
        *,
        turn: str | None = None,
        space: SpaceRef | None = None,
        since: datetime | None = None,
    ) -> list[Trace]:
        """The kept traces of ``turn``, that mounted ``space``, ended at or after ``since``.

        Every filter given must hold; oldest first. For the pages that read
        across sessions (a file's Life, a space's usage, a turn named without
        its session) without loading every trace (:func:`memfs.core.story.trace_matches`).
        """
        ...

    async def files_as_of(self, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
        """The files of ``ref`` as a turn that loaded at ``cursor`` carried them, by path.

        Each file's revision, sha256 and size then (no bytes), even if it was
        edited, deleted or forgotten from the org layer since. The live files
        only: a conversation's own waiting change laid over its load is not
        here (the turn's trace names what it touched of it). A person's file
        forgotten since, or a forgotten person, is gone from the past too
        (``{}`` for the whole space). ``NotFound`` for a cursor this store did
        not issue (:func:`memfs.core.story.as_of_cursor`). Not audited: the one
        way to read a person's for someone else is ``open_files_as_of``.
        """
        ...

    async def open_files_as_of(
        self, ref: SpaceRef, cursor: str, *, by: By | None
    ) -> dict[str, AsOfFile]:
        """``files_as_of`` on someone's behalf: of a person's own memory, the look is audited.

        A user-layer ``ref`` leaves an ``open`` entry (space, person, how many
        files, never a path) in the same transaction as the read, and one
        (detail ``memfs.core.audit.UNKNOWN_CURSOR``) where ``cursor`` is not
        the store's and this raises ``NotFound``: the caller shows what a
        turn's trace kept instead, which is a look inside all the same.
        """
        ...

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        """The live files of ``user``'s own memory in ``org``: space name -> path -> content.

        Spaces without live files are left out.
        """
        ...

    async def open_person(
        self, user: str, org: str, *, by: By | None
    ) -> dict[str, dict[str, bytes]]:
        """What an admin sees on opening ``user``'s memory: ``user_files``, and the act is audited.

        The one way to read a person's files on someone else's behalf, so
        every look leaves an ``open`` entry naming the person and who looked.
        """
        ...

    async def people(self, org: str) -> dict[SpaceRef, int]:
        """Every user-layer space of ``org`` with live files, and its live size in bytes.

        Sizes only: what :func:`memfs.core.roles.people_view` shows of a
        person's memory without opening it.
        """
        ...

    async def audit(
        self, *, org: str | None = None, before: str | None = None, limit: int | None = None
    ) -> list[AuditEntry]:
        """The audit log (of ``org``, or all), oldest first.

        A page of it (:func:`memfs.core.audit.page`): with ``before``, an
        entry's id, only the entries written before that one; with ``limit``,
        only the newest ``limit`` of those.

        Every ``decide``, ``restore``, ``forget_file``, ``forget_user``,
        ``set_review``, ``open_person`` and edited ``put`` adds one entry in the same
        transaction as the act, and so does every change to members and tokens
        (:class:`Members`). There is no way to change or remove an entry.
        """
        ...

    async def verify_audit(self) -> AuditCheck:
        """Check the audit log's hash chain over every entry (every org).

        ``AuditTampered`` names the first entry where the chain breaks (see
        :mod:`memfs.core.audit`); otherwise how many entries it holds and the
        hash of the last, to keep elsewhere as an anchor.
        """
        ...


@runtime_checkable
class ReviewingStore(ManagedStore, Protocol):
    """A managed store that holds org changes for a person (see :mod:`memfs.core.review`).

    Under review ``person`` a turn's change to an org space becomes the
    conversation's waiting change (``Stored.status == "waiting"``), which
    ``load`` shows to that conversation only; under ``after`` it is live and
    listed; under ``none`` live. The space's own setting (``set_review``) wins
    over the mode a turn passes. The user layer always saves at once.
    """

    async def set_review(self, ref: SpaceRef, mode: ReviewMode, *, by: By | None) -> None: ...

    async def review_mode(self, ref: SpaceRef) -> ReviewMode | None: ...

    async def list_changes(
        self, *, org: str | None = None, open_only: bool = True
    ) -> list[WaitingChange]:
        """Changes listed for review, oldest first, each with its stale files marked."""
        ...

    async def get_change(self, id: str) -> WaitingChange: ...

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
        """Approve, edit-then-approve or reject some files (all by default) of a change.

        The rules are :func:`memfs.core.review.decide`'s: applying a stale file
        needs ``force`` (else ``Conflict`` naming the stale files), a change
        that moved since its ``version`` or a chosen file whose live file moved
        since its ``live_version`` (forced or not) is a ``Conflict``, and
        applied files obey ``limits`` (the defaults if None); a refused move
        changes nothing. The change is marked (``mark_stale``) as the move is
        decided, in the same transaction as its effect.
        """
        ...


@dataclass(frozen=True)
class StoreRequest:
    """One space's ``store`` of a turn end, as :meth:`GroupCommitStore.store_batch` takes it.

    ``trace``: the turn's trace, made from this store's answer, to record in
    the same transaction (a turn whose one stored space is this one commits
    once, not twice); not for a conflict, which stores nothing.
    """

    ref: SpaceRef
    changes: ChangeSet
    cursor: str | None
    provenance: Provenance
    review: ReviewMode = "none"
    trace: Callable[[Stored], Trace] | None = None


@runtime_checkable
class GroupCommitStore(Store, Protocol):
    """Optional: a store that commits many turn ends' writes in one transaction (group commit).

    The turn engine hands it, in one call, every ``store`` and
    ``record_trace`` that concurrent turn ends asked for while its last
    batch committed (at most ``store_batch_max``). A store without this
    method gets them one call each, as always.
    """

    async def store_batch(
        self, items: Sequence[StoreRequest | Trace]
    ) -> list[Stored | Exception | None]:
        """Do every item, each as its own call would, and commit them all at once.

        One answer per item, in order: a ``StoreRequest``'s ``Stored``, ``None``
        for a ``Trace`` recorded, or the exception that item's own call would
        have raised (a conflict is a ``Stored``, not an exception). A
        ``StoreRequest`` with a ``trace`` also records ``trace(stored)`` after
        a store that is not a conflict; if that fails, the item fails whole
        (its store undone too; the caller stores again without it). An
        item's failure undoes that item alone (a savepoint per item); the
        rest commit. Nothing is answered before the commit is durable. If
        the commit itself fails, raise: every item then fails with it, none
        is committed.
        """
        ...


__all__ = [
    "ForgetLog",
    "GroupCommitStore",
    "ManagedStore",
    "Members",
    "PersonForgetting",
    "ReviewingStore",
    "Store",
    "StoreRequest",
]
