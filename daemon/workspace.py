"""The daemon's workspace: turns mounted as FUSE overlays, written down to survive a crash.

Implements :class:`memfs.engine.workspace.Workspace` over :class:`memfsd.overlay.Overlay`.
Opening a turn puts its snapshot into the blob cache and writes ``turn.json``
(everything needed to rebuild the turn) before the agent sees a file. Ending
one looks only at the paths the turn touched: O(touched), not O(space).

``turn.json`` is a JSON header line (the turn's state without its manifests,
the owner, ``"manifest": MANIFEST_FORMAT`` and ``"bases"``), then the
manifests as NUL-separated fields, a fixed number per file. Formats 2 and 3
have eight: mount, path, sha256, size, revision (empty: none), mode (octal
digits), mtime and ctime (nanoseconds; empty: unknown). In format 3 (this
one) a shared (org) mount's files are those of the base file its header names
(``"bases": {MOUNT: NAME}``, :mod:`memfsd.manifests`) changed by its rows: a
row replaces or adds a file, a row with an empty sha256 removes one; a
mount without a base has all its files in rows, as in format 2. Format 1 had
the first five fields and is still read, its files taking mode 0644 and
unknown times. The stored folders travel in the header, in each mount's state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import operator
import os
import shutil
import threading
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from functools import partial
from itertools import compress, filterfalse
from pathlib import Path
from typing import Any, NamedTuple

import trio

from memfs.api.models import MAX_ID
from memfs.core.diff import diff_folders, diff_touched
from memfs.core.ending import was_ending
from memfs.core.errors import (
    ConfigError,
    DiskFull,
    InvalidName,
    MemfsError,
    NotFound,
    StoreUnavailable,
    TooLarge,
    TurnOpen,
)
from memfs.core.lineage import Lineage
from memfs.core.models import DEFAULT_META, ChangeSet, Loaded, SpaceResult, TraceFile
from memfs.core.names import check_path
from memfs.core.policy import is_shared
from memfs.engine.plan import ManualHold, Mount, Owner, TurnPlan, TurnState
from memfs.engine.workspace import Fetch
from memfs.private import make_private_dirs, open_private
from memfsd import journal
from memfsd.access import FileAccess
from memfsd.durable import GroupSync, boot_id, fsync_each, fsync_path
from memfsd.manifests import BASE_FIELDS, SharedManifests, row, snapshots
from memfsd.nodes import MountTree, Snapshot, TurnTree
from memfsd.overlay import Overlay
from memfsd.spares import Spares

TURN_FILE = "turn.json"
# The spaces of an ending turn already stored (or, by a discard, dropped:
# reason "discarded"), and those kept because their store failed: {"turn":
# ID, "done": {NAME: SpaceResult}, "kept": {NAME: SpaceResult without its
# change set, which the working copy holds}}.
DONE_FILE = "done.json"
# An ended turn's manual spaces, until committed: manual/<turn>.json is a
# ManualHold (JSON, contents in base64); once all of it is committed it gives
# way to manual/<turn>.committed (empty), so a second commit says so.
MANUAL_DIR = "manual"
# In a turn's folder: made once its record and blobs are on disk (the
# turn's first sync, memfsd.durable). A turn.json written before the machine
# last booted comes back only with it.
DURABLE_FILE = "durable"
# In a turn's folder: made at its end's first collect, before any store hears
# of it. A turn brought back with it comes back frozen, as it was: a write let
# in after a crash between a store and done.json would be to a space already
# stored (its next end a conflict with itself, or a change never stored).
ENDING_FILE = "ending"
# A turn folder's marks: empty, read by no one but a start, so kept as spares at its end.
MARKS = (DURABLE_FILE, ENDING_FILE)
# The key :meth:`OverlayWorkspace.saved_turns` adds to each record: its session folder's name.
FOLDER_KEY = "folder"
# What a session whose turn a start could not bring back is told, at every call it cannot take.
NOT_BACK = (
    "the session's last turn could not be brought back when the daemon started "
    "(see its log); its record and files are kept in state_dir until a start brings it back"
)
# A turn.json or held change set that could not be read at start, set aside.
DAMAGED_SUFFIX = ".damaged"
# The copy _write_atomic writes beside its target before the rename: one a
# crash left is nothing anyone reads, and may hold a person's words.
TORN_SUFFIX = ".tmp"
MANIFEST_FORMAT = 3  # turn.json: a JSON header line, then NUL-separated manifest fields
_FIELDS = {1: 5, 2: 8, 3: 8}  # fields per file, by manifest format

log = logging.getLogger("memfsd.workspace")

# Each mount's snapshot as the overlay takes it, by mount name.
Snapshots = dict[str, dict[str, Snapshot]]
# One mount's blobs taken: (stored, held from the cache, gone, manifest and what became of it).
Taken = tuple[list[str], list[str], list[str], tuple[dict[str, str], Snapshots] | None]


class SavedTurns(NamedTuple):
    """The turns a start finds written down and never ended."""

    records: list[dict[str, Any]]  # each turn's record, its session under FOLDER_KEY
    # A turn whose record names what it is but not what its end did (an
    # unreadable done.json), and why: it waits for a start that can read it.
    unread: list[tuple[dict[str, Any], str]]


class OverlayWorkspace:
    sees_access = True  # every open and change goes through the mount

    def __init__(
        self,
        overlay: Overlay,
        mount_root: Path,
        *,
        invalidate: Callable[[Sequence[tuple[int, str]]], None] | None = None,
        invalidate_inodes: Callable[[Sequence[int]], None] | None = None,
    ) -> None:
        self.overlay = overlay
        self.mount_root = mount_root
        self._invalidate = invalidate
        self._invalidate_inodes = invalidate_inodes
        self._owners: dict[str, tuple[int | None, int | None]] = {}
        # One ``record`` of a session at a time, each of the turn as it stands then.
        self._recording: dict[str, trio.Lock] = {}
        # Each session's turn whose end wrote its final record: none is written after.
        self._ended_turn: dict[str, str] = {}
        # Sessions whose turn, written down, no start brought back (keep_left_behind).
        self.left_behind: set[str] = set()
        # Their (session, turn, space) whose blobs a forget let go of (drop_left_behind).
        self._let_go: set[tuple[str, str, str]] = set()
        # turn.json is read, edited and written whole: one writer at a time
        # (re-entered by a left-behind space's drop, which rewrites it too).
        self._rewriting = threading.RLock()
        self.manifests = SharedManifests(overlay.state_dir, _write_atomic)
        # This boot of the machine: a turn.json written in it is whole (the page
        # cache kept it); one from an earlier boot only if it was made durable.
        self.boot = boot_id()

    @property
    def spares(self) -> Spares:
        return self.overlay.spares

    def root(self, session: str) -> Path:
        return self.mount_root / session

    def set_owner(self, session: str, uid: int | None, gid: int | None) -> None:
        """Give the session's directory to a Unix user (mode 0700) from its next turn on."""
        self._owners[session] = (uid, gid)

    def owner(self, session: str) -> tuple[int | None, int | None] | None:
        """The owner :meth:`set_owner` gave the session, if any."""
        return self._owners.get(session)

    def restore_owner(self, session: str, owner: tuple[int | None, int | None] | None) -> None:
        """Put back what :meth:`owner` returned (a turn start that failed changes nothing)."""
        if owner is None:
            self._owners.pop(session, None)
        else:
            self._owners[session] = owner

    def turn_file(self, session: str) -> Path:
        return self.overlay.session_dir(session) / TURN_FILE

    def contents_held(self) -> Container[str]:
        return self.overlay.blobs.held()

    async def open(self, plan: TurnPlan, loaded: Mapping[str, Loaded], fetch: Fetch) -> None:
        if plan.session in self.left_behind:
            # Refused before anything is taken: undoing a failed start lets
            # go of the session's holds, which are that turn's.
            raise TurnOpen(NOT_BACK, path=plan.session)
        manifests: dict[str, dict[str, str]] = {}
        # The plan's owner, from this turn on; none named: the session's last.
        owner = plan.owner or Owner(*self._owners.get(plan.session, (None, None)))
        uid, gid = owner
        state = plan.state()
        last = list(plan.mounts)[-1] if plan.mounts else None
        # The mounts' maps are copies of the loads' own, so what a load's
        # lineage says of its maps holds for the mount's.
        lineages = {name: loaded[name].lineage for name in plan.mounts}

        def write_state(manifest: dict[str, str]) -> Snapshots:
            # The last mount's manifest is not in ``manifests`` yet: it is made
            # in the same worker-thread trip, just before.
            assert last is not None
            return self._write_state(state, {**manifests, last: manifest}, uid, gid, lineages)

        snaps: Snapshots | None = None  # set once turn.json is written
        try:
            for name, mount in plan.mounts.items():
                # The last mount's blobs and turn.json go in one trip.
                then = write_state if name == last else None
                manifests[name], written = await self._take_blobs(mount, loaded[name], fetch, then)
                if written is not None:
                    snaps = written
            if snaps is None:  # no mounts, or the last one's blobs were fetched again
                snaps = await trio.to_thread.run_sync(
                    self._write_state, state, manifests, uid, gid, lineages
                )
            self._attach(
                plan.session, plan.turn, plan.mounts, manifests, uid, gid, replay=False, snaps=snaps
            )
            tree = self._arm(plan.session, plan.turn, manifests)
            if self.boot is None:  # no way to tell a reboot: durable before the agent starts
                await trio.to_thread.run_sync(tree.ensure_durable)
            await self.forget_names()  # a session directory given a new owner is a new node
        except BaseException as exc:
            # The turn never got its mounts: nothing of it may stay behind,
            # turn.json least of all (a restart would bring back a turn whose
            # start failed, over a base released just below), whether or not
            # its write got past the rename. One of a turn that was not
            # brought back at start stays.
            laid = self.overlay.sessions.get(plan.session)
            attached = laid is not None and laid.turn is not None and laid.turn.turn == plan.turn
            if _names_turn(self.turn_file(plan.session), plan.turn):
                with self._rewriting:
                    self.turn_file(plan.session).unlink()
            if attached:
                self.overlay.detach_turn(plan.session)  # its folder and blobs with it
            else:
                self.overlay.remove_turn_dir(
                    self.overlay.session_dir(plan.session) / plan.turn, MARKS
                )
            self.manifests.release(plan.session)
            for name, manifest in manifests.items():
                if not attached and not is_shared(plan.mounts[name].layer):
                    self.overlay.blobs.release(list(manifest.values()), discard=True)
            if _no_room(exc):
                raise DiskFull(
                    "the disk under state_dir is full, so the turn could not start; "
                    "nothing of it was kept: start it again once there is room",
                    path=plan.session,
                ) from exc
            raise
        if plan.owner is not None:
            self._owners[plan.session] = (plan.owner.uid, plan.owner.gid)

    async def _take_blobs(
        self,
        mount: Mount,
        loaded: Loaded,
        fetch: Fetch,
        then: Callable[[dict[str, str]], Snapshots] | None = None,
    ) -> tuple[dict[str, str], Snapshots | None]:
        """Hold the blob of every file of one mount, storing the bytes that came along.

        Returns the mount's manifest (path -> sha256) and what ``then`` made
        of it: ``then`` runs in the same worker-thread trip where every blob
        was found (None where some were fetched again, and ``then`` did not
        run). A lean load left out the bytes the cache held when it ran; a
        person's blob may have been discarded since (their other turn
        ended), and such bytes are fetched again from the mount's source. On
        failure nothing stays held.

        This runs over every file of the space at every turn start, so each
        pass over them is a C-level one (no Python call per file), and an
        org space's pass is a set test: its blobs never leave the cache.
        """
        blobs = self.overlay.blobs
        # A person's blobs are held by each turn over them, and go with the
        # last; shared memory's are marked shared and stay.
        private = not is_shared(mount.layer)
        brought = list(loaded.files)
        contents = list(loaded.files.values())
        known = list(map(loaded.shas.get, brought))
        cached: list[str] = []  # a person's blobs the load left out, to hold here
        if loaded.lean and private:
            rest = filterfalse(loaded.files.__contains__, loaded.shas)
            cached = list(map(loaded.shas.__getitem__, rest))

        def manifest_of(taken: list[str]) -> dict[str, str]:
            # A lean load names every file's sha, in its order, but for the
            # files of a waiting change laid over it (bytes, no sha): those
            # are named by what they were stored under, in the load's order.
            if not loaded.lean:
                return dict(zip(brought, taken, strict=True))
            if None not in known:
                return dict(loaded.shas)
            named = {**loaded.shas, **dict(zip(brought, taken, strict=True))}
            paths = loaded.paths()
            return dict(zip(paths, map(named.__getitem__, paths), strict=True))

        def take() -> Taken:
            # One trip to a worker thread for all of it: what came along is
            # stored, what did not is looked up (and held, or shared) in the
            # cache, and where every blob is here, ``then`` runs on the
            # manifest.
            taken = blobs.put_many(contents, known, hold=private, share=not private)
            here: list[str] = []
            gone: list[str] = []
            if cached:
                flags = blobs.present(cached, hold=True)
                here = list(compress(cached, flags))
                gone = list(compress(cached, map(operator.not_, flags)))
            elif loaded.lean and not private:
                gone = blobs.share_here(loaded.shas.values())
            if then is None or gone:
                return taken, here, gone, None
            try:
                manifest = manifest_of(taken)
                return taken, here, gone, (manifest, then(manifest))
            except BaseException:
                if private:  # held in this trip, and the caller never hears of them
                    blobs.release([*taken, *here], discard=True)
                raise

        held: list[str] = []
        try:
            taken, here, gone, made = await trio.to_thread.run_sync(take)
            if made is not None:
                return made
            if private:
                held += taken + here
            if gone:
                fetched = await self._fetch_again(mount, gone, fetch)
                again = await trio.to_thread.run_sync(
                    partial(blobs.put_many, fetched, gone, hold=private, share=not private)
                )
                if private:
                    held += again
        except BaseException:
            blobs.release(held, discard=True)
            raise
        return manifest_of(taken), None

    async def _fetch_again(self, mount: Mount, gone: list[str], fetch: Fetch) -> list[bytes]:
        fetched = await fetch(mount.name, gone)
        if any(sha not in fetched for sha in gone):
            raise StoreUnavailable(
                "files a lean load left out are neither cached nor in the store any more",
                path=mount.name,
            )
        return [fetched[sha] for sha in gone]

    def _attach(
        self,
        session: str,
        turn: str,
        mounts: Mapping[str, Mount],
        manifests: Mapping[str, Mapping[str, str]],
        uid: int | None,
        gid: int | None,
        *,
        replay: bool,
        snaps: Mapping[str, dict[str, Snapshot]] | None = None,
    ) -> None:
        """Lay the mounts out; ``snaps``: each mount's snapshot, where already made."""
        self.overlay.open_session(session, uid, gid)
        laid: dict[str, tuple[bool, dict[str, Snapshot]]] = {}
        for name, mount in mounts.items():
            made = None if snaps is None else snaps.get(name)
            if made is None:
                made = snapshots(manifests[name], mount.sizes, mount.snapshot)
            laid[name] = (mount.read_only, made)
        self.overlay.attach_turn(
            session,
            turn,
            laid,
            replay=replay,
            private={name for name, mount in mounts.items() if not is_shared(mount.layer)},
            meta={name: mount.meta for name, mount in mounts.items()},
            folders={name: mount.folders for name, mount in mounts.items()},
        )

    def _write_state(
        self,
        state: TurnState,
        manifests: Mapping[str, Mapping[str, str]],
        uid: int | None,
        gid: int | None,
        lineages: Mapping[str, Lineage | None],
    ) -> Snapshots:
        """Write ``turn.json``; return each mount's snapshot as the overlay takes it.

        The manifests go after the JSON header as NUL-separated fields
        (NUL is the one character no path holds): encoding 10,000 files this
        way costs a third of encoding them as JSON. A shared mount writes only
        what differs from its base (:mod:`memfsd.manifests`), whose snapshot
        it reuses: an org space that changed by ten files costs ten rows.
        """
        if self.turn_file(state.session).exists():
            # Only a turn that did not come back at start leaves one here: a
            # new record would write over it, and the next start's sweep
            # would then remove what its agent wrote.
            raise TurnOpen(NOT_BACK, path=state.session)
        # The turn's folder and empty journal are made here, in the worker
        # thread, so that attaching the turn on the trio loop only opens them.
        turn_dir = self.overlay.session_dir(state.session) / state.turn
        self.overlay.spares.turn_folder(turn_dir)
        bases: dict[str, str] = {}
        snaps: Snapshots = {}
        fields: list[str] = []
        for name, manifest in manifests.items():
            mount = state.mounts[name]
            sizes, snapshot, meta = mount.sizes, mount.snapshot, mount.meta
            if is_shared(mount.ref.layer):
                written = self.manifests.written(
                    state.session, name, mount.ref, manifest, sizes, snapshot, meta, lineages[name]
                )
                bases[name] = written.base
                fields += written.rows
                snaps[name] = written.snapshot
                continue
            fields += [
                row(name, path, sha, sizes[path], snapshot.get(path), meta.get(path, DEFAULT_META))
                for path, sha in manifest.items()
            ]
            snaps[name] = snapshots(manifest, sizes, snapshot)
        header = {
            "state": state.model_dump(
                mode="json", exclude={"mounts": {"__all__": {"snapshot", "sizes", "meta"}}}
            ),
            "uid": uid,
            "gid": gid,
            "manifest": MANIFEST_FORMAT,
            "bases": bases,
            "boot": self.boot,
        }
        body = json.dumps(header, separators=(",", ":")) + "\n" + "\0".join(fields)
        # Not synced: see _make_durable.
        with self._rewriting:
            _write_atomic(self.turn_file(state.session), body, sync=False, spares=self.spares)
        return snaps

    def _arm(self, session: str, turn: str, manifests: Mapping[str, Mapping[str, str]]) -> TurnTree:
        """Have the attached turn made durable at its journal's first sync."""
        tree = self.overlay.sessions[session].turn
        assert tree is not None  # attached just now
        shas = [sha for manifest in manifests.values() for sha in manifest.values()]
        tree.make_durable = partial(self._make_durable, session, turn, shas)
        return tree

    def _make_durable(self, session: str, turn: str, shas: Sequence[str]) -> None:
        """Put the turn's record on disk: its blobs, ``turn.json``, then its ``durable`` mark.

        Blocking (the trio thread runs it inside the agent's first ``fsync``,
        as it runs that ``fsync`` itself). A turn start writes ``turn.json``
        and new blobs without syncing: a ``kill -9`` loses nothing of them
        (the page cache keeps what was written), and until the agent asks for
        something to be durable a power cut may lose the turn (what the agent
        wrote unsynced, as on any filesystem). The mark comes last, so a
        ``turn.json`` from before a reboot is trusted only with it, and then
        its blobs and itself are whole (:meth:`saved_turns`).
        """
        self.overlay.blobs.make_durable(shas)
        turn_file = self.turn_file(session)
        marker = _durable_mark(turn_file.parent, turn)
        turn_dir = marker.parent
        syncs = self.overlay.blobs.syncs
        first = [turn_file, turn_file.parent, turn_dir / "data", turn_dir]
        syncs.sync(partial(fsync_each, first), turn_file.parent, files=len(first))
        fd = open_private(marker, os.O_WRONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        syncs.sync(partial(fsync_path, turn_dir), turn_dir)

    def _read_state(self, text: str) -> dict[str, Any]:
        """A turn written down by :meth:`_write_state`, as one JSON-shaped record."""
        head, _, rows = text.partition("\n")
        record: dict[str, Any] = json.loads(head)
        if "manifest" not in record:
            return record  # written whole as JSON, by a memfs before MANIFEST_FORMAT
        mounts = record["state"]["mounts"]
        width = _FIELDS.get(record["manifest"])
        if width is None:
            raise ConfigError(
                f"turn.json has manifest format {record['manifest']}, newer than this memfs "
                f"understands ({MANIFEST_FORMAT}); upgrade memfs"
            )
        shas: dict[str, dict[str, str]] = {name: {} for name in mounts}
        for mount in mounts.values():
            mount["snapshot"], mount["sizes"], mount["meta"] = {}, {}, {}
        for name, base in record.get("bases", {}).items():
            parts = self.manifests.read(base)
            for at in range(0, len(parts), BASE_FIELDS):
                _read_file(mounts[name], shas[name], parts[at : at + BASE_FIELDS])
        parts = rows.split("\0") if rows else []
        for at in range(0, len(parts), width):
            name = parts[at]
            _read_file(mounts[name], shas[name], parts[at + 1 : at + width])
        record["shas"] = shas
        return record

    async def collect(self, session: str, mount: Mount) -> tuple[ChangeSet, dict[str, MemfsError]]:
        state = self.overlay.sessions[session].turn
        if state is None:
            raise NotFound("the session has no turn attached", path=session)
        first = not state.frozen
        if first:
            await self._write_back_mapped(session)
        self.overlay.freeze(session)
        tree = state.mounts[mount.name]
        # A path no store can hold (however it got here: a journal from before
        # the rename check, say) is named and left out, file or folder, so it
        # cannot sink the rest of the space.
        refused: dict[str, MemfsError] = {}
        touched_paths = _storable(tree.touched, refused)
        # Walk the tree here, in trio, where nothing else moves it; read the
        # bytes in a thread.
        sources = {path: self.overlay.source(tree, path) for path in touched_paths}
        bases = {path: self.overlay.base(tree, path) for path in touched_paths}
        meta = {
            path: m for path, m in self.overlay.meta_at_end(tree).items() if path not in refused
        }
        made, removed = diff_folders(
            self.overlay.folders_at_end(tree),
            stored=set(tree.folders),
            implied_before=_Implied(tree),
        )
        folders = (tuple(_storable(made, refused)), tuple(_storable(removed, refused)))
        # A file a write was refused for holds only what came before the
        # refusal: it is named as not saved, never stored cut off.
        for path in touched_paths:
            why = self.overlay.cut(tree, path)
            if why is not None:
                refused[path] = TooLarge(why, path=path)

        def read() -> ChangeSet:
            if first:
                self._mark_ending(state)
            touched = {p: None if src is None else src.read_bytes() for p, src in sources.items()}
            base = {p: src.read_bytes() for p, src in bases.items() if src is not None}
            return diff_touched(base, touched, base_meta=tree.meta, meta=meta, folders=folders)

        changes = await trio.to_thread.run_sync(read)
        return changes.without(refused), refused

    async def _write_back_mapped(self, session: str) -> None:
        """Have the kernel write back what the turn's mapped files hold dirty, before the freeze.

        A shared writable ``mmap`` changes the file's pages in the kernel; they
        come to the daemon as writes only when unmapped, synced, or written
        back later, and a write that comes after the freeze is refused
        unheard (the process sees no error). Invalidating such a file's pages
        makes the kernel write the dirty ones back first (FUSE's
        ``launder_folio``), as writes the turn takes: in a worker thread,
        since they come back through this trio loop.
        """
        inodes = self.overlay.mapped_for_writing(session)
        if inodes and self._invalidate_inodes is not None:
            await trio.to_thread.run_sync(self._invalidate_inodes, inodes)

    def _mark_ending(self, tree: TurnTree) -> None:
        """Write down that the turn is ending (:data:`ENDING_FILE`); blocking.

        In the page cache it outlives a ``kill -9``; a turn that is durable
        (its agent synced) has it synced too, so a power cut after the store
        does not bring the turn back open either.
        """
        self.spares.file(tree.dir / ENDING_FILE)
        if tree.make_durable is None:
            self.overlay.blobs.syncs.sync(partial(fsync_path, tree.dir), tree.dir)

    async def record(
        self,
        session: str,
        turn: str,
        done: Mapping[str, SpaceResult],
        kept: Mapping[str, SpaceResult],
        *,
        final: bool = False,
        state: TurnState | None = None,
    ) -> None:
        # One writer of the session's record at a time, reading ``done`` and
        # ``kept`` (the turn's own) when its turn comes: a write made before a
        # forget must not land after the forget's.
        async with self._recording.setdefault(session, trio.Lock()):
            if not final and self._ended_turn.get(session) == turn:
                return  # the turn's end removed its record: nothing is left to rewrite
            # A small file of its own: rewriting turn.json (the whole manifest)
            # for every stored space would cost O(space) at every turn end.
            record = {
                "turn": turn,
                "done": {space: r.model_dump(mode="json") for space, r in done.items()},
                # Without the change set: the working copy holds it, and is read again.
                "kept": {
                    space: r.model_dump(mode="json", exclude={"changes"})
                    for space, r in kept.items()
                },
            }
            target = self.turn_file(session).with_name(DONE_FILE)
            tree = self.overlay.sessions[session].turn if session in self.overlay.sessions else None
            try:
                if kept and tree is not None:
                    # What a failed store kept must outlive a power cut, as the store would have.
                    await trio.to_thread.run_sync(tree.ensure_durable)
                # Synced only for a turn that is durable: until then a power cut
                # loses the turn itself, and a crash loses no page of this file
                # (a store repeated after one is caught by its exactly-once record).
                durable = tree is None or tree.make_durable is None
                text, syncs = json.dumps(record), self.overlay.blobs.syncs

                def write() -> None:
                    if state is not None:
                        # Before done.json: the words must not outlive a crash here.
                        self._restate(session, state)
                    _write_atomic(target, text, syncs, sync=durable, spares=self.spares)
                    if final:  # close's first step, in the same trip (see close)
                        self._remove_record(session)

                await trio.to_thread.run_sync(write)
                if final:
                    self._ended_turn[session] = turn
            except OSError as exc:
                if not _no_room(exc):
                    raise
                # Nothing is lost: the turn stays open with what it holds (and the
                # store's exactly-once record catches a space stored just before).
                raise DiskFull(
                    "the disk under state_dir is full, so the turn's end could not be "
                    "written down; the turn stays open and keeps its files: end it again "
                    "once there is room",
                    path=session,
                ) from exc

    def access_log(self, session: str) -> dict[str, FileAccess]:
        """What the filesystem saw the session's current (or ending) turn do."""
        tree = self.overlay.sessions.get(session)
        if tree is not None and tree.turn is not None:
            return tree.turn.access_log()
        return {}

    def access(self, session: str) -> dict[str, TraceFile]:
        """The ending turn's access log, as the store keeps it in the turn's trace."""
        return {
            key: TraceFile(**dataclasses.asdict(entry))
            for key, entry in self.access_log(session).items()
        }

    async def close(self, session: str) -> None:
        # turn.json goes first: from then on the turn is over, and a crash
        # while its working copy is being removed leaves a folder nobody
        # brings back (the next start removes it, :meth:`sweep_ended`), never
        # a turn record over half a working copy. The files go in worker
        # threads: an unlink waits for the disk's journal while other turns
        # sync, and on the trio loop that wait would stall every request. A
        # final record (the engine's last before this) removed turn.json
        # already, in its own trip: one trip fewer at every turn end.
        tree = self.overlay.sessions.get(session)
        turn = tree.turn.turn if tree is not None and tree.turn is not None else None
        # After every record of the turn already waiting, and before any to
        # come, which find the turn ended and write nothing.
        async with self._recording.setdefault(session, trio.Lock()):
            if turn is None or self._ended_turn.get(session) != turn:
                await trio.to_thread.run_sync(self._remove_record, session)
            if turn is not None:
                self._ended_turn[session] = turn
        self.manifests.release(session)
        folder = None
        if tree is not None and tree.turn is not None:
            folder = self.overlay.detach_turn(session, remove=False)
        await self.forget_names(then_remove=folder)

    def sweep_ended(self, live: Collection[tuple[str, str]]) -> int:
        """Remove the turn folders of every turn but the ``live`` (session, turn) ones.

        They are what a crash left of turns already over (ended or
        discarded, their ``turn.json`` gone) while their working copies
        were being removed. The ``manual`` folder beside them is no turn's:
        it holds change sets waiting for ``memfs turn commit``. Called at
        start once every open turn is back; returns how many folders went.
        """
        removed = self.manifests.sweep({session for session, _ in live})
        for session in sorted((self.overlay.state_dir / "sessions").glob("*")):
            if not session.is_dir():
                continue
            for folder in session.iterdir():
                if folder.name == MANUAL_DIR:
                    continue
                if folder.is_dir() and (session.name, folder.name) not in live:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed += 1
        return removed

    async def close_session(self, session: str) -> None:
        self._recording.pop(session, None)
        self._ended_turn.pop(session, None)
        self.overlay.close_session(session)
        await self.forget_names()

    async def forget_names(self, *, then_remove: Path | None = None) -> None:
        """Tell the kernel about every name the daemon removed, before answering the caller.

        ``then_remove``: a detached turn's folder, removed in the same trip
        to a worker thread.
        """
        names, self.overlay.stale_names = self.overlay.stale_names, []
        inodes, self.overlay.stale_inodes = self.overlay.stale_inodes, []
        names_to = self._invalidate if names else None
        inodes_to = self._invalidate_inodes if inodes else None
        if names_to is None and inodes_to is None and then_remove is None:
            return

        def tell() -> None:
            if names_to is not None:
                names_to(names)
            if inodes_to is not None:
                inodes_to(inodes)
            if then_remove is not None:
                self.overlay.remove_turn_dir(then_remove, MARKS)

        await trio.to_thread.run_sync(tell)

    def manual_file(self, session: str, turn: str) -> Path:
        """Where an ended turn's manual change set waits for ``memfs turn commit``."""
        return self.overlay.session_dir(session) / MANUAL_DIR / f"{turn}.json"

    async def keep_manual(self, hold: ManualHold) -> None:
        # An end retried after the commit (its other spaces were kept) builds the
        # hold again: a committed one is never held again, here or after a restart.
        committed = self.manual_file(hold.session, hold.turn).with_suffix(".committed")
        if not await trio.to_thread.run_sync(committed.exists):
            await self.save_manual(hold)

    async def save_manual(self, hold: ManualHold) -> None:
        """Write an ended turn's manual change set down (0600), to commit after a restart."""
        target = self.manual_file(hold.session, hold.turn)
        await trio.to_thread.run_sync(_write_atomic, target, hold.model_dump_json())

    async def committed_manual(self, session: str, turn: str) -> None:
        """Every manual space of the turn is committed: its change set gives way to a mark."""

        def mark() -> None:
            target = self.manual_file(session, turn)
            _write_atomic(target.with_suffix(".committed"), "")
            target.unlink(missing_ok=True)

        await trio.to_thread.run_sync(mark)

    def remove_torn_copies(self) -> int:
        """Remove what a crash left of records being written (``turn.json``, ``done.json``,
        manual change sets); return how many. Run at start, before anything is written.

        Each is replaced whole by a rename, so its temporary copy is never read
        back; but it holds what the record held (a prompt, a label, file
        names and bytes), which no forget would otherwise reach.
        """
        removed = 0
        sessions = self.overlay.state_dir / "sessions"
        for pattern in (f"*/*{TORN_SUFFIX}", f"*/{MANUAL_DIR}/*{TORN_SUFFIX}"):
            for path in sessions.glob(pattern):
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def saved_manual(self) -> tuple[list[ManualHold], set[tuple[str, str]]]:
        """The manual change sets written down and not committed, and the (session, turn)
        pairs whose manual spaces were all committed."""
        sessions = self.overlay.state_dir / "sessions"
        holds = []
        for path in sorted(sessions.glob(f"*/{MANUAL_DIR}/*.json")):
            try:
                holds.append(ManualHold.model_validate_json(path.read_bytes()))
            except (OSError, ValueError) as exc:
                # Damaged, or written by another memfs: set aside for an
                # operator (a forget removes it: drop_damaged_records), so one
                # change set does not stop the start.
                log.error(
                    "could not read back the held change set %s of session %s (%s); "
                    "it is set aside as %s and cannot be committed",
                    path.stem,
                    path.parent.parent.name,
                    exc,
                    DAMAGED_SUFFIX,
                )
                path.replace(path.with_name(path.name + DAMAGED_SUFFIX))
        committed = {
            (path.parent.parent.name, path.stem)
            for path in sessions.glob(f"*/{MANUAL_DIR}/*.committed")
        }
        return holds, committed

    def saved_turns(self) -> SavedTurns:
        """Every turn written down and never ended: what a restart must bring back."""
        sessions = self.overlay.state_dir / "sessions"
        found = SavedTurns([], [])
        for path in sorted(sessions.glob(f"*/{TURN_FILE}")):
            record = self._trusted_state(path)
            if record is None:
                continue
            record[FOLDER_KEY] = path.parent.name  # the session, whatever the record says
            done_file = path.with_name(DONE_FILE)
            try:
                if done_file.exists():
                    done = json.loads(done_file.read_text())
                    if done.get("turn") == record["state"]["turn"]:
                        record["state"]["done"] = {
                            **record["state"].get("done", {}),
                            **done["done"],
                        }
                        record["state"]["kept"] = done.get("kept", {})
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                # Which spaces it stored, kept or discarded is not known: the
                # turn waits, its records as they are, for a start that reads them.
                found.unread.append((record, f"its {DONE_FILE} cannot be read ({exc!r})"))
            else:
                found.records.append(record)
        return found

    def _trusted_state(self, path: Path) -> dict[str, Any] | None:
        """The turn ``path`` (a ``turn.json``) holds, unless a reboot may have torn it.

        Written in this boot, or by a memfs that synced it at once (no
        ``boot``), or made durable since (its ``durable`` mark): it is whole,
        and so are its blobs. Otherwise the machine went down before the
        turn's agent asked for anything to be durable, and what the turn held
        is not promised: its record goes (its folder with it, at the sweep),
        with a warning naming it.
        """
        try:
            record = self._read_state(path.read_text())
            boot = record.get("boot")
            turn = str(record["state"]["turn"])
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            # Torn by a power cut before it was synced (it is replaced whole, by a
            # rename, so nothing else tears it): the turn never became durable.
            # Set aside, not removed, should the disk itself have damaged it.
            log.error(
                "the open turn of session %s left a turn.json that cannot be read (%s); "
                "it is set aside as %s and the turn is not brought back",
                path.parent.name,
                exc,
                DAMAGED_SUFFIX,
            )
            path.replace(path.with_name(TURN_FILE + DAMAGED_SUFFIX))
            return None
        if boot is None or boot == self.boot or _durable_mark(path.parent, turn).exists():
            return record
        log.warning(
            "the open turn %s of session %s was never synced before the machine restarted "
            "(its agent made no fsync); what it wrote is not promised after a power cut, "
            "so the turn is dropped",
            turn,
            path.parent.name,
        )
        _remove_turn_record(path, self.spares)
        return None

    def reattach(self, turn: TurnState, record: Mapping[str, Any]) -> None:
        """Bring a turn written down before a crash back under the mount, journal replayed.

        Laid out whole or not at all: where it fails, nothing of the turn is
        under the mount, and what it holds stays held as :meth:`keep_left_behind`
        holds it, its record, folder, bases and blobs there for a later start.
        """
        session = turn.session
        laid_before = session in self.overlay.sessions
        owner = self.owner(session)
        try:
            self._reattach(turn, record)
            self.left_behind.discard(session)
        except BaseException:
            laid = self.overlay.sessions.get(session)
            if laid is not None and laid.turn is not None and laid.turn.turn == turn.turn:
                self.overlay.detach_turn(session, remove=False, release=False)
            if not laid_before and laid is not None:
                self.overlay.close_session(session, remove=False)
            self.restore_owner(session, owner)
            if session not in self.left_behind:  # it failed before holding what it names
                try:
                    self.keep_left_behind(turn, record)
                except Exception:
                    log.exception("could not hold what session %s's turn names", session)
            raise

    def keep_left_behind(self, turn: TurnState, record: Mapping[str, Any]) -> None:
        """Hold what a turn no start could bring back names, as if it were back.

        Its person's blobs are held (another turn over their memory ending
        would discard them, and a later start could not bring it back) and
        its bases named (so nothing removes them); its session takes no new
        turn (:data:`NOT_BACK`), whose failed start would let go of them.
        """
        shared = {name for name, mount in turn.mounts.items() if is_shared(mount.ref.layer)}
        self._keep(turn.session, record, shared)

    def keep_unread(self, record: Mapping[str, Any]) -> None:
        """Hold what a turn whose record did not read back names, as :meth:`keep_left_behind` does.

        Which of its spaces are shared is not known: every blob it names is
        held (a shared one held as well stays all the same).
        """
        self._keep(record[FOLDER_KEY], record, set())

    def _keep(self, session: str, record: Mapping[str, Any], shared: Collection[str]) -> None:
        self.left_behind.add(session)
        self.manifests.hold(session, record.get("bases", {}).values())
        for name, manifest in record.get("shas", {}).items():
            shas = list(manifest.values())
            if name in shared:
                self.overlay.blobs.share(shas)
            else:
                self.overlay.blobs.hold(shas)

    def _reattach(self, turn: TurnState, record: Mapping[str, Any]) -> None:
        root = self.root(turn.session)
        mounts = {name: Mount.from_state(m, root) for name, m in turn.mounts.items()}
        uid, gid = record.get("uid"), record.get("gid")
        if not all(value is None or _real_id(value) for value in (uid, gid)):
            # Written by a memfs that took any number (one past 32 bits made the
            # mount root EIO for everyone). No such user exists: the session
            # stays private, to root, and its turn can still be ended.
            log.warning(
                "session %s was given owner %r:%r, which no user can be; it is root's now",
                turn.session,
                uid,
                gid,
            )
            uid, gid = 0, 0
        if uid is not None or gid is not None:
            self._owners[turn.session] = (uid, gid)
        self.keep_left_behind(turn, record)
        manifests = record["shas"]
        self._attach(turn.session, turn.turn, mounts, manifests, uid, gid, replay=True)
        marked = _durable_mark(self.turn_file(turn.session).parent, turn.turn).exists()
        if record.get("boot") is not None and not marked:
            # Whole in the page cache, not yet on disk: durable at its first sync,
            # its blobs with it (none is known synced after a restart).
            self._arm(turn.session, turn.turn, manifests)
        ending = self.overlay.session_dir(turn.session) / turn.turn / ENDING_FILE
        if was_ending(turn.kept, turn.done) or ending.exists():
            # It was ending when the daemon stopped: what ends is what was there.
            self.overlay.freeze(turn.session)
        forgotten = [name for name, result in turn.done.items() if result.reason == "forgotten"]
        for name in forgotten:
            # Forgotten while the turn was open: nothing of it comes back.
            self.overlay.drop_mount(turn.session, name)
        if forgotten:
            # A crash may have come between the forget and the scrub.
            self._scrub(turn.session, forgotten)

    def touched_paths(self, session: str, name: str) -> set[str]:
        """The paths the session's turn made, changed, moved or removed in mount ``name``.

        With the loaded ones, what a look for one forgotten file asks the store
        about: a file the turn made (and stored, its end kept open by another
        space) may be the one forgotten.
        """
        tree = self.overlay.sessions.get(session)
        if tree is None or tree.turn is None or name not in tree.turn.mounts:
            return set()
        return set(tree.turn.mounts[name].touched)

    async def drop_forgotten(self, session: str, name: str, paths: Iterable[str | None]) -> bool:
        """Take forgotten files (a ``None`` path: the whole space) out of an open turn.

        Its records are rewritten once, if anything was dropped; returns whether it was.
        """
        dropped = False
        for path in paths:
            if path is None:
                dropped |= self.overlay.drop_mount(session, name)
            else:
                dropped |= self.overlay.drop_path(session, name, path)
        await self.forget_names()
        if dropped:
            await self.scrub_forgotten(session, name)
        return dropped

    async def scrub_forgotten(self, session: str, name: str) -> None:
        """Rewrite the open turn's journal and ``turn.json`` without what space ``name`` forgot."""
        # The journal's rewrite reads the turn's tree and swaps its
        # descriptor: on the trio thread, where the agent's requests
        # append to it (in a worker thread, a record appended meanwhile
        # went to the old journal and was lost).
        self.overlay.scrub_forgotten(session)
        await trio.to_thread.run_sync(self._scrub_record, session, [name])

    async def drop_damaged_records(self) -> int:
        """Remove every ``turn.json`` and held change set set aside as damaged; how many.

        A person was forgotten: such a record cannot be read to tell whether
        it holds their words, so none is kept (the turn it was never came back).
        """

        def drop() -> int:
            gone = 0
            sessions = self.overlay.state_dir / "sessions"
            for pattern in (f"*/{TURN_FILE}{DAMAGED_SUFFIX}", f"*/{MANUAL_DIR}/*{DAMAGED_SUFFIX}"):
                for path in sessions.glob(pattern):
                    path.unlink(missing_ok=True)
                    gone += 1
            return gone

        return await trio.to_thread.run_sync(drop)

    def _restate(self, session: str, state: TurnState) -> None:
        """Put ``state``'s words (prompt, extra body, each ``by``, who is forgotten) in turn.json.

        The rows (every file's fields) stay as they are: a forget changes no
        file of the turn's plan, only whose words it keeps.
        """
        words = state.model_dump(mode="json", include={"prompt", "extra_body", "forgotten"})

        def restate(record: dict[str, Any], rows: str) -> str:
            record["state"].update(words)
            for name, mount in record["state"]["mounts"].items():
                if name in state.mounts:
                    by = state.mounts[name].by
                    mount["by"] = None if by is None else by.model_dump(mode="json")
            return rows

        self._rewrite_record(session, restate, turn=state.turn)

    def _remove_record(self, session: str) -> None:
        """The session's turn is over: its record goes, once no rewrite of it is under way."""
        with self._rewriting:
            _remove_turn_record(self.turn_file(session), self.spares)

    def _rewrite_record(
        self,
        session: str,
        edit: Callable[[dict[str, Any], str], str | None],
        *,
        turn: str | None = None,
    ) -> None:
        """Rewrite ``turn.json`` through ``edit`` (its JSON head, its rows: the rows to keep).

        Nothing where there is no record, where it is another turn's than
        ``turn`` (the one meant ended meanwhile, and the session started
        another), or where ``edit`` returns None. One writer of turn.json at
        a time (``_rewriting``): a rewrite that read it before the turn's end
        removed it would write it back, and the ended turn would come back.
        """
        target = self.turn_file(session)
        with self._rewriting:  # two edits at once (words, rows) would lose one
            try:
                text = target.read_text()
            except FileNotFoundError:
                return
            head, _, rows = text.partition("\n")
            record = json.loads(head)
            if turn is not None and record.get("state", {}).get("turn") != turn:
                return
            kept = edit(record, rows)
            if kept is not None:
                _write_atomic(target, json.dumps(record, separators=(",", ":")) + "\n" + kept)

    def _scrub(self, session: str, names: Sequence[str]) -> None:
        """No name or sha256 of a forgotten space's files stays in ``turn.json`` or the journal.

        Nor in the note ``turn.json`` keeps, which is dropped whole.
        """
        self.overlay.scrub_forgotten(session)
        self._scrub_record(session, names)

    async def drop_left_behind(self, session: str, turn: str, name: str) -> None:
        """A person's space in a turn no start brought back was forgotten: nothing of it stays.

        Such a turn is not laid out, so what an open turn's drop does
        (:meth:`drop_forgotten`) is done to its files: ``turn.json`` loses
        the space's rows, its journal the space's records and the data files
        they named, and the space's blobs are let go of
        (:meth:`keep_left_behind` held them). Its other spaces stay whole.
        Done again, it finishes one a crash cut short.
        """

        key = (session, turn, name)

        def drop() -> None:
            # The rows name the blobs its holds are for (keep_left_behind, at
            # each start), so the blobs go first, and once a process: a drop
            # done again must not let go of another turn's hold on the same
            # bytes. One drop at a time (a notice's and a look's at once).
            with self._rewriting:
                if key not in self._let_go:
                    record = self._read_state(self.turn_file(session).read_text())
                    shas = list(record.get("shas", {}).get(name, {}).values())
                    self._let_go.add(key)  # before: a drop done again must not let go twice
                    self.overlay.blobs.release(shas, discard=True)
                self._scrub_record(session, [name], turn=turn)
                _scrub_journal(self.overlay.session_dir(session) / turn, {name})

        await trio.to_thread.run_sync(drop)

    def _scrub_record(self, session: str, names: Sequence[str], *, turn: str | None = None) -> None:
        """``turn.json`` without a forgotten space's rows and folders, nor the note."""

        def scrub(record: dict[str, Any], rows: str) -> str | None:
            width = _FIELDS.get(record.get("manifest", 0))
            if width is None:
                return None  # an old whole-JSON record: rewritten by nobody, read as it is
            for name in names:
                mount = record["state"]["mounts"].get(name)
                if mount is not None:
                    mount["folders"] = []
            # The note lists every space's files, the forgotten person's too: it
            # goes (a turn brought back after this has none; the agent had it).
            record["state"]["note"] = ""
            parts = rows.split("\0") if rows else []
            return "\0".join(
                "\0".join(parts[at : at + width])
                for at in range(0, len(parts), width)
                if parts[at] not in names
            )

        self._rewrite_record(session, scrub, turn=turn)


def _scrub_journal(turn_dir: Path, names: Collection[str]) -> None:
    """A turn's journal without the records of the spaces ``names``, nor the data they named.

    For a turn that is not laid out (the overlay compacts a laid-out one's).
    Every data file no remaining record names goes: the forgotten spaces'
    ones, and any a crash left before its record was written.
    """
    target = turn_dir / "journal"
    records = list(journal.decode(target.read_bytes()))
    kept = [record for record in records if record.get("m") not in names]
    _write_atomic(target, journal.encode(kept).decode())
    named = {str(record["d"]) for record in kept if record.get("o") == "f"}
    data = turn_dir / "data"
    for path in data.iterdir() if data.is_dir() else ():
        if path.name not in named:
            path.unlink(missing_ok=True)


class _Implied:
    """The folders a mount's snapshot files imply, asked one at a time (``in``)."""

    def __init__(self, mount: MountTree) -> None:
        self.mount = mount

    def __contains__(self, folder: object) -> bool:
        return isinstance(folder, str) and self.mount.holds_files_at_snapshot(folder)


def _read_file(mount: dict[str, Any], shas: dict[str, str], fields: Sequence[str]) -> None:
    """One file's fields after the mount name (five or eight of them): put it into ``mount``.

    An empty sha256 removes the file (a turn's row off its base).
    """
    path, sha, size, revision = fields[:4]
    if not sha:
        for held in (shas, mount["sizes"], mount["snapshot"], mount["meta"]):
            held.pop(path, None)
        return
    shas[path] = sha
    mount["sizes"][path] = int(size)
    if revision:
        mount["snapshot"][path] = revision
    else:
        mount["snapshot"].pop(path, None)
    if len(fields) == 7:
        mode, mtime, ctime = fields[4:7]
        mount["meta"][path] = {
            "mode": int(mode, 8),
            "mtime_ns": int(mtime) if mtime else None,
            "ctime_ns": int(ctime) if ctime else None,
        }


def _storable(paths: Iterable[str], refused: dict[str, MemfsError]) -> list[str]:
    """The ``paths`` a store can hold; each other one goes into ``refused`` with why."""
    kept = []
    for path in paths:
        try:
            check_path(path)
        except InvalidName as exc:
            refused[path] = exc
        else:
            kept.append(path)
    return kept


def _real_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID


def _durable_mark(session_dir: Path, turn: str) -> Path:
    """Where the turn's ``durable`` mark goes, once its record is on disk."""
    return session_dir / turn / DURABLE_FILE


def _no_room(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk under ``state_dir`` has no room (full, or over quota)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _names_turn(turn_file: Path, turn: str) -> bool:
    """Whether ``turn_file`` is there and is the record of ``turn`` (its header says)."""
    try:
        with open(turn_file, "rb") as record:
            return bool(json.loads(record.readline())["state"]["turn"] == turn)
    except (OSError, ValueError, KeyError, TypeError):
        return False  # gone, or not known to be this turn's: not this start's to remove


def _remove_turn_record(turn_file: Path, spares: Spares) -> None:
    """``turn.json``, then ``done.json``: the turn is over (see ``OverlayWorkspace.close``).

    Each leaves its name at once, as an unlink would, and is kept as a spare.
    """
    for record in (turn_file, turn_file.with_name(DONE_FILE)):
        with contextlib.suppress(FileNotFoundError):
            spares.take_file(record)


def _write_atomic(
    target: Path,
    text: str,
    syncs: GroupSync | None = None,
    *,
    sync: bool = True,
    spares: Spares | None = None,
) -> None:
    """Write ``text`` to ``target`` so that a crash leaves the old file or the new, synced.

    The content is on disk before the rename, and the rename before this
    returns. With ``syncs``, both syncs are shared with other threads
    writing at the same moment (:mod:`memfsd.durable`); without, they are
    this file's ``fsync`` and its folder's. ``sync=False`` leaves both to the
    page cache: a ``kill -9`` still leaves the old file or the new, whole.
    With ``spares``, the copy is written into a spare file rather than a new one.
    """
    make_private_dirs(target.parent)
    # Its own name beside each target: manual/<turn>.json and <turn>.committed
    # shared one when it replaced the suffix, and two writes at once mixed them.
    tmp = target.with_name(target.name + TORN_SUFFIX)
    try:
        # 0600: a turn's record holds its prompt, identity and (done.json) results.
        if spares is None:
            fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        else:
            spares.file(tmp)
            fd = os.open(tmp, os.O_WRONLY)
        with open(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            if sync and syncs is None:
                os.fsync(fh.fileno())
            elif sync and syncs is not None:
                syncs.sync(partial(os.fsync, fh.fileno()), target.parent)
        os.replace(tmp, target)
    except BaseException:
        # A half-written copy (a full disk) must not stay behind, holding part of it.
        tmp.unlink(missing_ok=True)
        raise
    if not sync:
        return
    if syncs is None:
        fsync_path(target.parent)
    else:
        syncs.sync(partial(fsync_path, target.parent), target.parent)


__all__ = ["OverlayWorkspace"]
