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

A change carries its files' metadata (``FileChange.meta``) and the folders
the turns made or removed (``WaitingChange.folders``: path -> True for made,
False for removed); both go live with the change, and a reviewer decides a
folder by its path as they decide a file. Folders are never stale.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Literal

from pydantic import Field

from memfs.core.errors import Conflict, IllegalTransition, NotFound
from memfs.core.limits import require_within
from memfs.core.models import (
    By,
    ChangeSet,
    FileMeta,
    Frozen,
    Layer,
    Limits,
    Origin,
    Provenance,
    SpaceRef,
    Status,
    now,
)

ReviewMode = Literal["person", "after", "none"]
REVIEW_MODES: tuple[ReviewMode, ...] = ("person", "after", "none")
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

    @property
    def stale_paths(self) -> tuple[str, ...]:
        return tuple(sorted(path for path, file in self.files.items() if file.stale))

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
    if provenance.session is None:
        raise NotFound("a waiting change belongs to a conversation; this one has none")
    return WaitingChange(
        id=id,
        ref=ref,
        session=provenance.session,
        mode=mode,
        state="waiting" if mode == "person" else "live",
        files=_files(changes, snapshot, provenance.turn, loaded, edited),
        provenance=provenance,
        created_at=provenance.at,
        folders=folder_changes(changes),
    )


def applied_origin(change: WaitingChange, action: Action) -> Origin:
    """Where an applied file comes from: a reviewer's edit, else where the change came from."""
    return "edited" if action == "edit" else change.provenance.origin


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
            # the snapshot it first had; a live (review after) file went live with
            # the earlier turn, which the later turn has seen.
            keep: dict[str, object] = {"base": earlier.base}
            if change.state == "waiting":
                keep["loaded"] = earlier.loaded
            file = file.model_copy(update=keep)
        files[path] = file
    # A later turn's word on a folder replaces the earlier one, as for files.
    folders = {**change.folders, **folder_changes(changes)}
    return change.model_copy(update={"files": files, "provenance": provenance, "folders": folders})


OPEN_STATES: tuple[ChangeState, ...] = ("waiting", "live")


def mark_stale(
    change: WaitingChange, live: Mapping[str, int], others: Iterable[WaitingChange]
) -> WaitingChange:
    """Mark the files that changed under this change without it seeing them.

    ``live`` maps each path to the sequence number of its last live change
    (a revision or a deletion); ``others`` are the space's other changes.
    """
    rivals = [o for o in others if o.id != change.id and o.state in OPEN_STATES]

    def stale(path: str, file: FileChange) -> bool:
        if live.get(path, 0) > file.loaded:
            return True
        return any(
            path in o.files and file.loaded < o.files[path].edited < file.edited for o in rivals
        )

    files = {
        path: file.model_copy(update={"stale": stale(path, file)})
        for path, file in change.files.items()
    }
    return change.model_copy(update={"files": files})


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
) -> tuple[WaitingChange, Effect, dict[str, bytes | None]]:
    """A reviewer's move on some files (all by default) of a change.

    Returns the change after the move, the effect for the store, and the files
    the effect concerns (path -> content, None for a deletion). Approving or
    editing part of a waiting change applies those files and leaves the rest
    waiting; rejecting part drops those files. Editing replaces the content
    of the chosen files before they are applied. Rejecting a change that is
    already live (review ``after``) reverts its files to their bases.

    A move that applies files (``Effect.APPLY``) is refused, and nothing
    changes, when:

    - a chosen file is stale (``change`` as :func:`mark_stale` marked it) and
      ``force`` is not set: applying it would overwrite an edit the turn
      never saw, so it is a ``Conflict`` naming the stale files;
    - with ``live_sizes`` (each live file's size in the space), the applied
      files would pass ``limits`` (the defaults if None), as a turn's would:
      ``TooLarge`` or ``SpaceFull`` (:func:`memfs.core.limits.require_within`).
    """
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
        concerned = {path: None for path in chosen}  # the store puts back each file's base
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


__all__ = [
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
    "applied_origin",
    "decide",
    "decided_folders",
    "folder_changes",
    "is_listed",
    "mark_stale",
    "open_change",
    "saves_at_once",
    "status_after_store",
    "transition",
    "update",
]
