"""The working copies the FUSE mount serves: one tree of nodes per open turn, over shared blobs.

This module owns the daemon's filesystem state and its rules of motion,
independent of pyfuse3: the node tree (root → sessions → mounts → entries;
a nested mount path such as ``persistent/user`` puts read-only ``parent``
folders, which hold only mounts, between a session and its mount), the
overlay of each file (an unmodified snapshot blob, or a data file the
turn wrote), the turn journal that makes a crash lose nothing the agent saw
as saved, and the access log. ``memfsd.fs`` translates FUSE requests into the
methods here; every refusal is a ``MemfsError`` whose errno reaches the agent.

Durability: a turn's writes go to data files under
``<state_dir>/sessions/<session>/<turn>/data/``; every change of what a path
holds is one line in that turn's ``journal`` (its record format is
:mod:`memfsd.journal`'s; the nodes are :mod:`memfsd.nodes`, the access log
:mod:`memfsd.access`). Both are written through (no buffering in this
process) before a request returns, so after a ``kill -9``
the turn is rebuilt from its manifest plus the journal; ``fsync`` (and, with
``sync_on_close``, every close, rename and unlink) also syncs them to disk.
Methods never await: each runs whole between two FUSE requests.

What a turn keeps across turns is what a filesystem keeps: files are planted
with the mode, mtime and ctime the snapshot stored (``MountTree.meta``), the
snapshot's stored folders are planted too, empty or not, and a change of
mode or times is an ``a`` record in the journal, so a crash keeps a ``chmod``.
Entries get inode numbers derived from (session, mount, path), so the same
file has the same inode turn after turn: git's index caches inode, ctime and
mtime, and any of them moving would make a read-only ``git status`` rewrite
``.git/index``. A number still held by the kernel for an earlier node falls
back to the counter (a file renamed within a turn keeps its number, so it
gets its new path's only in the next turn).

Bounds, so one agent cannot exhaust what the others need: a removed file's
data file is unlinked as soon as no handle holds it (while one does, the file
still counts toward its space's limits); a journal past
``Limits.journal_bytes`` is rewritten to what the turn holds now
(:meth:`Overlay.compact`); a session holds at most ``Limits.max_open_files``
handles, and the daemon at most ``descriptors`` descriptors on data files and
blobs, closing the least recently used and reopening on demand; and when free
space under ``state_dir`` falls below ``Limits.disk_reserve_bytes``, agents'
writes get ENOSPC so ending and storing turns still find room.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import shutil
import stat
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

from memfs.core.diff import FolderEnd
from memfs.core.errors import (
    DiskFull,
    Exists,
    InvalidName,
    IsADirectory,
    NameTooLong,
    NotADirectory,
    NotEmpty,
    NotFound,
    PermissionDenied,
    ReadOnly,
    TooLarge,
    TooManyOpen,
)
from memfs.core.limits import file_too_large, space_too_full, too_many_files, too_many_folders
from memfs.core.models import MODE_BITS, FileMeta, Limits, clamp_time_ns
from memfs.core.names import MAX_PATH_BYTES, check_new_name
from memfs.private import make_private_dirs
from memfsd import journal
from memfsd.blobs import BlobCache
from memfsd.nodes import (
    DIR_MODE,
    FILE_MODE,
    PARENT_MODE,
    ROOT_INODE,
    ROOT_MODE,
    SESSION_MODE,
    Handle,
    Kind,
    MountTree,
    Node,
    Role,
    SessionTree,
    Snapshot,
    TurnTree,
)
from memfsd.spares import Spares

_SIZE = itemgetter(1)  # a Snapshot's size
log = logging.getLogger("memfsd.overlay")

# Inodes derived from a path live in [2**62, 2**63), far above the counter's.
_STABLE_INODES = 1 << 62
DESCRIPTORS = 512  # descriptors on data files and blobs kept open at once, by default
ROOM_SECONDS = 1.0  # free space under state_dir is looked at again at least this often


class Overlay:
    """Every session's working copies, as one tree the FUSE adapter serves."""

    def __init__(
        self,
        state_dir: Path,
        blobs: BlobCache,
        limits: Limits,
        *,
        clock: Callable[[], int] = time.time_ns,
        sync_on_close: bool = False,
        descriptors: int = DESCRIPTORS,
        free_bytes: Callable[[], int] | None = None,
    ) -> None:
        self.state_dir = state_dir
        # The inodes of ended turns, used again (their folder emptied first).
        self.spares = Spares(state_dir)
        self.sync_on_close = sync_on_close
        self.blobs = blobs
        self.limits = limits
        self.clock = clock
        # Names the kernel may have cached that the daemon changed behind its
        # back, as (parent inode, name); the workspace tells the kernel (it must
        # not happen inside a FUSE request, or the kernel would wait on itself).
        self.stale_names: list[tuple[int, str]] = []
        # Inodes whose cached contents the kernel must drop (forgotten files).
        self.stale_inodes: list[int] = []
        # Renames and exchanges so far: a path can change only through one of them.
        self.moves = 0
        self._next_inode = ROOT_INODE + 1
        self._next_fh = 1
        now = clock()
        self.root = Node(
            ROOT_INODE, "dir", "root", "", None, ROOT_MODE, 0, 0, now, now, now, lookups=1
        )
        self.nodes: dict[int, Node] = {ROOT_INODE: self.root}
        self.sessions: dict[str, SessionTree] = {}
        self.handles: dict[int, Handle] = {}
        # Handles holding a descriptor, least recently used first.
        self.descriptors = max(1, descriptors)
        self._fds: OrderedDict[Handle, None] = OrderedDict()
        # Turns whose journal passed its bound: compacted after the request.
        self.due: list[TurnTree] = []
        self.free_bytes = free_bytes or self._statvfs_free
        self._room = 0  # bytes agents may still write before free space is looked at again
        self._room_at = -ROOM_SECONDS

    # -- sessions and turns -------------------------------------------------

    def _new_node(
        self,
        kind: Kind,
        role: Role,
        name: str,
        parent: Node,
        *,
        mode: int,
        uid: int,
        gid: int,
        tree: MountTree | None = None,
    ) -> Node:
        now = self.clock()
        inode = self._next_inode
        if role == "entry" and tree is not None:
            path = f"{parent.path()}/{name}" if parent.role == "entry" else name
            inode = self._entry_inode(tree, path)
        node = Node(inode, kind, role, name, parent, mode, uid, gid, now, now, now, tree=tree)
        if inode == self._next_inode:
            self._next_inode += 1
        self.nodes[node.inode] = node
        # Not ``children``: a new file's folder need not be planted (its caller
        # looked the name up, :meth:`_entry`); a later planting adds the rest.
        parent.kids[name] = node
        if kind == "dir":
            parent.subdirs += 1
        parent.mtime_ns = parent.ctime_ns = now
        return node

    def _entry_inode(self, mount: MountTree, path: str) -> int:
        """The inode number of ``path`` in ``mount``: the same every turn, unless it is taken.

        Two checksums seeded with (session, mount), not a cryptographic hash:
        one per planted file at every turn start, and a collision costs only
        a number from the counter. The CRC is the low half, the part git keeps.
        """
        raw = path.encode()
        crc, adler = mount.inode_seeds
        digest = zlib.adler32(raw, adler) << 32 | zlib.crc32(raw, crc)
        inode = _STABLE_INODES | (digest & (_STABLE_INODES - 1))
        return self._next_inode if inode in self.nodes else inode

    def session_dir(self, session: str) -> Path:
        return self.state_dir / "sessions" / session

    def open_session(
        self, session: str, uid: int | None = None, gid: int | None = None
    ) -> SessionTree:
        """The session's directory under the mount root, given to ``uid``/``gid`` if set.

        A directory with an owner is 0700. When an existing session gets an
        owner (or another one), its directory becomes a new node: the kernel
        may hold the old one's attributes (mode 0755, the old owner) for a
        process whose working directory it is, and a new node shares none of
        them. The old name goes to ``stale_names`` for the kernel to drop.
        """
        existing = self.sessions.get(session)
        if existing is not None:
            if uid is None and gid is None:
                return existing
            new_uid = existing.uid if uid is None else uid
            new_gid = existing.gid if gid is None else gid
            node = existing.node
            if (node.uid, node.gid, node.mode) == (new_uid, new_gid, SESSION_MODE):
                return existing
            if existing.turn is not None:
                raise Exists("the session's turn is open; its owner changes after it", path=session)
            self._detach(node)
            self.stale_names.append((ROOT_INODE, session))
            existing.node = self._new_node(
                "dir", "session", session, self.root, mode=SESSION_MODE, uid=new_uid, gid=new_gid
            )
            existing.uid, existing.gid = new_uid, new_gid
            return existing
        private = uid is not None or gid is not None
        node = self._new_node(
            "dir",
            "session",
            session,
            self.root,
            mode=SESSION_MODE if private else DIR_MODE,
            uid=uid or 0,
            gid=gid or 0,
        )
        tree = SessionTree(session, node, node.uid, node.gid)
        self.sessions[session] = tree
        return tree

    def attach_turn(
        self,
        session: str,
        turn: str,
        mounts: Mapping[str, tuple[bool, Mapping[str, Snapshot]]],
        *,
        replay: bool = False,
        private: Collection[str] = (),
        meta: Mapping[str, Mapping[str, FileMeta]] | None = None,
        folders: Mapping[str, Collection[str]] | None = None,
    ) -> TurnTree:
        """Build a turn's mount trees from their snapshots (and, on recovery, its journal).

        ``meta`` and ``folders`` are each mount's file metadata and stored
        folders, by mount name; a mount left out has none.
        """
        tree = self.sessions[session]
        if tree.turn is not None:
            raise Exists("the session already has a turn attached", path=session)
        turn_dir = self.session_dir(session) / turn
        make_private_dirs(turn_dir / "data")
        fd = os.open(turn_dir / "journal", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        state = TurnTree(tree, turn, turn_dir, fd, due=self.due)
        before = dict(tree.node.kids)
        try:
            state.journal_size = os.fstat(fd).st_size
            state.compact_at = self.limits.journal_bytes
            self._lay_mounts(tree, state, mounts, private, meta, folders)
        except BaseException:
            # Laid out whole or not at all: no folder of it stays, nor its journal open.
            for name, node in list(tree.node.kids.items()):
                if before.get(name) is not node:
                    self._detach(node)
                    self.stale_names.append((tree.node.inode, name))
            os.close(fd)
            raise
        tree.turn = state
        if replay:
            self._replay(state)
            try:
                self._free_unreferenced(state)
                if state.journal_size > state.compact_at:
                    self.compact(state)
            except OSError as exc:
                # Tidying up must never keep a turn from coming back: its journal still holds all.
                log.warning("could not tidy %s after replaying it: %s", turn_dir, exc)
        return state

    def _lay_mounts(
        self,
        tree: SessionTree,
        state: TurnTree,
        mounts: Mapping[str, tuple[bool, Mapping[str, Snapshot]]],
        private: Collection[str],
        meta: Mapping[str, Mapping[str, FileMeta]] | None,
        folders: Mapping[str, Collection[str]] | None,
    ) -> None:
        """Make each mount's root (and the folders a nested one needs) and its tree."""
        session = tree.session
        for name, (read_only, snapshot) in mounts.items():
            *above, last = name.split("/")
            root = self._new_node(
                "dir",
                "mount",
                last,
                self._mount_parent(tree, above),
                mode=DIR_MODE,
                uid=tree.uid,
                gid=tree.gid,
            )
            mount = MountTree(name, read_only, root, state, dict(snapshot), private=name in private)
            key = f"{session}\0{name}\0".encode()
            mount.inode_seeds = (zlib.crc32(key), zlib.adler32(key))
            mount.meta = (meta or {}).get(name, {})
            mount.folders = tuple((folders or {}).get(name, ()))
            mount.stored_folders = frozenset(mount.folders)
            mount.paths = sorted([*mount.snapshot, *(f"{path}/" for path in mount.folders)])
            mount.plant = self._plant
            mount.files = len(snapshot)
            mount.folders_stored = len(mount.folders)
            mount.bytes = sum(map(_SIZE, snapshot.values()))  # C-level: every file, every turn
            root.tree = mount
            root.unplanted = ""
            state.mounts[name] = mount
            state.access.start(name, snapshot)

    def _mount_parent(self, tree: SessionTree, above: list[str]) -> Node:
        """The folder a mount's root goes in: the session's, or the folders a nested one needs.

        Those (``persistent/`` of ``persistent/user``) belong to no space:
        read-only, holding only mounts, gone with the turn.
        """
        parent = tree.node
        for part in above:
            child = parent.kids.get(part)
            if child is None:
                child = self._new_node(
                    "dir", "parent", part, parent, mode=PARENT_MODE, uid=tree.uid, gid=tree.gid
                )
            parent = child
        return parent

    @staticmethod
    def _run(mount: MountTree, prefix: str) -> tuple[int, int]:
        """Where the entries under ``prefix`` (``""`` or ending in "/") lie in ``mount.paths``."""
        paths = mount.paths
        if not prefix:
            return 0, len(paths)
        # "0" follows "/": every path under the prefix sorts before prefix[:-1] + "0".
        at = bisect.bisect_left(paths, prefix)
        end = bisect.bisect_left(paths, prefix[:-1] + "0", at)
        if at < end and paths[at] == prefix:
            at += 1  # the folder's own entry, as a stored folder
        return at, end

    def _plant(self, folder: Node) -> None:
        """Make nodes of a snapshot folder's entries, now that someone looks inside it.

        A turn start builds no tree: a space of 10,000 files costs only the
        folders the agent opens. The snapshot's paths are sorted, so the
        entries under ``<folder>/`` are one run found by bisection, and each
        subfolder's run is skipped over in one step, left for its own turn.
        Entries a lookup already made one by one (:meth:`_plant_one`) stay
        as they are.
        """
        mount, prefix = folder.tree, folder.unplanted
        assert mount is not None and prefix is not None
        folder.unplanted = None
        paths = mount.paths
        if prefix:
            prefix += "/"
        at, end = self._run(mount, prefix)
        now = self.clock()
        cut = len(prefix)
        # Names met in this run, when lookups planted some first: one of
        # them met again is a file and a folder at once, as below.
        seen: set[str] | None = set() if folder.kids else None
        while at < end:
            rest = paths[at][cut:]
            name, slash, _ = rest.partition("/")
            if name in folder.kids:
                if seen is None or name in seen:
                    # Not the name: it is a person's, and a log outlives any forget.
                    log.warning("%s: a name is a file and a folder in the snapshot", mount.name)
                else:
                    seen.add(name)  # planted by a lookup: it is already what this makes
                at = bisect.bisect_left(paths, prefix + name + "0", at, end) if slash else at + 1
                continue
            if seen is not None:
                seen.add(name)
            self._snapshot_entry(folder, mount, prefix, name, slash == "/", now)
            at = bisect.bisect_left(paths, prefix + name + "0", at, end) if slash else at + 1

    def _plant_one(self, folder: Node, name: str) -> Node | None:
        """The snapshot entry ``name`` of a folder not planted yet, as a node; None: no such entry.

        A lookup needs one entry, not the folder's hundreds: the rest wait
        for whatever lists or changes the folder (:meth:`_plant`). The node
        is the one planting the folder would make (a file wins over a
        folder of the same name, as it sorts first).
        """
        mount, prefix = folder.tree, folder.unplanted
        assert mount is not None and prefix is not None
        if prefix:
            prefix += "/"
        path = prefix + name
        paths = mount.paths
        at = bisect.bisect_left(paths, path)
        if at < len(paths) and paths[at] == path:
            return self._snapshot_entry(folder, mount, prefix, name, False, self.clock())
        at = bisect.bisect_left(paths, path + "/", at)
        if at < len(paths) and paths[at].startswith(path + "/"):
            return self._snapshot_entry(folder, mount, prefix, name, True, self.clock())
        return None

    def _snapshot_entry(
        self, folder: Node, mount: MountTree, prefix: str, name: str, is_dir: bool, now: int
    ) -> Node:
        """A node for the snapshot's entry ``prefix + name`` in ``folder``."""
        inode = self._entry_inode(mount, prefix + name)
        uid, gid = folder.uid, folder.gid
        if is_dir:
            node = Node(
                inode, "dir", "entry", name, folder, DIR_MODE, uid, gid,
                now, now, now, tree=mount, unplanted=prefix + name,
            )  # fmt: skip
        else:
            path = prefix + name
            file = mount.snapshot[path]
            kept = mount.meta.get(path)
            if kept is None:
                mode, mtime, ctime = FILE_MODE, now, now
            else:
                mode = kept.mode
                mtime = now if kept.mtime_ns is None else kept.mtime_ns
                ctime = mtime if kept.ctime_ns is None else kept.ctime_ns
            node = Node(
                inode, "file", "entry", name, folder, mode, uid, gid,
                mtime, ctime, now, tree=mount, blob=file[0], size=file[1], revision=file[2],
                origin=path,
            )  # fmt: skip
        if inode == self._next_inode:
            self._next_inode += 1
        self.nodes[node.inode] = node
        folder.kids[name] = node
        if is_dir:
            folder.subdirs += 1
        return node

    def subdirs(self, folder: Node) -> int:
        """How many folders ``folder`` holds (its link count is 2 more), planting nothing.

        A folder not planted yet is as the snapshot has it: its subfolders
        are counted there, each once, a name that is also a file's not at
        all (the file is what planting makes of it).
        """
        mount, prefix = folder.tree, folder.unplanted
        if mount is None or prefix is None:
            return folder.subdirs
        if prefix:
            prefix += "/"
        paths = mount.paths
        at, end = self._run(mount, prefix)
        cut = len(prefix)
        names: set[str] = set()
        count = 0
        while at < end:
            name, slash, _ = paths[at][cut:].partition("/")
            if name not in names:
                names.add(name)
                count += slash == "/"
            at = bisect.bisect_left(paths, prefix + name + "0", at, end) if slash else at + 1
        return count

    def detach_turn(
        self, session: str, *, remove: bool = True, release: bool = True
    ) -> Path | None:
        """Drop a turn's trees and its data; the session directory stays until closed.

        ``remove=False`` leaves the turn's folder (journal, data files) on
        disk and returns it, for the caller to remove off the trio loop.
        ``release=False`` keeps the blobs its mounts hold, for the caller to
        let go of (a turn laid out again whose record stays).
        """
        tree = self.sessions[session]
        state = tree.turn
        if state is None:
            return None
        for mount in state.mounts.values():
            self._detach_mount_root(mount)
        for node in list(tree.node.kids.values()):
            if node.role == "parent":  # a nested mount's folders go with its turn
                self._detach(node)
                self.stale_names.append((tree.node.inode, node.name))
        state.gone = True
        for fh in [
            fh
            for fh, h in self.handles.items()
            if h.node.tree is not None and h.node.tree.turn is state
        ]:
            self._close_handle(fh)
        if state in self.due:
            self.due.remove(state)
        os.close(state.journal)
        tree.turn = None
        if remove:
            self.remove_turn_dir(state.dir)
        if release:
            for mount in state.mounts.values():
                self._release_blobs(mount)
        return None if remove else state.dir

    def remove_turn_dir(self, folder: Path, marks: Collection[str] = ()) -> None:
        """Remove a detached turn's folder, kept as a spare with ``marks``. Blocking."""
        try:
            self.spares.take_turn_folder(folder, marks)
        except FileNotFoundError:
            pass  # never made (a start that failed early), or removed already
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)  # could not be moved: removed in place

    def _detach_mount_root(self, mount: MountTree) -> None:
        parent = mount.root.parent
        self._detach(mount.root)
        if parent is not None:
            self.stale_names.append((parent.inode, mount.root.name))

    def _release_blobs(self, mount: MountTree) -> None:
        if mount.private:  # shared memory's blobs are never held, only marked shared
            self.blobs.release([file[0] for file in mount.snapshot.values()], discard=True)

    def close_session(self, session: str, *, remove: bool = True) -> None:
        """The session's directory disappears (ENOENT from now on).

        ``remove=False`` drops only its tree: its folder in ``state_dir``
        stays, with whatever record is there (a turn not laid out after all).
        """
        self.detach_turn(session)
        tree = self.sessions.pop(session)
        self._detach(tree.node)
        self.stale_names.append((ROOT_INODE, session))
        if remove:
            shutil.rmtree(self.session_dir(session), ignore_errors=True)

    def _detach(self, node: Node) -> None:
        # Raw ``kids``: detaching must not plant folders nobody looked into.
        if node.parent is not None and node.parent.kids.get(node.name) is node:
            del node.parent.kids[node.name]
            if node.is_dir:
                node.parent.subdirs -= 1
        for child in list(node.kids.values()):
            self._detach(child)
        node.attached = False
        self._maybe_free(node)

    def _maybe_free(self, node: Node) -> None:
        if not node.attached and node.lookups <= 0 and node.opens <= 0:
            self.nodes.pop(node.inode, None)

    # -- what statfs reports -------------------------------------------------

    def space_use(self, inode: int | None, caller_uid: int) -> tuple[int, int]:
        """Bytes and files in use, as ``statfs`` reports them against the space's limits.

        Inside a mount, that mount's use. Elsewhere (a session directory, the
        mount root, or where the caller is not known) the fullest of the
        mounts below it that the caller may see: one owned by the caller, or
        any for root. Each space has its own limits, and reporting the
        tightest never tells a tool there is room where a write would get
        ENOSPC.
        """
        node = self.nodes.get(inode) if inode is not None else None
        if node is not None and node.tree is not None:
            return node.tree.bytes, node.tree.files
        sessions = (
            [self._session_of(node)]
            if node is not None and node.role == "session"
            else list(self.sessions.values())
        )
        used_bytes = used_files = 0
        for tree in sessions:
            if tree is None or tree.turn is None or caller_uid not in (0, tree.uid):
                continue
            for mount in tree.turn.mounts.values():
                used_bytes = max(used_bytes, mount.bytes)
                used_files = max(used_files, mount.files)
        return used_bytes, used_files

    def _session_of(self, node: Node) -> SessionTree | None:
        tree = self.sessions.get(node.name)
        return tree if tree is not None and tree.node is node else None

    def path_node(self, parts: Collection[str]) -> Node | None:
        """The node at a path below the mount root (names as the kernel shows them), if any."""
        node = self.root
        for part in parts:
            child = node.children.get(part) if node.is_dir else None
            if child is None:
                return None
            node = child
        return node

    # -- looking things up ---------------------------------------------------

    def node(self, inode: int) -> Node:
        try:
            return self.nodes[inode]
        except KeyError:
            raise NotFound("no such inode", path=str(inode)) from None

    def lookup(self, parent_inode: int, name: str) -> Node:
        parent = self.node(parent_inode)
        if not parent.is_dir:
            raise NotADirectory("not a folder", path=parent.name)
        child = parent.children.get(name)
        if child is None:
            raise NotFound("no such file or folder", path=name)
        return child

    def _entry(self, folder: Node, name: str) -> Node | None:
        """The entry ``name`` of ``folder``, planting only it if the folder is not planted."""
        child = folder.kids.get(name)
        if child is None and folder.unplanted is not None:
            child = self._plant_one(folder, name)
        return child

    def find(self, parent_inode: int, name: str) -> Node:
        """:meth:`lookup` for the kernel's ``LOOKUP``: plants the one entry, not its folder.

        Only looking: whatever changes a folder's entries (unlink, rename,
        create, ...) goes through :meth:`lookup` or ``children``, which plant
        the whole folder first, so an entry planted here is never lost or
        made twice by a later planting.
        """
        parent = self.node(parent_inode)
        if not parent.is_dir:
            raise NotADirectory("not a folder", path=parent.name)
        child = self._entry(parent, name)
        if child is None:
            raise NotFound("no such file or folder", path=name)
        return child

    def remember(self, node: Node) -> Node:
        """The kernel now holds a reference to ``node`` (one more lookup)."""
        node.lookups += 1
        return node

    def forget(self, inode: int, count: int) -> None:
        node = self.nodes.get(inode)
        if node is None or inode == ROOT_INODE:
            return
        node.lookups -= count
        self._maybe_free(node)

    def children(self, inode: int) -> list[Node]:
        node = self.node(inode)
        if not node.is_dir:
            raise NotADirectory("not a folder", path=node.name)
        kids = node.children
        return [kids[name] for name in sorted(kids)]

    def _dir_at(self, mount: MountTree, parts: list[str]) -> Node:
        """The folder at ``parts`` in ``mount``, made (with its parents) if missing."""
        parent = mount.root
        for part in parts:
            child = parent.children.get(part)
            if child is None:
                child = self._new_node(
                    "dir",
                    "entry",
                    part,
                    parent,
                    mode=DIR_MODE,
                    uid=parent.uid,
                    gid=parent.gid,
                    tree=mount,
                )
            elif not child.is_dir:
                raise NotADirectory("a file stands where a folder is needed", path=part)
            parent = child
        return parent

    def _file_at(self, mount: MountTree, path: str) -> Node:
        """The file at ``path``, made empty (a new file of the mount) if missing."""
        parts = path.split("/")
        parent = self._dir_at(mount, parts[:-1])
        node = parent.children.get(parts[-1])
        if node is None:
            node = self._new_node(
                "file",
                "entry",
                parts[-1],
                parent,
                mode=FILE_MODE,
                uid=parent.uid,
                gid=parent.gid,
                tree=mount,
            )
            mount.files += 1
        return node

    # -- checks every change goes through ------------------------------------

    def _writable_dir(self, parent: Node) -> MountTree:
        """The mount a change inside ``parent`` lands in, if changes may land there."""
        if not parent.is_dir:
            raise NotADirectory("not a folder", path=parent.name)
        if parent.role in ("root", "session", "parent"):
            raise PermissionDenied(
                "only the folders of mounted spaces hold files", path=parent.name
            )
        return self._writable(parent)

    def _writable(self, node: Node) -> MountTree:
        mount = node.tree
        if mount is None:
            raise PermissionDenied("outside any mounted space", path=node.name)
        if mount.read_only:
            raise ReadOnly("this space is read-only for this turn", path=mount.name)
        if mount.turn.frozen or not node.attached:
            raise ReadOnly("this turn is ending; its folders take no more changes", path=mount.name)
        return mount

    def _check_name(self, parent: Node, name: str) -> str:
        check_new_name(name, what="file name")
        full = f"{parent.path()}/{name}" if parent.role == "entry" else name
        if len(full.encode()) > MAX_PATH_BYTES:
            raise NameTooLong(f"the path would be longer than {MAX_PATH_BYTES} bytes", path=full)
        return name

    # -- namespace changes ---------------------------------------------------

    def _new_entry(
        self, parent_inode: int, name: str, kind: Kind, mode: int, uid: int, gid: int
    ) -> tuple[MountTree, Node]:
        """A new file or folder in a writable space, after every check a new name needs."""
        parent = self.node(parent_inode)
        mount = self._writable_dir(parent)
        self._check_name(parent, name)
        if kind == "dir":
            # A folder's link count counts its subfolders: a new one among
            # entries not planted yet would be missed (``subdirs``).
            parent.plant()
        if self._entry(parent, name) is not None:
            raise Exists("already exists", path=name)
        if kind == "file" and (error := too_many_files(name, mount.files, self.limits)):
            raise error
        if kind == "dir" and (error := too_many_folders(name, mount.folders_stored, self.limits)):
            raise error  # ENOSPC now: a folder the store would refuse must not seem made
        # Mode 0 is a mode like any other (POSIX): no default replaces it.
        self._need_room(0, parent)
        node = self._new_node(
            kind,
            "entry",
            name,
            parent,
            mode=stat.S_IMODE(mode),
            uid=uid,
            gid=gid,
            tree=mount,
        )
        return mount, node

    def create(self, parent_inode: int, name: str, mode: int, uid: int, gid: int) -> Node:
        node, fd = self._create(parent_inode, name, mode, uid, gid)
        os.close(fd)
        return node

    def create_open(
        self, parent_inode: int, name: str, mode: int, uid: int, gid: int, flags: int
    ) -> tuple[Node, int]:
        """Create a file and open it (FUSE ``CREATE``): one data file, opened once."""
        parent = self.node(parent_inode)
        if parent.tree is not None:
            self._check_open_files(parent.tree.turn.session)
        node, fd = self._create(parent_inode, name, mode, uid, gid)
        try:
            fh, handle = self.open(node.inode, flags & ~(os.O_TRUNC | os.O_CREAT | os.O_EXCL))
        except BaseException:
            os.close(fd)
            raise
        if handle.writable:
            self._keep_fd(handle, fd, node.data)
        else:
            os.close(fd)
        return node, fh

    def _create(
        self, parent_inode: int, name: str, mode: int, uid: int, gid: int
    ) -> tuple[Node, int]:
        mount, node = self._new_entry(parent_inode, name, "file", mode, uid, gid)
        node.data, fd = self._new_data(mount.turn, keep_open=True)
        node.written = True
        mount.files += 1
        path = node.path()
        mount.touched.add(path)
        # ``w`` after its mode and times: a replay takes its mtime from its data
        # file, which moves with each write to come, journaled or not.
        mount.turn.log(
            journal.holds_data(mount.name, path, node.data),
            self._attributes(mount, node, path),
            journal.written(mount.name, path),
        )
        return node, fd

    def mkdir(self, parent_inode: int, name: str, mode: int, uid: int, gid: int) -> Node:
        mount, node = self._new_entry(parent_inode, name, "dir", mode, uid, gid)
        path = node.path()
        self._arrive(mount, node, path)
        # Its mode too (a replay makes folders 0755): a 0700 folder stays private.
        mount.turn.log(journal.made_folder(mount.name, path), self._attributes(mount, node, path))
        return node

    def unlink(self, parent_inode: int, name: str) -> None:
        parent = self.node(parent_inode)
        mount = self._writable_dir(parent)
        node = self.lookup(parent_inode, name)
        if node.is_dir:
            raise IsADirectory("use rmdir for folders", path=name)
        self._remove_file(mount, node)
        # The folder changed, and so did the file's link count (an open descriptor sees it).
        parent.mtime_ns = parent.ctime_ns = node.ctime_ns = self.clock()
        self._synced_names(mount)
        mount.turn.free_released()

    def _remove_file(self, mount: MountTree, node: Node) -> None:
        path = node.path()
        mount.touched.add(path)
        mount.turn.log(journal.removed(mount.name, path))
        self._detach(node)
        if node.opens > 0:
            node.orphan = True  # counts toward the space until the last handle goes
        else:
            self._let_go(mount, node)

    def _let_go(self, mount: MountTree, node: Node) -> None:
        """A removed file no handle holds: it leaves the space's counts and its data goes."""
        node.orphan = False
        mount.files -= 1
        mount.bytes -= node.size
        if node.data is not None:
            mount.turn.release(node.data, sync=node.synced or self.sync_on_close)

    def rmdir(self, parent_inode: int, name: str) -> None:
        parent = self.node(parent_inode)
        mount = self._writable_dir(parent)
        node = self.lookup(parent_inode, name)
        if not node.is_dir:
            raise NotADirectory("not a folder", path=name)
        if node.children:
            raise NotEmpty("the folder is not empty", path=name)
        path = node.path()
        self._leave(mount, node, path)
        mount.turn.log(journal.removed_folder(mount.name, path))
        self._detach(node)
        parent.mtime_ns = parent.ctime_ns = self.clock()
        self._synced_names(mount)

    # -- counting folders toward max_folders -----------------------------------

    @staticmethod
    def _leave(mount: MountTree, node: Node, path: str) -> None:
        """The folder ``node`` leaves ``path`` (removed, or moved away)."""
        if node.made or path in mount.stored_folders:
            mount.folders_stored -= 1
        node.made = False

    @staticmethod
    def _arrive(mount: MountTree, node: Node, path: str) -> None:
        """The folder ``node`` is now at ``path`` (made, or moved there)."""
        node.made = path not in mount.stored_folders
        mount.folders_stored += 1

    def _check_folders_moved(
        self, mount: MountTree, moves: Iterable[tuple[Node, str, str]], name: str, freed: int = 0
    ) -> None:
        """ENOSPC before a move whose folders' new paths would pass ``max_folders``.

        ``moves``: each node, its path now and its path after; ``freed``: the
        counted folders the move replaces. A folder moved to a path the
        snapshot did not store is a folder the store makes at the turn's end,
        so a move counts as a removal and a mkdir do.
        """
        grown = -freed
        for node, old, _ in moves:
            if node.is_dir:
                grown += 1 - int(node.made or old in mount.stored_folders)
        if grown > 0 and (
            error := too_many_folders(name, mount.folders_stored + grown - 1, self.limits)
        ):
            raise error

    def _count_moved(self, mount: MountTree, moves: Iterable[tuple[Node, str, str]]) -> None:
        for node, old, new in moves:
            if node.is_dir:
                self._leave(mount, node, old)
                self._arrive(mount, node, new)

    def rename(
        self,
        old_parent_inode: int,
        old_name: str,
        new_parent_inode: int,
        new_name: str,
        *,
        replace: bool = True,
    ) -> None:
        old_parent = self.node(old_parent_inode)
        new_parent = self.node(new_parent_inode)
        mount = self._writable_dir(old_parent)
        if self._writable_dir(new_parent) is not mount:
            raise PermissionDenied("files move only within one space", path=new_name)
        node = self.lookup(old_parent_inode, old_name)
        self._check_name(new_parent, new_name)
        target = new_parent.children.get(new_name)
        if target is node:
            return
        ancestor: Node | None = new_parent
        while ancestor is not None:
            if ancestor is node:
                raise InvalidName("a folder cannot move into itself", path=new_name)
            ancestor = ancestor.parent
        if target is not None:
            if not replace:
                raise Exists("already exists", path=new_name)
            if node.is_dir and not target.is_dir:
                raise NotADirectory("cannot replace a file with a folder", path=new_name)
            if target.is_dir and not node.is_dir:
                raise IsADirectory("cannot replace a folder with a file", path=new_name)
            if target.is_dir and target.children:
                raise NotEmpty("the folder being replaced is not empty", path=new_name)
        self._check_moved_paths(node, new_parent, new_name)
        to = self._path_in(new_parent, new_name)
        walked = self._walked(node)
        moves = _folder_moves(walked, to)
        freed = target is not None and target.is_dir and (target.made or to in mount.stored_folders)
        self._check_folders_moved(mount, moves, new_name, freed=int(freed))
        with mount.turn.batch():
            self._move(mount, walked, old_parent, old_name, new_parent, new_name, target)
        self._count_moved(mount, moves)
        self._synced_names(mount)
        mount.turn.free_released()

    def _path_in(self, parent: Node, name: str) -> str:
        """The path in its mount of ``name`` in the folder ``parent``."""
        return f"{parent.path()}/{name}" if parent.role == "entry" else name

    def _walked(self, node: Node) -> list[tuple[Node, str]]:
        """Every node under ``node`` (itself first), with its path now: walked once per move."""
        return [(n, n.path()) for n in self._walk(node)]

    def _check_moved_paths(self, node: Node, new_parent: Node, new_name: str) -> None:
        """Refuse a move that would put anything under ``node`` past the path limit.

        Checked before anything changes: the store would refuse such a path at
        the turn's end, so the agent hears it now, as ENAMETOOLONG.
        """
        if not node.is_dir:
            return  # the new name itself was checked with the rest of the name
        base = self._path_in(new_parent, new_name)
        longest = len(base.encode()) + self._longest_below(node)
        if longest > MAX_PATH_BYTES:
            raise NameTooLong(
                f"a path under the folder would be {longest} bytes; "
                f"at most {MAX_PATH_BYTES} are allowed",
                path=base,
            )

    def _longest_below(self, folder: Node) -> int:
        """Bytes of the longest ``/rest`` of a path under ``folder`` (0 if it is empty)."""
        longest = 0
        for child in folder.children.values():
            size = 1 + len(child.name.encode())
            if child.is_dir:
                size += self._longest_below(child)
            longest = max(longest, size)
        return longest

    def exchange(
        self, one_parent_inode: int, one_name: str, other_parent_inode: int, other_name: str
    ) -> None:
        """Swap what two names hold (``renameat2`` with ``RENAME_EXCHANGE``); both must exist.

        Journaled as a rename is: every old path of both goes (deepest first,
        so a replay empties each folder before removing it), then every new
        path arrives with what it holds, in one write.
        """
        one_parent = self.node(one_parent_inode)
        other_parent = self.node(other_parent_inode)
        mount = self._writable_dir(one_parent)
        if self._writable_dir(other_parent) is not mount:
            raise PermissionDenied("files move only within one space", path=other_name)
        one = self.lookup(one_parent_inode, one_name)
        other = self.lookup(other_parent_inode, other_name)
        if one is other:
            return
        for inner, outer in ((one, other), (other, one)):
            ancestor: Node | None = inner.parent
            while ancestor is not None:
                if ancestor is outer:
                    raise InvalidName("a folder cannot swap with what it holds", path=inner.name)
                ancestor = ancestor.parent
        self._check_moved_paths(one, other_parent, other_name)
        self._check_moved_paths(other, one_parent, one_name)
        one_walked, other_walked = self._walked(one), self._walked(other)
        moves = [
            *_folder_moves(one_walked, self._path_in(other_parent, other_name)),
            *_folder_moves(other_walked, self._path_in(one_parent, one_name)),
        ]
        self._check_folders_moved(mount, moves, other_name)
        walked = [*one_walked, *other_walked]
        with mount.turn.batch():
            for n, path in reversed(walked):
                if n.is_dir:
                    mount.turn.log(journal.removed_folder(mount.name, path))
                else:
                    mount.touched.add(path)
                    mount.turn.log(journal.removed(mount.name, path))
            one_parent.children[one_name] = other
            other_parent.children[other_name] = one
            self.moves += 1
            one.name, other.name = other_name, one_name
            one.parent, other.parent = other_parent, one_parent
            shift = int(other.is_dir) - int(one.is_dir)  # folders that moved into one's parent
            one_parent.subdirs += shift
            other_parent.subdirs -= shift
            now = self.clock()
            for changed in (one_parent, other_parent):
                changed.mtime_ns = changed.ctime_ns = now
            one.ctime_ns = other.ctime_ns = now
            self._journal_arrivals(mount, walked)
        self._count_moved(mount, moves)
        self._synced_names(mount)

    def _move(
        self,
        mount: MountTree,
        walked: list[tuple[Node, str]],
        old_parent: Node,
        old_name: str,
        new_parent: Node,
        new_name: str,
        target: Node | None,
    ) -> None:
        """Carry out a checked rename of ``walked`` (:meth:`_walked`): journal it, move it."""
        node = walked[0][0]
        if target is not None:
            if target.is_dir:
                path = target.path()
                self._leave(mount, target, path)
                mount.turn.log(journal.removed_folder(mount.name, path))
                self._detach(target)
            else:
                self._remove_file(mount, target)
        for n, path in walked:
            if not n.is_dir:
                mount.touched.add(path)
                mount.turn.log(journal.removed(mount.name, path))
        # Folders after their files, deepest first: a replay removes only empty ones.
        for n, path in reversed(walked):
            if n.is_dir:
                mount.turn.log(journal.removed_folder(mount.name, path))
        del old_parent.children[old_name]
        self.moves += 1
        node.name = new_name
        node.parent = new_parent
        new_parent.children[new_name] = node
        if node.is_dir:
            old_parent.subdirs -= 1
            new_parent.subdirs += 1
        now = self.clock()
        old_parent.mtime_ns = old_parent.ctime_ns = new_parent.mtime_ns = now
        new_parent.ctime_ns = node.ctime_ns = now
        self._journal_arrivals(mount, walked)

    def _journal_arrivals(self, mount: MountTree, walked: list[tuple[Node, str]]) -> None:
        for n, old_path in walked:
            self._log_arrival(mount, n, old_path)

    def _log_arrival(self, mount: MountTree, node: Node, old_path: str) -> None:
        """Journal a moved node at its new path, with all it had (``_node_records``).

        A replay plants an arrival at the defaults, so without its ``a``
        record a chmod'ed file, a stored script or a 0700 folder would come
        back 0644 or 0755 after a crash.
        """
        path = node.path()
        if node.is_dir:
            mount.turn.log(journal.made_folder(mount.name, path))
        else:
            mount.touched.add(path)
            held, *known = self._node_records(mount, node, path)
            renamed = journal.renamed(mount.name, path, old_path)
            mount.turn.log(held, renamed, *known)
            return
        mount.turn.log(self._attributes(mount, node, path))

    def _synced_names(self, mount: MountTree) -> None:
        if self.sync_on_close:
            mount.turn.sync()

    @staticmethod
    def _holds(mount: MountTree, node: Node, path: str) -> journal.Record:
        if node.data is not None:
            return journal.holds_data(mount.name, path, node.data, node.origin)
        return journal.holds_blob(
            mount.name, path, node.blob, node.size, node.revision, node.origin
        )

    def _walk(self, node: Node) -> Iterator[Node]:
        yield node
        for child in node.children.values():
            yield from self._walk(child)

    # -- attributes ----------------------------------------------------------

    def setattr(
        self,
        inode: int,
        *,
        size: int | None = None,
        mode: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
        atime_ns: int | None = None,
        mtime_ns: int | None = None,
        caller_uid: int = 0,
        caller_groups: Collection[int] = (),
    ) -> Node:
        """Change a node's attributes (also through a descriptor whose name is gone).

        ``caller_groups`` are the groups the caller is in (its own and its
        supplementary ones); they matter only to a caller other than root
        changing a file's group.
        """
        node = self.node(inode)
        self._changeable(node)
        self._check_owner_change(node, uid, gid, caller_uid, caller_groups)
        if size is not None:
            if node.is_dir:
                raise IsADirectory("cannot truncate a folder", path=node.name)
            self._truncate(node, size)
        if mode is not None:
            node.mode = stat.S_IMODE(mode)
        if uid is not None:
            node.uid = uid
        if gid is not None:
            node.gid = gid
        if (uid is not None or gid is not None) and not node.is_dir:
            # As Linux does at every chown of a file: a program must not keep
            # running as someone once it belongs to someone else. Setgid
            # without group execute is a locking mark, not a privilege: kept.
            node.mode &= ~stat.S_ISUID
            if node.mode & stat.S_IXGRP:
                node.mode &= ~stat.S_ISGID
        if atime_ns is not None:
            node.atime_ns = clamp_time_ns(atime_ns)
        if mtime_ns is not None:
            node.mtime_ns = clamp_time_ns(mtime_ns)
        node.ctime_ns = self.clock()
        mount = node.tree
        if (
            (mode is not None or mtime_ns is not None)
            and mount is not None
            and node.role == "entry"
            and node.attached
        ):
            # Journaled, so a crash keeps a chmod; a file's metadata is part of what it holds.
            # A file no name holds any more is in no path's record.
            path = node.path()
            if not node.is_dir:
                mount.touched.add(path)
                node.stamped = node.written
            mount.turn.log(self._attributes(mount, node, path))
        return node

    @staticmethod
    def _check_owner_change(
        node: Node, uid: int | None, gid: int | None, caller_uid: int, groups: Collection[int]
    ) -> None:
        """POSIX ``chown`` without privilege: the owner may give its file to a group it is in.

        Nobody but root gives a file to another user; naming the owner and
        group a file already has is allowed to its owner.
        """
        if caller_uid == 0:
            return
        if uid is not None and (caller_uid != node.uid or uid != node.uid):
            raise PermissionDenied("only root may give a file to another user", path=node.name)
        if gid is not None and (caller_uid != node.uid or (gid != node.gid and gid not in groups)):
            raise PermissionDenied(
                "only the owner may change a file's group, to a group it is in", path=node.name
            )

    def _changeable(self, node: Node) -> MountTree:
        """The mount whose turn may change ``node``'s attributes or size.

        A file unlinked or renamed over while a descriptor holds it is still
        a file, as on any disk (``ftruncate``, ``fchmod``, ``fchown``,
        ``futimens`` work), as long as its turn is the one still open.
        """
        if node.attached:
            return self._writable(node)
        mount = node.tree
        if mount is None or mount.turn.session.turn is not mount.turn:
            raise ReadOnly("the turn this file belonged to has ended", path=node.name)
        if mount.read_only:
            raise ReadOnly("this space is read-only for this turn", path=mount.name)
        if mount.turn.frozen:
            raise ReadOnly("this turn is ending; its folders take no more changes", path=mount.name)
        return mount

    def _truncate_unlinked(self, mount: MountTree, node: Node, size: int) -> None:
        """Truncate a file no name holds any more: nothing to journal, but it still counts.

        Until its last handle goes it counts toward its space's limits (see
        ``_remove_file``), so growing it is checked as growing any file is.
        """
        self._check_size(mount, node, size)
        if node.data is None:
            node.data, _ = self._new_data(mount.turn)
            if size > 0 and node.blob is not None:
                shutil.copyfile(self.blobs.path(node.blob), mount.turn.data_path(node.data))
            node.blob = node.revision = None
        os.truncate(mount.turn.data_path(node.data), size)
        if node.orphan:
            mount.bytes += size - node.size
        node.size = size
        node.mtime_ns = node.ctime_ns = self.clock()

    @staticmethod
    def _attributes(mount: MountTree, node: Node, path: str) -> journal.Record:
        """The journal record of a node's mode and times."""
        return journal.attributes(mount.name, path, node.mode, node.mtime_ns, node.ctime_ns)

    def _truncate(self, node: Node, size: int) -> None:
        if not node.attached:
            self._truncate_unlinked(self._changeable(node), node, size)
            return
        mount = self._writable(node)
        self._check_size(mount, node, size)
        if size > node.size:
            self._need_room(size - node.size, node)
        self._copy_up(mount, node, keep=size > 0)
        os.truncate(mount.turn.data_path(self._data(node)), size)
        mount.bytes += size - node.size
        node.size = size
        node.mtime_ns = node.ctime_ns = self.clock()
        self._mark_written(mount, node)
        self._uncut(mount, node)

    def _check_size(self, mount: MountTree, node: Node, size: int) -> None:
        error = file_too_large(node.name, size, self.limits) or (
            space_too_full(node.name, mount.bytes + size - node.size, self.limits)
            if size > node.size
            else None
        )
        if error is not None:
            raise error

    # -- file contents -------------------------------------------------------

    @staticmethod
    def _data(node: Node) -> int:
        assert node.data is not None
        return node.data

    def _new_data(self, turn: TurnTree, *, keep_open: bool = False) -> tuple[int, int]:
        """A new, empty data file of the turn: its id, and (with ``keep_open``) an fd on it.

        The fd is read-write; without ``keep_open`` it is closed and -1 returned.
        """
        data = turn.next_data
        turn.next_data += 1
        path = turn.data_path(data)
        self.spares.file(path)
        return (data, os.open(path, os.O_RDWR)) if keep_open else (data, -1)

    def _copy_up(self, mount: MountTree, node: Node, *, keep: bool) -> None:
        """Give a snapshot file its own data file before its first change."""
        if node.data is not None:
            return
        self._need_room(node.size if keep else 0, node)
        data, _ = self._new_data(mount.turn)
        target = mount.turn.data_path(data)
        if keep and node.blob is not None:
            shutil.copyfile(self.blobs.path(node.blob), target)
        node.data, node.blob, node.revision = data, None, None
        if not keep:
            mount.bytes -= node.size
            node.size = 0
        path = node.path()
        mount.touched.add(path)
        mount.turn.log(journal.holds_data(mount.name, path, data, node.origin))

    def _mark_written(self, mount: MountTree, node: Node) -> None:
        # Once more after a record of its times: a replay applies the last of
        # them, and only a ``w`` takes the time of the writes after it.
        if not node.written or node.stamped:
            node.written = True
            node.stamped = False
            mount.turn.log(journal.written(mount.name, node.path()))

    def _mark_cut(self, mount: MountTree, node: Node, error: TooLarge | DiskFull) -> None:
        """A write to ``node`` was refused: what it holds now is cut off, and is not stored."""
        if isinstance(error, DiskFull):
            why = "no room: a write to it was refused (the disk is full), so it is cut off"
        elif isinstance(error, TooLarge) and error.errno == errno.EFBIG:
            why = (
                f"too large: a write past the {self.limits.max_file_bytes}-byte file limit "
                "was refused, so it is cut off"
            )
        else:
            why = "no room: a write to it was refused (the space is full), so it is cut off"
        if node.cut != why:
            node.cut = why
            mount.turn.log(journal.cut(mount.name, node.path(), why))

    def _uncut(self, mount: MountTree, node: Node) -> None:
        """Truncated (or rewritten from empty) within the limits: the file may be stored again."""
        if node.cut is not None:
            node.cut = None
            mount.turn.log(journal.uncut(mount.name, node.path()))

    def cut(self, mount: MountTree, path: str) -> str | None:
        """Why the file at ``path`` is not to be stored (a write to it was refused), or None."""
        node = self.node_at(mount, path)
        return None if node is None or node.is_dir else node.cut

    def open(self, inode: int, flags: int) -> tuple[int, Handle]:
        node = self.nodes.get(inode)
        if node is None:
            raise NotFound("no such inode", path=str(inode))
        if node.kind == "dir":
            raise IsADirectory("cannot open a folder as a file", path=node.name)
        mount = node.tree
        assert mount is not None
        turn = mount.turn
        session = turn.session
        if session.open_files >= self.limits.max_open_files:
            self._check_open_files(session)
        access = flags & os.O_ACCMODE
        if access == os.O_RDONLY and not flags & os.O_TRUNC:
            # Most opens only read: nothing to copy up, nothing to check.
            writable = False
            # A frozen turn (ending, or kept by a failed store) still reads:
            # its reads are the turn's, in the record of the end that stores it.
            if node.read_checked != self.moves:
                self._log_read(mount, node)
        else:
            writable = access in (os.O_WRONLY, os.O_RDWR)
            truncate = bool(flags & os.O_TRUNC)
            if writable or truncate:
                self._writable(node)
                if truncate:
                    self._copy_up(mount, node, keep=False)
                    os.truncate(turn.data_path(self._data(node)), 0)
                    mount.bytes -= node.size
                    node.size = 0
                    node.mtime_ns = node.ctime_ns = self.clock()
                    self._mark_written(mount, node)
                    self._uncut(mount, node)
                else:
                    self._copy_up(mount, node, keep=True)
            if access in (os.O_RDONLY, os.O_RDWR):
                self._log_read(mount, node)
        fh = self._next_fh
        self._next_fh = fh + 1
        handle = Handle(node, writable, mappable=access == os.O_RDWR)
        self.handles[fh] = handle
        node.opens += 1
        session.open_files += 1
        return fh, handle

    def _check_open_files(self, session: SessionTree) -> None:
        if session.open_files >= self.limits.max_open_files:
            raise TooManyOpen(
                f"the session already holds {session.open_files} open files; the limit is "
                f"{self.limits.max_open_files}",
                path=session.session,
            )

    def _log_read(self, mount: MountTree, node: Node) -> None:
        """Journal the first open for reading of a path in a turn; later ones add nothing.

        Once a node's path is known to be opened, the node keeps the move
        count it was checked at: until a rename moves some path, the path and
        its entry are the same, so a second open walks no path (a ``grep -r``
        over cached files is two requests a file, and this was most of one).
        """
        if node.read_checked == self.moves:
            return
        path = node.path()
        seen = mount.turn.access.get(mount.name, path)
        if seen is None or not seen.opened:
            mount.turn.log(journal.read(mount.name, path, node.revision))
        node.read_checked = self.moves

    def _fd(self, handle: Handle) -> int:
        """The descriptor that reads what ``handle``'s file holds now, opened if need be."""
        node = handle.node
        data = node.data
        source = data if data is not None else node.blob
        fd = handle.fd
        if fd is not None:
            if handle.source == source:
                self._fds.move_to_end(handle)
                return fd
            self._drop_fd(handle)
        if data is not None:
            mount = node.tree
            assert mount is not None
            path = f"{mount.turn.dir}/data/{data}"
        else:
            path = self.blobs.location(node.blob or "")
        fd = os.open(path, os.O_RDWR if handle.writable else os.O_RDONLY)
        self._keep_fd(handle, fd, source)
        return fd

    def _keep_fd(self, handle: Handle, fd: int, source: int | str | None) -> None:
        """``handle`` now holds ``fd``; past ``descriptors``, the least recently used is closed.

        A handle whose descriptor was closed reopens one at its next read or
        write (:meth:`_fd`): agents' open files cost the daemon no descriptor
        while idle, so however many one agent holds, the others still get one.
        """
        handle.fd, handle.source = fd, source
        fds = self._fds
        fds[handle] = None
        while len(fds) > self.descriptors:
            idle, _ = fds.popitem(last=False)
            if idle.fd is not None:
                os.close(idle.fd)
            idle.fd = idle.source = None

    def _drop_fd(self, handle: Handle) -> None:
        if handle.fd is not None:
            os.close(handle.fd)
            handle.fd = handle.source = None
            self._fds.pop(handle, None)

    def handle(self, fh: int) -> Handle:
        try:
            return self.handles[fh]
        except KeyError:
            raise NotFound("no such open file", path=str(fh)) from None

    def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self.handles.get(fh)
        if handle is None:
            raise NotFound("no such open file", path=str(fh))
        return os.pread(self._fd(handle), size, offset)

    def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self.handle(fh)
        node = handle.node
        if not handle.writable:
            raise PermissionDenied("the file was not opened for writing", path=node.name)
        # A file unlinked while open still takes writes, as on any disk, and
        # still counts toward its space's limits until its last handle goes.
        mount = self._changeable(node)
        # The kernel's offset stands, O_APPEND or not: it put an append at the
        # end itself (under the inode's lock, with the size this daemon told
        # it), and a write at an offset on such a descriptor is a pwrite after
        # fcntl dropped O_APPEND, pwritev2's RWF_NOAPPEND, or an mmap page
        # written back, each meant for where it says.
        end = offset + len(data)
        try:
            if end > node.size:
                self._check_size(mount, node, end)
            self._need_room(len(data), node)
        except (TooLarge, DiskFull) as exc:
            if node.attached:
                self._mark_cut(mount, node, exc)
            raise
        written = os.pwrite(self._fd(handle), data, offset)
        if written and offset + written > node.size:  # writing nothing extends nothing
            mount.bytes += offset + written - node.size
            node.size = offset + written
        node.mtime_ns = node.ctime_ns = self.clock()
        handle.wrote = True
        if node.attached:
            self._mark_written(mount, node)
        return written

    def close(self, fh: int) -> None:
        """The agent closed a descriptor (only asked with ``sync_on_close``): sync what it wrote."""
        handle = self.handle(fh)
        if handle.writable and (handle.wrote or handle.node.written):
            self.fsync(fh)

    def fsync(self, fh: int) -> None:
        """Make what the file and the turn's journal hold durable before returning.

        Through any handle, read-only too: ``sync FILE`` opens it so, and an
        ``fsync`` makes a file's data durable whatever descriptor asks.
        """
        handle = self.handle(fh)
        node = handle.node
        if node.data is not None:
            # Its descriptor may have been closed while idle: any one syncs the file.
            os.fsync(self._fd(handle))
            node.synced = True
        tree = handle.node.tree
        if tree is not None:
            tree.turn.sync()

    def fsync_folder(self, folder: Node) -> None:
        """Make the names in ``folder`` durable: the journal that records them is synced.

        A write, ``fsync``, ``rename``, ``fsync`` of the folder is how
        editors, git and SQLite replace a file durably. (A file's own bytes
        are its ``fsync``'s: a journal record naming a data file that was
        never synced comes back empty after a power cut, as on any filesystem.)
        """
        mount = folder.tree
        if mount is not None and not mount.turn.gone:  # an ended turn was stored: done
            mount.turn.sync()

    def release(self, fh: int) -> None:
        self._close_handle(fh)

    def _close_handle(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is None:
            return
        if handle.fd is not None:
            self._drop_fd(handle)
        node = handle.node
        node.opens -= 1
        mount = node.tree
        if mount is not None:
            mount.turn.session.open_files -= 1
            if node.orphan and node.opens <= 0:
                self._let_go(mount, node)
                mount.turn.free_released()
        if not node.attached:
            self._maybe_free(node)

    # -- turn end --------------------------------------------------------------

    def write_held(self) -> None:
        """Put every turn's held-back read records into its journal (the daemon is stopping)."""
        for tree in self.sessions.values():
            if tree.turn is not None:
                tree.turn.write_held()

    def mapped_for_writing(self, session: str) -> list[int]:
        """The inodes of the session's turn that a handle may have mapped for writing.

        Only such a file can have pages the kernel holds dirty and has not
        written back to the daemon yet: a shared writable ``mmap`` needs a
        descriptor opened ``O_RDWR``, and keeps its handle open (the kernel
        sends no release) until it is unmapped. A handle opened ``O_WRONLY``
        (``printf > f``, an editor's save) is no such file, though its
        release often comes after the turn's end has begun.
        """
        state = self.sessions[session].turn if session in self.sessions else None
        if state is None:
            return []
        return sorted(
            {
                h.node.inode
                for h in self.handles.values()
                if h.mappable and h.node.tree is not None and h.node.tree.turn is state
            }
        )

    def freeze(self, session: str) -> None:
        """From now on the turn's folders refuse changes: what ends is what was there."""
        state = self.sessions[session].turn
        if state is not None:
            state.frozen = True
            state.write_held()

    def source(self, mount: MountTree, path: str) -> Path | None:
        """The file on disk holding what ``path`` holds now in ``mount``; ``None`` if nothing."""
        node: Node | None = mount.root
        for part in path.split("/"):
            if node is None or not node.is_dir:
                return None
            node = self._entry(node, part)  # only looking: plant the path, not its folders
        if node is None or node.is_dir:
            return None
        if node.data is not None:
            return mount.turn.data_path(node.data)
        return self.blobs.path(node.blob or "")

    def base(self, mount: MountTree, path: str) -> Path | None:
        """The blob holding what ``path`` held in the turn's snapshot; ``None`` if nothing."""
        file = mount.snapshot.get(path)
        return None if file is None else self.blobs.path(file[0])

    # -- bounds: disk room and the journal -------------------------------------

    def _statvfs_free(self) -> int:
        st = os.statvfs(self.state_dir)
        return st.f_bavail * st.f_frsize

    def _need_room(self, size: int, node: Node) -> None:
        """Refuse an agent's write of ``size`` bytes if it would dip into the disk reserve.

        Free space is looked at once a second, or sooner when the agents'
        writes since the last look could have used up what was left above
        the reserve, so the check costs a ``statvfs`` only now and then.
        """
        reserve = self.limits.disk_reserve_bytes
        if reserve == 0:
            return
        now = time.monotonic()
        if size > self._room or now - self._room_at > ROOM_SECONDS:
            self._room = self.free_bytes() - reserve
            self._room_at = now
            if size > self._room:
                raise DiskFull(
                    f"the disk under state_dir is down to its reserve of {reserve} bytes, "
                    "kept for storing turns",
                    path=node.name,
                )
        self._room -= size

    def compact_due(self) -> None:
        """Compact every journal that passed its bound (called between requests)."""
        while self.due:
            state = self.due.pop()
            if state.gone:
                continue
            try:
                self.compact(state)
            except OSError as exc:
                # The journal as it is still holds everything; try again once it grows more.
                log.warning("could not compact the journal of %s: %s", state.dir, exc)
                state.compact_at = state.journal_size + self.limits.journal_bytes

    def compact(self, state: TurnTree) -> None:
        """Rewrite the turn's journal as the records of what it holds now, atomically.

        Replaying the new journal over the snapshot rebuilds the same turn:
        each touched path removed (``x``) or held as it is now (what a rename
        journals for a moved file), snapshot folders gone (``R``, deepest
        first), new folders (``D``), and the access log entry by entry
        (``L``). It is written beside the old one, synced and renamed over
        it, so a crash leaves one or the other whole. The next compaction
        comes at ``journal_bytes`` or twice what this one wrote, whichever is
        more, so a turn holding much is not rewritten at every request.
        """
        records: list[journal.Record] = []
        forgotten = {name for name, mount in state.mounts.items() if mount.forgotten}
        for mount in state.mounts.values():
            if not mount.forgotten:
                records += self._state_records(mount)
        records += (
            journal.access_entry(name, path, fields)
            for name, path, fields in state.access.compacted(forgotten)
        )
        body = journal.encode(records)
        target = state.dir / "journal"
        tmp = state.dir / "journal.tmp"
        # One descriptor, opened before anything is replaced: it becomes the
        # journal's, so no failure after the rename leaves appends going to
        # the old, unlinked file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            folder = os.open(state.dir, os.O_RDONLY)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        try:
            os.replace(tmp, target)
        except BaseException:
            os.close(fd)
            os.close(folder)
            raise
        os.close(state.journal)
        state.journal = fd
        # Held reads are in the access log the new journal carries.
        state.held_reads.clear()
        state.unsynced = False
        state.journal_size = len(body)
        state.compact_at = max(self.limits.journal_bytes, 2 * len(body))
        try:
            os.fsync(folder)  # the rename itself is durable before anything is appended
        finally:
            os.close(folder)

    def _state_records(self, mount: MountTree) -> list[journal.Record]:
        """The journal records that rebuild ``mount``'s files and folders from its snapshot."""
        name = mount.name
        removed: list[journal.Record] = []
        held: list[journal.Record] = []
        for path in sorted(mount.touched):
            node = self.node_at(mount, path)
            if node is None or node.is_dir:
                removed.append(journal.removed(name, path))
            else:
                held += self._node_records(mount, node, path)
        gone, planted, made = self._folder_changes(mount)
        # Every folder that is a node keeps its mode and times (a chmod, a
        # mkdir's mode); the rest are as loaded.
        folder_modes = []
        for d in planted:
            node = self.node_at(mount, d)
            if node is not None:
                folder_modes.append(self._attributes(mount, node, d))
        return [
            *removed,
            *(journal.removed_folder(name, d) for d in gone),
            *(journal.made_folder(name, d) for d in made),
            *folder_modes,
            *held,
        ]

    def _folder_changes(self, mount: MountTree) -> tuple[list[str], list[str], list[str]]:
        """The snapshot's folders gone (deepest first), every planted folder, and those made."""
        # The folders the snapshot's files imply, and its stored (maybe empty) ones.
        snapshot_dirs = {path[:at] for path in mount.paths for at, c in enumerate(path) if c == "/"}
        for folder in mount.folders:
            snapshot_dirs.add(folder)
            snapshot_dirs.update(folder[:at] for at, c in enumerate(folder) if c == "/")
        gone = sorted(
            (d for d in snapshot_dirs if not self._has_dir(mount, d)),
            key=lambda d: -d.count("/"),
        )
        planted = sorted(self._planted_dirs(mount.root, ""))
        # Made: where the snapshot had no folder, or counted as made there (a
        # folder re-made where the snapshot's files only implied one), so a
        # replay counts each as the live turn did (``_arrive``).
        made = [d for d in planted if d not in snapshot_dirs or self._made_at(mount, d)]
        return gone, planted, made

    def _made_at(self, mount: MountTree, path: str) -> bool:
        node = self.node_at(mount, path)
        return node is not None and node.made

    def _replay_rmdir(self, mount: MountTree, node: Node, path: str) -> None:
        if node.is_dir and not node.children:
            self._leave(mount, node, path)
            self._detach(node)

    def _node_records(self, mount: MountTree, node: Node, path: str) -> list[journal.Record]:
        """What the journal says of a file held at ``path``: its content and what is known of it."""
        records = [self._holds(mount, node, path)]
        if node.written:
            records.append(journal.written(mount.name, path))
            node.stamped = True  # its ``a`` comes last
        if node.cut is not None:
            records.append(journal.cut(mount.name, path, node.cut))
        # Its mode and times last: a replay of ``w`` takes the data file's times.
        records.append(self._attributes(mount, node, path))
        return records

    def node_at(self, mount: MountTree, path: str) -> Node | None:
        """The node at ``path`` in ``mount`` now, or None."""
        node: Node | None = mount.root
        for part in path.split("/"):
            if node is None or not node.is_dir:
                return None
            node = self._entry(node, part)  # only looking: plant the path, not its folders
        return node

    def meta_at_end(self, mount: MountTree) -> dict[str, FileMeta]:
        """The mode and times of every touched file that is there now."""
        found: dict[str, FileMeta] = {}
        for path in mount.touched:
            node = self.node_at(mount, path)
            if node is not None and not node.is_dir:
                found[path] = FileMeta(
                    mode=node.mode & MODE_BITS, mtime_ns=node.mtime_ns, ctime_ns=node.ctime_ns
                )
        return found

    def folders_at_end(self, mount: MountTree) -> dict[str, FolderEnd]:
        """What each folder the turn could have changed is now (see ``core.diff.diff_folders``).

        Those are the folders it made, removed or moved, and every folder
        above a file or folder it touched: O(touched), never the whole space.
        """
        considered: set[str] = set(mount.touched_dirs)
        for path in (*mount.touched, *mount.touched_dirs):
            cut = path.rfind("/")
            while cut > 0:
                considered.add(path[:cut])
                cut = path.rfind("/", 0, cut)
        considered.discard("")
        return {path: self._folder_end(mount, path) for path in considered}

    def _folder_end(self, mount: MountTree, path: str) -> FolderEnd:
        node = self.node_at(mount, path)
        if node is None or not node.is_dir:
            return None
        # Breadth first, files before subfolders: one file anywhere answers.
        queue = [node]
        while queue:
            folder = queue.pop(0)
            kids = folder.kids
            if any(not kid.is_dir for kid in kids.values()):
                return True
            # A folder not planted holds its nodes (entries looked up one by
            # one, files made since) and, as loaded, every other entry of the snapshot.
            if folder.unplanted is not None and self._snapshot_holds_file(mount, folder, kids):
                return True
            queue.extend(kid for kid in kids.values() if kid.is_dir)
        return False

    def _snapshot_holds_file(self, mount: MountTree, folder: Node, besides: Container[str]) -> bool:
        """Whether a snapshot file lies below the unplanted ``folder``, outside ``besides``."""
        prefix = folder.unplanted
        assert prefix is not None
        if prefix:
            prefix += "/"
        paths, snapshot = mount.paths, mount.snapshot
        at, end = self._run(mount, prefix)
        cut = len(prefix)
        while at < end:
            path = paths[at]
            name, slash, _ = path[cut:].partition("/")
            if name not in besides:
                if path in snapshot:
                    return True
                at += 1
            elif slash:  # the node answers for everything below it: skip its run
                at = bisect.bisect_left(paths, prefix + name + "0", at, end)
            else:
                at += 1
        return False

    # -- forgetting --------------------------------------------------------------

    def drop_path(self, session: str, name: str, path: str) -> bool:
        """A forgotten file leaves the turn at once: its node, handles, data file and blob.

        The mount turns read-only too: nothing of it can be stored any more
        (the store refuses a turn that loaded before the forget). Returns
        whether the turn held the path.
        """
        mount = self._forget_target(session, name)
        if mount is None:
            return False
        mount.read_only = True
        mount.forgotten = True
        node: Node | None = mount.root
        for part in path.split("/"):
            node = None if node is None or not node.is_dir else node.children.get(part)
        found = node is not None and not node.is_dir
        if node is not None and not node.is_dir:
            self._drop_nodes(mount, [node])
        # Moved since the turn loaded it (``mv``, a folder's move, then maybe
        # written to): the same file under another name is forgotten too. A
        # loaded file is known by the path it came from, however often it
        # moved and whatever took its names since; one the turn made and
        # stored, by the chain of its moves.
        moved = [self.node_at(mount, where) for where in self._moved_from(mount, path)]
        moved += [n for n in self._walk_raw(mount.root) if n.origin == path]
        moved += [
            h.node for h in self.handles.values() if h.node.tree is mount and h.node.origin == path
        ]
        for node in dict.fromkeys(n for n in moved if n is not None and not n.is_dir):
            self._drop_nodes(mount, [node])
            found = True
        if path in mount.stored_folders:  # a folder of theirs: its name is forgotten too
            found = True
            mount.folders = tuple(folder for folder in mount.folders if folder != path)
            mount.stored_folders = frozenset(mount.folders)
            at = bisect.bisect_left(mount.paths, f"{path}/")
            if at < len(mount.paths) and mount.paths[at] == f"{path}/":
                del mount.paths[at]
            if node is not None and node.is_dir and not node.children:
                self._drop_nodes(mount, [node])  # empty: it goes (one with files stays theirs)
        file = mount.snapshot.pop(path, None)
        if file is not None:
            at = bisect.bisect_left(mount.paths, path)
            if at < len(mount.paths) and mount.paths[at] == path:
                del mount.paths[at]
            if mount.private:
                self.blobs.release([file[0]], discard=True)
        return found or file is not None

    @staticmethod
    def _moved_from(mount: MountTree, path: str) -> list[str]:
        """The paths the turn moved the file at ``path`` to, by way of any others."""
        came_from = {
            where: entry.renamed_from
            for (name, where), entry in mount.turn.access.entries.items()
            if name == mount.name and entry.renamed_from is not None
        }
        moved = []
        for where in came_from:
            seen = {where}
            at: str | None = came_from[where]
            while at is not None and at != path and at not in seen:
                seen.add(at)
                at = came_from.get(at)
            if at == path:
                moved.append(where)
        return moved

    def drop_mount(self, session: str, name: str) -> bool:
        """A forgotten person's space leaves the turn at once, with every byte it held here."""
        mount = self._forget_target(session, name)
        if mount is None:
            return False
        mount.read_only = True
        mount.forgotten = True
        nodes = [n for n in self._walk_raw(mount.root) if not n.is_dir]
        nodes += [h.node for h in self.handles.values() if h.node.tree is mount]
        self._drop_nodes(mount, nodes)
        self._detach_mount_root(mount)
        self._release_blobs(mount)
        mount.snapshot, mount.paths = {}, []
        return True

    def scrub_forgotten(self, session: str) -> None:
        """Rewrite the turn's journal without a record of its forgotten spaces.

        Their files' names are the person's too: the journal must not keep
        them until the turn ends. A restart drops those spaces whole anyway.
        """
        tree = self.sessions.get(session)
        if tree is not None and tree.turn is not None and not tree.turn.gone:
            self.compact(tree.turn)

    def _forget_target(self, session: str, name: str) -> MountTree | None:
        tree = self.sessions.get(session)
        if tree is None or tree.turn is None:
            return None
        return tree.turn.mounts.get(name)

    def _drop_nodes(self, mount: MountTree, nodes: list[Node]) -> None:
        for node in nodes:
            for fh in [fh for fh, h in self.handles.items() if h.node is node]:
                self._close_handle(fh)
            if node.data is not None:
                mount.turn.data_path(node.data).unlink(missing_ok=True)
            if node.attached and node.parent is not None:
                self.stale_names.append((node.parent.inode, node.name))
                self._detach(node)
            self.stale_inodes.append(node.inode)

    def _walk_raw(self, node: Node) -> Iterator[Node]:
        """Every node under ``node`` made so far (planting nothing)."""
        yield node
        for child in list(node.kids.values()):
            yield from self._walk_raw(child)

    @staticmethod
    def _has_dir(mount: MountTree, path: str) -> bool:
        """Whether a folder stands at ``path``, planting nothing that is still as loaded."""
        node = mount.root
        for part in path.split("/"):
            child = node.kids.get(part)
            if child is None:
                # Not a node: as loaded, if its folder was never planted (what
                # removes an entry plants its folder first); gone, if it was.
                return node.unplanted is not None
            if not child.is_dir:
                return False
            node = child
        return True

    def _planted_dirs(self, folder: Node, prefix: str) -> Iterator[str]:
        """The paths of the folders under ``folder`` that are nodes (the rest are as loaded)."""
        for child in folder.kids.values():
            if child.is_dir:
                path = f"{prefix}/{child.name}" if prefix else child.name
                yield path
                # A folder not planted may still hold nodes: entries looked
                # up one by one, and what was made inside those.
                yield from self._planted_dirs(child, path)

    # -- recovery --------------------------------------------------------------

    def _replay(self, state: TurnTree) -> None:
        # A compaction the crash cut short: the journal itself is the old one, whole.
        (state.dir / "journal.tmp").unlink(missing_ok=True)
        highest = 0
        for record in journal.decode((state.dir / "journal").read_bytes()):
            mount = state.mounts.get(record["m"])
            if mount is None:
                continue
            self._apply(mount, record)
            state.note(record)
            if record["o"] == "f":
                highest = max(highest, int(record["d"]))
        on_disk = [int(name) for name in os.listdir(state.dir / "data") if name.isdigit()]
        state.next_data = max([highest, *on_disk]) + 1

    def _apply(self, mount: MountTree, record: Mapping[str, Any]) -> None:
        op, path = record["o"], record["p"]
        if op in ("f", "b", "x"):
            mount.touched.add(path)
        if op == "f" or op == "b":
            try:
                node = self._file_at(mount, path)
            except NotADirectory:
                return
            if node.is_dir:
                return
            if "g" in record:  # loaded from there, then moved (a node made here has none)
                node.origin = record["g"]
            mount.bytes -= node.size
            if op == "f":
                node.data, node.blob, node.revision = int(record["d"]), None, None
                try:
                    node.size = mount.turn.data_path(node.data).stat().st_size
                except FileNotFoundError:
                    node.size = 0
            else:
                node.data, node.blob, node.revision = None, record["s"], record.get("r")
                node.size = int(record["z"])
            mount.bytes += node.size
        elif op == "w":
            self._find(mount, path, self._rewritten(mount))
        elif op == "a":
            self._find(mount, path, self._set_attributes(mount, record))
        elif op == "x":
            self._find(mount, path, self._drop_file(mount))
        elif op == "D":
            try:
                node = self._dir_at(mount, path.split("/"))
            except NotADirectory:
                return
            # A folder made or moved here: counted as the live turn counted it.
            self._arrive(mount, node, path)
        elif op == "R":
            self._find(mount, path, lambda n: self._replay_rmdir(mount, n, path))
        elif op == "E":
            self._find(mount, path, lambda n: setattr(n, "cut", record["why"]))
        elif op == "e":
            self._find(mount, path, lambda n: setattr(n, "cut", None))

    def _free_unreferenced(self, state: TurnTree) -> None:
        """Unlink the data files no path of the replayed turn holds (removed before the crash).

        The journal is synced first: the records that dropped them must be
        on disk before their data is gone.
        """
        held = {
            node.data
            for node in self.nodes.values()
            if node.tree is not None and node.tree.turn is state and node.attached
        }
        loose = [
            name
            for name in os.listdir(state.dir / "data")
            if not (name.isdigit() and int(name) in held)
        ]
        if loose:
            os.fsync(state.journal)
            for name in loose:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(state.dir / "data" / name)

    def _rewritten(self, mount: MountTree) -> Callable[[Node], None]:
        def mark(node: Node) -> None:
            node.written = True
            node.stamped = False
            # The data file's own times are the last write's: the nearest to what
            # the node said before the crash (a later ``a`` record may set them).
            if node.data is not None:
                with contextlib.suppress(FileNotFoundError):
                    info = mount.turn.data_path(node.data).stat()
                    node.mtime_ns, node.ctime_ns = info.st_mtime_ns, info.st_ctime_ns

        return mark

    def _set_attributes(
        self, mount: MountTree, record: Mapping[str, Any]
    ) -> Callable[[Node], None]:
        def set_them(node: Node) -> None:
            node.mode = int(record["mode"])
            node.mtime_ns, node.ctime_ns = int(record["mt"]), int(record["ct"])
            if not node.is_dir:
                mount.touched.add(record["p"])
                node.stamped = node.written  # as when it was journaled

        return set_them

    def _drop_file(self, mount: MountTree) -> Callable[[Node], None]:
        def drop(node: Node) -> None:
            if not node.is_dir:
                mount.files -= 1
                mount.bytes -= node.size
                self._detach(node)

        return drop

    def _find(self, mount: MountTree, path: str, action: Callable[[Node], Any]) -> None:
        node: Node | None = mount.root
        for part in path.split("/"):
            if node is None or not node.is_dir:
                return
            node = node.children.get(part)
        if node is not None:
            action(node)


def _folder_moves(walked: list[tuple[Node, str]], to: str) -> list[tuple[Node, str, str]]:
    """Each folder of ``walked`` (a subtree, root first): its path now and once moved to ``to``."""
    if not walked or not walked[0][0].is_dir:
        return []
    cut = len(walked[0][1])
    return [(n, path, to + path[cut:]) for n, path in walked if n.is_dir]


__all__ = ["Overlay"]
