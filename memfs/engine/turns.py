"""The turn engine: ``Memory`` mounts an app's specs for each turn and commits what changed.

A turn resolves whose spaces it mounts (``NoIdentity`` if the sign-in gave
none), asks ``can_write``, loads each space, writes it out as a working copy
(copy mode) and renders the note. Ending it scans each working copy, diffs it
against the snapshot and does what :func:`memfs.core.policy.end_action` says:
store, hold for ``commit_manual``, skip (read-only) or refuse (loaded from the
last known copy). Every decision is the core's; this module does the I/O.

Nothing a turn wrote is deleted until it is stored or discarded: a space
whose store fails or conflicts is *kept* (``SpaceResult.kept``), the turn
stays open with its working copies, ``Turn.end`` again retries only the kept
spaces, and ``Memory.discard_turn`` drops them. A path the store refuses is
named in ``not_saved`` and the rest of its space is stored. A store that
refuses a turn because the person's memory was forgotten since it loaded
(``Forgotten``) ends that space ``not_saved``, and nothing of it is kept.
"""

from __future__ import annotations

import inspect
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio
from pydantic import Field

from memfs.core.errors import (
    AlreadyCommitted,
    ConfigError,
    Forgotten,
    InvalidName,
    MemfsError,
    NotFound,
    StoreUnavailable,
    TurnOpen,
)
from memfs.core.limits import apply_limits
from memfs.core.models import (
    By,
    ChangeSet,
    CommitMode,
    FileMeta,
    Frozen,
    Layer,
    Limits,
    Loaded,
    Provenance,
    SpaceRef,
    SpaceResult,
    Stored,
    Trace,
    TraceMount,
    TurnContext,
)
from memfs.core.names import check_identity
from memfs.core.note import NoteSpace, render_note
from memfs.core.policy import (
    EndAction,
    check_unique_paths,
    end_action,
    is_read_only,
    resolve_by,
    resolve_ref,
)
from memfs.core.review import NOTE_LINE, ReviewMode, saves_at_once
from memfs.core.specs import ExtraBody, OrgMemory, PersistentDir, Spec, UserMemory
from memfs.engine.seeds import SeedRecord, read_seed, sync_seed
from memfs.engine.sources import AppSource, Source, StoreSource
from memfs.engine.workspace import CopyWorkspace, Workspace
from memfs.stores.base import ManagedStore, Store

OnError = Callable[[BaseException, str], "Awaitable[None] | None"]


@dataclass
class Mount:
    """One space as a turn sees it: its folder, whether it may write, and its snapshot."""

    name: str
    path: Path
    space: str
    layer: Layer
    ref: SpaceRef
    read_only: bool
    commit: CommitMode
    from_last_known_copy: bool
    cursor: str | None
    snapshot: dict[str, str]  # path -> the exact revision this turn loaded
    sizes: dict[str, int]  # path -> size in bytes at the snapshot
    by: By | None
    source: Source = field(repr=False)
    review: ReviewMode = "none"  # for org spaces: how this turn's change is reviewed
    meta: dict[str, FileMeta] = field(default_factory=dict)  # path -> mode and times loaded
    folders: tuple[str, ...] = ()  # the folders the space stores, as loaded


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


@dataclass
class _Pending:
    """A manual mount's change set, held until ``commit_manual``."""

    mount: Mount
    changes: ChangeSet
    refused: dict[str, MemfsError]
    provenance: Provenance


class CommitResult:
    """What ending a turn did, space by space (keyed by mount name)."""

    def __init__(
        self,
        memory: Memory,
        session: str,
        turn: str,
        spaces: dict[str, SpaceResult],
        pending: dict[str, _Pending],
    ) -> None:
        self._memory = memory
        self.session = session
        self.turn = turn
        self.spaces = spaces
        self._pending = pending
        self._committed = False

    async def commit_manual(self) -> CommitResult:
        """Store every ``manual`` mount of this turn, once; returns the updated result."""
        if self._committed:
            raise AlreadyCommitted(
                "this turn's manual mounts were already committed; committing again would "
                "write twice",
                path=self.turn,
            )
        self._committed = True
        spaces = dict(self.spaces)
        left: dict[str, _Pending] = {}
        for name, pending in self._pending.items():
            spaces[name] = await self._memory._store(
                pending.mount, pending.changes, pending.refused, pending.provenance
            )
            if spaces[name].kept:
                # The store did not take it: the returned result holds it, to commit again.
                left[name] = pending
        return CommitResult(self._memory, self.session, self.turn, spaces, left)

    @property
    def pending(self) -> list[str]:
        """The manual mounts this result still holds uncommitted."""
        return sorted(self._pending)

    def summary(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "turn": self.turn,
            "spaces": {name: result.summary() for name, result in self.spaces.items()},
        }

    def __repr__(self) -> str:
        return f"CommitResult(session={self.session!r}, turn={self.turn!r}, spaces={self.spaces!r})"


class Turn:
    """One open turn of one session: its mounts, its note, and how to end it."""

    def __init__(
        self,
        memory: Memory,
        *,
        session: str,
        turn: str,
        root: Path,
        prompt: str | None,
        extra_body: ExtraBody,
        mounts: dict[str, Mount],
        note: str,
    ) -> None:
        self._memory = memory
        self.session = session
        self.id = turn
        self.root = root
        self.prompt = prompt
        self.extra_body = extra_body
        self.mounts = mounts
        self.note = note
        self.ended = False
        self.ending = False  # an end (or discard) is running
        # Mounts already committed before a crash, by name: ending skips them.
        self.done: dict[str, SpaceResult] = {}
        # Mounts whose store failed at an earlier end: their working copies stay
        # until a later end stores them or a discard drops them.
        self.kept: dict[str, SpaceResult] = {}
        # Mounts whose spec the configuration no longer has (restored from the record).
        self.orphaned: set[str] = set()

    def state(self) -> TurnState:
        return TurnState(
            session=self.session,
            turn=self.id,
            prompt=self.prompt,
            extra_body=dict(self.extra_body),
            note=self.note,
            mounts={
                # model_construct: every value comes from a validated load, and
                # validating a 10,000-file snapshot again costs at every turn start.
                name: MountState.model_construct(
                    name=name,
                    ref=m.ref,
                    read_only=m.read_only,
                    commit=m.commit,
                    from_last_known_copy=m.from_last_known_copy,
                    cursor=m.cursor,
                    snapshot=m.snapshot,
                    sizes=m.sizes,
                    by=m.by,
                    review=m.review,
                    meta=m.meta,
                    folders=m.folders,
                )
                for name, m in self.mounts.items()
            },
            done=dict(self.done),
            kept=dict(self.kept),
        )

    async def end(self) -> CommitResult:
        """Scan each working copy, commit what changed, and remove the session's folder.

        A space whose store fails is kept (see the module docstring): the turn
        then stays open, and ending it again retries only those spaces. So
        does a failure of ending itself: nothing is removed until it is stored.
        """
        if self.ended:
            raise NotFound("this turn has already ended", path=self.id)
        if self.ending:
            raise TurnOpen("this turn is already ending", path=self.session)
        self.ending = True
        try:
            result = await self._memory._end(self)
        finally:
            self.ending = False
        if not self.kept:
            self.ended = True
            self._memory._close(self)
        return result


class Memory:
    """An app's memory: a store and the specs mounted into every turn."""

    def __init__(
        self,
        store: Store,
        specs: Sequence[Spec],
        *,
        on_error: OnError | None = None,
        workdir: Path | str | None = None,
        limits: Limits | None = None,
        workspace: Workspace | None = None,
        seed_record: Path | None = None,
    ) -> None:
        specs = list(specs)
        for spec in specs:
            if not isinstance(spec, OrgMemory | UserMemory | PersistentDir):
                raise ConfigError(
                    "memory specs are built with org_memory(), user_memory() or persistent_dir()",
                    path=repr(spec),
                )
        check_unique_paths(specs)
        for spec in specs:
            seed = spec.seed if isinstance(spec, OrgMemory) else None
            if seed is not None and not Path(seed).is_dir():
                raise ConfigError("a seed must be an existing folder", path=str(seed))
        self.store = store
        self.specs = specs
        self.on_error = on_error
        self.limits = limits or Limits()
        self._workdir = None if workdir is None else Path(workdir)
        self._workspace = workspace
        # What was last seen of each seed folder; on disk when ``seed_record`` is set.
        self._seeds = SeedRecord(seed_record)
        self._seeded: dict[SpaceRef, Path] = {}  # every space a seed was brought into
        self._open: dict[str, Turn] = {}
        # The last copy this process loaded of each space, for when a load fails.
        self._last_known: dict[tuple[str, SpaceRef], Loaded] = {}

    @property
    def workspace(self) -> Workspace:
        """Copy mode under ``workdir`` (a temporary folder if none was given), unless set."""
        if self._workspace is None:
            if self._workdir is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="memfs-"))
            self._workspace = CopyWorkspace(
                self._workdir, max_file_bytes=self.limits.max_file_bytes
            )
        return self._workspace

    async def start_turn(
        self,
        session: str,
        extra_body: ExtraBody | None = None,
        prompt: str | None = None,
        *,
        turn: str | None = None,
    ) -> Turn:
        """Mount every spec for this session's next turn."""
        check_identity(session, what="session id")
        if session in self._open:
            kept = self._open[session].kept
            if kept:
                raise TurnOpen(
                    "this session's last turn kept spaces its store did not take "
                    f"({', '.join(sorted(kept))}); end the turn again to retry them, or "
                    "discard it to drop them",
                    path=session,
                )
            raise TurnOpen("this session already has an open turn; end it first", path=session)
        body: ExtraBody = dict(extra_body or {})
        turn_id = turn or f"t-{uuid.uuid4().hex[:12]}"
        check_identity(turn_id, what="turn id")
        # Resolve every identity before loading anything: a turn without a
        # signed-in person fails whole, it never mounts half its spaces.
        refs = [(spec, resolve_ref(spec, body)) for spec in self.specs]
        workspace = self.workspace
        turn_obj = Turn(
            self,
            session=session,
            turn=turn_id,
            root=workspace.root(session),
            prompt=prompt,
            extra_body=body,
            mounts={},
            note="",
        )
        self._open[session] = turn_obj
        try:
            outcomes: dict[str, tuple[Mount, Loaded] | Exception] = {}
            async with trio.open_nursery() as nursery:
                for spec, ref in refs:
                    nursery.start_soon(self._mount, outcomes, turn_obj, spec, ref)
            # Loads run concurrently; a mistake in one is raised as itself, the first in
            # spec order, not wrapped in an exception group.
            mounts: dict[str, Mount] = {}
            loaded: dict[str, Loaded] = {}
            for spec, _ in refs:
                outcome = outcomes[spec.path]
                if isinstance(outcome, Exception):
                    raise outcome
                mounts[spec.path], loaded[spec.path] = outcome
            turn_obj.mounts = mounts
            await workspace.open(turn_obj, loaded)
        except BaseException:
            del self._open[session]
            raise
        turn_obj.note = render_note(
            (self._note_space(spec, mounts[spec.path]) for spec, _ in refs),
            file_list_bytes=self.limits.note_file_list_bytes,
            limits=self.limits,
        )
        return turn_obj

    def restore_turn(self, state: TurnState) -> Turn:
        """An open turn again, from what a durable workspace wrote down before a crash.

        Nothing is loaded: the turn keeps its snapshot and cursors, so ending it
        commits against exactly what it loaded.
        """
        if state.session in self._open:
            raise TurnOpen("this session already has an open turn", path=state.session)
        specs = {spec.path: spec for spec in self.specs}
        turn = Turn(
            self,
            session=state.session,
            turn=state.turn,
            root=self.workspace.root(state.session),
            prompt=state.prompt,
            extra_body=state.extra_body,
            mounts={},
            note=state.note,
        )
        for name, m in state.mounts.items():
            spec = specs.get(name)
            source: Source
            if spec is None:
                # The turn's own record names its space: it is still ended (or
                # discarded) through the store that record names, never orphaned.
                turn.orphaned.add(name)
                source = (
                    _GoneSource(name)
                    if m.ref.layer == "dir"
                    else StoreSource(self.store, m.ref, state.session, m.review)
                )
            else:
                source = self.source_for(
                    spec, m.ref, state.session, state.turn, state.prompt, state.extra_body
                )
            if isinstance(source, StoreSource):
                source.review = m.review
            turn.mounts[name] = Mount(
                name=name,
                path=turn.root / name,
                space=m.ref.space,
                layer=m.ref.layer,
                ref=m.ref,
                read_only=m.read_only,
                commit=m.commit,
                from_last_known_copy=m.from_last_known_copy,
                cursor=m.cursor,
                snapshot=dict(m.snapshot),
                sizes=dict(m.sizes),
                by=m.by,
                source=source,
                review=m.review,
                meta=dict(m.meta),
                folders=tuple(m.folders),
            )
        turn.done = dict(state.done)
        turn.kept = dict(state.kept)
        self._open[state.session] = turn
        return turn

    async def discard_turn(self, session: str) -> CommitResult:
        """Drop what the session's open turn holds that is not stored yet, and end it.

        The explicit way to let go of kept spaces (or of a whole open turn):
        their working copies are removed and nothing of them is stored. Spaces
        already stored stay as they were.
        """
        turn = self.open_turn(session)
        if turn.ending:
            raise TurnOpen("this turn is ending; discard it after", path=session)
        turn.ending = True
        spaces: dict[str, SpaceResult] = {}
        try:
            for name, mount in turn.mounts.items():
                if name in turn.done:
                    spaces[name] = turn.done[name]
                    continue
                try:
                    changes, refused = await self.workspace.collect(turn.session, mount)
                except MemfsError:
                    changes, refused = ChangeSet(), {}
                dropped = tuple(sorted({*changes.paths, *refused}))
                spaces[name] = SpaceResult(
                    status="not_saved" if dropped else "skipped",
                    changes=changes,
                    not_saved=dropped,
                    error="discarded; nothing of it was stored" if dropped else None,
                    errors={path: "discarded" for path in dropped},
                    reason="discarded",
                )
            turn.kept = {}
            if isinstance(self.store, ManagedStore):
                await self._record_trace(self.store, turn, spaces)
        finally:
            turn.ending = False
        turn.ended = True
        self._close(turn)
        await self.workspace.close(turn.session)
        return CommitResult(self, turn.session, turn.id, spaces, {})

    async def kept_changes(self, session: str) -> dict[str, tuple[Mount, SpaceResult, ChangeSet]]:
        """The kept spaces of the session's open turn: mount, last result, and change set.

        The change set is read again from the working copy, which holds the
        kept files until they are stored or discarded (after a restart too).
        """
        turn = self.open_turn(session)
        found: dict[str, tuple[Mount, SpaceResult, ChangeSet]] = {}
        for name, result in sorted(turn.kept.items()):
            mount = turn.mounts[name]
            changes, _ = await self.workspace.collect(session, mount)
            found[name] = (mount, result, changes)
        return found

    def open_turns(self) -> list[Turn]:
        """Every open turn (ended ones that keep spaces too), by session."""
        return [self._open[session] for session in sorted(self._open)]

    async def forget_in_turn(self, turn: Turn, name: str) -> None:
        """A person's memory mounted as ``name`` was forgotten: nothing of it is stored.

        Its result is settled now (and written down, for a restart), so the
        turn's end never sends it; the store would refuse it anyway.
        """
        stored = turn.done.get(name)
        if stored is not None and stored.status in ("saved", "waiting"):
            # Stored before the forget (the turn is still open for another
            # space): it stays reported as stored, but names nothing of them.
            result = SpaceResult(status=stored.status, change=stored.change)
        else:
            result = SpaceResult(
                status="not_saved",
                error="this person's memory was forgotten during the turn; nothing of this "
                "space is stored",
                reason="forgotten",
            )
        turn.kept.pop(name, None)
        turn.done[name] = result
        await self.workspace.record(turn, name, result)

    def open_turn(self, session: str) -> Turn:
        """The session's open turn, or ``NotFound``."""
        try:
            return self._open[session]
        except KeyError:
            raise NotFound("this session has no open turn", path=session) from None

    async def _mount(
        self,
        outcomes: dict[str, tuple[Mount, Loaded] | Exception],
        turn: Turn,
        spec: Spec,
        ref: SpaceRef,
    ) -> None:
        try:
            outcomes[spec.path] = await self._load_mount(turn, spec, ref)
        except Exception as exc:
            outcomes[spec.path] = exc

    async def _load_mount(self, turn: Turn, spec: Spec, ref: SpaceRef) -> tuple[Mount, Loaded]:
        may_write = True
        if spec.can_write is not None:
            verdict = spec.can_write(turn.extra_body)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            may_write = bool(verdict)
        source = self.source_for(spec, ref, turn.session, turn.id, turn.prompt, turn.extra_body)
        key = (spec.path, ref)
        stale = False
        try:
            if isinstance(spec, OrgMemory) and spec.seed is not None:
                await self._sync_seed(ref, Path(spec.seed))
            loaded = await source.load(have=self.workspace.contents_held())
        except StoreUnavailable as exc:
            # Only the store being unavailable falls back; anything else a
            # load raises (an app's own bug, a config mistake) fails the turn.
            loaded, stale = await self._fall_back(key, exc, ref.space)
        else:
            self._last_known[key] = loaded
        mount = Mount(
            name=spec.path,
            path=turn.root / spec.path,
            space=ref.space,
            layer=ref.layer,
            ref=ref,
            read_only=is_read_only(spec.commit, may_write),
            commit=spec.commit,
            from_last_known_copy=stale,
            cursor=loaded.cursor,
            snapshot=dict(loaded.revisions),
            sizes=(
                dict(loaded.sizes)  # a lean load sizes every path
                if loaded.lean
                else {path: len(content) for path, content in loaded.files.items()}
            ),
            by=resolve_by(spec, turn.extra_body),
            source=source,
            review=source.review if isinstance(source, StoreSource) else "none",
            meta=dict(loaded.meta),
            folders=tuple(loaded.folders),
        )
        return mount, loaded

    async def _sync_seed(self, ref: SpaceRef, folder: Path) -> None:
        files = await trio.to_thread.run_sync(
            partial(read_seed, folder, max_file_bytes=self.limits.max_file_bytes)
        )
        previous = self._seeds.get(ref)
        result = await sync_seed(self.store, ref, files, previous)
        self._seeded[ref] = folder
        if result.manifest != previous:
            await self._seeds.put(ref, result.manifest)

    @property
    def seed_folders(self) -> list[Path]:
        """Every seed folder of these specs (what a watcher should watch)."""
        return [
            Path(spec.seed)
            for spec in self.specs
            if isinstance(spec, OrgMemory) and spec.seed is not None
        ]

    async def refresh_seeds(self) -> None:
        """Check every seed against the spaces it was brought into, now rather than next turn.

        Spaces seeded before this process started are known from the seed
        record, so a change made to a folder while nothing ran is caught here.
        """
        folders = {
            spec.space: Path(spec.seed)
            for spec in self.specs
            if isinstance(spec, OrgMemory) and spec.seed is not None
        }
        targets = dict(self._seeded)
        for ref in self._seeds.refs():
            if ref not in targets and ref.space in folders:
                targets[ref] = folders[ref.space]
        for ref, folder in targets.items():
            await self._sync_seed(ref, folder)

    def source_for(
        self,
        spec: Spec,
        ref: SpaceRef,
        session: str,
        turn: str,
        prompt: str | None,
        extra_body: ExtraBody,
    ) -> Source:
        """Where a spec's files come from and go to for one turn."""
        if isinstance(spec, PersistentDir):
            ctx = TurnContext(
                session=session, turn=turn, path=spec.path, prompt=prompt, extra_body=extra_body
            )
            return AppSource(spec, ctx)
        review = spec.review if isinstance(spec, OrgMemory) else "none"
        return StoreSource(self.store, ref, session, review)

    async def _fall_back(
        self, key: tuple[str, SpaceRef], exc: BaseException, space: str
    ) -> tuple[Loaded, bool]:
        await self._report(exc, space)
        last = self._last_known.get(key, Loaded())
        if last.lean:
            # A lean copy names blobs instead of holding bytes; with the store
            # down, it is a copy only if the workspace still holds every one
            # (a person's blobs go with their last turn).
            held = self.workspace.contents_held()
            if held is None or any(
                sha not in held for path, sha in last.shas.items() if path not in last.files
            ):
                return Loaded(), True
        return last, True

    async def _report(self, exc: BaseException, space: str) -> None:
        if self.on_error is None:
            return
        outcome = self.on_error(exc, space)
        if inspect.isawaitable(outcome):
            await outcome

    def _note_space(self, spec: Spec, mount: Mount) -> NoteSpace:
        return NoteSpace(
            path=mount.name,
            space=mount.space,
            layer=mount.layer,
            description=spec.description,
            writable=not mount.read_only,
            files=mount.sizes,
            from_last_known_copy=mount.from_last_known_copy,
            extra_lines=(
                (NOTE_LINE,)
                if not mount.read_only and not saves_at_once(mount.layer, mount.review)
                else ()
            ),
        )

    def _close(self, turn: Turn) -> None:
        self._open.pop(turn.session, None)

    async def _end(self, turn: Turn) -> CommitResult:
        spaces: dict[str, SpaceResult] = {}
        pending: dict[str, _Pending] = {}
        # Only once every space is stored (or dropped) do the working copies go:
        # an exception here leaves the turn open, to be ended again.
        for name, mount in turn.mounts.items():
            if name in turn.done:
                spaces[name] = turn.done[name]
                continue
            changes, refused = await self.workspace.collect(turn.session, mount)
            provenance = Provenance(
                session=turn.session, turn=turn.id, prompt=turn.prompt, by=mount.by
            )
            action = end_action(
                commit=mount.commit,
                read_only=mount.read_only,
                from_last_known_copy=mount.from_last_known_copy,
                has_changes=not changes.is_empty(),
            )
            spaces[name] = await self._finish(action, mount, changes, refused, provenance, pending)
            settled = turn.done.get(name)
            if settled is not None and settled.reason == "forgotten":
                # Forgotten while its store ran: that store was refused, or
                # erased by the forget. Nothing of the space is kept.
                spaces[name] = settled
                turn.kept.pop(name, None)
                continue
            if spaces[name].kept:
                turn.kept[name] = spaces[name]
            else:
                turn.kept.pop(name, None)
                turn.done[name] = spaces[name]
            await self.workspace.record(turn, name, spaces[name])
        if turn.kept:
            return CommitResult(self, turn.session, turn.id, spaces, pending)
        # Traced once the turn is over, so a retried end traces it once.
        if isinstance(self.store, ManagedStore):
            await self._record_trace(self.store, turn, spaces)
        await self.workspace.close(turn.session)
        return CommitResult(self, turn.session, turn.id, spaces, pending)

    async def _record_trace(
        self, store: ManagedStore, turn: Turn, spaces: Mapping[str, SpaceResult]
    ) -> None:
        """Give the store this turn's trace; a failure is reported, never fatal.

        The turn's changes are already stored, so losing its trace must not
        lose its result. App-defined dirs are not the store's, so they are left out.
        """
        try:
            kept = {name: mount for name, mount in turn.mounts.items() if mount.layer != "dir"}
            # A forgotten person's space leaves no name of theirs in a trace
            # written after the forget: the store took them out of the old ones.
            forgotten = {name for name, r in spaces.items() if r.reason == "forgotten"}
            files = {
                key: entry
                for key, entry in self.workspace.access(turn.session).items()
                if key.split("/", 1)[0] in kept.keys() - forgotten  # mount names are one segment
            }
            seen: dict[str, set[str]] | None = None
            if self.workspace.sees_access:
                seen = {name: set() for name in kept}
                for key in files:
                    name, path = key.split("/", 1)
                    seen[name].add(path)
            trace = Trace(
                session=turn.session,
                turn=turn.id,
                prompt=turn.prompt,
                mounts={
                    name: _trace_mount(
                        mount,
                        spaces[name],
                        None if seen is None else seen[name],
                        forgotten=name in forgotten,
                    )
                    for name, mount in kept.items()
                    if name in spaces
                },
                files=files,
            )
            await store.record_trace(trace)
        except Exception as exc:
            await self._report(exc, "trace")

    async def _finish(
        self,
        action: EndAction,
        mount: Mount,
        changes: ChangeSet,
        refused: dict[str, MemfsError],
        provenance: Provenance,
        pending: dict[str, _Pending],
    ) -> SpaceResult:
        errors = {path: str(exc) for path, exc in refused.items()}
        if action is EndAction.SKIP:
            discarded = tuple(sorted({*changes.paths, *refused}))
            return SpaceResult(
                status="skipped",
                changes=changes,
                not_saved=discarded,
                error="read-only this turn; changes were discarded" if discarded else None,
                errors=errors,
            )
        if action is EndAction.NOTHING:
            return SpaceResult(
                status="not_saved" if refused else "saved",
                not_saved=tuple(sorted(refused)),
                error=_first_error(refused),
                errors=errors,
                reason="refused" if refused else None,
            )
        if action is EndAction.MANUAL:
            pending[mount.name] = _Pending(mount, changes, refused, provenance)
            return SpaceResult(
                status="manual",
                changes=changes,
                not_saved=tuple(sorted(refused)),
                error=_first_error(refused),
                errors=errors,
            )
        if action is EndAction.REFUSE_STALE:
            unsaved = tuple(sorted({*changes.paths, *refused}))
            exc = StoreUnavailable(
                "the space was loaded from the last known copy, so its changes were not "
                f"sent: {', '.join(unsaved)}",
                path=mount.space,
            )
            await self._report(exc, mount.space)
            return SpaceResult(
                status="not_saved",
                changes=changes,
                not_saved=unsaved,
                error=str(exc),
                errors={**errors, **{p: "loaded from the last known copy" for p in changes.paths}},
                reason="last known copy",
            )
        return await self._store(mount, changes, refused, provenance)

    async def _store(
        self,
        mount: Mount,
        changes: ChangeSet,
        refused: dict[str, MemfsError],
        provenance: Provenance,
    ) -> SpaceResult:
        accepted, over = apply_limits(
            changes, mount.sizes, self.limits, base_folders=len(mount.folders)
        )
        refused = {**refused, **over}
        errors = {path: str(exc) for path, exc in refused.items()}

        def nothing_left(reason: str | None) -> SpaceResult:
            return SpaceResult(
                status="not_saved",
                changes=changes,
                not_saved=tuple(sorted(refused)),
                error=_first_error(refused),
                errors=errors,
                reason=reason,
            )

        if accepted.is_empty():
            return nothing_left(None)
        while True:
            try:
                stored = await mount.source.store(
                    accepted, cursor=mount.cursor, provenance=provenance
                )
            except InvalidName as exc:
                if exc.path not in accepted.paths:
                    return await self._store_failed(mount, changes, accepted, refused, exc)
                # The store refused one path (its own name rules, or a file it
                # does not hold): that path is named, the rest is stored.
                refused = {**refused, exc.path: exc}
                errors[exc.path] = str(exc)
                accepted = accepted.without([exc.path])
                if accepted.is_empty():
                    return nothing_left("refused")
                continue
            except Forgotten as exc:
                await self._report(exc, mount.space)
                unsaved = tuple(sorted({*changes.paths, *refused}))
                return SpaceResult(
                    status="not_saved",
                    changes=changes,
                    not_saved=unsaved,
                    error=str(exc),
                    errors={**errors, **{p: "forgotten" for p in changes.paths}},
                    reason="forgotten",
                )
            except Exception as exc:
                if isinstance(exc, ConfigError):
                    raise  # a mistake in the app or config: fail loudly
                return await self._store_failed(mount, changes, accepted, refused, exc)
            break
        if stored.status == "conflict":
            moved = stored.conflicts or accepted.paths
            unsaved = tuple(sorted({*accepted.paths, *refused}))
            return SpaceResult(
                status="not_saved",
                changes=changes,
                not_saved=unsaved,
                conflicts=tuple(moved),
                error=(
                    "changed by someone else since this turn loaded it, so nothing of this "
                    f"space was saved (its files are kept to merge): {', '.join(moved)}"
                ),
                errors={**errors, **{p: "changed since this turn loaded it" for p in moved}},
                reason="conflict",
                kept=True,
                bases={p: mount.snapshot.get(p) for p in accepted.paths},
            )
        return SpaceResult(
            status=stored.status,
            changes=changes,
            not_saved=tuple(sorted(refused)),
            error=_first_error(refused),
            errors=errors,
            revisions=stored.revisions,
            change=stored.change,
            reason="refused" if refused else None,
        )

    async def _store_failed(
        self,
        mount: Mount,
        changes: ChangeSet,
        accepted: ChangeSet,
        refused: Mapping[str, MemfsError],
        exc: Exception,
    ) -> SpaceResult:
        """The store did not take the space (down, locked, full): it is kept for a retry."""
        await self._report(exc, mount.space)
        unsaved = tuple(sorted({*accepted.paths, *refused}))
        errors = {path: str(error) for path, error in refused.items()}
        return SpaceResult(
            status="not_saved",
            changes=changes,
            not_saved=unsaved,
            error=f"the store failed (the files are kept; end the turn again to retry): {exc}",
            errors={**errors, **{p: f"the store failed: {exc}" for p in accepted.paths}},
            reason="store failed",
            kept=True,
            bases={p: mount.snapshot.get(p) for p in accepted.paths},
        )


class _GoneSource:
    """The source of an app-defined dir the configuration no longer has: it cannot store.

    Its open turn is still restored, so the space is kept (and readable) until
    discarded, instead of being orphaned on disk.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def _gone(self) -> StoreUnavailable:
        return StoreUnavailable(
            "the configuration no longer has this app-defined dir, so nothing can store it; "
            "discard the turn to drop it",
            path=self.name,
        )

    async def load(self, have: Container[str] | None = None) -> Loaded:
        raise self._gone()

    async def store(
        self, changes: ChangeSet, *, cursor: str | None, provenance: Provenance
    ) -> Stored:
        raise self._gone()


def _trace_mount(
    mount: Mount, result: SpaceResult, seen: set[str] | None, *, forgotten: bool = False
) -> TraceMount:
    """One mount as the turn's trace keeps it: what it carried and what became of it.

    ``seen``: the paths the turn opened or changed, where the workspace can
    tell; then only their revisions are kept, not the whole space's.
    ``forgotten``: the person was forgotten, so no path of the space is kept.
    """
    stored = result.status in ("saved", "waiting")
    snapshot = {} if forgotten else mount.snapshot
    return TraceMount(
        ref=mount.ref,
        read_only=mount.read_only,
        from_last_known_copy=mount.from_last_known_copy,
        cursor=mount.cursor,
        snapshot=(
            dict(snapshot)
            if seen is None
            else {path: snapshot[path] for path in sorted(seen) if path in snapshot}
        ),
        status=result.status,
        saved=tuple(p for p in result.changes.paths if p not in result.not_saved) if stored else (),
        not_saved=() if forgotten else result.not_saved,
        change=result.change,
    )


def _first_error(refused: Mapping[str, MemfsError]) -> str | None:
    if not refused:
        return None
    if len(refused) == 1:
        return str(next(iter(refused.values())))
    return f"{len(refused)} files were not saved; see errors"


__all__ = ["CommitResult", "Memory", "Mount", "OnError", "Turn"]
