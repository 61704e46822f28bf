"""What turns carried and did, told from stored traces: the session story, carried, Life, usage.

Pure: values in (traces, file histories, as-of answers), values out. The
store answers "the files of a space as of a cursor" (``files_as_of``);
everything here is shaping and counting over what it and the traces give.

The rules every door shares:

- A turn *carried* a file of a space when the file was live in that space as
  of the cursor the turn loaded at (:func:`live_at` over the file's history),
  or when the turn's trace names it in the mount's ``snapshot`` (a file of
  the conversation's own waiting change, which no cursor covers).
- A turn *opened* a file when its trace has an entry for it that is
  ``opened`` or ``read`` (the daemon sees both; copy mode records neither, so
  its turns carry but never open).
- Managed stores' cursors and revision ids are numbers of one sequence
  (:func:`memfs.core.policy.parse_cursor`), so "live as of a cursor" is the
  latest revision numbered at or below it. A cursor that is not a number, or
  is past everything the store ever numbered, was not issued by this store:
  ``NotFound`` (:func:`as_of_cursor`).
- A person's forgotten files leave no history and their traces are rewritten
  without them, so they are gone from the past too: nothing here can bring
  them back.
- Nothing of a person's own memory is named to anyone who has not opened it:
  their mounts show counts only (:func:`mount_line` with ``closed``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Literal

from memfs.core.errors import NotFound
from memfs.core.models import (
    AsOfFile,
    By,
    Frozen,
    Layer,
    Origin,
    Revision,
    SpaceRef,
    Status,
    Trace,
    TraceFile,
    TraceMount,
)
from memfs.core.note import file_list
from memfs.core.paging import latest_before
from memfs.core.review import WaitingChange

USAGE_DAYS = 30  # org memory's usage counts the opens of this many last days
MAX_USAGE_DAYS = 366  # the widest window usage counts opens over: a year, a leap one too
# The turns one page of a session story shows unless asked for another number,
# and the most a page may ask for: each turn costs a look at what it carried.
STORY_PAGE = 50
MAX_STORY_PAGE = 500

_NOT_ISSUED = "this store did not issue that cursor"


def as_of_cursor(cursor: str, clock: int) -> int:
    """``cursor`` as a number of the store's sequence, which stands at ``clock`` now.

    ``NotFound`` for a cursor this store cannot have issued: not a number,
    negative, or past ``clock`` (a cursor of another store, or made up).
    """
    try:
        value = int(cursor)
    except (TypeError, ValueError):
        raise NotFound(_NOT_ISSUED, path=str(cursor)) from None
    if value < 0 or value > clock or str(value) != cursor:
        raise NotFound(_NOT_ISSUED, path=cursor)
    return value


def live_at(history: Sequence[Revision], at: int) -> Revision | None:
    """The revision of a file that was live at sequence number ``at``; None if none was.

    ``history`` is the file's, oldest first; a deletion counts (the file was
    not live), and so does a revision id that is not a number (never live).
    """
    found: Revision | None = None
    for revision in history:
        try:
            number = int(revision.id)
        except ValueError:
            continue
        if number <= at:
            found = revision
    return None if found is None or found.deleted else found


def trace_matches(
    trace: Trace,
    *,
    turn: str | None = None,
    space: SpaceRef | None = None,
    since: datetime | None = None,
) -> bool:
    """Whether ``trace`` is of ``turn``, mounted ``space`` and ended at or after ``since``."""
    if turn is not None and trace.turn != turn:
        return False
    if since is not None and trace.at < since:
        return False
    return space is None or any(m.ref == space for m in trace.mounts.values())


def mount_files(trace: Trace, name: str) -> dict[str, TraceFile]:
    """The file entries of one mount of ``trace``, by path in the space."""
    prefix = f"{name}/"
    return {key[len(prefix) :]: f for key, f in trace.files.items() if key.startswith(prefix)}


def opened(entry: TraceFile) -> bool:
    return entry.opened or entry.read is not None


def opened_paths(trace: Trace, name: str) -> tuple[str, ...]:
    """The paths of mount ``name`` the turn opened, sorted."""
    return tuple(sorted(p for p, f in mount_files(trace, name).items() if opened(f)))


def was_carried(mount: TraceMount, path: str, history: Sequence[Revision]) -> bool:
    """Whether a turn's mount carried ``path``: live as of its cursor, or in its snapshot."""
    if path in mount.snapshot:
        return True
    if mount.cursor is None:
        return False
    try:
        at = int(mount.cursor)
    except ValueError:
        return False
    return live_at(history, at) is not None


# -- the session story -------------------------------------------------------------


class MountLine(Frozen):
    """One mount of one turn, as the story tells it.

    ``user`` is None unless the viewer may see whose memory it is (admins).
    ``closed``: a person's memory nobody opened, so ``opened``/``saved``/
    ``not_saved`` name no file (their counts are still given).
    ``carried`` is how many files the mount carried as of ``cursor``; None
    when the store cannot say (no cursor: the load failed with no copy).
    """

    name: str
    layer: Layer
    space: str
    user: str | None
    cursor: str | None
    carried: int | None
    read_only: bool
    from_last_known_copy: bool
    closed: bool
    opened: tuple[str, ...]
    opened_count: int
    saved: tuple[str, ...]
    saved_count: int
    not_saved: tuple[str, ...]
    status: Status
    change: str | None  # what it left waiting (or listed) for review


class TurnLine(Frozen):
    session: str
    turn: str
    prompt: str | None
    at: datetime
    mounts: tuple[MountLine, ...]


class SessionStory(Frozen):
    """A page of a session's turns, oldest first: the latest ones before a turn."""

    session: str
    turns: tuple[TurnLine, ...]
    # ``before`` for the page of earlier turns; None: this page starts with the first.
    earlier: str | None = None


def story_page(
    traces: Sequence[Trace], before: str | None, limit: int
) -> tuple[list[Trace], str | None]:
    """The latest ``limit`` of a session's ``traces`` before turn ``before``, and ``earlier``.

    ``traces`` is the session's, oldest first; a ``before`` that is no turn
    of them is ``BadRequest`` (a page names a turn it showed).
    """
    shown, earlier = latest_before(traces, _turn_of, before, limit, what="turn of this session")
    return shown, (shown[0].turn if earlier else None)


def _turn_of(trace: Trace) -> str:
    return trace.turn


def mount_line(
    trace: Trace, name: str, *, carried: int | None, closed: bool, show_user: bool
) -> MountLine:
    mount = trace.mounts[name]
    seen = opened_paths(trace, name)
    return MountLine(
        name=name,
        layer=mount.ref.layer,
        space=mount.ref.space,
        user=mount.ref.user if show_user else None,
        cursor=mount.cursor,
        carried=carried,
        read_only=mount.read_only,
        from_last_known_copy=mount.from_last_known_copy,
        closed=closed,
        opened=() if closed else seen,
        opened_count=len(seen),
        saved=() if closed else mount.saved,
        saved_count=len(mount.saved),
        not_saved=() if closed else mount.not_saved,
        status=mount.status,
        change=mount.change,
    )


def carried_count(mount: TraceMount, as_of: Mapping[str, AsOfFile]) -> int:
    """How many files a mount carried: the space as of its cursor, and its own waiting files.

    The count :func:`carried_mount` gives, without building a value per file.
    """
    return len(as_of) + sum(1 for path in mount.snapshot if path not in as_of)


# -- carried -----------------------------------------------------------------------


class CarriedFile(Frozen):
    """One file a turn carried; ``waiting``: from the conversation's own waiting change."""

    path: str
    revision: str
    size: int | None  # None for a waiting file: its bytes are the change's
    opened: bool
    saved: bool
    waiting: bool = False


class CarriedMount(Frozen):
    """Exactly what one mount carried. ``closed``: a person's memory not opened, counts only.

    ``known`` is False when the store could not answer for the turn's cursor
    (none recorded, or not one it issued): ``files`` then holds only what the
    trace itself names.
    """

    name: str
    layer: Layer
    space: str
    user: str | None
    cursor: str | None
    known: bool
    closed: bool
    count: int
    files: tuple[CarriedFile, ...]


class Carried(Frozen):
    session: str
    turn: str
    prompt: str | None
    at: datetime
    mounts: tuple[CarriedMount, ...]


def carried_mount(
    trace: Trace,
    name: str,
    as_of: Mapping[str, AsOfFile] | None,
    *,
    closed: bool,
    show_user: bool,
) -> CarriedMount:
    """One mount's carried files: the space as of its cursor (``as_of``, None if unknown), with
    the trace's own snapshot laid over it (files of the conversation's waiting change)."""
    mount = trace.mounts[name]
    seen = set(opened_paths(trace, name))
    saved = set(mount.saved)
    files: dict[str, CarriedFile] = {}
    for path, file in (as_of or {}).items():
        files[path] = CarriedFile(
            path=path,
            revision=file.revision,
            size=file.size,
            opened=path in seen,
            saved=path in saved,
        )
    for path, revision in mount.snapshot.items():
        known = files.get(path)
        if known is None or known.revision != revision:
            files[path] = CarriedFile(
                path=path,
                revision=revision,
                size=None if known is None else known.size,
                opened=path in seen,
                saved=path in saved,
                waiting=known is None,
            )
    return CarriedMount(
        name=name,
        layer=mount.ref.layer,
        space=mount.ref.space,
        user=mount.ref.user if show_user else None,
        cursor=mount.cursor,
        known=as_of is not None,
        closed=closed,
        count=len(files),
        files=() if closed else tuple(files[p] for p in sorted(files)),
    )


# -- Life of one file --------------------------------------------------------------


class LifeDay(Frozen):
    """One day (UTC) of a file's life: how many turns carried it, how many opened it."""

    day: date
    carried: int
    opened: int


class LifeEvent(Frozen):
    """One step of a file's timeline: a revision (taught, approved, edited...) or a turn's open."""

    kind: Literal["revision", "opened"]
    at: datetime
    session: str | None
    turn: str | None
    revision: str | None = None
    origin: Origin | None = None
    deleted: bool = False
    by: By | None = None
    approved_by: By | None = None
    prompt: str | None = None


class FileLife(Frozen):
    space: str
    path: str
    carried_turns: int
    opened_turns: int
    last_opened: datetime | None
    last_session: str | None  # the conversation of the last open
    last_turn: str | None
    days: tuple[LifeDay, ...]
    timeline: tuple[LifeEvent, ...]


def file_life(
    ref: SpaceRef, path: str, history: Sequence[Revision], traces: Iterable[Trace]
) -> FileLife:
    """The Life of ``path`` of ``ref`` from its history and the traces that mounted ``ref``."""
    carried_on: dict[date, int] = {}
    opened_on: dict[date, int] = {}
    events: list[LifeEvent] = [
        LifeEvent(
            kind="revision",
            at=rev.provenance.at,
            session=rev.provenance.session,
            turn=rev.provenance.turn,
            revision=rev.id,
            origin=rev.provenance.origin,
            deleted=rev.deleted,
            by=rev.provenance.by,
            approved_by=rev.approved_by,
            prompt=rev.provenance.prompt,
        )
        for rev in history
    ]
    carried_turns = opened_turns = 0
    last: Trace | None = None
    for trace in traces:
        names = [n for n, m in trace.mounts.items() if m.ref == ref]
        if not names:
            continue
        day = trace.at.date()
        if any(was_carried(trace.mounts[n], path, history) for n in names):
            carried_turns += 1
            carried_on[day] = carried_on.get(day, 0) + 1
        if any(path in opened_paths(trace, n) for n in names):
            opened_turns += 1
            opened_on[day] = opened_on.get(day, 0) + 1
            if last is None or trace.at >= last.at:
                last = trace
            events.append(
                LifeEvent(
                    kind="opened",
                    at=trace.at,
                    session=trace.session,
                    turn=trace.turn,
                    prompt=trace.prompt,
                )
            )
    days = tuple(
        LifeDay(day=d, carried=carried_on.get(d, 0), opened=opened_on.get(d, 0))
        for d in sorted({*carried_on, *opened_on})
    )
    return FileLife(
        space=ref.space,
        path=path,
        carried_turns=carried_turns,
        opened_turns=opened_turns,
        last_opened=None if last is None else last.at,
        last_session=None if last is None else last.session,
        last_turn=None if last is None else last.turn,
        days=days,
        timeline=tuple(sorted(events, key=lambda e: e.at)),
    )


# -- org usage ---------------------------------------------------------------------


class FileUse(Frozen):
    """How one live file of a space was used: opens in the last ``days`` days, and ever."""

    path: str
    opens: int
    last_opened: datetime | None
    never_opened: bool


class SpaceUsage(Frozen):
    space: str
    days: int
    since: datetime
    files: tuple[FileUse, ...]


def space_usage(
    ref: SpaceRef,
    paths: Iterable[str],
    traces: Iterable[Trace],
    *,
    at: datetime,
    days: int = USAGE_DAYS,
) -> SpaceUsage:
    """Per live file of ``ref``: turns that opened it since ``days`` before ``at``, and ever."""
    since = at - timedelta(days=days)
    recent: dict[str, int] = {}
    last: dict[str, datetime] = {}
    for trace in traces:
        for name, mount in trace.mounts.items():
            if mount.ref != ref:
                continue
            for path in opened_paths(trace, name):
                if path not in last or trace.at > last[path]:
                    last[path] = trace.at
                if trace.at >= since:
                    recent[path] = recent.get(path, 0) + 1
    return SpaceUsage(
        space=ref.space,
        days=days,
        since=since,
        files=tuple(
            FileUse(
                path=p,
                opens=recent.get(p, 0),
                last_opened=last.get(p),
                never_opened=p not in last,
            )
            for p in sorted(paths)
        ),
    )


# -- the inbox ---------------------------------------------------------------------


class NoRoom(Frozen):
    """A space whose file list no longer fits the note ("No room in the note")."""

    space: str
    files: int
    bytes: int  # what the whole list would take
    budget: int  # ``Limits.note_file_list_bytes``
    left_out: int  # how many files the note leaves out


class Inbox(Frozen):
    changes: tuple[WaitingChange, ...]
    no_room: tuple[NoRoom, ...]


def no_room(space: str, sizes: Mapping[str, int], budget: int) -> NoRoom | None:
    """``NoRoom`` when the note's file list of ``space`` leaves files out; None when all fit.

    The note lists a space under the folder it is mounted at, which the
    daemon's specs choose; the space's name stands for it here, as in
    ``/api/v1/spaces``.
    """
    _, left_out = file_list(space, sizes, budget)
    if left_out == 0:
        return None
    whole, _ = file_list(space, sizes, 2**62)
    return NoRoom(
        space=space,
        files=len(sizes),
        bytes=sum(len(line.encode("utf-8")) + 1 for line in whole),
        budget=budget,
        left_out=left_out,
    )


__all__ = [
    "MAX_STORY_PAGE",
    "MAX_USAGE_DAYS",
    "STORY_PAGE",
    "USAGE_DAYS",
    "Carried",
    "CarriedFile",
    "CarriedMount",
    "FileLife",
    "FileUse",
    "Inbox",
    "LifeDay",
    "LifeEvent",
    "MountLine",
    "NoRoom",
    "SessionStory",
    "SpaceUsage",
    "TurnLine",
    "as_of_cursor",
    "carried_count",
    "carried_mount",
    "file_life",
    "live_at",
    "mount_files",
    "mount_line",
    "no_room",
    "opened",
    "opened_paths",
    "space_usage",
    "story_page",
    "trace_matches",
    "was_carried",
]
