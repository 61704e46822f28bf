"""The turn engine: ``Memory`` mounts an app's specs for each turn and commits what changed.

A turn resolves whose spaces it mounts (``NoIdentity`` if the sign-in gave
none; one org for the whole turn), asks ``can_write``, loads each space and
renders the note: all of it decided into a frozen :class:`~memfs.engine.plan.TurnPlan`
before the workspace writes anything. Ending it (``Memory.end_turn``) scans
each working copy, diffs it against the snapshot and does what
:func:`memfs.core.policy.end_action` says: store, hold for ``commit_manual``,
skip (read-only) or refuse (loaded from the last known copy); how each space
ended is reported by :mod:`memfs.core.ending`. Every decision is the core's;
this module does the I/O.

Nothing a turn wrote is deleted until it is stored or discarded: a space
whose store fails or conflicts is *kept* (``SpaceResult.kept``), the turn
stays open with its working copies, ending again retries only the kept
spaces, and ``Memory.discard_turn`` drops them. A path the store refuses is
named in ``not_saved`` and the rest of its space is stored. A store that
refuses a turn because the person's memory was forgotten since it loaded
(``Forgotten``) ends that space ``not_saved``, and nothing of it is kept.

An ended turn's ``manual`` spaces are held as a value
(:class:`~memfs.engine.plan.ManualHold`, in ``CommitResult.held``) until
``Memory.commit_manual``; committing the same space twice is
``AlreadyCommitted``.
"""

from __future__ import annotations

import inspect
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Collection, Container, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import trio

from memfs.core import ending
from memfs.core.errors import (
    AlreadyCommitted,
    ConfigError,
    Forgotten,
    InvalidName,
    MemfsError,
    NotFound,
    StoreUnavailable,
    TraceFailed,
    TurnOpen,
)
from memfs.core.forgetting import dating
from memfs.core.limits import apply_limits
from memfs.core.models import (
    ChangeSet,
    Limits,
    Loaded,
    Provenance,
    SpaceRef,
    SpaceResult,
    Stored,
    Trace,
    TraceFile,
    TraceMount,
    TurnContext,
    org_of,
)
from memfs.core.names import check_identity, check_text
from memfs.core.note import NoteSpace, render_note, saving_for
from memfs.core.policy import (
    EndAction,
    check_one_org,
    check_unique_paths,
    end_action,
    is_read_only,
    is_shared,
    resolve_by,
    resolve_ref,
)
from memfs.core.review import ReviewMode
from memfs.core.specs import (
    ExtraBody,
    MemorySpec,
    OrgMemory,
    PersistentDir,
    Resolver,
    Spec,
    as_spec,
)
from memfs.engine.commits import DEFAULT_MAX_ITEMS, GroupCommit
from memfs.engine.plan import (
    EndedSpace,
    HeldSpace,
    ManualHold,
    Mount,
    MountState,
    Owner,
    TurnPlan,
    TurnState,
)
from memfs.engine.seeds import SeedRecord, read_seed, sync_seed
from memfs.engine.sources import AppSource, Source, StoreSource, store_is
from memfs.engine.workspace import CopyWorkspace, Workspace
from memfs.stores.base import ForgetLog, GroupCommitStore, ManagedStore, ReviewingStore, Store

OnError = Callable[[BaseException, str], "Awaitable[None] | None"]


class CommitResult:
    """What ending a turn did, space by space (keyed by mount name).

    ``files``: the access log, what the turn did to each file it touched
    (``<mount>/<path>``; empty where the workspace cannot see access, and
    for a commit). ``held``: its ``manual`` spaces, still to commit.
    ``committed``: this is the result of a commit, not of an end.
    """

    def __init__(
        self,
        memory: Memory,
        session: str,
        turn: str,
        spaces: dict[str, SpaceResult],
        held: ManualHold | None = None,
        files: Mapping[str, TraceFile] | None = None,
        *,
        committed: bool = False,
    ) -> None:
        self._memory = memory
        self.committed = committed
        self.session = session
        self.turn = turn
        self.spaces = spaces
        self.held = held
        self.files: dict[str, TraceFile] = dict(files or {})

    async def commit_manual(self) -> CommitResult:
        """Store every ``manual`` mount of this turn, once; returns the updated result."""
        return await self._memory.commit_manual(self)

    @property
    def pending(self) -> list[str]:
        """The manual mounts this result still holds uncommitted."""
        return [] if self.held is None else sorted(self.held.spaces)

    def summary(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "turn": self.turn,
            "spaces": {name: result.summary() for name, result in self.spaces.items()},
        }

    def __repr__(self) -> str:
        return f"CommitResult(session={self.session!r}, turn={self.turn!r}, spaces={self.spaces!r})"


class Turn:
    """One open turn of one session: its plan, and how far ending it has got.

    The plan (mounts, note, owner) is frozen; ``done`` and ``kept`` record the
    spaces an ending settled or kept, for a retry and a restart.
    """

    def __init__(self, memory: Memory, plan: TurnPlan, sources: Mapping[str, Source]) -> None:
        self._memory = memory
        self.plan = plan
        self.sources = dict(sources)
        self.ended = False
        self.ending = False  # an end (or discard) is running
        # Mounts already committed before a crash, by name: ending skips them.
        self.done: dict[str, SpaceResult] = {}
        # Mounts whose store failed at an earlier end: their working copies stay
        # until a later end stores them or a discard drops them.
        self.kept: dict[str, SpaceResult] = {}
        # Mounts whose spec the configuration no longer has (restored from the record).
        self.orphaned: set[str] = set()
        # A forget changed the turn and writing that down failed: it holds in
        # the turn all the same, and Memory.write_down writes it again.
        self.unwritten = False
        # Where the store had last forgotten each (org, user) as the turn
        # started ("0": never), as its owner noted (memfsd.words): what the
        # turn stores carries its author's (``Provenance.words_since``).
        self.words_since: dict[tuple[str, str], str] = {}

    @property
    def session(self) -> str:
        return self.plan.session

    @property
    def id(self) -> str:
        return self.plan.turn

    @property
    def root(self) -> Path:
        return self.plan.root

    @property
    def prompt(self) -> str | None:
        return self.plan.prompt

    @property
    def extra_body(self) -> ExtraBody:
        return self.plan.extra_body

    @property
    def author(self) -> str | None:
        """Whose words the turn's prompt is (``Provenance.author``): its person, else its by."""
        if self.person is not None:
            return self.person
        by = next((m.by for m in self.plan.mounts.values() if m.by is not None), None)
        return None if by is None or by.id in self.plan.forgotten else by.id

    @property
    def person(self) -> str | None:
        """The one person whose own memory the turn mounted (``Provenance.person``), if one.

        None once they are forgotten: nothing more of the turn is theirs.
        """
        people = {m.ref.user for m in self.plan.mounts.values() if m.layer == "user"}
        person = next(iter(people)) if len(people) == 1 else None
        return None if person in self.plan.forgotten else person

    @property
    def mounts(self) -> Mapping[str, Mount]:
        return self.plan.mounts

    @property
    def note(self) -> str:
        return self.plan.note

    def state(self) -> TurnState:
        return self.plan.state(done=self.done, kept=self.kept)

    async def end(self) -> CommitResult:
        """Scan each working copy, commit what changed, and remove the session's folder.

        The same as ``Memory.end_turn(turn.session)``, for this turn.
        """
        if self.ended:
            raise NotFound("this turn has already ended", path=self.id)
        return await self._memory.end_turn(self.session)


class Memory:
    """An app's memory: a store and the specs mounted into every turn.

    ``org``: the org resolver every spec inherits unless it names its own
    (``None``: org ``default``). A turn belongs to one org; specs that resolve
    to different orgs in one turn are a ``ConfigError``.
    """

    def __init__(
        self,
        store: Store,
        specs: Sequence[MemorySpec],
        *,
        org: Resolver | None = None,
        on_error: OnError | None = None,
        workdir: Path | str | None = None,
        limits: Limits | None = None,
        workspace: Workspace | None = None,
        seed_record: Path | None = None,
        store_batch_max: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        kinds = [as_spec(spec) for spec in specs]
        check_unique_paths(kinds)
        for spec in kinds:
            seed = spec.seed if isinstance(spec, OrgMemory) else None
            if seed is not None and not Path(seed).is_dir():
                raise ConfigError("a seed must be an existing folder", path=str(seed))
        if org is not None and not (isinstance(org, str) or callable(org)):
            raise ConfigError("org must be an extra-body field name or a callable", path=repr(org))
        self.store = store
        # Concurrent turn ends' stores and traces share one commit, where the
        # store can take them together (memfs.engine.commits).
        self.commits = (
            GroupCommit(store, max_items=store_batch_max)
            if isinstance(store, GroupCommitStore)
            else None
        )
        self.specs: list[Spec] = kinds
        self.org = org
        self.on_error = on_error
        self.limits = limits or Limits()
        self._workdir = None if workdir is None else Path(workdir)
        self._workspace = workspace
        # What was last seen of each seed folder; on disk when ``seed_record`` is set.
        self._seeds = SeedRecord(seed_record)
        self._seeded: dict[SpaceRef, Path] = {}  # every space a seed was brought into
        self._open: dict[str, Turn] = {}
        # Restored turns their workspace could not take back (leave_behind).
        self._left_behind: dict[str, Turn] = {}
        self._starting: set[str] = set()  # sessions whose turn is being planned
        # The manual spaces this process committed, by (session, turn).
        self._committed: dict[tuple[str, str], set[str]] = {}
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

    def refs(self, extra_body: ExtraBody) -> list[tuple[Spec, SpaceRef]]:
        """Each spec and the space it mounts for this extra body: one org, or an error."""
        refs = [(spec, resolve_ref(spec, extra_body, org=self.org)) for spec in self.specs]
        check_one_org(ref for _, ref in refs)
        return refs

    async def start_turn(
        self,
        session: str,
        extra_body: ExtraBody | None = None,
        prompt: str | None = None,
        *,
        turn: str | None = None,
        owner: Owner | None = None,
    ) -> Turn:
        """Mount every spec for this session's next turn.

        ``owner``: the Unix user the session's folder is given to (a workspace
        that can, the daemon's); ``None`` keeps the workspace's own.
        """
        check_identity(session, what="session id")
        # Before anything is mounted: the prompt is kept (and sealed) as UTF-8 at the end.
        check_text(prompt, what="prompt")
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
        if session in self._starting:
            raise TurnOpen("this session's turn is starting", path=session)
        body: ExtraBody = dict(extra_body or {})
        turn_id = turn or f"t-{uuid.uuid4().hex[:12]}"
        check_identity(turn_id, what="turn id")
        # Resolve every identity before loading anything: a turn without a
        # signed-in person fails whole, it never mounts half its spaces.
        refs = self.refs(body)
        workspace = self.workspace
        root = workspace.root(session)
        self._starting.add(session)
        try:
            outcomes: dict[str, tuple[Mount, Loaded, Source] | Exception] = {}
            async with trio.open_nursery() as nursery:
                for spec, ref in refs:
                    nursery.start_soon(
                        self._mount, outcomes, spec, ref, (session, turn_id, prompt, body, root)
                    )
            # Loads run concurrently; a mistake in one is raised as itself, the first in
            # spec order, not wrapped in an exception group.
            mounts: dict[str, Mount] = {}
            loaded: dict[str, Loaded] = {}
            sources: dict[str, Source] = {}
            for spec, _ in refs:
                outcome = outcomes[spec.path]
                if isinstance(outcome, Exception):
                    raise outcome
                mounts[spec.path], loaded[spec.path], sources[spec.path] = outcome
            # Everything is decided before anything is written: the plan a
            # durable workspace writes down holds the note the agent gets.
            plan = TurnPlan(
                session=session,
                turn=turn_id,
                root=root,
                prompt=prompt,
                extra_body=body,
                mounts=mounts,
                note=render_note(
                    (self._note_space(spec, mounts[spec.path]) for spec, _ in refs),
                    limits=self.limits,
                ),
                owner=owner,
            )
            await workspace.open(plan, loaded, partial(_fetch, sources))
            turn_obj = Turn(self, plan, sources)
            self._open[session] = turn_obj
        finally:
            self._starting.discard(session)
        return turn_obj

    def restore_turn(self, state: TurnState) -> Turn:
        """An open turn again, from what a durable workspace wrote down before a crash.

        Nothing is loaded: the turn keeps its snapshot and cursors, so ending it
        commits against exactly what it loaded.
        """
        if state.session in self._open:
            raise TurnOpen("this session already has an open turn", path=state.session)
        root = self.workspace.root(state.session)
        mounts = {name: Mount.from_state(m, root) for name, m in state.mounts.items()}
        sources: dict[str, Source] = {}
        orphaned: set[str] = set()
        for name, m in state.mounts.items():
            source, known = self._source_again(
                name, m, state.session, state.turn, state.prompt, state.extra_body
            )
            sources[name] = source
            if not known:
                orphaned.add(name)
        plan = TurnPlan(
            session=state.session,
            turn=state.turn,
            root=root,
            prompt=state.prompt,
            extra_body=state.extra_body,
            mounts=mounts,
            note=state.note,
            forgotten=frozenset(state.forgotten),
        )
        turn = Turn(self, plan, sources)
        turn.orphaned = orphaned
        turn.done = dict(state.done)
        turn.kept = dict(state.kept)
        if isinstance(self.store, ForgetLog):
            # Its start's marks are gone: its loads date each person's words,
            # too early at worst (their words dropped from its stores, never kept).
            turn.words_since = {
                (org, user): dating(mounts.values(), org, user) for org, user in plan.people()
            }
        self._open[state.session] = turn
        return turn

    def leave_behind(self, session: str) -> None:
        """Undo :meth:`restore_turn`: its workspace could not take the turn back.

        The turn is no longer open (ending it would find nothing to end);
        what its workspace wrote down stays there for a later start. It is
        kept aside, in :meth:`left_behind_turns`, for a forget to reach:
        :meth:`forget_person` and :meth:`forget_in_turn` write down what it
        keeps as they do for an open turn.
        """
        turn = self._open.pop(session, None)
        if turn is not None:
            self._left_behind[session] = turn

    def left_behind_turns(self) -> list[Turn]:
        """Every turn :meth:`leave_behind` set aside, by session."""
        return [self._left_behind[session] for session in sorted(self._left_behind)]

    def is_left_behind(self, turn: Turn) -> bool:
        return self._left_behind.get(turn.session) is turn

    def held_turns(self) -> list[Turn]:
        """Every turn a forget reaches: the open ones, then those :meth:`leave_behind` set aside."""
        return [*self.open_turns(), *self.left_behind_turns()]

    async def end_turn(self, session: str) -> CommitResult:
        """End the session's open turn: store what changed; the result carries the access log.

        A space whose store fails is kept (see the module docstring): the turn
        then stays open, and ending it again retries only those spaces. So
        does a failure of ending itself: nothing is removed until it is stored.
        """
        turn = self.open_turn(session)
        if turn.ending:
            raise TurnOpen("this turn is already ending", path=session)
        turn.ending = True
        try:
            result = await self._end(turn)
        finally:
            turn.ending = False
        if not turn.kept:
            turn.ended = True
            self._close(turn)
        return result

    async def commit_manual(self, held: ManualHold | CommitResult) -> CommitResult:
        """Store the ``manual`` spaces an ended turn holds; returns the whole turn's result.

        A space is committed once: asking again is ``AlreadyCommitted``. A
        space whose store fails is held again in the returned result
        (``held``), to commit later. An ended turn that holds nothing (no
        manual space changed, or each was refused, as one loaded from the last
        known copy is) commits nothing and is returned as it is.
        """
        if isinstance(held, CommitResult):
            if held.held is None:
                if held.committed:
                    raise AlreadyCommitted(
                        "this turn's manual mounts were already committed; committing again "
                        "would write twice",
                        path=held.turn,
                    )
                return held
            held = held.held
        key = (held.session, held.turn)
        committed = self._committed.setdefault(key, set())
        again = sorted(committed & held.spaces.keys())
        if again:
            raise AlreadyCommitted(
                f"this turn's manual mounts were already committed ({', '.join(again)}); "
                "committing again would write twice",
                path=held.turn,
            )
        spaces = dict(held.ended)
        left: dict[str, HeldSpace] = {}
        for name, space in held.spaces.items():
            mount = Mount.from_state(space.mount, self.workspace.root(held.session))
            source, _ = self._source_again(
                name, space.mount, held.session, held.turn, held.prompt, held.extra_body
            )
            refused = {path: MemfsError(why, path=path) for path, why in space.refused.items()}
            spaces[name], _ = await self._store(
                mount, source, space.changes, refused, space.provenance
            )
            if spaces[name].kept:
                left[name] = space  # the store did not take it: held again
            else:
                committed.add(name)
        rest = held.model_copy(update={"spaces": left, "ended": spaces}) if left else None
        return CommitResult(self, held.session, held.turn, spaces, rest, committed=True)

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
                spaces[name] = ending.discarded(changes, refused)
            # Written down before anything is removed: a crash from here on
            # finds the turn discarded, not kept (nor half of each).
            discarded = {name: r for name, r in spaces.items() if name not in turn.done}
            done, kept = dict(turn.done), turn.kept
            turn.done.update(discarded)
            turn.kept = {}
            if discarded:
                try:
                    await self.workspace.record(turn.session, turn.id, turn.done, turn.kept)
                except BaseException:
                    turn.done, turn.kept = done, kept  # not written down: still kept
                    raise
            files = self.workspace.access(session)
            if isinstance(self.store, ManagedStore):
                await self._record_trace(self.store, turn, spaces, files)
        finally:
            turn.ending = False
        turn.ended = True
        self._close(turn)
        await self.workspace.close(turn.session)
        return CommitResult(self, turn.session, turn.id, spaces, files=files)

    def _close(self, turn: Turn) -> None:
        """``turn`` is over; no last known copy of a person's space outlives the last turn over it.

        A person's copy names blobs only their turns hold: with none left it
        serves nothing, and kept it would grow with everyone ever served.
        """
        self._open.pop(turn.session, None)
        theirs = {m.ref for m in turn.mounts.values() if not is_shared(m.ref.layer)}
        if theirs:
            still = self.mounted()
            self.drop_last_known(lambda ref: ref in theirs and ref not in still)

    def mounted(self) -> set[SpaceRef]:
        """The spaces some turn holds (open, or set aside at start): their blobs are here."""
        return {mount.ref for turn in self.held_turns() for mount in turn.mounts.values()}

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

    def last_known_people(self) -> list[tuple[SpaceRef, str | None]]:
        """Each person's space this process keeps a last known copy of, and its cursor."""
        return [
            (key[1], loaded.cursor)
            for key, loaded in self._last_known.items()
            if not is_shared(key[1].layer)
        ]

    def drop_last_known(self, reaches: Callable[[SpaceRef], bool]) -> None:
        """Keep no last known copy of the spaces ``reaches`` says a forget reached.

        A copy names the files it held: one of them forgotten since (a file,
        or the whole person) must not be served back while the store is down.
        """
        for key in [key for key in self._last_known if reaches(key[1])]:
            del self._last_known[key]

    async def forget_in_turn(self, turn: Turn, name: str) -> None:
        """A person's memory mounted as ``name`` was forgotten: nothing of it is stored.

        Its result is settled now (and written down, for a restart), so the
        turn's end never sends it; the store would refuse it anyway.
        """
        turn.kept.pop(name, None)
        turn.done[name] = ending.forgotten_in_turn(turn.done.get(name))
        await self._write_down(turn)

    async def forget_person(
        self, org: str, user: str, turns: Collection[Turn] | None = None
    ) -> list[Turn]:
        """``user`` of ``org`` was forgotten: every open turn with their words forgets them.

        Each turn they are in (their memory mounted, or named as its ``by``)
        keeps no prompt and no label of theirs from now on, nor a part of
        them in its trace (:meth:`TurnPlan.forgetting`), and writes that down
        at once. Their spaces themselves are dropped by :meth:`forget_in_turn`.
        ``turns``: only those of the open turns (the ones started before the
        forget); None, every one. No last known copy of theirs is kept either
        way. Returns the turns that changed.
        """
        self.drop_last_known(lambda ref: ref.owned_by(org, user))
        changed = []
        failed: BaseException | None = None
        for turn in self.open_turns() if turns is None else turns:
            if not turn.plan.involves(org, user):
                continue
            turn.plan = turn.plan.forgetting(user)
            for name, mount in turn.mounts.items():
                if mount.layer == "dir":  # an app's dir is handed the prompt and body
                    turn.sources[name], _ = self._source_again(
                        name, mount.state(), turn.session, turn.id, turn.prompt, turn.extra_body
                    )
            changed.append(turn)
            try:
                await self._write_down(turn, words=True)
            except Exception as exc:
                # The next turns lose their words all the same: raised after them.
                failed = failed or exc
        if failed is not None:
            raise failed
        return changed

    async def write_down(self, turn: Turn) -> None:
        """Write down again what a forget changed in ``turn``, where that failed (``unwritten``).

        Not while the turn is ending: its end writes its record, and one
        written after the end removed it would outlive the turn.
        """
        if turn.unwritten and not turn.ending and not turn.ended:
            await self._write_down(turn, words=True)

    async def _write_down(self, turn: Turn, *, words: bool = False) -> None:
        """Write down the turn's settled spaces, and with ``words`` its words, for a restart.

        What a forget took out of the turn stays out of it in this process
        whatever the disk does: a write that fails (a full disk, EIO) marks
        the turn ``unwritten`` for :meth:`write_down` to try again, and is
        raised for the caller to report. Once marked, every write carries the
        words too, which an earlier failed write may not have.
        """
        state = turn.state() if words or turn.unwritten else None
        try:
            await self.workspace.record(turn.session, turn.id, turn.done, turn.kept, state=state)
        except BaseException:
            turn.unwritten = True
            raise
        if state is not None:
            turn.unwritten = False

    def forget_in_hold(self, held: ManualHold, org: str, user: str) -> ManualHold:
        """``held`` once ``user`` of ``org`` is forgotten (:meth:`ManualHold.forgetting`)."""
        return held.forgetting(org, user, ending.forgotten_in_turn(None))

    def forget_space_in_hold(self, held: ManualHold, name: str) -> ManualHold:
        """``held`` once a file of its person's space ``name`` is forgotten.

        The space leaves it whole (:meth:`ManualHold.without`).
        """
        return held.without([name], ending.forgotten_in_turn(None))

    def open_turn(self, session: str) -> Turn:
        """The session's open turn, or ``NotFound``."""
        try:
            return self._open[session]
        except KeyError:
            raise NotFound("this session has no open turn", path=session) from None

    async def _mount(
        self,
        outcomes: dict[str, tuple[Mount, Loaded, Source] | Exception],
        spec: Spec,
        ref: SpaceRef,
        turn: tuple[str, str, str | None, ExtraBody, Path],
    ) -> None:
        try:
            outcomes[spec.path] = await self._load_mount(spec, ref, *turn)
        except Exception as exc:
            outcomes[spec.path] = exc

    async def _load_mount(
        self,
        spec: Spec,
        ref: SpaceRef,
        session: str,
        turn: str,
        prompt: str | None,
        extra_body: ExtraBody,
        root: Path,
    ) -> tuple[Mount, Loaded, Source]:
        may_write = True
        if spec.can_write is not None:
            verdict = spec.can_write(extra_body)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            may_write = bool(verdict)
        source = self.source_for(spec, ref, session, turn, prompt, extra_body)
        key = (spec.path, ref)
        stale = False
        review: ReviewMode = "none"
        try:
            if isinstance(spec, OrgMemory) and spec.seed is not None:
                await self._sync_seed(ref, Path(spec.seed))
            loaded = await source.load(have=self.workspace.contents_held())
            if isinstance(source, StoreSource) and isinstance(spec, OrgMemory):
                review = await source.review_mode(spec.review, loaded)
        except StoreUnavailable as exc:
            # Only the store being unavailable falls back; anything else a
            # load raises (an app's own bug, a config mistake) fails the turn.
            loaded, stale = await self._fall_back(key, exc, ref.space)
            review = spec.review if isinstance(spec, OrgMemory) else "none"
        else:
            self._remember(key, loaded)
        mount = Mount(
            name=spec.path,
            path=root / spec.path,
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
            by=resolve_by(spec, extra_body),
            review=review,
            meta=dict(loaded.meta),
            folders=tuple(loaded.folders),
        )
        return mount, loaded, source

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
        return StoreSource(self.store, ref, session, commits=self.commits)

    def _source_again(
        self,
        name: str,
        mount: MountState,
        session: str,
        turn: str,
        prompt: str | None,
        extra_body: ExtraBody,
    ) -> tuple[Source, bool]:
        """The source of a mount written down earlier; ``False`` if no spec names it now.

        The turn's own record names its space: it is still ended (or
        discarded) through the store that record names, never orphaned.
        """
        spec = next((spec for spec in self.specs if spec.path == name), None)
        if spec is None:
            gone: Source = (
                _GoneSource(name)
                if mount.ref.layer == "dir"
                else StoreSource(self.store, mount.ref, session, commits=self.commits)
            )
            return gone, False
        return self.source_for(spec, mount.ref, session, turn, prompt, extra_body), True

    def _remember(self, key: tuple[str, SpaceRef], loaded: Loaded) -> None:
        """Keep ``loaded`` as the last known copy of a space, for when its store is down.

        A person's memory is kept without its bytes (only what names their
        blobs): caches of it must not outlive the turns that use it, or a
        forget this process never heard of could be served back from here.
        A load with its session's own waiting change laid over it is that
        session's view alone: the copy every session may be served stays.
        """
        if loaded.own_change is not None:
            return
        if is_shared(key[1].layer):
            self._last_known[key] = loaded
        elif loaded.lean:
            self._last_known[key] = loaded.model_copy(update={"files": {}})
        else:
            self._last_known.pop(key, None)

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
        # model_construct: every value comes from a validated load or spec, and
        # validating a 10,000-file size map again costs at every turn start.
        return NoteSpace.model_construct(
            path=mount.name,
            space=mount.space,
            layer=mount.layer,
            description=spec.description,
            writable=not mount.read_only,
            files=mount.sizes,
            from_last_known_copy=mount.from_last_known_copy,
            # Only a store that holds changes for a person makes them wait.
            saving=saving_for(
                mount.layer, mount.review, store_reviews=store_is(self.store, ReviewingStore)
            ),
        )

    async def _end(self, turn: Turn) -> CommitResult:
        spaces: dict[str, SpaceResult] = {}
        # Only once every space is stored (or dropped) do the working copies go:
        # an exception here leaves the turn open, to be ended again.
        ending_now: list[tuple[str, ChangeSet, dict[str, MemfsError]]] = []
        actions: dict[str, EndAction] = {}
        for name, mount in turn.mounts.items():
            settled = turn.done.get(name)
            # A manual space's change set is held only once the whole end is
            # through: an end that failed after it is made again, its hold too.
            if settled is not None and settled.status != "manual":
                spaces[name] = settled
                continue
            changes, refused = await self.workspace.collect(turn.session, mount)
            actions[name] = end_action(
                commit=mount.commit,
                read_only=mount.read_only,
                from_last_known_copy=mount.from_last_known_copy,
                has_changes=not changes.is_empty(),
            )
            ending_now.append((name, changes, refused))
        files = self.workspace.access(turn.session)
        # A turn whose one store goes to a store that can take the trace with
        # it commits once: that space ends last, its trace made from every
        # space's result (the others' need no store).
        storing = [entry for entry in ending_now if actions[entry[0]] is EndAction.STORE]
        traced_with: str | None = None
        if (
            len(storing) == 1
            and store_is(self.store, ManagedStore)
            and not turn.kept
            and isinstance(source := turn.sources[storing[0][0]], StoreSource)
            and source.traces_with_store
        ):
            traced_with = storing[0][0]
            ending_now = [entry for entry in ending_now if entry is not storing[0]] + storing
        traced = False
        managed = store_is(self.store, ManagedStore)
        manual: dict[str, tuple[ChangeSet, dict[str, MemfsError]]] = {}
        for at, (name, changes, refused) in enumerate(ending_now, start=1):
            action = actions[name]
            # The turn as it is now: a person forgotten while an earlier
            # space was stored has no words left in it (forget_person).
            mount, provenance = turn.mounts[name], _provenance(turn, name)
            if action is EndAction.MANUAL:
                manual[name] = (changes, refused)
            trace = (
                partial(self._trace_of, turn, dict(spaces), files, name)
                if name == traced_with
                else None
            )
            spaces[name], traced = await self._finish(
                action, mount, turn.sources[name], changes, refused, provenance, trace
            )
            settled = turn.done.get(name)
            if settled is not None and settled.reason == ending.FORGOTTEN:
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
            # The last record, where the turn closes right after it (nothing
            # kept, no trace still to record, no change set to hold first),
            # goes down with the turn's end.
            final = (
                at == len(ending_now) and not turn.kept and (traced or not managed) and not manual
            )
            await self.workspace.record(turn.session, turn.id, turn.done, turn.kept, final=final)
        # A space forgotten after it ended (while a later one stored) is reported so.
        for name, settled in turn.done.items():
            if name in spaces and settled.reason == ending.FORGOTTEN:
                spaces[name] = settled
        # Made once every space has ended, from the turn as it is then (see above).
        held = {
            name: HeldSpace(
                mount=turn.mounts[name].state(),
                changes=changes,
                refused={path: str(exc) for path, exc in refused.items()},
                provenance=_provenance(turn, name),
            )
            for name, (changes, refused) in manual.items()
            if spaces[name].reason != ending.FORGOTTEN
        }
        hold = (
            ManualHold(
                session=turn.session,
                turn=turn.id,
                prompt=turn.prompt,
                extra_body=dict(turn.extra_body),
                spaces=held,
                ended=spaces,
                forgotten=sorted(turn.plan.forgotten),
                org=org_of(mount.ref for mount in turn.mounts.values()),
                ended_people={
                    name: EndedSpace(ref=turn.mounts[name].ref, cursor=turn.mounts[name].cursor)
                    for name in spaces
                    if name not in held and turn.mounts[name].ref.layer == "user"
                },
            )
            if held
            else None
        )
        spaces = {name: spaces[name] for name in turn.mounts if name in spaces}  # spec order
        if hold is not None:  # down before the turn's record goes: a stop between loses nothing
            await self.workspace.keep_manual(hold)
        if turn.kept:
            return CommitResult(self, turn.session, turn.id, spaces, hold, files)
        # Traced once the turn is over, so a retried end traces it once.
        if managed and not traced:
            await self._record_trace(cast(ManagedStore, self.store), turn, spaces, files)
        await self.workspace.close(turn.session)
        return CommitResult(self, turn.session, turn.id, spaces, hold, files)

    def _trace_of(
        self,
        turn: Turn,
        spaces: Mapping[str, SpaceResult],
        access: Mapping[str, TraceFile],
        name: str,
        result: SpaceResult,
    ) -> Trace:
        """The turn's trace once the space ``name`` ended with ``result`` (the others before)."""
        return self._trace(turn, {**spaces, name: result}, access)

    def _trace(
        self,
        turn: Turn,
        spaces: Mapping[str, SpaceResult],
        access: Mapping[str, TraceFile],
    ) -> Trace:
        """What the store keeps of the turn. App-defined dirs are not the store's: left out."""
        # A person forgotten while the turn was open has no part in its trace
        # (a store would keep one under a key made again for them); the store
        # took their parts out of the traces written before.
        kept = {
            name: mount
            for name, mount in turn.mounts.items()
            if mount.layer != "dir"
            and not (mount.layer == "user" and mount.ref.user in turn.plan.forgotten)
        }
        # A space of theirs forgotten a file at a time leaves no name of theirs
        # in a trace written after the forget either.
        forgotten = {name for name, r in spaces.items() if r.reason == ending.FORGOTTEN}
        files = {
            key: entry
            for key, entry in access.items()
            if key.split("/", 1)[0] in kept.keys() - forgotten  # mount names are one segment
        }
        seen: dict[str, set[str]] | None = None
        if self.workspace.sees_access:
            seen = {name: set() for name in kept}
            for key in files:
                name, path = key.split("/", 1)
                seen[name].add(path)
        org = org_of(mount.ref for mount in turn.mounts.values())
        author = turn.author
        return Trace(
            session=turn.session,
            turn=turn.id,
            prompt=turn.prompt,
            author=author,
            words_since=(
                None if author is None or org is None else turn.words_since.get((org, author))
            ),
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

    async def _record_trace(
        self,
        store: ManagedStore,
        turn: Turn,
        spaces: Mapping[str, SpaceResult],
        access: Mapping[str, TraceFile],
    ) -> None:
        """Give the store this turn's trace; a failure is reported, never fatal.

        The turn's changes are already stored, so losing its trace must not
        lose its result.
        """
        try:
            trace = self._trace(turn, spaces, access)
            if self.commits is not None:
                await self.commits.record_trace(trace)
            else:
                await store.record_trace(trace)
        except Exception as exc:
            await self._report(exc, "trace")

    async def _finish(
        self,
        action: EndAction,
        mount: Mount,
        source: Source,
        changes: ChangeSet,
        refused: dict[str, MemfsError],
        provenance: Provenance,
        trace: Callable[[SpaceResult], Trace] | None = None,
    ) -> tuple[SpaceResult, bool]:
        """The space's result, and whether the turn's trace went with its store (``trace``)."""
        if action is EndAction.SKIP:
            return ending.skipped(changes, refused), False
        if action is EndAction.NOTHING:
            return ending.unchanged(refused), False
        if action is EndAction.MANUAL:
            return ending.held(changes, refused), False
        if action is EndAction.REFUSE_STALE:
            await self._report(
                StoreUnavailable(ending.stale_message(changes, refused), path=mount.space),
                mount.space,
            )
            return ending.refused_stale(changes, refused), False
        return await self._store(mount, source, changes, refused, provenance, trace)

    async def _store(
        self,
        mount: Mount,
        source: Source,
        changes: ChangeSet,
        refused: dict[str, MemfsError],
        provenance: Provenance,
        trace: Callable[[SpaceResult], Trace] | None = None,
    ) -> tuple[SpaceResult, bool]:
        accepted, over = apply_limits(
            changes, mount.sizes, self.limits, base_folders=len(mount.folders)
        )
        refused = {**refused, **over}
        if accepted.is_empty():
            return ending.nothing_left(changes, refused, None), False
        trace_failed: Exception | None = None
        while True:
            with_trace = None
            if trace is not None and isinstance(source, StoreSource):
                # The trace of the answer this very attempt gets, with what it refused.
                with_trace = _traced(trace, changes, dict(refused))
            try:
                if with_trace is not None:
                    assert isinstance(source, StoreSource)
                    stored = await source.store(
                        accepted,
                        cursor=mount.cursor,
                        provenance=provenance,
                        review=mount.review,
                        trace=with_trace,
                    )
                else:
                    stored = await source.store(
                        accepted, cursor=mount.cursor, provenance=provenance, review=mount.review
                    )
            except InvalidName as exc:
                if exc.path not in accepted.paths:
                    await self._report(exc, mount.space)
                    return ending.store_failed(
                        changes, accepted, refused, exc, mount.snapshot
                    ), False
                # The store refused one path (its own name rules, or a file it
                # does not hold): that path is named, the rest is stored.
                refused = {**refused, exc.path: exc}
                accepted = accepted.without([exc.path])
                if accepted.is_empty():
                    return ending.nothing_left(changes, refused, ending.REFUSED), False
                continue
            except Forgotten as exc:
                await self._report(exc, mount.space)
                return ending.forgotten(changes, refused, str(exc)), False
            except Exception as exc:
                if isinstance(exc, ConfigError):
                    raise  # a mistake in the app or config: fail loudly
                if with_trace is not None and isinstance(exc, TraceFailed):
                    # The store was undone with its trace: store once more
                    # without, and trace on its own after.
                    trace_failed, trace = exc, None
                    continue
                await self._report(exc, mount.space)
                return ending.store_failed(changes, accepted, refused, exc, mount.snapshot), False
            break
        if trace_failed is not None:
            await self._report(trace_failed, "trace")  # stored without it: it is what failed
        if stored.status == "conflict":
            moved = stored.conflicts or accepted.paths
            return ending.conflicted(changes, accepted, refused, moved, mount.snapshot), False
        return ending.stored(changes, refused, stored), with_trace is not None


def _provenance(turn: Turn, name: str) -> Provenance:
    """Where what the turn stores in the mount ``name`` came from, as the turn stands now."""
    provenance = Provenance(
        session=turn.session,
        turn=turn.id,
        prompt=turn.prompt,
        by=turn.mounts[name].by,
        person=turn.person,
    )
    author = provenance.author
    if author is None:
        return provenance
    since = turn.words_since.get((turn.mounts[name].ref.org, author))
    return provenance.model_copy(update={"words_since": since})


def _traced(
    trace: Callable[[SpaceResult], Trace], changes: ChangeSet, refused: dict[str, MemfsError]
) -> Callable[[Stored], Trace]:
    """The turn's trace made from a store's answer, as ending turns that answer into a result."""

    def made(stored: Stored) -> Trace:
        return trace(ending.stored(changes, refused, stored))

    return made


async def _fetch(
    sources: Mapping[str, Source], name: str, shas: Collection[str]
) -> Mapping[str, bytes]:
    """The bytes a lean load of mount ``name`` left out, from its store (``{}``: cannot)."""
    source = sources.get(name)
    if isinstance(source, StoreSource):
        return await source.fetch(shas)
    return {}


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
        self,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        raise self._gone()


def _trace_mount(
    mount: Mount, result: SpaceResult, seen: set[str] | None, *, forgotten: bool = False
) -> TraceMount:
    """One mount as the turn's trace keeps it: what it carried and what became of it.

    ``seen``: the paths the turn opened or changed, where the workspace can
    tell; None where it cannot (copy mode), and then the paths it changed.
    Only their revisions are kept, never the whole space's: the rest of what
    the turn carried is the space as of ``cursor`` (``files_as_of``), so a
    trace stays O(what the turn did) however large the space.
    ``forgotten``: the person was forgotten, so no path of the space is kept.
    """
    stored = result.status in ("saved", "waiting")
    snapshot = {} if forgotten else mount.snapshot
    if seen is None:
        seen = set(result.changes.paths) | set(result.not_saved)
    return TraceMount(
        ref=mount.ref,
        read_only=mount.read_only,
        from_last_known_copy=mount.from_last_known_copy,
        cursor=mount.cursor,
        snapshot={path: snapshot[path] for path in sorted(seen) if path in snapshot},
        status=result.status,
        saved=tuple(p for p in result.changes.paths if p not in result.not_saved) if stored else (),
        not_saved=() if forgotten else result.not_saved,
        change=result.change,
    )


__all__ = [
    "CommitResult",
    "ManualHold",
    "Memory",
    "Mount",
    "MountState",
    "OnError",
    "Owner",
    "Turn",
    "TurnPlan",
    "TurnState",
]
