"""The review workflow: every rule of a change to shared memory lives in this file.

A turn's change to an org space under review ``person`` becomes one
**waiting change** per (conversation, space, org): it is not live, and a later
turn of the same conversation that edits the same file replaces that file in
it. Under review ``after`` the change is live at once and stays listed for a
person to look at; under ``none`` it is live and never listed. A person's own
memory always saves at once.

The moves a reviewer can make are a table (``TRANSITIONS``): from a state and
an action to the next state and the effect a store must carry out. Anything
not in the table is an :class:`IllegalTransition`. Every file of a change
remembers the revision the turn loaded (its *base*) and two points on the
store's one sequence of changes: where the turn's snapshot stood (*loaded*)
and when the file was edited into the change (*edited*). A file is **stale**
when the live file changed after the turn loaded it, or when another open
change edited it after this turn loaded it and before this change did: of
two conversations that edit one file from the same snapshot, the later is
stale, so a reviewer sees the conflict before approving. Values in, values
out: stores keep the changes, this module decides what happens to them.

Which open change an edit joins is decided here too (:func:`joins`): a
conversation's ``waiting`` change (review ``person``) and its ``live`` change
(review ``after``) stay apart, so a space switched from one mode to the other
mid-conversation never mixes an edit that waits into one that is live. A
conversation's load sees its own waiting change laid over the live files
(:func:`lay_over`), which names each such file by one made-up revision
(:func:`own_revision`). A deletion must name a file the conversation sees
(:func:`require_deletable`); a change listed for review must come from a
conversation (:func:`conversation_of`); a review mode is one of
``REVIEW_MODES`` (:func:`check_mode`), and a space's own setting wins over
the mode a turn asks for (:func:`effective_mode`). Each file of a change
keeps the turn that taught it (``WaitingChange.turns``), so approving a
change built over several turns records every file with its own prompt and
turn (:func:`applied_provenance`).

A change carries its files' metadata (``FileChange.meta``) and the folders
the turns made or removed (``WaitingChange.folders``: path -> True for made,
False for removed); both go live with the change, and a reviewer decides a
folder by its path as they decide a file. Folders are never stale.
"""

from __future__ import annotations

import bisect
import enum
import hashlib
from collections.abc import Container, Iterable, Mapping
from datetime import datetime
from typing import Literal

from pydantic import Field

from memfs.core.errors import (
    BadRequest,
    ConfigError,
    Conflict,
    IllegalTransition,
    InvalidName,
    NotFound,
)
from memfs.core.limits import require_within
from memfs.core.models import (
    By,
    ChangeSet,
    FileMeta,
    Frozen,
    Layer,
    Limits,
    Loaded,
    Origin,
    Provenance,
    ReviewMode,
    SpaceRef,
    Status,
    digest,
    now,
    settle_meta,
)

REVIEW_MODES: tuple[ReviewMode, ...] = ("person", "after", "none")
# The most digits a decision's ``live_version`` may have: every point of a
# store's sequence (a 64-bit count) fits; past it, ``BadRequest``.
MAX_LIVE_VERSION_DIGITS = 20
ChangeState = Literal["waiting", "live", "approved", "rejected"]
Action = Literal["update", "approve", "edit", "reject"]


class Effect(enum.Enum):
    """What a store must do to its live files when a transition happens."""

    NONE = "none"  # nothing changes in what turns load
    APPLY = "apply"  # the chosen files (as approved or edited) become live revisions
    REVERT = "revert"  # the change was live already: put back what it replaced


# (state, action) -> (next state, effect). The one table of the workflow.
TRANSITIONS: Mapping[tuple[ChangeState, Action], tuple[ChangeState, Effect]] = {
    ("waiting", "update"): ("waiting", Effect.NONE),
    ("waiting", "approve"): ("approved", Effect.APPLY),
    ("waiting", "edit"): ("approved", Effect.APPLY),
    ("waiting", "reject"): ("rejected", Effect.NONE),
    ("live", "update"): ("live", Effect.NONE),
    ("live", "approve"): ("approved", Effect.NONE),
    ("live", "edit"): ("approved", Effect.APPLY),
    ("live", "reject"): ("rejected", Effect.REVERT),
}

NOTE_LINE = (
    "Changes you make here wait for a person to review them: tell the person your "
    "change is waiting for review, not that it is saved."
)


def saves_at_once(layer: Layer, mode: ReviewMode) -> bool:
    """Whether a turn's change is live when the turn ends."""
    return layer != "org" or mode != "person"


def is_listed(layer: Layer, mode: ReviewMode) -> bool:
    """Whether a turn's change is kept for a person to look at."""
    return layer == "org" and mode in ("person", "after")


def status_after_store(layer: Layer, mode: ReviewMode) -> Status:
    """What the turn's result says for a space whose change was accepted."""
    return "saved" if saves_at_once(layer, mode) else "waiting"


class FileChange(Frozen):
    """One file of a waiting change: its new content (None: deleted) and what it was based on."""

    content: bytes | None
    base: str | None  # the revision the turn loaded; None if the file was new to it
    loaded: int  # the store's sequence number of the snapshot the file was built on
    edited: int  # the store's sequence number of this edit
    stale: bool = False
    turn: str | None = None
    meta: FileMeta | None = None  # mode and times the turn gave it; None: as the store has it
    # The store's sequence number of the live file's last change (a revision
    # or a deletion) when the change was marked (mark_stale); 0: none.
    live_at: int = 0


class Review(Frozen):
    """Who moved a change, how, and when."""

    action: Action
    by: By | None
    at: datetime
    paths: tuple[str, ...]


class WaitingChange(Frozen):
    """A conversation's change to one org space, as a reviewer sees it."""

    id: str
    ref: SpaceRef
    session: str
    mode: ReviewMode
    state: ChangeState
    files: dict[str, FileChange]
    provenance: Provenance  # of the latest turn that changed it
    created_at: datetime = Field(default_factory=now)
    reviews: tuple[Review, ...] = ()
    folders: dict[str, bool] = Field(default_factory=dict)  # True: made, False: removed
    # The provenance of each turn whose edits the change holds, by turn id
    # ("" for none; see taught): what each file records when it goes live.
    # Changes kept before turns were recorded have none, and fall back to
    # ``provenance``.
    turns: dict[str, Provenance] = Field(default_factory=dict)

    @property
    def stale_paths(self) -> tuple[str, ...]:
        return tuple(sorted(path for path, file in self.files.items() if file.stale))

    @property
    def version(self) -> str:
        """A name for what a reviewer is shown of the change: its files, modes and folders.

        A later turn of the conversation, or a decision on part of it, gives a
        new one; a reviewer who names the version they were shown
        (:func:`decide`'s ``version``) applies exactly that or nothing.
        """
        h = hashlib.sha256()
        for path in sorted(self.files):
            file = self.files[path]
            content = "-" if file.content is None else digest(file.content)
            mode = "" if file.meta is None else f"{file.meta.mode:o}"
            h.update(f"f\0{path}\0{content}\0{mode}\0".encode())
        for path in sorted(self.folders):
            h.update(f"d\0{path}\0{int(self.folders[path])}\0".encode())
        return h.hexdigest()[:16]

    @property
    def live_version(self) -> str:
        """A name for the live files a reviewer is shown beside the change (its diffs).

        The latest point of the store's sequence at which one of them
        changed, as :func:`mark_stale` found it; every later change of a
        live file comes after it. A reviewer who names the live version they
        were shown (:func:`decide`'s ``live_version``) never applies a file
        over a live one they were not shown, forced or not.
        """
        return str(max((file.live_at for file in self.files.values()), default=0))

    def change_set(self, live: Iterable[str]) -> ChangeSet:
        """The files as a change set against what is live (``live``: the live paths)."""
        present = set(live)
        created: dict[str, bytes] = {}
        updated: dict[str, bytes] = {}
        deleted: list[str] = []
        meta: dict[str, FileMeta] = {}
        for path in sorted(self.files):
            file = self.files[path]
            content = file.content
            if content is None:
                if path in present:
                    deleted.append(path)
                continue
            if path in present:
                updated[path] = content
            else:
                created[path] = content
            if file.meta is not None:
                meta[path] = file.meta
        return ChangeSet(
            created=created,
            updated=updated,
            deleted=tuple(deleted),
            meta=meta,
            folders_created=tuple(sorted(p for p, made in self.folders.items() if made)),
            folders_deleted=tuple(sorted(p for p, made in self.folders.items() if not made)),
        )


def _files(
    changes: ChangeSet, snapshot: Mapping[str, str], turn: str | None, loaded: int, edited: int
) -> dict[str, FileChange]:
    contents: dict[str, bytes | None] = {**changes.created, **changes.updated}
    contents.update(dict.fromkeys(changes.deleted))
    return {
        path: FileChange(
            content=content,
            base=snapshot.get(path),
            loaded=loaded,
            edited=edited,
            turn=turn,
            meta=changes.meta.get(path),
        )
        for path, content in contents.items()
    }


def folder_changes(changes: ChangeSet) -> dict[str, bool]:
    """A change set's folders as a change keeps them: path -> True (made) / False (removed)."""
    return {
        **dict.fromkeys(changes.folders_created, True),
        **dict.fromkeys(changes.folders_deleted, False),
    }


def open_change(
    id: str,
    ref: SpaceRef,
    *,
    mode: ReviewMode,
    changes: ChangeSet,
    snapshot: Mapping[str, str],
    loaded: int,
    edited: int,
    provenance: Provenance,
) -> WaitingChange:
    """A conversation's first change to a space: ``waiting`` (person) or ``live`` (after)."""
    session = _session(provenance)
    return WaitingChange(
        id=id,
        ref=ref,
        session=session,
        mode=mode,
        state=open_state(check_mode(mode)),
        files=_files(changes, snapshot, provenance.turn, loaded, edited),
        provenance=provenance,
        created_at=provenance.at,
        folders=folder_changes(changes),
        turns={_turn_key(provenance): provenance},
    )


def _turn_key(provenance: Provenance) -> str:
    return provenance.turn or ""


def taught(change: WaitingChange, path: str) -> Provenance:
    """The provenance of the turn that put ``path`` (a file of ``change``) into the change.

    A change kept before its turns were recorded answers its latest turn's.
    """
    return change.turns.get(change.files[path].turn or "", change.provenance)


def applied_provenance(change: WaitingChange, path: str, action: Action) -> Provenance:
    """What the revision of ``path`` records when a reviewer's ``action`` applies it.

    Who taught it (the prompt and turn that wrote this file, not the change's
    latest turn) stays; a reviewer's edit makes its origin ``edited``. Who let
    it in is the store's ``approved_by``.
    """
    source = taught(change, path)
    origin: Origin = "edited" if action == "edit" else source.origin
    return source.model_copy(update={"origin": origin})


def check_mode(mode: str) -> ReviewMode:
    """``mode`` as a review mode; ``ConfigError`` if it is none of ``REVIEW_MODES``.

    The one check for every door that names a mode: a spec's ``review``, a
    space's setting and the mode a turn stores under.
    """
    for known in REVIEW_MODES:
        if mode == known:
            return known
    raise ConfigError(f"review must be one of {', '.join(REVIEW_MODES)}", path=str(mode))


def effective_mode(setting: ReviewMode | None, requested: str) -> ReviewMode:
    """The mode a store holds a turn's change under: the space's own setting wins.

    ``requested`` (the turn's mode) is checked even when the setting wins: a
    mistake is a mistake whichever mode applies.
    """
    asked = check_mode(requested)
    return asked if setting is None else setting


def conversation_of(layer: Layer, mode: ReviewMode, provenance: Provenance) -> str | None:
    """The conversation a change is kept under for review; None if it is not listed.

    A change listed for review (see :func:`is_listed`) is one per
    conversation, so one that comes from none is ``NotFound``, and a store
    asks this before it writes anything: under ``after`` nothing goes live.
    """
    if not is_listed(layer, mode):
        return None
    return _session(provenance)


def _session(provenance: Provenance) -> str:
    if not provenance.session:
        raise NotFound("a change held for review belongs to a conversation; this one has none")
    return provenance.session


def open_state(mode: ReviewMode) -> Literal["waiting", "live"]:
    """The state of the open change a turn's edit under ``mode`` goes into."""
    return "waiting" if mode == "person" else "live"


def joins(
    changes: Iterable[WaitingChange], ref: SpaceRef, session: str, mode: ReviewMode
) -> WaitingChange | None:
    """The open change of ``session`` to ``ref`` that an edit under ``mode`` joins, if any.

    ``changes`` in the order they were made; the latest that fits wins. A
    conversation's waiting change and its live change stay apart: a space
    switched from ``after`` to ``person`` mid-conversation holds the next
    edit in a new waiting change (joining the live one would make it live
    with nothing to approve), and one switched back makes the next edit live
    in a change of its own (joining the waiting one would apply it twice).
    """
    state = open_state(mode)
    found = None
    for change in changes:
        if change.ref == ref and change.session == session and change.state == state:
            found = change
    return found


def own_revision(change: WaitingChange, path: str) -> str:
    """What a conversation's load names a file of its own waiting change by.

    Not a revision id: it names the change and the edit, so it differs from
    every revision and from every other edit, and is never valid for restore.
    """
    return f"c{change.id}.{change.files[path].edited}"


def lay_over(loaded: Loaded, own: WaitingChange | None) -> Loaded:
    """What a conversation loads: the live files with its own waiting change laid over them.

    ``own`` is the conversation's waiting change (``joins`` under
    ``person``), None if it has none. A file the change deleted is gone for
    this conversation only; a file it wrote comes with its bytes, its own
    revision name (:func:`own_revision`), no sha256 (the bytes differ from
    the live revision's) and the metadata its turn gave it. The load says
    whose view it is now (``own_change``: the change's id).
    """
    if own is None or own.state != "waiting":
        return loaded
    files = dict(loaded.files)
    revisions = dict(loaded.revisions)
    shas = dict(loaded.shas)
    sizes = dict(loaded.sizes)
    meta = dict(loaded.meta)
    folders = set(loaded.folders)
    for path, file in own.files.items():
        shas.pop(path, None)
        if file.content is None:
            for held in (files, revisions, sizes, meta):
                held.pop(path, None)
            continue
        files[path] = file.content
        revisions[path] = own_revision(own, path)
        if loaded.sizes:  # a lean load names every path's size
            sizes[path] = len(file.content)
        meta[path] = settle_meta(file.meta, meta.get(path), taught(own, path).at)
    for path, made in own.folders.items():
        (folders.add if made else folders.discard)(path)
    return loaded.model_copy(
        update={
            "files": files,
            "revisions": revisions,
            "shas": shas,
            "sizes": sizes,
            "meta": meta,
            "folders": tuple(sorted(folders)),
            "own_change": own.id,
        }
    )


def require_deletable(
    deleted: Iterable[str], live: Container[str], own: WaitingChange | None = None
) -> None:
    """A deletion must name a file the conversation sees, else ``InvalidName`` naming it.

    ``live``: the space's live paths (at least those among ``deleted``);
    ``own``: the conversation's waiting change, whose files it sees over the
    live ones (a file it wrote can be deleted, one it deleted cannot be
    again). Checked before anything is written, so a refused change set
    writes nothing.
    """
    for path in deleted:
        file = None if own is None or own.state != "waiting" else own.files.get(path)
        seen = path in live if file is None else file.content is not None
        if not seen:
            raise InvalidName("cannot delete a file the space does not hold", path=path)


def transition(change: WaitingChange, action: Action) -> tuple[ChangeState, Effect]:
    """The next state and effect of ``action``, or :class:`IllegalTransition`."""
    try:
        return TRANSITIONS[(change.state, action)]
    except KeyError:
        raise IllegalTransition(
            f"a change that is {change.state} cannot be {action}d", path=change.id
        ) from None


def update(
    change: WaitingChange,
    changes: ChangeSet,
    *,
    snapshot: Mapping[str, str],
    loaded: int,
    edited: int,
    provenance: Provenance,
) -> WaitingChange:
    """A later turn of the same conversation: its files replace the same files in the change.

    The later turn loaded the change's own files (a conversation sees what it
    saved), so where it rewrote a file already in the change, the file keeps
    its original base and snapshot: what the conversation first built on.
    """
    transition(change, "update")
    files = dict(change.files)
    for path, file in _files(changes, snapshot, provenance.turn, loaded, edited).items():
        earlier = files.get(path)
        if earlier is not None:
            # A waiting file never went live, so the conversation still builds on
            # the snapshot it first had (a turn that did not see this edit is
            # refused before: unseen_edits); a live (review after) file went
            # live with the earlier turn, which the later turn has seen.
            keep: dict[str, object] = {"base": earlier.base}
            if change.state == "waiting":
                keep["loaded"] = earlier.loaded
            file = file.model_copy(update=keep)
        files[path] = file
    # A later turn's word on a folder replaces the earlier one, as for files.
    folders = {**change.folders, **folder_changes(changes)}
    # Only the turns some file still comes from: a rewritten file's earlier turn
    # taught nothing the change still holds.
    taught_by = {file.turn or "" for file in files.values()}
    turns = {
        key: value
        for key, value in {**change.turns, _turn_key(provenance): provenance}.items()
        if key in taught_by
    }
    return change.model_copy(
        update={"files": files, "provenance": provenance, "folders": folders, "turns": turns}
    )


def unseen_edits(change: WaitingChange | None, changes: ChangeSet, loaded: int) -> tuple[str, ...]:
    """The paths of ``changes`` that ``change`` (the conversation's open change) edited after
    ``loaded``, the snapshot the incoming turn was built on.

    A later turn of a conversation loads its waiting change, so it has seen
    every edit in it; one that has not (held for a manual commit, committed
    after a later turn) would replace an edit nobody saw. A store refuses it
    as a conflict, kept for a person to merge, as a space without review does.
    """
    if change is None or change.state != "waiting":
        return ()
    return tuple(
        sorted(
            path
            for path in changes.paths
            if path in change.files and change.files[path].edited > loaded
        )
    )


OPEN_STATES: tuple[ChangeState, ...] = ("waiting", "live")


class _RivalEdits:
    """When each open change of a space edited each path, sorted: "edited between" is a bisect."""

    def __init__(self, others: Iterable[WaitingChange]) -> None:
        by_path: dict[str, list[int]] = {}
        for other in others:
            if other.state in OPEN_STATES:
                for path, file in other.files.items():
                    by_path.setdefault(path, []).append(file.edited)
        for edits in by_path.values():
            edits.sort()
        self._by_path = by_path

    def between(self, path: str, low: int, high: int) -> bool:
        """Whether some open change edited ``path`` strictly after ``low`` and before ``high``."""
        edits = self._by_path.get(path)
        if not edits:
            return False
        first_after = bisect.bisect_right(edits, low)
        return first_after < len(edits) and edits[first_after] < high


def _mark(change: WaitingChange, live: Mapping[str, int], rivals: _RivalEdits) -> WaitingChange:
    # A change's own edit of a path is never strictly before itself, so it is
    # never its own rival.
    files = {
        path: file.model_copy(
            update={
                "stale": live.get(path, 0) > file.loaded
                or rivals.between(path, file.loaded, file.edited),
                "live_at": live.get(path, 0),
            }
        )
        for path, file in change.files.items()
    }
    return change.model_copy(update={"files": files})


def mark_stale(
    change: WaitingChange, live: Mapping[str, int], others: Iterable[WaitingChange]
) -> WaitingChange:
    """Mark the files that changed under this change without it seeing them.

    ``live`` maps each path to the sequence number of its last live change
    (a revision or a deletion); ``others`` are the space's other changes. A
    file is stale if the live file moved on after the snapshot it was built
    on (``loaded``), or another open change edited it in between. Each file
    keeps where its live file stands (``live_at``: the change's
    :attr:`~WaitingChange.live_version`).
    """
    return _mark(change, live, _RivalEdits(others))


def mark_stale_all(
    changes: Iterable[WaitingChange], live: Mapping[str, int], others: Iterable[WaitingChange]
) -> list[WaitingChange]:
    """:func:`mark_stale` for many changes of one space, with the rivals indexed once."""
    rivals = _RivalEdits(others)
    return [_mark(change, live, rivals) for change in changes]


def decide(
    change: WaitingChange,
    action: Literal["approve", "edit", "reject"],
    *,
    by: By | None,
    at: datetime | None = None,
    paths: Iterable[str] | None = None,
    edits: Mapping[str, bytes | None] | None = None,
    force: bool = False,
    live_sizes: Mapping[str, int] | None = None,
    limits: Limits | None = None,
    version: str | None = None,
    live_version: str | None = None,
) -> tuple[WaitingChange, Effect, dict[str, bytes | None]]:
    """A reviewer's move on some files (all by default) of a change.

    Returns the change after the move, the effect for the store, and the files
    the effect concerns (path -> content, None for a deletion). Approving or
    editing part of a waiting change applies those files and leaves the rest
    waiting; rejecting part drops those files. Editing replaces the content
    of the chosen files before they are applied. Rejecting a change that is
    already live (review ``after``) reverts its files to their bases, but
    for those written since (stale): they stay as that later write left them.

    With ``version`` (the :attr:`WaitingChange.version` the reviewer was
    shown), any move on a change that has changed since is a ``Conflict``,
    and nothing changes: a later turn of the conversation rewrote it, and
    approving would make live what nobody was shown.

    A move that applies files (``Effect.APPLY``) is refused, and nothing
    changes, when:

    - with ``live_version`` (the :attr:`WaitingChange.live_version` the
      reviewer was shown), the live file of a chosen file changed since
      (``change`` as :func:`mark_stale` marked it): a ``Conflict`` naming
      those files, with ``force`` too, since forcing goes over the live
      file the reviewer saw, never over one they did not (another approval,
      or a write under review ``after`` or ``none``, made meanwhile);
    - a chosen file is stale (``change`` as :func:`mark_stale` marked it) and
      ``force`` is not set: applying it would overwrite an edit the turn
      never saw, so it is a ``Conflict`` naming the stale files;
    - with ``live_sizes`` (each live file's size in the space), the applied
      files would pass ``limits`` (the defaults if None), as a turn's would:
      ``TooLarge`` or ``SpaceFull`` (:func:`memfs.core.limits.require_within`).
    """
    if version is not None and version != change.version:
        raise Conflict(
            "the change has changed since it was shown (a later turn of its conversation); "
            "look at it again before deciding",
            path=change.id,
        )
    shown = None if live_version is None else _sequence_point(live_version)
    every = {*change.files, *change.folders}
    picked = every if paths is None else set(paths)
    unknown = [path for path in sorted(picked) if path not in every]
    if unknown:
        raise NotFound("the change holds no such file", path=unknown[0])
    chosen = tuple(sorted(path for path in picked if path in change.files))
    edits = dict(edits or {})
    extra = [path for path in edits if path not in chosen]
    if extra:
        raise NotFound("an edit names a file outside the files being decided", path=extra[0])
    if action != "edit" and edits:
        raise IllegalTransition("only an edit carries new content", path=change.id)
    state, effect = transition(change, action)
    when = at or now()
    concerned = {
        path: edits[path] if path in edits else change.files[path].content for path in chosen
    }
    if effect is Effect.APPLY:
        if shown is not None:
            moved = tuple(path for path in chosen if change.files[path].live_at > shown)
            if moved:
                raise Conflict(
                    f"{', '.join(moved)} changed live since the change was shown; "
                    "look at it again before deciding",
                    path=change.id,
                    paths=moved,
                )
        stale = tuple(path for path in chosen if change.files[path].stale)
        if stale and not force:
            raise Conflict(
                f"{', '.join(stale)} changed since this change was made; approving would "
                "overwrite that edit (force it to approve anyway)",
                path=change.id,
                paths=stale,
            )
        if live_sizes is not None:
            applied = change.model_copy(
                update={
                    "files": {
                        path: change.files[path].model_copy(update={"content": content})
                        for path, content in concerned.items()
                    }
                }
            )
            require_within(applied.change_set(live_sizes), live_sizes, limits or Limits())
    if effect is Effect.REVERT:
        # The store puts back each file's base, but never over a write made
        # since (a stale file): that write is someone's, and stays live.
        concerned = {path: None for path in chosen if not change.files[path].stale}
    remaining = {path: file for path, file in change.files.items() if path not in chosen}
    folders_left = {path: made for path, made in change.folders.items() if path not in picked}
    if remaining or folders_left:
        state = change.state  # part of it decided; the rest stays as it was
    review = Review(action=action, by=by, at=when, paths=tuple(sorted(picked)))
    after = change.model_copy(
        update={
            "state": state,
            "files": remaining if state == "waiting" else change.files,
            "folders": folders_left if state == "waiting" else change.folders,
            "reviews": (*change.reviews, review),
        }
    )
    return after, effect, concerned


def _sequence_point(live_version: str) -> int:
    """``live_version`` as the point of the store's sequence it names; ``BadRequest`` if none."""
    # ASCII digits only, and few: int() takes "+1", " 1", "1_0" and other scripts' digits.
    digits = len(live_version)
    if not (
        0 < digits <= MAX_LIVE_VERSION_DIGITS and live_version.isascii() and live_version.isdigit()
    ):
        raise BadRequest("a live version is the number a listed change gave")
    return int(live_version)


def decided_folders(
    change: WaitingChange, effect: Effect, paths: Iterable[str] | None = None
) -> dict[str, bool]:
    """The folders a store makes (True) or removes (False) for a decision's ``effect``.

    ``paths`` as given to :func:`decide`. Applying carries out the change's
    folders; reverting a live change undoes them.
    """
    picked = set(change.folders) if paths is None else set(paths)
    chosen = {path: made for path, made in change.folders.items() if path in picked}
    if effect is Effect.APPLY:
        return chosen
    if effect is Effect.REVERT:
        return {path: not made for path, made in chosen.items()}
    return {}


# A person's words in a waiting change: each turn's prompt and ``by`` label,
# kept apart from the change so a store can seal them under the person's key.
Words = dict[str, tuple[str, str | None, str | None]]  # key -> (author, prompt, label)
_LATEST = ""  # the key of ``provenance`` (a turn's own keys are "turn:<id>")


def _label(provenance: Provenance) -> str | None:
    return None if provenance.by is None else provenance.by.label


def _silent(provenance: Provenance) -> Provenance:
    by = None if provenance.by is None else provenance.by.model_copy(update={"label": None})
    return provenance.model_copy(update={"prompt": None, "by": by})


def without_words_of(change: WaitingChange, user: str) -> WaitingChange:
    """``change`` once ``user`` is forgotten: no prompt or label of theirs in any of its turns."""
    return change.model_copy(
        update={
            "turns": {key: p.without_words_of(user) for key, p in change.turns.items()},
            "provenance": change.provenance.without_words_of(user),
        }
    )


def without_words(change: WaitingChange) -> tuple[WaitingChange, Words]:
    """``change`` with no prompt or ``by`` label left in it, and those words by whose they are.

    Only the words of someone (``Provenance.author``); a turn nobody typed
    (code, an edit without a name) keeps its text in the change.
    """
    words: Words = {}
    turns: dict[str, Provenance] = {}
    for key, provenance in change.turns.items():
        author = provenance.words_author
        if author is None:
            turns[key] = provenance  # no words of anyone's
            continue
        words[f"turn:{key}"] = (author, provenance.prompt, _label(provenance))
        turns[key] = _silent(provenance)
    latest = change.provenance
    if (author := latest.words_author) is not None:
        words[_LATEST] = (author, latest.prompt, _label(latest))
        latest = _silent(latest)
    return change.model_copy(update={"turns": turns, "provenance": latest}), words


def with_words(change: WaitingChange, words: Words) -> WaitingChange:
    """``change`` with the words ``without_words`` took out put back (those still known)."""

    def spoken(provenance: Provenance, key: str) -> Provenance:
        if key not in words:
            return provenance
        _, prompt, label = words[key]
        by = None if provenance.by is None else provenance.by.model_copy(update={"label": label})
        return provenance.model_copy(update={"prompt": prompt, "by": by})

    return change.model_copy(
        update={
            "turns": {k: spoken(p, f"turn:{k}") for k, p in change.turns.items()},
            "provenance": spoken(change.provenance, _LATEST),
        }
    )


__all__ = [
    "MAX_LIVE_VERSION_DIGITS",
    "NOTE_LINE",
    "OPEN_STATES",
    "REVIEW_MODES",
    "TRANSITIONS",
    "Action",
    "ChangeState",
    "Effect",
    "FileChange",
    "Review",
    "ReviewMode",
    "WaitingChange",
    "Words",
    "applied_provenance",
    "check_mode",
    "conversation_of",
    "decide",
    "decided_folders",
    "effective_mode",
    "folder_changes",
    "is_listed",
    "joins",
    "lay_over",
    "mark_stale",
    "mark_stale_all",
    "open_change",
    "open_state",
    "own_revision",
    "require_deletable",
    "saves_at_once",
    "status_after_store",
    "taught",
    "transition",
    "update",
    "with_words",
    "without_words",
]
