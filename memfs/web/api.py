"""The Memory tab's JSON API: ``/api/v1`` routes over one managed store, for signed-in people.

Every request names its person with ``Authorization: Bearer TOKEN``; the
token is resolved through the store on every request (nothing is cached, so
a revoked token or a removed member stops at once), and the person's role and
org come from the store only. Each act then goes through
:class:`memfs.engine.acting.Acting`, the one place that checks roles and
orgs: this module writes no role rule of its own.

Errors are RFC 9457 problem details, as in the control API
(:func:`memfs.api.control.problem`): no, unknown or revoked token → 401
``NoIdentity`` with ``WWW-Authenticate: Bearer``; a bearer token that does
not resolve is a failed sign-in, as at ``/login``: audited (``sign-in-failed``)
and counted by the same throttle, and a client past it gets 429
``SigninThrottled`` with ``Retry-After``, its token not looked at (a good
token does not clear the count here: every request carries one); a role that may not → 403
``PermissionDenied``; anything of another org → 404 with the same body as
something missing; a space name, path or member id that breaks
:mod:`memfs.core.names` → 400 before the store is asked (``Acting`` checks
names first, for every door); a body that is not
JSON (one that repeats a key is not: :class:`memfs.api.control.JsonRoute`)
or not of the route's model, or a query parameter the route does not
take → 400 ``BadRequest``; a body over
``max_body_bytes`` → 413 ``TooLarge``.

File contents travel as UTF-8 text (``content``); a stored file that is not
UTF-8 shows ``text: null`` with its size. See ``docs/web.md``.

What turns carried and did (the session story, one turn's carried files,
a file's Life, a space's usage, the inbox) are the models of
:mod:`memfs.core.story`, served as ``Acting`` shapes them; a turn id named
without ``?session=`` that several sessions used is a 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.dependencies.models import Dependant
from pydantic import BaseModel, ConfigDict, Field, model_validator

from memfs.api.control import JsonRoute
from memfs.api.models import Problem
from memfs.core.audit import AUDIT_PAGE, MAX_AUDIT_PAGE
from memfs.core.diff import unified
from memfs.core.errors import BadRequest, NoIdentity, NotFound, SigninThrottled
from memfs.core.members import Member, looks_like_token
from memfs.core.models import AuditEntry, By, Limits, Revision
from memfs.core.names import MAX_SEGMENT_BYTES, unencodable
from memfs.core.note import file_list
from memfs.core.review import WaitingChange
from memfs.core.signin import SigninThrottle, client_key, throttle_key
from memfs.core.story import (
    MAX_STORY_PAGE,
    MAX_USAGE_DAYS,
    STORY_PAGE,
    USAGE_DAYS,
    Carried,
    FileLife,
    NoRoom,
    SessionStory,
    SpaceUsage,
)
from memfs.engine.acting import Acting, act_as
from memfs.stores.base import ManagedStore
from memfs.web.signin_gate import ClientGate

PREFIX = "/api/v1"
# The longest revision id a restore names, the longest change version a
# decision names, and the longest audit entry id a page starts before:
# longer than any a store makes, so past them is a 400.
MAX_REVISION_CHARS = 200
MAX_VERSION_CHARS = 64
MAX_ENTRY_ID_CHARS = 64

PROBLEMS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": Problem, "description": "The request failed; `error` names the memfs error."},
    "5XX": {"model": Problem, "description": "memfs or its store failed."},
}


class Body(BaseModel):
    """A request body: unknown fields are refused, so a typo is a 400, not a silent default.

    Every string in it must be text a store can keep: JSON's ``"\\ud800"``
    (a lone surrogate) is a 400, not a 500 where it is encoded.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _text(self) -> Body:
        found = unencodable(self.model_dump(), "body")
        if found is not None:
            raise ValueError(f"not valid UTF-8 text: {found}")
        return self


class Out(BaseModel):
    model_config = ConfigDict(frozen=True)


# -- request bodies ------------------------------------------------------------


class PutFile(Body):
    content: str


class RestoreFile(Body):
    revision: str = Field(min_length=1, max_length=MAX_REVISION_CHARS)


class SetReview(Body):
    mode: Literal["person", "after", "none"]


class Approve(Body):
    paths: list[str] | None = None
    force: bool = False
    # The change's ``version`` the reviewer was shown: a change that has
    # changed since is 409 Conflict, and nothing is decided.
    version: str | None = Field(default=None, max_length=MAX_VERSION_CHARS)
    # The change's ``live_version`` the reviewer was shown: a chosen file whose
    # live file changed since is 409 Conflict, forced or not.
    live_version: str | None = Field(default=None, max_length=MAX_VERSION_CHARS)


class Reject(Body):
    paths: list[str] | None = None
    # The change's ``version`` the reviewer was shown: a change that has
    # changed since is 409 Conflict, and nothing is decided.
    version: str | None = Field(default=None, max_length=MAX_VERSION_CHARS)


class EditChange(Body):
    path: str
    content: str | None  # None: the reviewer deletes the file in the change
    force: bool = False
    # The change's ``version`` the reviewer was shown: a change that has
    # changed since is 409 Conflict, and nothing is decided.
    version: str | None = Field(default=None, max_length=MAX_VERSION_CHARS)
    # As Approve's: a live file changed since it was shown is 409 Conflict.
    live_version: str | None = Field(default=None, max_length=MAX_VERSION_CHARS)


# -- responses -----------------------------------------------------------------


class Me(Out):
    id: str
    org: str
    role: str
    label: str | None


class NoteUse(Out):
    """How much of the note's file list (``note_file_list_bytes``) a space's files take."""

    bytes: int
    budget: int
    fits: bool
    left_out: int


class SpaceSummary(Out):
    space: str
    review: str | None
    files: int
    bytes: int
    note: NoteUse


class PersonBay(Out):
    space: str
    bytes: int
    person: str | None  # admins only; None for everyone else


class Spaces(Out):
    org: str
    spaces: list[SpaceSummary]
    people: list[PersonBay]


class FileEntry(Out):
    path: str
    size: int


class FileList(Out):
    space: str
    files: list[FileEntry]


class Step(Out):
    """One revision of a file's trail: who taught it, where, and who approved it."""

    revision: str
    size: int
    deleted: bool
    origin: str
    by: By | None
    session: str | None
    turn: str | None
    prompt: str | None
    at: datetime
    approved_by: By | None


class FileView(Out):
    space: str
    path: str
    size: int
    text: str | None
    origin: str | None
    trail: list[Step]


class Written(Out):
    space: str
    path: str
    status: str
    revision: str | None


class ChangeFile(Out):
    path: str
    deleted: bool
    stale: bool
    size: int | None


class ChangeSummary(Out):
    id: str
    space: str
    session: str
    mode: str
    state: str
    prompt: str | None
    author: By | None
    created_at: datetime
    stale: list[str]
    files: list[ChangeFile]
    # Folders the change makes (true) or removes (false): decided by path, as files are.
    folders: dict[str, bool] = Field(default_factory=dict)
    version: str  # names what is shown here; a decision may name it back (409 if it moved)
    # Names the live files the diffs are against; an approval or edit may name
    # it back (409 if a chosen file's live file moved since, even forced).
    live_version: str = "0"


class ChangeDiff(Out):
    path: str
    diff: str


class ChangeDetail(ChangeSummary):
    diffs: list[ChangeDiff]


class ReviewList(Out):
    changes: list[ChangeSummary]


class ReviewSet(Out):
    space: str
    mode: str


class PersonFile(Out):
    path: str
    size: int
    text: str | None


class OpenedPerson(Out):
    user: str
    spaces: dict[str, list[PersonFile]]


class ForgotFile(Out):
    space: str
    path: str
    status: str


class ForgotPerson(Out):
    user: str
    spaces: list[str]
    files: int


class Audit(Out):
    entries: list[AuditEntry]  # oldest first
    older: str | None = None  # ``before`` for the page of older entries; None: none older


class InboxView(Out):
    """Waiting changes, and "Memory to look at": spaces with no room in the note."""

    changes: list[ChangeSummary]
    no_room: list[NoRoom]


# -- sign-in -------------------------------------------------------------------

_NO_TOKEN = "sign in: send Authorization: Bearer TOKEN (memfs token create)"
_BAD_TOKEN = "the token is unknown, revoked, or its member was removed"


def store_of(request: Request) -> ManagedStore:
    store: ManagedStore = request.app.state.memfs_store
    return store


async def member(request: Request) -> Member:
    """The signed-in person, as the store holds them now; ``NoIdentity`` (401) otherwise."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NoIdentity(_NO_TOKEN)
    token = token.strip()
    # A token is a sign-in: the /login form's throttle and audit hold here too.
    throttle: SigninThrottle = request.app.state.memfs_throttle
    gate: ClientGate = request.app.state.memfs_signin_gate
    host = request.client.host if request.client else None
    counted = throttle_key(host)
    store = store_of(request)
    async with gate.one_at_a_time(counted):
        verdict = throttle.check(counted)
        if not verdict.allowed:
            raise SigninThrottled(
                f"too many failed sign-ins: try again in {verdict.retry_after} seconds",
                retry_after=verdict.retry_after,
            )
        # Anything not shaped like a token cannot resolve: refused without a lookup.
        found = await store.resolve_token(token) if looks_like_token(token) else None
        if found is None:
            throttle.failed(counted)
    if found is None:
        await store.record_signin(None, client=client_key(host))
        raise NoIdentity(_BAD_TOKEN)
    return found


async def acting(request: Request, who: Annotated[Member, Depends(member)]) -> Acting:
    limits: Limits = request.app.state.memfs_limits
    return act_as(store_of(request), who.id, who.role, org=who.org, limits=limits)


SignedIn = Annotated[Member, Depends(member)]
Actor = Annotated[Acting, Depends(acting)]


# -- shaping -------------------------------------------------------------------


def _text(content: bytes) -> str | None:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _step(rev: Revision) -> Step:
    p = rev.provenance
    return Step(
        revision=rev.id,
        size=rev.size,
        deleted=rev.deleted,
        origin=p.origin,
        by=p.by,
        session=p.session,
        turn=p.turn,
        prompt=p.prompt,
        at=p.at,
        approved_by=rev.approved_by,
    )


def _summary(change: WaitingChange) -> dict[str, Any]:
    return {
        "id": change.id,
        "space": change.ref.space,
        "session": change.session,
        "mode": change.mode,
        "state": change.state,
        "prompt": change.provenance.prompt,
        "author": change.provenance.by,
        "created_at": change.created_at,
        "stale": list(change.stale_paths),
        "folders": dict(sorted(change.folders.items())),
        "version": change.version,
        "live_version": change.live_version,
        "files": [
            ChangeFile(
                path=path,
                deleted=file.content is None,
                stale=file.stale,
                size=None if file.content is None else len(file.content),
            )
            for path, file in sorted(change.files.items())
        ],
    }


def note_use(space: str, sizes: Mapping[str, int], budget: int) -> NoteUse:
    """How much of ``budget`` the note's file list of ``space`` takes (path -> size in bytes)."""
    # The note lists a space's files under the folder it is mounted at, which
    # the daemon's specs choose; the space's name stands for it here.
    lines, left_out = file_list(space, sizes, budget)
    used = sum(len(line.encode("utf-8")) + 1 for line in lines)
    return NoteUse(bytes=used, budget=budget, fits=left_out == 0, left_out=left_out)


def person_bay(entry: dict[str, object]) -> PersonBay:
    """One entry of ``Acting.people`` (whose only for admins) as the API and pages show it."""
    person = entry["person"]
    return PersonBay(
        space=str(entry["space"]),
        bytes=int(str(entry["bytes"])),
        person=None if person is None else str(person),
    )


async def change_detail(
    me: Acting, change: WaitingChange, *, live: dict[str, bytes] | None = None
) -> ChangeDetail:
    """A waiting change as a reviewer reads it: each file's unified diff against the live one.

    ``live`` is the space's live files, if the caller already has them (a page
    of many changes to one space reads them once).
    """
    if live is None:
        live = await me.files(change.ref.space)
    diffs = [
        ChangeDiff(path=path, diff=unified(path, live.get(path), file.content))
        for path, file in sorted(change.files.items())
    ]
    return ChangeDetail(**_summary(change), diffs=diffs)


def file_view(space: str, path: str, content: bytes, revisions: list[Revision]) -> FileView:
    """A live file with its text, origin and whole trail (oldest revision first)."""
    trail = [_step(rev) for rev in revisions]
    return FileView(
        space=space,
        path=path,
        size=len(content),
        text=_text(content),
        origin=trail[-1].origin if trail else None,
        trail=trail,
    )


def _known_query(request: Request) -> None:
    """400 ``BadRequest`` for a query parameter the route does not take.

    FastAPI passes over one it does not know, so ``?user=`` on an org file's
    route acted on the org's file, not the person's the caller meant.
    """
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if not isinstance(dependant, Dependant):
        return
    unknown = sorted(set(request.query_params) - _query_names(dependant))
    if unknown:
        raise BadRequest(f"this route takes no query parameter {', '.join(unknown)}")


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route takes, its dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def _known_space(me: Acting, space: str) -> None:
    """``NotFound`` unless ``space`` is one of this org's spaces (another org's reads the same)."""
    if space not in await me.spaces():
        raise NotFound("no such space", path=space)


# -- routes --------------------------------------------------------------------


def api_router() -> APIRouter:
    """The ``/api/v1`` routes; the app supplies ``state.memfs_store`` and ``state.memfs_limits``."""
    router = APIRouter(
        prefix=PREFIX,
        responses=PROBLEMS,
        dependencies=[Depends(_known_query)],
        route_class=JsonRoute,
    )

    @router.get("/me", response_model=Me, summary="Who the token signs in as")
    async def me(who: SignedIn) -> Me:
        return Me(id=who.id, org=who.org, role=who.role, label=who.label)

    @router.get("/spaces", response_model=Spaces, summary="The org's spaces and people's bays")
    async def spaces(me: Actor) -> Spaces:
        out = []
        for name, mode in sorted((await me.spaces()).items()):
            files = await me.files(name)
            out.append(
                SpaceSummary(
                    space=name,
                    review=mode,
                    files=len(files),
                    bytes=sum(len(c) for c in files.values()),
                    note=note_use(
                        name,
                        {path: len(content) for path, content in files.items()},
                        me.limits.note_file_list_bytes,
                    ),
                )
            )
        people = [person_bay(p) for p in await me.people()]
        return Spaces(org=me.org, spaces=out, people=people)

    @router.get("/spaces/{space}/files", response_model=FileList, summary="A space's live files")
    async def list_files(space: str, me: Actor) -> FileList:
        files = await me.files(space)
        await _known_space(me, space)
        return FileList(
            space=space,
            files=[FileEntry(path=p, size=len(c)) for p, c in sorted(files.items())],
        )

    @router.post(
        "/spaces/{space}/files/{path:path}/restore",
        response_model=Written,
        summary="Bring back an earlier revision of a file (members, audited)",
    )
    async def restore(space: str, path: str, body: RestoreFile, me: Actor) -> Written:
        stored = await me.restore(space, path, body.revision)
        return Written(
            space=space, path=path, status=stored.status, revision=stored.revisions.get(path)
        )

    @router.get(
        "/spaces/{space}/files/{path:path}",
        response_model=FileView,
        summary="A file's text, origin and whole trail",
    )
    async def get_file(space: str, path: str, me: Actor) -> FileView:
        content = await me.file(space, path)
        return file_view(space, path, content, await me.history(space, path))

    @router.put(
        "/spaces/{space}/files/{path:path}",
        response_model=Written,
        summary="Edit or add a live file (members, audited)",
    )
    async def put_file(space: str, path: str, body: PutFile, me: Actor) -> Written:
        stored = await me.put(space, path, body.content.encode("utf-8"))
        return Written(
            space=space, path=path, status=stored.status, revision=stored.revisions.get(path)
        )

    @router.delete(
        "/spaces/{space}/files/{path:path}",
        response_model=ForgotFile,
        summary="Forget a file (members, audited; kept in history, restorable)",
    )
    async def delete_file(space: str, path: str, me: Actor) -> ForgotFile:
        await me.file(space, path)  # a file the space does not hold is 404, not forgotten
        stored = await me.forget(space, path)
        return ForgotFile(space=space, path=path, status=stored.status)

    @router.put(
        "/spaces/{space}/review",
        response_model=ReviewSet,
        summary="Set how a space's changes are reviewed (admins, audited)",
    )
    async def set_review(space: str, body: SetReview, me: Actor) -> ReviewSet:
        await me.set_review(space, body.mode)
        return ReviewSet(space=space, mode=body.mode)

    @router.get("/review", response_model=ReviewList, summary="The changes waiting for review")
    async def review(me: Actor) -> ReviewList:
        changes = await me.waiting()
        return ReviewList(changes=[ChangeSummary(**_summary(c)) for c in changes])

    @router.get(
        "/review/{change}",
        response_model=ChangeDetail,
        summary="One waiting change, with a unified diff per file against the live files",
    )
    async def show_change(change: str, me: Actor) -> ChangeDetail:
        return await change_detail(me, await me.change(change))

    @router.post(
        "/review/{change}/approve",
        response_model=ChangeSummary,
        summary="Approve a change, or some of its files (members, audited)",
    )
    async def approve(change: str, me: Actor, body: Approve | None = None) -> ChangeSummary:
        body = body or Approve()
        done = await me.approve(
            change,
            paths=body.paths,
            force=body.force,
            version=body.version,
            live_version=body.live_version,
        )
        return ChangeSummary(**_summary(done))

    @router.post(
        "/review/{change}/reject",
        response_model=ChangeSummary,
        summary="Reject a change, or some of its files (members, audited)",
    )
    async def reject(change: str, me: Actor, body: Reject | None = None) -> ChangeSummary:
        body = body or Reject()
        done = await me.reject(change, paths=body.paths, version=body.version)
        return ChangeSummary(**_summary(done))

    @router.post(
        "/review/{change}/edit",
        response_model=ChangeSummary,
        summary="A reviewer's edit of one file of a change, applied as approved (members, audited)",
    )
    async def edit(change: str, body: EditChange, me: Actor) -> ChangeSummary:
        content = None if body.content is None else body.content.encode("utf-8")
        done = await me.edit(
            change,
            {body.path: content},
            force=body.force,
            version=body.version,
            live_version=body.live_version,
        )
        return ChangeSummary(**_summary(done))

    @router.get("/people", response_model=list[PersonBay], summary="Everyone with memory (admins)")
    async def people(me: Actor) -> list[PersonBay]:
        # The listing names people, so it is the admins' (the bays alone are in /spaces).
        return [person_bay(p) for p in await me.people_by_name()]

    @router.post(
        "/people/{user}/open",
        response_model=OpenedPerson,
        summary="Open a person's memory (admins, audited)",
    )
    async def open_person(user: str, me: Actor) -> OpenedPerson:
        opened = await me.open_person(user)
        return OpenedPerson(
            user=user,
            spaces={
                space: [
                    PersonFile(path=p, size=len(c), text=_text(c)) for p, c in sorted(files.items())
                ]
                for space, files in sorted(opened.items())
            },
        )

    @router.delete(
        "/people/{user}/files/{space}/{path:path}",
        response_model=ForgotFile,
        summary="Forget one file of a person's memory (admins, audited; purged)",
    )
    async def forget_person_file(user: str, space: str, path: str, me: Actor) -> ForgotFile:
        stored = await me.forget(space, path, user=user)
        return ForgotFile(space=space, path=path, status=stored.status)

    @router.delete(
        "/people/{user}",
        response_model=ForgotPerson,
        summary="Forget this person: all their memory in the org (admins, audited)",
    )
    async def forget_person(user: str, me: Actor) -> ForgotPerson:
        forgot = await me.forget_user(user)
        return ForgotPerson(
            user=user, spaces=sorted(ref.space for ref in forgot.spaces), files=forgot.files
        )

    @router.get(
        "/audit",
        response_model=Audit,
        summary="A page of the org's audit log (admins): the newest entries before `before`",
    )
    async def audit(
        me: Actor,
        before: Annotated[str | None, Query(max_length=MAX_ENTRY_ID_CHARS)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_PAGE)] = AUDIT_PAGE,
    ) -> Audit:
        page = await me.audit_page(before=before, limit=limit)
        return Audit(entries=page.entries, older=page.older)

    @router.get(
        "/sessions/{session}",
        response_model=SessionStory,
        summary="The session story: each turn's prompt and what each mount carried, opened, saved",
    )
    async def session_story(
        session: str,
        me: Actor,
        before: Annotated[str | None, Query(max_length=MAX_SEGMENT_BYTES)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_STORY_PAGE)] = STORY_PAGE,
    ) -> SessionStory:
        return await me.session_story(session, before=before, limit=limit)

    @router.get(
        "/turns/{turn}/carried",
        response_model=Carried,
        summary="Exactly what a turn carried, as of its cursors, with what it opened and saved",
    )
    async def carried(turn: str, me: Actor, session: str | None = None) -> Carried:
        return await me.carried(turn, session=session)

    @router.post(
        "/turns/{turn}/carried/open",
        response_model=Carried,
        summary="What a turn carried, people's memory opened too (admins, audited)",
    )
    async def carried_open(turn: str, me: Actor, session: str | None = None) -> Carried:
        return await me.carried(turn, session=session, open=True)

    @router.get(
        "/files/life",
        response_model=FileLife,
        summary="A file's Life: turns that carried and opened it per day, last open, timeline",
    )
    async def life(space: str, path: str, me: Actor) -> FileLife:
        return await me.life(space, path)

    @router.get(
        "/spaces/{space}/usage",
        response_model=SpaceUsage,
        summary="How often each file of a space was opened lately, and which never were",
    )
    async def usage(
        space: str, me: Actor, days: Annotated[int, Query(ge=1, le=MAX_USAGE_DAYS)] = USAGE_DAYS
    ) -> SpaceUsage:
        return await me.usage(space, days=days)

    @router.get(
        "/inbox",
        response_model=InboxView,
        summary="Waiting changes, and spaces with no room in the note",
    )
    async def inbox(me: Actor) -> InboxView:
        found = await me.inbox()
        return InboxView(
            changes=[ChangeSummary(**_summary(c)) for c in found.changes],
            no_room=list(found.no_room),
        )

    return router


__all__ = [
    "PREFIX",
    "acting",
    "api_router",
    "change_detail",
    "file_view",
    "member",
    "note_use",
    "person_bay",
]
