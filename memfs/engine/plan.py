"""What a turn is, as values: its plan, its mounts, what it writes down, what it holds.

A turn starts by deciding everything — whose spaces it mounts, whether each
may write, what was loaded, how each is reviewed, who owns the session's
folder, the rendered note — into a frozen :class:`TurnPlan`. Only then does a
workspace lay it out, and a durable workspace writes down exactly that plan
(:class:`TurnState`), note included. The workspace protocol
(:mod:`memfs.engine.workspace`) is typed on these values, never on the
engine's live objects.

:class:`ManualHold` is the change set of an ended ``manual`` turn, held for
``Memory.commit_manual``. It is a plain value (JSON: contents in base64) so a
daemon can keep it on disk across a restart.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from pydantic import Field

from memfs.core.models import (
    By,
    ChangeSet,
    CommitMode,
    FileMeta,
    Frozen,
    Layer,
    Provenance,
    SpaceRef,
    SpaceResult,
)
from memfs.core.review import ReviewMode


class Owner(NamedTuple):
    """The Unix user (and group) a session's folder belongs to; ``None``: the daemon's."""

    uid: int | None
    gid: int | None


class MountState(Frozen):
    """A mount as a durable workspace writes it down, to rebuild the turn after a crash."""

    name: str
    ref: SpaceRef
    read_only: bool
    commit: CommitMode
    from_last_known_copy: bool
    cursor: str | None
    snapshot: dict[str, str]
    sizes: dict[str, int]
    by: By | None
    review: ReviewMode = "none"
    meta: dict[str, FileMeta] = Field(default_factory=dict)
    folders: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mount:
    """One space as a turn sees it: its folder, whether it may write, and its snapshot.

    ``review`` is the one place a turn carries its space's review mode: the
    spec's default, overridden by the store's own setting at load.
    """

    name: str
    path: Path
    space: str
    layer: Layer
    ref: SpaceRef
    read_only: bool
    commit: CommitMode
    from_last_known_copy: bool
    cursor: str | None
    snapshot: Mapping[str, str]  # path -> the exact revision this turn loaded
    sizes: Mapping[str, int]  # path -> size in bytes at the snapshot
    by: By | None
    review: ReviewMode = "none"  # for org spaces: how this turn's change is reviewed
    meta: Mapping[str, FileMeta] = field(default_factory=dict)  # path -> mode and times
    folders: tuple[str, ...] = ()  # the folders the space stores, as loaded

    def state(self) -> MountState:
        # model_construct: every value comes from a validated load, and
        # validating a 10,000-file snapshot again costs at every turn start.
        return MountState.model_construct(
            name=self.name,
            ref=self.ref,
            read_only=self.read_only,
            commit=self.commit,
            from_last_known_copy=self.from_last_known_copy,
            cursor=self.cursor,
            snapshot=dict(self.snapshot),
            sizes=dict(self.sizes),
            by=self.by,
            review=self.review,
            meta=dict(self.meta),
            folders=self.folders,
        )

    @classmethod
    def from_state(cls, state: MountState, root: Path) -> Mount:
        return cls(
            name=state.name,
            path=root / state.name,
            space=state.ref.space,
            layer=state.ref.layer,
            ref=state.ref,
            read_only=state.read_only,
            commit=state.commit,
            from_last_known_copy=state.from_last_known_copy,
            cursor=state.cursor,
            snapshot=dict(state.snapshot),
            sizes=dict(state.sizes),
            by=state.by,
            review=state.review,
            meta=dict(state.meta),
            folders=tuple(state.folders),
        )


class TurnState(Frozen):
    """An open turn, as a durable workspace writes it down."""

    session: str
    turn: str
    prompt: str | None
    extra_body: dict[str, Any]
    note: str
    mounts: dict[str, MountState]
    done: dict[str, SpaceResult] = Field(default_factory=dict)
    # Spaces whose store failed at an earlier end of this turn, kept for a retry.
    kept: dict[str, SpaceResult] = Field(default_factory=dict)
    # People forgotten while the turn was open: their words left it (``TurnPlan.forgetting``).
    forgotten: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class TurnPlan:
    """Everything a turn decided at its start, complete before anything is written."""

    session: str
    turn: str
    root: Path
    prompt: str | None
    extra_body: Mapping[str, Any]
    mounts: Mapping[str, Mount]
    note: str
    owner: Owner | None = None  # None: the workspace's own (the session's last owner)
    forgotten: frozenset[str] = frozenset()  # people forgotten since it started (``forgetting``)

    def state(
        self,
        done: Mapping[str, SpaceResult] | None = None,
        kept: Mapping[str, SpaceResult] | None = None,
    ) -> TurnState:
        return TurnState.model_construct(
            session=self.session,
            turn=self.turn,
            prompt=self.prompt,
            extra_body=dict(self.extra_body),
            note=self.note,
            mounts={name: mount.state() for name, mount in self.mounts.items()},
            done=dict(done or {}),
            kept=dict(kept or {}),
            forgotten=sorted(self.forgotten),
        )

    def people(self) -> set[tuple[str, str]]:
        """(org, user) of everyone with words in this turn (their memory, or their name),
        but those forgotten since it started."""
        return {(org, u) for org, u in _people(self.mounts.values()) if u not in self.forgotten}

    def involves(self, org: str, user: str) -> bool:
        return (org, user) in self.people()

    def forgetting(self, user: str) -> TurnPlan:
        """This plan once ``user`` (one of its :meth:`people`) is forgotten.

        The prompt goes: it was typed over their memory or by them, so it is
        theirs, as a store keeps it (``Trace.holders``). So does their label,
        wherever it is: in each mount's ``by`` and in every extra-body field
        holding it (the app's body is the one copy a spec's label was read
        from). Their id stays, as it does in the store after a forget.
        """
        return replace(
            self,
            prompt=None,
            extra_body=_without_labels(self.extra_body, self.mounts.values(), user),
            mounts={name: _unlabelled(mount, user) for name, mount in self.mounts.items()},
            forgotten=self.forgotten | {user},
        )


class HeldSpace(Frozen):
    """One ``manual`` space's change set, as its turn ended."""

    mount: MountState
    changes: ChangeSet
    refused: dict[str, str] = Field(default_factory=dict)  # path -> why it was not taken
    provenance: Provenance


class EndedSpace(Frozen):
    """A person's own space an ended turn saved (or settled) without holding it."""

    ref: SpaceRef
    cursor: str | None = None  # where the turn loaded it: a look at the store dates forgets by it


class ManualHold(Frozen):
    """What an ended turn holds for ``Memory.commit_manual``: its manual spaces.

    ``ended`` is every space's result as the turn ended, so a commit reports
    the whole turn. ``extra_body`` and ``prompt`` are the turn's, for an
    app-defined dir's ``store(ctx, ...)``.
    """

    session: str
    turn: str
    prompt: str | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    spaces: dict[str, HeldSpace]
    ended: dict[str, SpaceResult] = Field(default_factory=dict)
    # People forgotten since the turn ended: their words and spaces left it (``forgetting``).
    forgotten: list[str] = Field(default_factory=list)
    # The org the turn was of (its org and person spaces'): a held dir's ref is
    # of none, only the default. None: of none, or held by a memfs before it.
    org: str | None = None
    # Each person's own space the turn ended without holding (saved at once,
    # say), by name: its result in ``ended`` names their files, so forgetting
    # them, or a file of that space, settles it too (``forgetting``, ``without``).
    ended_people: dict[str, EndedSpace] = Field(default_factory=dict)

    def involves(self, org: str, user: str) -> bool:
        return (org, user) in self.people()

    def person_spaces(self) -> dict[str, SpaceRef]:
        """Every person's own space whose files this hold names, held or only ended, by name."""
        return {name: ref for name, (ref, _) in self.person_loads().items()}

    def person_loads(self) -> dict[str, tuple[SpaceRef, str | None]]:
        """:meth:`person_spaces`, each with the cursor the turn loaded it at."""
        loads = {name: (space.ref, space.cursor) for name, space in self.ended_people.items()}
        for name, held in self.spaces.items():
            if held.mount.ref.layer == "user":
                loads[name] = (held.mount.ref, held.mount.cursor)
        return loads

    def people(self) -> set[tuple[str, str]]:
        """(org, user) of everyone with words or memory here (their memory, their name, or
        an author's words), but those forgotten since the turn ended."""
        found = _people(space.mount for space in self.spaces.values())
        found |= {(s.ref.org, s.ref.user) for s in self.ended_people.values() if s.ref.user}
        found |= {
            (self.org or space.mount.ref.org, author)
            for space in self.spaces.values()
            if (author := space.provenance.author) is not None
        }
        return {(org, user) for org, user in found if user not in self.forgotten}

    def forgetting(self, org: str, user: str, settled: SpaceResult) -> ManualHold:
        """This hold once ``user`` of ``org`` is forgotten, as :meth:`TurnPlan.forgetting` does.

        Their own spaces' change sets go (``settled`` is what each ended as
        now); every other space's provenance keeps no prompt and no label of theirs.
        """
        gone = [name for name, ref in self.person_spaces().items() if ref.owned_by(org, user)]
        kept = self.without(gone, settled)
        spaces = {
            name: space.model_copy(
                update={
                    "mount": _unlabelled(space.mount, user),
                    "provenance": _without_words(space.provenance, user),
                }
            )
            for name, space in kept.spaces.items()
        }
        return kept.model_copy(
            update={
                "prompt": None,
                "extra_body": _without_labels(
                    self.extra_body, [space.mount for space in self.spaces.values()], user
                ),
                "spaces": spaces,
                "forgotten": sorted({*self.forgotten, user}),
            }
        )

    def without(self, names: Collection[str], settled: SpaceResult) -> ManualHold:
        """This hold with the spaces ``names`` gone, each ended as ``settled`` now.

        A file of a person's space forgotten since the turn ended: the store
        refuses that space's change set whole (its cursor is older than the
        forget), so it leaves the hold as their whole space does.
        """
        return self.model_copy(
            update={
                "spaces": {n: space for n, space in self.spaces.items() if n not in names},
                "ended": {**self.ended, **dict.fromkeys(names, settled)},
                "ended_people": {n: r for n, r in self.ended_people.items() if n not in names},
            }
        )


class _Attributed(Protocol):
    @property
    def ref(self) -> SpaceRef: ...

    @property
    def by(self) -> By | None: ...


def _people(mounts: Iterable[_Attributed]) -> set[tuple[str, str]]:
    """(org, user) of each person whose memory is mounted, or named as a mount's ``by``."""
    found: set[tuple[str, str]] = set()
    for mount in mounts:
        if mount.ref.layer == "user" and mount.ref.user is not None:
            found.add((mount.ref.org, mount.ref.user))
        if mount.by is not None:
            found.add((mount.ref.org, mount.by.id))
    return found


A = TypeVar("A", Mount, MountState)


def _unlabelled(mount: A, user: str) -> A:
    """``mount`` with no label of ``user`` in its ``by``."""
    if mount.by is None or mount.by.id != user or mount.by.label is None:
        return mount
    by = mount.by.model_copy(update={"label": None})
    if isinstance(mount, Mount):
        return replace(mount, by=by)
    return mount.model_copy(update={"by": by})


def _without_labels(
    extra_body: Mapping[str, Any], mounts: Iterable[_Attributed], user: str
) -> dict[str, Any]:
    """The extra body with no field, at any depth, holding a label of ``user`` (a ``by``'s)."""
    labels = {
        mount.by.label
        for mount in mounts
        if mount.by is not None and mount.by.id == user and mount.by.label is not None
    }
    return _without(extra_body, labels)


def _without(body: Mapping[str, Any], labels: set[str]) -> dict[str, Any]:
    """``body`` without the string fields holding one of ``labels``, at any depth."""
    kept: dict[str, Any] = {}
    for key, value in body.items():
        if isinstance(value, str) and value in labels:
            continue
        if isinstance(value, Mapping):
            value = _without(value, labels)
        elif isinstance(value, list):
            value = [
                _without(item, labels) if isinstance(item, Mapping) else item
                for item in value
                if not (isinstance(item, str) and item in labels)
            ]
        kept[key] = value
    return kept


def _without_words(provenance: Provenance, user: str) -> Provenance:
    """``provenance`` with no prompt, and no label or person of ``user``."""
    by = provenance.by
    if by is not None and by.id == user:
        by = by.model_copy(update={"label": None})
    person = None if provenance.person == user else provenance.person
    return provenance.model_copy(update={"prompt": None, "by": by, "person": person})


__all__ = [
    "EndedSpace",
    "HeldSpace",
    "ManualHold",
    "Mount",
    "MountState",
    "Owner",
    "TurnPlan",
    "TurnState",
]
