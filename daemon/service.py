"""The daemon's service: turns and sessions as the control API sees them.

Implements :class:`memfs.api.target.ControlTarget` by driving a
:class:`memfs.Memory` whose workspace is the FUSE overlay, and shapes its
results into the control API's models. On start it brings back every turn a
crash left open, exactly as it was, so ``memfs turn end`` can still commit it.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio

from memfs._version import __version__
from memfs.api.models import (
    DaemonStatus,
    FileAccess,
    ForgetApplied,
    ForgetNotice,
    KeptFile,
    KeptSpace,
    KeptTurn,
    MountInfo,
    SessionClosed,
    SessionStatus,
    SpaceOutcome,
    StartTurnRequest,
    StoreHealth,
    TurnEnded,
    TurnStarted,
)
from memfs.core.errors import (
    AlreadyCommitted,
    BadRequest,
    Conflict,
    DiskFull,
    MemfsError,
    NotFound,
    TurnOpen,
)
from memfs.core.models import SpaceRef, SpaceResult
from memfs.core.names import check_identity, check_new_name, check_path
from memfs.engine.plan import ManualHold, Mount, MountState, Owner
from memfs.engine.turns import CommitResult, Memory, Turn, TurnState
from memfs.stores.base import ForgetLog
from memfsd.words import Judge, Key, Person, WordMarks
from memfsd.workspace import FOLDER_KEY, NOT_BACK, OverlayWorkspace

log = logging.getLogger("memfsd.service")


def outcome(result: SpaceResult) -> SpaceOutcome:
    return SpaceOutcome(
        status=result.status,
        **result.changes.summary(),
        not_saved=list(result.not_saved),
        error=result.error,
        conflicts=list(result.conflicts),
        errors=dict(result.errors),
        reason=result.reason,
        kept=result.kept,
        bases=dict(result.bases),
    )


def ended(result: CommitResult) -> TurnEnded:
    return TurnEnded(
        session=result.session,
        turn=result.turn,
        spaces={name: outcome(space) for name, space in result.spaces.items()},
        files={path: FileAccess(**seen.model_dump()) for path, seen in result.files.items()},
    )


# Forget notices heard recently, kept for turns starting meanwhile (``DaemonService.heard``).
# Past it the oldest falls off the list: a turn that started before it fell asks
# the store about everyone with words or memory in it, or, where the store cannot
# say (not a ``ForgetLog``), takes all their words and private spaces out.
HEARD_FORGETS = 1024


@dataclass
class DaemonService:
    memory: Memory
    workspace: OverlayWorkspace
    store_url: str
    state_dir: str
    # Ended turns with manual mounts, until committed: (session, turn) -> what they hold.
    # Written down too (OverlayWorkspace.save_manual), so a restart keeps them.
    manual: dict[tuple[str, str], ManualHold] = field(default_factory=dict)
    # Ended turns whose manual mounts were all committed (a second commit says so).
    committed: set[tuple[str, str]] = field(default_factory=set)
    # (session, turn) of each held change set a commit is storing now: one at a time,
    # and the forgets heard meanwhile, applied to it if the commit holds it again.
    _committing: dict[tuple[str, str], list[Callable[[ManualHold], ManualHold]]] = field(
        default_factory=dict
    )
    # FUSE requests served since start, by operation (the mount counts them).
    requests: Counter[str] = field(default_factory=Counter)
    # (session, turn, mount) of person spaces already dropped as forgotten.
    forgets_applied: set[tuple[str, str, str]] = field(default_factory=set)
    # Of those, the ones whose turn's records could not be rewritten without what
    # was forgotten (EIO, a full disk): the paths (None: the space) to try again.
    unscrubbed: dict[tuple[str, str, str], set[str | None]] = field(default_factory=dict)
    # The store's health as the daemon's listening connection finds it (memfsd.listen);
    # None: a store the daemon does not follow.
    store_health: StoreHealth | None = None
    # One look for forgets at a time: the poll and a notice may ask at once.
    forget_lock: trio.Lock = field(default_factory=trio.Lock)
    # One write of a held change set at a time (_write_hold).
    _hold_writes: trio.Lock = field(default_factory=trio.Lock)
    # Forgets heard of (a notice, or a shared store's notice), counted: a turn
    # starting meanwhile was not open to hear them, and asks after (start_turn).
    # The latest notices, with their count.
    heard: int = 0
    heard_forgets: deque[tuple[int, ForgetNotice]] = field(
        default_factory=lambda: deque(maxlen=HEARD_FORGETS)
    )
    # The count of the latest notice the list let fall off (0: none yet).
    heard_fell: int = 0
    # Where the store last forgot each person in an open turn, as it started (memfsd.words).
    words: WordMarks = field(default_factory=WordMarks)

    def recover(self) -> list[str]:
        """Reattach every turn a crash or stop left open; returns their sessions."""
        back = []
        torn = self.workspace.remove_torn_copies()
        if torn:
            log.info("removed %d records a crash left half written", torn)
        holds, self.committed = self.workspace.saved_manual()
        self.manual = {(hold.session, hold.turn): hold for hold in holds}
        records, unread = self.workspace.saved_turns()
        for record, why in unread:
            self._wait_unread(record, why)
        for record in records:
            try:
                state = TurnState.model_validate_json(json.dumps(record["state"]))
            except ValueError as exc:
                # Written by another memfs, or damaged in a way JSON still reads.
                self._wait_unread(record, str(exc))
                continue
            restored = False
            try:
                turn = self.memory.restore_turn(state)
                restored = True
                self.workspace.reattach(turn.state(), record)
            except Exception:
                log.exception("could not bring back the open turn of session %s", state.session)
                if restored:  # laid out whole or not at all: the engine sets it aside too
                    self.memory.leave_behind(state.session)
                    continue
                try:  # the workspace never saw it
                    self.workspace.keep_left_behind(state, record)
                except Exception:
                    log.exception("could not hold what session %s's turn names", state.session)
                continue
            log.info("brought back open turn %s of session %s", state.turn, state.session)
            if turn.orphaned:
                log.warning(
                    "the open turn of session %s mounts %s, which the configuration no longer "
                    "has; end or discard it",
                    state.session,
                    ", ".join(sorted(turn.orphaned)),
                )
            back.append(state.session)
        if not unread and len(back) == len(records):
            # Only now is every blob a turn needs held: the rest is nobody's.
            swept = self.workspace.overlay.blobs.sweep()
            if swept:
                log.info("removed %d blobs no open turn holds", swept)
            live = {(r["state"]["session"], r["state"]["turn"]) for r in records}
            ended = self.workspace.sweep_ended(live)
            if ended:
                log.info("removed what %d ended turns left in state_dir", ended)
        else:
            log.warning("an open turn did not come back; its blobs are left in place")
        return back

    def _wait_unread(self, record: Mapping[str, Any], why: str) -> None:
        """An open turn whose record cannot be read back: its session waits, the others start."""
        session = record[FOLDER_KEY]
        log.error("could not read back the open turn of session %s: %s", session, why)
        try:
            self.workspace.keep_unread(record)
        except Exception:
            log.exception("could not hold what session %s's turn names", session)

    async def finish_discards(self) -> list[str]:
        """Finish every discard a crash cut short; returns the sessions whose turn it ended.

        A discard writes down that it dropped the turn's spaces before it
        removes anything, so a restart that finds every space of a turn
        settled and one of them discarded completes it (the trace once, the
        working copies gone) instead of bringing back half a discarded turn.
        """
        finished = []
        for turn in self.memory.open_turns():
            settled = turn.mounts.keys() <= turn.done.keys() and not turn.kept
            if settled and any(r.reason == "discarded" for r in turn.done.values()):
                try:
                    await self.memory.discard_turn(turn.session)
                except (OSError, MemfsError):
                    # Its trace or its records (the store down, EIO): the turn
                    # stays open as it came back, and the others go on.
                    log.exception(
                        "could not finish discarding the turn of session %s that a crash cut "
                        "short; discard it again",
                        turn.session,
                    )
                    continue
                log.info("finished discarding the turn %s of session %s", turn.id, turn.session)
                finished.append(turn.session)
        return finished

    async def catch_up_forgets(self) -> list[tuple[str, str]]:
        """Drop what restored turns hold of a person forgotten while the daemon was down.

        The forget's notice found no daemon to tell, so ask the store, for each
        open turn's person space, whether it was forgotten after the turn
        loaded it, and what (the whole person, or which files); that leaves
        the turn as a notice would have made it.
        Returns the (session, mount) pairs dropped.
        """
        return await self._drop_forgotten_spaces("was forgotten while the daemon was down")

    async def poll_forgets(self, only: Collection[SpaceRef] | None = None) -> list[tuple[str, str]]:
        """Drop what open turns hold of a person another process forgot since they loaded it.

        What :meth:`catch_up_forgets` does at start, done every
        ``forget_poll_seconds`` while the daemon runs: a person forgetting
        their own memory through an app's ``my_memory`` handler (or through
        another daemon sharing the store) tells no daemon. A space already
        dropped, by a notice or an earlier look, is not asked about again.
        With ``only``, just the open turns' mounts of those spaces are asked
        about (a shared store's notice named them: ``memfsd.listen``).

        Either way it counts as heard, as a POST /forgotten does: a turn
        starting meanwhile is not open to be asked about here, and asks the
        store itself once open (``start_turn``). A catch-up after notices
        were lost (``only`` None) may stand for a forget made while it loaded.
        """
        self.heard += 1
        blobs = self.workspace.overlay.blobs
        if blobs.unremoved():  # a forgotten person's bytes an unlink failed to remove
            await trio.to_thread.run_sync(blobs.remove_unheld)
        return await self._drop_forgotten_spaces("was forgotten by another process", only)

    async def _drop_forgotten_spaces(
        self, why: str, only: Collection[SpaceRef] | None = None
    ) -> list[tuple[str, str]]:
        async with self.forget_lock:
            return await self._drop_forgotten_locked(why, only)

    async def _drop_forgotten_locked(
        self, why: str, only: Collection[SpaceRef] | None
    ) -> list[tuple[str, str]]:
        await self._write_down_forgets()
        store = self.memory.store
        if not isinstance(store, ForgetLog):
            return []
        turns = self.memory.held_turns()
        mounted = self.memory.mounted()
        for ref, cursor in self.memory.last_known_people():
            if ref not in mounted:
                # No turn holds its blobs, so it serves nothing but names:
                # let it go rather than ask after it at every look.
                self.memory.drop_last_known(ref.__eq__)
            elif (only is None or ref in only) and await store.forgotten_since(ref, cursor):
                self.memory.drop_last_known(ref.__eq__)
        live = {(turn.session, turn.id) for turn in turns}
        self.forgets_applied &= {key for key in self.forgets_applied if key[:2] in live}
        dropped = []
        for turn in turns:
            behind = self.memory.is_left_behind(turn)
            for name, mount in turn.mounts.items():
                key = (turn.session, turn.id, name)
                settled = turn.done.get(name)
                if mount.ref.layer != "user" or key in self.forgets_applied:
                    continue
                if only is not None and mount.ref not in only:
                    continue
                if not behind and settled is not None and settled.reason == "forgotten":
                    continue  # a notice (of the space, or of one file) already dropped it
                if not await store.forgotten_since(mount.ref, mount.cursor):
                    continue
                # Which files, so a file forget drops that file as its notice
                # would have (a notice may come just after this look, or never):
                # of those it loaded, and those it made or moved since.
                paths = {*mount.snapshot, *self.workspace.touched_paths(turn.session, name)}
                what = await store.forgotten_files_since(mount.ref, mount.cursor, paths)
                if turn not in self.memory.held_turns():
                    break  # it ended while the store answered: nothing of it is left to drop
                # Exactly what a notice of the person or of those files does (POST /forgotten).
                if what.everything:
                    org, user = mount.ref.org, mount.ref.user or ""
                    await self._forget_words(org, user, self.words.judge(store, org, user))
                if await self._drop_space(turn, name, [None] if what.everything else what.paths):
                    aside = " (left behind)" if behind else ""
                    log.info("session %s%s: %s %s", turn.session, aside, name, why)
                    dropped.append((turn.session, name))
        # Whose words each open turn, turn left behind and held change set
        # carries, forgotten since: their own spaces above are one way in; a
        # turn by them (their id its `by`), or one whose space of theirs was
        # settled by a file's forget, is another.
        carriers: list[tuple[Key, set[Person], list[Mount | MountState]]] = [
            ((turn.session, turn.id), turn.plan.people(), [*turn.mounts.values()])
            for turn in self.memory.held_turns()
        ]
        carriers += [
            ((held.session, held.turn), held.people(), [s.mount for s in held.spaces.values()])
            for held in self.manual.values()
        ]
        theirs: dict[Person, list[tuple[Key, list[Mount | MountState]]]] = {}
        for whose, people, mounts in carriers:
            for person in people:
                theirs.setdefault(person, []).append((whose, mounts))
        for (org, user), loads in sorted(theirs.items()):
            if only is not None and not any(ref.owned_by(org, user) for ref in only):
                continue
            judge = self.words.judge(store, org, user)  # the store asked once per person
            for whose, mounts in loads:
                if await judge(whose, mounts):
                    await self._forget_words(org, user, judge)
                    break
        self.words.keep_only({whose for whose, _, _ in carriers})
        # A held change set's space of a person forgotten since, or a file of
        # it: after their words above, since the space is what names them.
        for whose, held in list(self.manual.items()):
            for name, (ref, cursor) in held.person_loads().items():
                if only is not None and ref not in only:
                    continue
                if await store.forgotten_since(ref, cursor):
                    await self._drop_held_space(whose, name)
                    log.info("session %s (held for commit): %s %s", whose[0], name, why)
        return dropped

    async def _drop_space(self, turn: Turn, name: str, paths: Sequence[str | None]) -> bool:
        """A person's space ``name`` of ``turn`` was forgotten (``None``), or files of it.

        The one way a forget is applied to a turn: an open one settles the
        space and drops each path from its mount (every path of a file forget
        the notice or the store named), one set aside drops the space from
        its files (:meth:`_drop_left_behind`). Returns whether the space is
        out of the turn now.
        """
        if self.memory.is_left_behind(turn):
            await self._drop_left_behind(turn, name)
            return (turn.session, turn.id, name) in self.forgets_applied
        # A space stored before the forget stays reported so, naming nothing.
        with _written_down_later(turn):
            await self.memory.forget_in_turn(turn, name)
        key = (turn.session, turn.id, name)
        try:
            await self.workspace.drop_forgotten(turn.session, name, paths)
        except OSError as exc:
            # Out of the mount already (or of the tree, where a data file would not
            # go); its copies in the turn's records wait for the next look.
            self.unscrubbed.setdefault(key, set()).update(paths)
            _not_scrubbed(turn.session, exc)
        self.forgets_applied.add(key)
        return True

    async def _write_down_forgets(self) -> None:
        """Finish each forget a held turn took in but could not write down or scrub then."""
        held = {(turn.session, turn.id): turn for turn in self.memory.held_turns()}
        for turn in held.values():
            if turn.unwritten:
                with _written_down_later(turn):
                    await self.memory.write_down(turn)
        for key, paths in list(self.unscrubbed.items()):
            session, turn_id, name = key
            still = held.get((session, turn_id))
            if still is None or still.ended or self.memory.is_left_behind(still):
                del self.unscrubbed[key]  # its records went with it, or were dropped whole
                continue
            if still.ending:
                continue  # an end that keeps the turn open leaves it for the next look
            try:
                # Out of the mount already, most likely: then only the records are left.
                if not await self.workspace.drop_forgotten(session, name, paths):
                    await self.workspace.scrub_forgotten(session, name)
            except OSError as exc:
                _not_scrubbed(session, exc)
            else:
                del self.unscrubbed[key]

    async def _drop_held_space(self, key: Key, name: str) -> None:
        """A file of the person's space ``name`` of a held change set was forgotten: it goes.

        Held, or only ended (saved at once): either way the hold names its files.
        """
        held = self.manual.get(key)
        if held is None or name not in held.person_spaces():
            return  # committed, or dropped, while the store answered
        await self._forget_in_hold(key, partial(self.memory.forget_space_in_hold, name=name))

    async def _forget_in_hold(self, key: Key, forget: Callable[[ManualHold], ManualHold]) -> None:
        """Apply ``forget`` to the held change set ``key``, on disk at once.

        One being committed is read by the commit already: the store refuses
        what was forgotten, and a commit that fails holds its own copy again,
        with ``forget`` applied to it too (else that copy, written back, would
        bring the forgotten back).
        """
        pending = self._committing.get(key)
        if pending is not None:
            pending.append(forget)
        # Applied at once: a forget heard while this one is written down
        # applies on top of it, never to the copy from before.
        self.manual[key] = forget(self.manual[key])
        await self._write_hold(key)

    async def _write_hold(self, key: Key) -> None:
        """Write down the held change set ``key`` as it stands now; one such write at a time.

        Each write takes the hold as it is when its turn comes, so an older
        copy never lands over a forget applied meanwhile, and one committed
        meanwhile is not written back.
        """
        async with self._hold_writes:
            held = self.manual.get(key)
            if held is not None:
                await self.workspace.save_manual(held)

    async def _drop_left_behind(self, turn: Turn, name: str) -> bool:
        """A person's space in a turn no start brought back was forgotten, or a file of it.

        As an open turn drops it, but whole even for one file: the turn's
        journal could not be replayed, so which of its records that file's
        are is not known (a rename carries a file's bytes to another name).
        Its files are cleaned out whatever its result says (a space stored
        before the forget still has its rows and journal records), once per
        process (``forgets_applied``); a start's catch-up does it again,
        which finishes one a crash or a failed write cut short. Returns
        whether it did it now.
        """
        key = (turn.session, turn.id, name)
        if key in self.forgets_applied:
            return False
        with _written_down_later(turn):
            await self.memory.forget_in_turn(turn, name)
        try:
            await self.workspace.drop_left_behind(turn.session, turn.id, name)
        except Exception:
            # Its files are what kept it from coming back: one that cannot be
            # rewritten must not stop this forget elsewhere, nor a start.
            log.exception(
                "could not take %s out of the files of session %s's turn, left behind at start; "
                "tried again at the next look for forgets",
                name,
                turn.session,
            )
            return False
        self.forgets_applied.add(key)
        return True

    async def _forget_words(self, org: str, user: str, judge: Judge | None = None) -> None:
        """``user`` of ``org`` was forgotten: no open turn or held change set keeps their words.

        Open turns drop the prompt and their labels (``Memory.forget_person``);
        an ended turn's manual change set drops their spaces too, on disk at once.
        With ``judge``, only those whose words the forget came after
        (:mod:`memfsd.words`): a turn the person started once back holds new
        words. Without, every one (the notice of a forget just made).
        """
        turns = [
            turn
            for turn in self.memory.held_turns()
            if turn.plan.involves(org, user)
            and (judge is None or await judge((turn.session, turn.id), turn.mounts.values()))
        ]
        for turn in turns:  # one by one: a turn not written down is its own alone
            with _written_down_later(turn):
                await self.memory.forget_person(org, user, [turn])
        for turn in filter(self.memory.is_left_behind, turns):
            # Its spaces of theirs too: no look of the store reads its files again.
            for name, mount in turn.mounts.items():
                if mount.ref.owned_by(org, user):
                    await self._drop_space(turn, name, [None])
        if await self.workspace.drop_damaged_records():
            log.warning("removed the turn records set aside as damaged: a person was forgotten")
        for key, held in list(self.manual.items()):
            if not held.involves(org, user):
                continue
            if judge is None or await judge(
                (held.session, held.turn), [space.mount for space in held.spaces.values()]
            ):
                forget = partial(self.memory.forget_in_hold, org=org, user=user)
                await self._forget_in_hold(key, forget)

    async def start_turn(self, request: StartTurnRequest) -> TurnStarted:
        # A new session is a folder name in the mount root and in state_dir.
        check_new_name(request.session, what="session id")
        owner = None
        if request.uid is not None or request.gid is not None:
            owner = Owner(request.uid, request.gid)
        heard = self.heard
        turn = await self.memory.start_turn(
            request.session, request.extra_body, request.prompt, owner=owner
        )
        if self.heard != heard:
            await self._forgotten_while_starting(turn, heard)
        store = self.memory.store
        if isinstance(store, ForgetLog) and (people := turn.plan.people()):
            await self.words.mark(store, (turn.session, turn.id), people)
            # What it stores carries them: a store refuses the words of an
            # author forgotten since, even while the store is in flight.
            turn.words_since = self.words.marks((turn.session, turn.id), turn.mounts.values())
        return TurnStarted(
            session=turn.session,
            turn=turn.id,
            root=str(turn.root),
            mounts={
                name: MountInfo(
                    path=str(mount.path),
                    read_only=mount.read_only,
                    space=mount.space,
                    layer=mount.layer,
                )
                for name, mount in turn.mounts.items()
            },
            note=turn.note,
        )

    async def _forgotten_while_starting(self, turn: Turn, since: int) -> None:
        """Forgets heard while ``turn`` started (not open yet; ``heard`` was ``since``): what
        they would have dropped.

        Its spaces may have been loaded before the forget: the store says
        which (as a look at the store does), or, where it cannot, each notice
        heard drops what it names; a person forgotten (a notice on
        ``heard_forgets``, or found so by the store) takes their words out of it too.
        """
        notices = [notice for at, notice in self.heard_forgets if at > since]
        people = {(notice.org, notice.user) for notice in notices if notice.path is None}
        store = self.memory.store
        knows = isinstance(store, ForgetLog)
        fell = self.heard_fell > since and not knows
        if fell:
            # Which notices fell off the list is not known, and this store cannot
            # say what it forgot: anyone with words or memory in the turn may be theirs.
            log.warning(
                "over %d forgets were heard while session %s's turn started: "
                "it keeps nobody's words or private memory",
                HEARD_FORGETS,
                turn.session,
            )
            people |= turn.plan.people()
        for org, user in sorted(people):
            # The notice reached every other turn and change set open then.
            with _written_down_later(turn):  # the turn is open: its start is not undone
                await self.memory.forget_person(org, user, [turn])
        if not knows:
            # Nor can it say whether the start loaded before or after a forget:
            # each notice reaches the turn as it reached the turns open then.
            for name, mount in turn.mounts.items():
                ref = mount.ref
                paths = [notice.path for notice in notices if notice.reaches(ref)]
                if fell and ref.layer == "user":
                    paths = [None]
                if paths:
                    await self._drop_space(turn, name, [None] if None in paths else paths)
        refs = {mount.ref for mount in turn.mounts.values() if mount.layer == "user"}
        if refs:
            await self._drop_forgotten_spaces("was forgotten while the turn started", refs)
        # A shared store's notice names spaces, not people: everyone whose
        # words the turn carries is asked about, as a look does.
        if isinstance(store, ForgetLog):
            async with self.forget_lock:
                for org, user in sorted(turn.plan.people()):
                    judge = self.words.judge(store, org, user)  # no mark yet: its cursors
                    if await judge((turn.session, turn.id), turn.mounts.values()):
                        with _written_down_later(turn):
                            await self.memory.forget_person(org, user, [turn])

    async def end_turn(self, session: str) -> TurnEnded:
        try:
            result = await self.memory.end_turn(session)
        except NotFound:
            self._not_back(session, NotFound)
            raise
        # A retried end reports a manual space from the first; the first holds its
        # changes (written down by the end itself: Workspace.keep_manual).
        key = (session, result.turn)
        if result.held is not None and key not in self.manual and key not in self.committed:
            self.manual[key] = result.held
        return ended(result)

    async def discard_turn(self, session: str) -> TurnEnded:
        check_identity(session, what="session id")
        try:
            return ended(await self.memory.discard_turn(session))
        except NotFound:
            self._not_back(session, NotFound)
            raise

    def _not_back(self, session: str, error: type[MemfsError]) -> None:
        """Raise ``error`` saying why, where the session's turn did not come back at start.

        It has no open turn, yet its record and files wait in ``state_dir``:
        "no open turn" alone would send its operator looking elsewhere.
        """
        if session in self.workspace.left_behind:
            raise error(NOT_BACK, path=session)

    async def kept(self, session: str) -> KeptTurn:
        check_identity(session, what="session id")
        turn = self.memory.open_turn(session)
        spaces: dict[str, KeptSpace] = {}
        for name, (mount, result, changes) in (await self.memory.kept_changes(session)).items():
            files = {
                **{
                    p: KeptFile(change="created", base=None, size=len(c))
                    for p, c in changes.created.items()
                },
                **{
                    p: KeptFile(change="updated", base=mount.snapshot.get(p), size=len(c))
                    for p, c in changes.updated.items()
                },
                **{
                    p: KeptFile(change="deleted", base=mount.snapshot.get(p), size=None)
                    for p in changes.deleted
                },
            }
            spaces[name] = KeptSpace(
                space=mount.space,
                layer=mount.layer,
                reason=result.reason,
                error=result.error,
                conflicts=list(result.conflicts),
                files=dict(sorted(files.items())),
            )
        return KeptTurn(session=session, turn=turn.id, spaces=spaces)

    async def kept_file(self, session: str, name: str, path: str) -> bytes:
        check_identity(session, what="session id")
        check_path(path)
        found = await self.memory.kept_changes(session)
        if name not in found:
            raise NotFound("the session's open turn keeps no space by that name", path=name)
        changes = found[name][2]
        for files in (changes.created, changes.updated):
            if path in files:
                return files[path]
        if path in changes.deleted:
            raise NotFound("the kept turn deleted this file", path=path)
        raise NotFound("the kept space did not change this file", path=path)

    async def commit_turn(self, session: str, turn: str) -> TurnEnded:
        key = (session, turn)
        held = self.manual.get(key)
        if held is None:
            if key in self.committed:
                raise AlreadyCommitted(
                    "this turn's manual mounts were already committed; committing again would "
                    "write twice",
                    path=f"{session}/{turn}",
                )
            raise NotFound("no ended turn with manual mounts by that id", path=f"{session}/{turn}")
        if key in self._committing:
            raise Conflict(
                "this turn's manual mounts are being committed now; committing again would "
                "write twice",
                path=f"{session}/{turn}",
            )
        self._committing[key] = []
        try:
            result = await self.memory.commit_manual(held)
            if result.held is not None:  # a failed store: held again, for the next commit
                again = result.held
                for forget in self._committing[key]:  # heard while it was at the store
                    again = forget(again)
                self.manual[key] = again
                await self._write_hold(key)
            else:
                async with self._hold_writes:  # no forget's write of it lands after
                    await self.workspace.committed_manual(session, turn)
                    self.manual.pop(key, None)
                self.committed.add(key)
        finally:
            del self._committing[key]
        return ended(result)

    async def close_session(self, session: str) -> SessionClosed:
        check_identity(session, what="session id")
        # Closing would remove the record and files of a turn that did not come back.
        self._not_back(session, TurnOpen)
        if session not in self.workspace.overlay.sessions:
            raise NotFound("no such session", path=session)
        try:
            self.memory.open_turn(session)
        except NotFound:
            pass
        else:
            raise TurnOpen("the session has an open turn; end it first", path=session)
        if any(key[0] == session for key in self._committing):
            # Closing removes the change set the commit is storing, and its mark.
            raise TurnOpen(
                "a commit of the session's turn is in progress; close it once that is through",
                path=session,
            )
        await self.workspace.close_session(session)
        # The session's state (its manual change sets with it) is gone.
        for key in [key for key in self.manual if key[0] == session]:
            del self.manual[key]
        self.committed = {key for key in self.committed if key[0] != session}
        return SessionClosed(session=session)

    async def status(self) -> DaemonStatus:
        sessions = []
        for name, tree in sorted(self.workspace.overlay.sessions.items()):
            sessions.append(
                SessionStatus(
                    session=name,
                    turn=None if tree.turn is None else tree.turn.turn,
                    root=str(self.workspace.root(name)),
                    mounts=[] if tree.turn is None else sorted(tree.turn.mounts),
                    uid=tree.uid if tree.node.mode == 0o700 else None,
                    gid=tree.gid if tree.node.mode == 0o700 else None,
                    **self._open_turn_status(name),
                )
            )
        return DaemonStatus(
            version=__version__,
            pid=os.getpid(),
            mount_root=str(self.workspace.mount_root),
            state_dir=self.state_dir,
            store=self.store_url,
            sessions=sessions,
            requests=dict(sorted(self.requests.items())),
            store_health=self.store_health,
            left_behind=sorted(self.workspace.left_behind),
        )

    def _open_turn_status(self, session: str) -> dict[str, list[str]]:
        try:
            turn = self.memory.open_turn(session)
        except NotFound:
            return {}
        return {"kept": sorted(turn.kept), "orphaned": sorted(turn.orphaned)}

    async def forgotten(self, notice: ForgetNotice) -> ForgetApplied:
        """A store forgot a person, or one file of theirs: every open turn over it drops it."""
        check_identity(notice.org, what="org id")
        check_identity(notice.user, what="user id")
        if notice.path is not None:
            check_path(notice.path)
            if notice.space is None:
                raise BadRequest("a forgotten file needs the space it was in")
        dropped: dict[str, list[str]] = {}
        await self._write_down_forgets()
        self.heard += 1
        if len(self.heard_forgets) == self.heard_forgets.maxlen:
            self.heard_fell = self.heard_forgets[0][0]
        self.heard_forgets.append((self.heard, notice))
        self.memory.drop_last_known(notice.reaches)
        if notice.path is None:
            self.words.heard(notice.org, notice.user)
            await self._forget_words(notice.org, notice.user)
        for turn in self.memory.held_turns():
            for name, mount in turn.mounts.items():
                if not notice.reaches(mount.ref):
                    continue
                if await self._drop_space(turn, name, [notice.path]):
                    dropped.setdefault(turn.session, []).append(name)
        for whose, held in list(self.manual.items()):
            for name, ref in held.person_spaces().items():
                if notice.reaches(ref):
                    await self._drop_held_space(whose, name)
        return ForgetApplied(dropped=dropped)


def _not_scrubbed(session: str, exc: OSError) -> None:
    log.error(
        "could not take what was forgotten out of the turn of session %s (%s); it is out of "
        "the mount, and its records are rewritten at the next look for forgets",
        session,
        exc.strerror or exc,
    )


@contextmanager
def _written_down_later(turn: Turn) -> Iterator[None]:
    """Where a forget taken into ``turn`` could not be written down, say so and go on.

    The turn holds the forget all the same (``Turn.unwritten``) and keeps
    its files; the next look for forgets, or notice, writes it down. One
    session's record that cannot be written (a full disk, EIO, EACCES) must
    not stop the forget in the others, nor the daemon's start.
    """
    try:
        yield
    except (OSError, DiskFull) as exc:
        # DiskFull's own words are for a turn's end: the disk's are enough here.
        cause = exc.__cause__ if isinstance(exc, DiskFull) and exc.__cause__ else exc
        log.error(
            "could not write down a forget in the turn of session %s (%s); the turn holds it "
            "and keeps its other files, and it is written down at the next look for forgets",
            turn.session,
            getattr(cause, "strerror", None) or cause,
        )


__all__ = ["DaemonService"]
