"""Lazy planting against a model: random snapshots and changes, compactions and crashes.

A turn's working copy is planted lazily (``Overlay._plant``, ``_plant_one``):
a folder's entries become nodes only when someone lists or changes it, a
lookup plants one entry, a new file goes in without its folder. A hypothesis
state machine builds a random snapshot (nested and stored empty folders,
names that sort next to each other: ``a``, ``a-b``, ``a.md``, ``a/``) and
drives two overlays through ``MemfsOperations`` with the same operations:
one lazy, one that lists every folder before each operation (the eager
twin). Lookups, listings, creates and writes, truncates, mkdir, unlink,
rmdir, renames and exchanges (across folders, files and folders), chmod and
utime, compactions and real crashes (the lazy overlay replaced by its
replay) come in any order. After every step:

1. every folder's listing (names, kinds, modes, mtimes, contents) of the
   lazy overlay, of its twin, of the lazy overlay's replay (a crash now,
   over a copy of its state dir), of that replay compacted and replayed
   again, and of the lazy overlay compacted now and replayed equals the
   model, as do the mount's file and byte counts;
2. what a turn end computes (``folders_at_end``, ``meta_at_end``, and the
   change set built as ``OverlayWorkspace.collect`` builds it) is the same
   for the lazy overlay, for it with every folder planted first, and for
   the twin; computing it plants no folder; and the change set is the model's
   difference from the snapshot.

Every auto-set time is one constant clock, and data files' mtimes are set to
it before a replay reads them, so every time is predictable. Fixed seed,
bounded steps.
"""

from __future__ import annotations

import copy
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyfuse3
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memfs.core.diff import FolderEnd, diff, diff_folders, diff_touched
from memfs.core.errors import MemfsError
from memfs.core.models import ChangeSet, FileMeta, Limits
from memfsd.blobs import BlobCache
from memfsd.fs import MemfsOperations
from memfsd.nodes import ROOT_INODE, MountTree, Node, Snapshot
from memfsd.overlay import Overlay
from tests.machines import fixed_seed
from tests.overlay_helpers import Ctx, turn_of

T = TypeVar("T")
CTX = Ctx(uid=47200, gid=47200)
NOW = 1_700_000_000_000_000_000  # every time the overlay sets itself
NAMES = ("a", "a-b", "a.md", "a0", "b")
POOL = [
    "/".join(parts)
    for parts in (
        *((x,) for x in NAMES),
        *((x, y) for x in NAMES for y in NAMES),
        *((x, y, z) for x in NAMES for y in NAMES for z in ("a", "a.md")),
    )
]
MODES = (0o644, 0o600, 0o755, 0o700, 0o640)


def clock() -> int:
    return NOW


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a handler of ``MemfsOperations``: none of them ever waits."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("a handler awaited something")


def outcome(call: Callable[[], T]) -> tuple[str, T | int]:
    """("ok", result) or ("error", errno)."""
    try:
        return "ok", call()
    except pyfuse3.FUSEError as exc:
        return "error", exc.errno
    except MemfsError as exc:
        return "error", exc.errno


def parent_of(path: str) -> str:
    return path.rpartition("/")[0]


def under(path: str, folder: str) -> bool:
    return path.startswith(folder + "/")


@dataclass
class Snap:
    files: dict[str, Snapshot]
    contents: dict[str, bytes]
    meta: dict[str, FileMeta]
    folders: tuple[str, ...]


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[dict[str, bytes], dict[str, FileMeta], tuple[str, ...]]:
    wanted = draw(st.lists(st.sampled_from(POOL), max_size=9, unique=True))
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for path in wanted:
        ancestors = [path[:at] for at, c in enumerate(path) if c == "/"]
        if path in dirs or any(a in files for a in ancestors):
            continue  # a path is a file or a folder, never both
        files[path] = draw(st.binary(max_size=6))
        dirs.update(ancestors)
    stored = []
    for path in draw(st.lists(st.sampled_from(POOL), max_size=4, unique=True)):
        ancestors = [path[:at] for at, c in enumerate(path) if c == "/"]
        if path not in files and not any(a in files for a in ancestors):
            stored.append(path)
    meta = {}
    for path in files:
        if draw(st.booleans()):
            mtime = draw(st.integers(1, 10**18))
            meta[path] = FileMeta(mode=draw(st.sampled_from(MODES)), mtime_ns=mtime, ctime_ns=mtime)
    return files, meta, tuple(stored)


# -- one overlay, driven as the kernel drives it ------------------------------------


class World:
    """One overlay over the snapshot, in its own state dir, with its FUSE face."""

    def __init__(
        self,
        state: Path,
        blobs: Path,
        snap: Snap,
        limits: Limits,
        *,
        eager: bool = False,
        replay: bool = False,
    ) -> None:
        self.state, self.blobs_dir, self.snap, self.eager = state, blobs, snap, eager
        self.overlay = Overlay(state, BlobCache(blobs), limits, clock=clock)
        # Open files: the model's file id -> this overlay's handle.
        self.held: dict[int, int] = {}
        self.overlay.open_session("s1")
        self.overlay.attach_turn(
            "s1",
            "t1",
            {"rules": (False, snap.files)},
            meta={"rules": snap.meta},
            folders={"rules": snap.folders},
            replay=replay,
        )
        self.ops = MemfsOperations(self.overlay)
        self.root = self.lookup(self.lookup(ROOT_INODE, "s1"), "rules")

    @property
    def mount(self) -> MountTree:
        return turn_of(self.overlay).mounts["rules"]

    def lookup(self, parent: int, name: str) -> int:
        return run(self.ops.lookup(parent, name.encode(), CTX)).st_ino

    def inode(self, path: str) -> int:
        """The path's inode, found by one LOOKUP per name as the kernel does."""
        inode = self.root
        for part in path.split("/") if path else ():
            inode = self.lookup(inode, part)
        return inode

    def before(self) -> None:
        if self.eager:
            plant_all(self.overlay, self.mount.root)

    def close(self) -> None:
        """The process dies: its descriptors go, nothing else is written."""
        for handle in list(self.overlay._fds):
            if handle.fd is not None:
                os.close(handle.fd)
        turn = self.overlay.sessions["s1"].turn
        if turn is not None:
            os.close(turn.journal)


def plant_all(overlay: Overlay, node: Node) -> None:
    for child in overlay.children(node.inode):
        if child.is_dir:
            plant_all(overlay, child)


def entries(overlay: Overlay, mount: MountTree) -> dict[str, tuple[Any, ...]]:
    """Every entry of the mount, planting as it goes: (kind, mode, mtime, content or nlink)."""
    found: dict[str, tuple[Any, ...]] = {}

    def walk(node: Node, prefix: str) -> None:
        kids = overlay.children(node.inode)
        for kid in kids:
            path = f"{prefix}{kid.name}"
            if kid.is_dir:
                walk(kid, path + "/")
                subdirs = sum(1 for k in overlay.children(kid.inode) if k.is_dir)
                assert overlay.subdirs(kid) == subdirs, path
                found[path] = ("dir", kid.mode, kid.mtime_ns)
            else:
                if kid.data is not None:
                    content = mount.turn.data_path(kid.data).read_bytes()
                else:
                    content = overlay.blobs.path(kid.blob or "").read_bytes()
                assert len(content) == kid.size, path
                found[path] = ("file", kid.mode, kid.mtime_ns, content)

    walk(mount.root, "")
    return found


def copy_overlay(overlay: Overlay) -> Overlay:
    """An independent copy of the overlay's nodes (the blob cache and spares shared, not copied)."""
    shared: dict[int, object] = {
        id(overlay.blobs): overlay.blobs,
        id(overlay.spares): overlay.spares,
    }
    return copy.deepcopy(overlay, shared)


def planted(overlay: Overlay, mount: MountTree) -> set[int]:
    """The inodes of the folders planted so far (planting nothing)."""
    return {n.inode for n in overlay._walk_raw(mount.root) if n.is_dir and n.unplanted is None}


@dataclass(frozen=True)
class End:
    """What a turn end computes of a mount."""

    changes: ChangeSet
    folders: dict[str, FolderEnd]
    meta: dict[str, FileMeta]


def turn_end(overlay: Overlay, mount: MountTree) -> End:
    """What ``OverlayWorkspace.collect`` computes of the mount, with the overlay's same calls."""
    touched = sorted(mount.touched)
    sources = {path: overlay.source(mount, path) for path in touched}
    bases = {path: overlay.base(mount, path) for path in touched}
    meta = overlay.meta_at_end(mount)
    folders = overlay.folders_at_end(mount)

    class Implied:
        def __contains__(self, folder: object) -> bool:
            return isinstance(folder, str) and mount.holds_files_at_snapshot(folder)

    found = diff_folders(folders, stored=set(mount.folders), implied_before=Implied())
    after = {p: None if src is None else src.read_bytes() for p, src in sources.items()}
    base = {p: src.read_bytes() for p, src in bases.items() if src is not None}
    changes = diff_touched(base, after, base_meta=mount.meta, meta=meta, folders=found)
    return End(changes, folders, meta)


def settle_data_times(turn_dir: Path) -> None:
    """Data files' mtimes to the clock's: a replay takes a written file's from its data file."""
    for name in os.listdir(turn_dir / "data"):
        os.utime(turn_dir / "data" / name, ns=(NOW, NOW))


# -- the model -----------------------------------------------------------------------


class Model:
    """What the mount must hold: files (content, mode, mtime) and folders (mode, mtime)."""

    def __init__(self, snap: Snap) -> None:
        self.files: dict[str, list[Any]] = {}  # path -> [content, mode, mtime, file id]
        self.ids = iter(range(10**6))
        # Files no name holds any more, kept by an open handle: id -> content.
        self.orphans: dict[int, bytes] = {}
        self.held: set[int] = set()  # ids of the files open
        self.dirs: dict[str, list[int]] = {}
        for path, content in snap.contents.items():
            kept = snap.meta.get(path)
            mode = kept.mode if kept else 0o644
            mtime = kept.mtime_ns if kept and kept.mtime_ns is not None else NOW
            self.files[path] = [content, mode, mtime, next(self.ids)]
        for path in [*snap.files, *(f"{f}/x" for f in snap.folders)]:
            cut = path.rfind("/")
            while cut > 0:
                self.dirs.setdefault(path[:cut], [0o755, NOW])
                cut = path.rfind("/", 0, cut)

    def kind(self, path: str) -> str | None:
        if path == "":
            return "dir"
        return "file" if path in self.files else "dir" if path in self.dirs else None

    def touch(self, folder: str) -> None:
        if folder:
            self.dirs[folder][1] = NOW

    def below(self, folder: str) -> list[str]:
        return [p for p in [*self.files, *self.dirs] if under(p, folder)]

    def listing(self) -> dict[str, tuple[Any, ...]]:
        out: dict[str, tuple[Any, ...]] = {
            p: ("file", mode, mtime, content) for p, (content, mode, mtime, _) in self.files.items()
        }
        out.update((p, ("dir", mode, mtime)) for p, (mode, mtime) in self.dirs.items())
        return out

    def can_make(self, path: str) -> bool:
        return self.kind(parent_of(path)) == "dir" and self.kind(path) is None

    def move(self, src: str, dst: str) -> None:
        """Move ``src`` (and all below it) to ``dst``, which is free."""
        for table in (self.files, self.dirs):
            for path in [p for p in table if p == src or under(p, src)]:
                table[dst + path[len(src) :]] = table.pop(path)

    def remove(self, path: str) -> None:
        if path in self.files and self.files[path][3] in self.held:
            self.orphans[self.files[path][3]] = self.files[path][0]
        for table in (self.files, self.dirs):
            for p in [p for p in table if p == path or under(p, path)]:
                del table[p]

    def rename(self, src: str, dst: str, flags: int) -> bool:
        """Whether the rename (or exchange) succeeds; if it does, it is made."""
        kind, target = self.kind(src), self.kind(dst)
        if not src or not dst or kind is None or self.kind(parent_of(dst)) != "dir":
            return False
        if flags == pyfuse3.RENAME_EXCHANGE:
            if target is None or under(dst, src) or under(src, dst):
                return False
            if src == dst:
                return True
            self.move(src, "\0tmp")
            self.move(dst, src)
            self.move("\0tmp", dst)
        else:
            if src == dst:
                return True
            if under(dst, src):
                return False
            if target is not None:
                if flags == pyfuse3.RENAME_NOREPLACE or target != kind:
                    return False
                if target == "dir" and self.below(dst):
                    return False
                self.remove(dst)
            self.move(src, dst)
        self.touch(parent_of(src))
        self.touch(parent_of(dst))
        return True

    def files_changed(self, snap: Snap) -> ChangeSet:
        """The model's difference from the snapshot, files only."""
        meta = {
            p: FileMeta(mode=mode, mtime_ns=mtime, ctime_ns=NOW)
            for p, (_, mode, mtime, _) in self.files.items()
        }
        return diff(
            snap.contents,
            {p: content for p, (content, _, _, _) in self.files.items()},
            base_meta=snap.meta,
            meta=meta,
        )

    def check_changes(self, snap: Snap, changes: ChangeSet) -> None:
        """``changes`` stored over the snapshot give the model's files, and its folders next turn.

        Folders are checked by what they make: storing a folder that its stored
        subfolder keeps anyway is redundant, not wrong.
        """
        same_files(changes, self.files_changed(snap))
        stored = set(snap.folders)
        assert set(changes.folders_deleted) <= stored
        assert set(changes.folders_created) <= set(self.dirs)
        stored = (stored - set(changes.folders_deleted)) | set(changes.folders_created)
        next_turn = set()
        for path in [*self.files, *(f"{f}/x" for f in stored)]:
            cut = path.rfind("/")
            while cut > 0:
                next_turn.add(path[:cut])
                cut = path.rfind("/", 0, cut)
        assert next_turn == set(self.dirs)


def same_files(got: ChangeSet, want: ChangeSet) -> None:
    """The same files changed, ctimes aside (a replay sets them to its clock)."""

    def strip(changes: ChangeSet) -> tuple[Any, ...]:
        meta = {p: (m.mode, m.mtime_ns) for p, m in changes.meta.items()}
        return changes.created, changes.updated, changes.deleted, meta

    assert strip(got) == strip(want)


# -- the machine -----------------------------------------------------------------------


class LazyPlanting(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="memfs-replay-"))
        self.runs = iter(range(10**6))

    @initialize(snapshot=snapshots(), journal_bytes=st.sampled_from([400, 2000, 10**9]))
    def start(
        self,
        snapshot: tuple[dict[str, bytes], dict[str, FileMeta], tuple[str, ...]],
        journal_bytes: int,
    ) -> None:
        contents, meta, folders = snapshot
        # A small bound compacts on its own, after a request and at a replay.
        self.limits = Limits(journal_bytes=journal_bytes)
        self.blobs = self.root / "blobs"
        shas = BlobCache(self.blobs).put_many(list(contents.values()))
        files: dict[str, Snapshot] = {
            path: (sha, len(content), "rev-1")
            for (path, content), sha in zip(contents.items(), shas, strict=True)
        }
        self.snap = Snap(files, contents, meta, folders)
        self.model = Model(self.snap)
        self.lazy = World(self.root / "lazy", self.blobs, self.snap, self.limits)
        self.twin = World(self.root / "twin", self.blobs, self.snap, self.limits, eager=True)
        self.crashed = False

    def teardown(self) -> None:
        for world in ("lazy", "twin"):
            if hasattr(self, world):
                getattr(self, world).close()
        shutil.rmtree(self.root, ignore_errors=True)

    def both(self, act: Callable[[World], T]) -> tuple[str, T | int]:
        """Do ``act`` on the lazy overlay and on its twin: both must give the same."""
        results = []
        for world in (self.lazy, self.twin):
            world.before()
            got = outcome(lambda world=world: act(world))  # type: ignore[misc]
            world.overlay.compact_due()
            results.append(got)
        assert results[0] == results[1]
        return results[0]

    def path(self, data: st.DataObject, *, kind: str | None = None) -> str:
        """Mostly a path that is there (of ``kind``), sometimes any: most changes succeed."""
        known = sorted(
            p for p in self.model.listing() if kind is None or self.model.kind(p) == kind
        )
        return self.draw_from(data, known)

    def free(self, data: st.DataObject) -> str:
        """Mostly a path not taken in a folder that is there: a create or mkdir succeeds."""
        folders = ["", *self.model.dirs]
        free = sorted(
            path
            for folder in folders
            for name in NAMES
            if self.model.kind(path := f"{folder}/{name}" if folder else name) is None
        )
        return self.draw_from(data, free)

    def empty(self, data: st.DataObject) -> str:
        """Mostly an empty folder."""
        return self.draw_from(data, sorted(d for d in self.model.dirs if not self.model.below(d)))

    @staticmethod
    def draw_from(data: st.DataObject, likely: list[str]) -> str:
        roll = data.draw(st.integers(0, 3))
        if likely and roll:
            return data.draw(st.sampled_from(likely))
        return data.draw(st.sampled_from(POOL))

    # -- only looking -----------------------------------------------------------------

    @rule(data=st.data())
    def lookup(self, data: st.DataObject) -> None:
        path = self.path(data)

        def look(world: World) -> tuple[Any, ...]:
            attr = world.overlay.node(world.inode(path))
            got = world.ops.attributes(attr)
            # A folder's mtime is checked with the trees (a crash may move it: not kept).
            mtime = got.st_mtime_ns if stat.S_ISREG(got.st_mode) else None
            # Planted early or late, a path gets the same inode (git's index keeps it).
            inode = None if self.crashed else got.st_ino
            return (stat.S_IFMT(got.st_mode), got.st_mode & 0o7777, mtime, got.st_nlink, inode)

        result = self.both(look)
        kind = self.model.kind(path)
        assert (result[0] == "ok") == (kind is not None)
        if result[0] == "ok":
            fmt, mode, mtime, nlink, _ = result[1]  # type: ignore[misc]
            if kind == "dir":
                subdirs = sum(1 for d in self.model.dirs if parent_of(d) == path and d != path)
                assert (fmt, mode, nlink) == (stat.S_IFDIR, self.model.dirs[path][0], 2 + subdirs)
            else:
                assert (fmt, mode, mtime, nlink) == (stat.S_IFREG, *self.model.files[path][1:3], 1)

    @rule(data=st.data())
    def listdir(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(["", *sorted(self.model.dirs)]))

        def listing(world: World) -> list[tuple[str, int, int]]:
            fh = run(world.ops.opendir(world.inode(path), CTX))
            try:
                return [
                    (n.name, stat.S_IFMT(world.ops.attributes(n).st_mode), n.mode)
                    for n in world.ops._dirs[fh][1]
                ]
            finally:
                run(world.ops.releasedir(fh))

        result = self.both(listing)
        prefix = f"{path}/" if path else ""
        want = sorted(
            (p[len(prefix) :], stat.S_IFREG if k[0] == "file" else stat.S_IFDIR, k[1])
            for p, k in self.model.listing().items()
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        )
        assert result == ("ok", want)

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        path = self.path(data, kind="file")

        def read(world: World) -> bytes:
            info = run(world.ops.open(world.inode(path), os.O_RDONLY, CTX))
            try:
                return run(world.ops.read(info.fh, 0, 100))
            finally:
                run(world.ops.release(info.fh))

        result = self.both(read)
        if self.model.kind(path) == "file":
            assert result == ("ok", self.model.files[path][0])
        else:
            assert result[0] == "error"

    # -- changes ------------------------------------------------------------------------

    @rule(data=st.data(), content=st.binary(max_size=6), mode=st.sampled_from(MODES))
    def create(self, data: st.DataObject, content: bytes, mode: int) -> None:
        path = self.free(data)
        folder, _, name = path.rpartition("/")

        def create(world: World) -> None:
            parent = world.inode(folder)
            with_name = outcome(lambda: world.lookup(parent, name))  # the kernel looks first
            assert with_name[0] == "error" or not self.model.can_make(path)
            info, _ = run(
                world.ops.create(parent, name.encode(), stat.S_IFREG | mode, os.O_WRONLY, CTX)
            )
            try:
                if content:
                    run(world.ops.write(info.fh, 0, content))
            finally:
                run(world.ops.release(info.fh))

        result = self.both(create)
        assert (result[0] == "ok") == self.model.can_make(path)
        if result[0] == "ok":
            self.model.files[path] = [content, mode, NOW, next(self.model.ids)]
            self.model.touch(folder)

    @rule(
        data=st.data(),
        content=st.binary(max_size=6),
        how=st.sampled_from(["truncate", "append", "overwrite"]),
    )
    def write(self, data: st.DataObject, content: bytes, how: str) -> None:
        path = self.path(data, kind="file")
        flags = {"truncate": os.O_TRUNC, "append": os.O_APPEND, "overwrite": 0}[how]

        def write(world: World) -> None:
            inode = world.inode(path)
            info = run(world.ops.open(inode, os.O_WRONLY | flags, CTX))
            # An append comes at the end: the kernel sends the file's size as its offset.
            at = run(world.ops.getattr(inode, CTX)).st_size if how == "append" else 0
            try:
                run(world.ops.write(info.fh, at, content))
            finally:
                run(world.ops.release(info.fh))

        result = self.both(write)
        assert (result[0] == "ok") == (self.model.kind(path) == "file")
        if result[0] == "ok":
            entry = self.model.files[path]
            old = entry[0]
            entry[0] = {
                "truncate": content,
                "append": old + content,
                "overwrite": content + old[len(content) :],
            }[how]
            entry[2] = NOW  # a write sets it, even of nothing

    @rule(data=st.data(), size=st.integers(0, 8))
    def truncate(self, data: st.DataObject, size: int) -> None:
        path = self.path(data, kind="file")
        result = self.both(lambda w: w.overlay.setattr(w.inode(path), size=size) and None)
        assert (result[0] == "ok") == (self.model.kind(path) == "file")
        if result[0] == "ok":
            entry = self.model.files[path]
            entry[0] = entry[0][:size].ljust(size, b"\0")
            entry[2] = NOW

    @rule(data=st.data(), mode=st.sampled_from(MODES))
    def mkdir(self, data: st.DataObject, mode: int) -> None:
        path = self.free(data)
        folder, _, name = path.rpartition("/")

        def mkdir(world: World) -> None:
            parent = world.inode(folder)
            outcome(lambda: world.lookup(parent, name))
            run(world.ops.mkdir(parent, name.encode(), stat.S_IFDIR | mode, CTX))

        result = self.both(mkdir)
        assert (result[0] == "ok") == self.model.can_make(path)
        if result[0] == "ok":
            self.model.dirs[path] = [mode, NOW]
            self.model.touch(folder)

    @rule(data=st.data())
    def unlink(self, data: st.DataObject) -> None:
        path = self.path(data, kind="file")
        folder, _, name = path.rpartition("/")

        def unlink(world: World) -> None:
            parent = world.inode(folder)
            world.lookup(parent, name)
            run(world.ops.unlink(parent, name.encode(), CTX))

        result = self.both(unlink)
        assert (result[0] == "ok") == (self.model.kind(path) == "file")
        if result[0] == "ok":
            self.model.remove(path)
            self.model.touch(folder)

    @rule(data=st.data())
    def rmdir(self, data: st.DataObject) -> None:
        path = self.empty(data)
        folder, _, name = path.rpartition("/")

        def rmdir(world: World) -> None:
            parent = world.inode(folder)
            world.lookup(parent, name)
            run(world.ops.rmdir(parent, name.encode(), CTX))

        result = self.both(rmdir)
        ok = self.model.kind(path) == "dir" and not self.model.below(path)
        assert (result[0] == "ok") == ok
        if ok:
            del self.model.dirs[path]
            self.model.touch(folder)

    @rule(
        data=st.data(),
        flags=st.sampled_from([0, pyfuse3.RENAME_NOREPLACE, pyfuse3.RENAME_EXCHANGE]),
    )
    def rename(self, data: st.DataObject, flags: int) -> None:
        src = self.path(data)
        dst = self.path(data) if flags == pyfuse3.RENAME_EXCHANGE else self.free(data)
        if flags == 0 and data.draw(st.booleans()):
            dst = self.path(data, kind=self.model.kind(src))  # over one of its kind
        (old, _, old_name), (new, _, new_name) = src.rpartition("/"), dst.rpartition("/")

        def rename(world: World) -> None:
            old_parent, new_parent = world.inode(old), world.inode(new)
            world.lookup(old_parent, old_name)
            outcome(lambda: world.lookup(new_parent, new_name))
            run(
                world.ops.rename(
                    old_parent, old_name.encode(), new_parent, new_name.encode(), flags, CTX
                )
            )

        result = self.both(rename)
        assert (result[0] == "ok") == self.model.rename(src, dst, flags), result

    @rule(data=st.data(), mode=st.sampled_from(MODES))
    def chmod(self, data: st.DataObject, mode: int) -> None:
        path = self.path(data)
        result = self.both(lambda w: w.overlay.setattr(w.inode(path), mode=mode) and None)
        kind = self.model.kind(path)
        assert (result[0] == "ok") == (kind is not None)
        if kind == "file":
            self.model.files[path][1] = mode
        elif kind == "dir" and path:
            self.model.dirs[path][0] = mode

    @rule(data=st.data(), mtime=st.integers(1, 10**18))
    def utime(self, data: st.DataObject, mtime: int) -> None:
        path = self.path(data)
        result = self.both(lambda w: w.overlay.setattr(w.inode(path), mtime_ns=mtime) and None)
        kind = self.model.kind(path)
        assert (result[0] == "ok") == (kind is not None)
        if kind == "file":
            self.model.files[path][2] = mtime
        elif kind == "dir" and path:
            self.model.dirs[path][1] = mtime

    # -- open files: written through after their name moved or went ----------------------

    @rule(data=st.data())
    def hold(self, data: st.DataObject) -> None:
        path = self.path(data, kind="file")
        if self.model.kind(path) == "file" and self.model.files[path][3] in self.model.held:
            return
        opened: dict[World, int] = {}

        def hold(world: World) -> None:
            opened[world] = run(world.ops.open(world.inode(path), os.O_RDWR, CTX)).fh

        result = self.both(hold)
        assert (result[0] == "ok") == (self.model.kind(path) == "file")
        if result[0] == "ok":
            fid = self.model.files[path][3]
            self.model.held.add(fid)
            for world, fh in opened.items():
                world.held[fid] = fh

    @precondition(lambda self: bool(getattr(self, "model", None) and self.model.held))
    @rule(data=st.data(), content=st.binary(max_size=4), offset=st.integers(0, 5))
    def write_held(self, data: st.DataObject, content: bytes, offset: int) -> None:
        fid = data.draw(st.sampled_from(sorted(self.model.held)))
        result = self.both(lambda w: run(w.ops.write(w.held[fid], offset, content)))
        assert result == ("ok", len(content))

        def splice(old: bytes) -> bytes:
            if not content:
                return old
            return old[:offset].ljust(offset, b"\0") + content + old[offset + len(content) :]

        for entry in self.model.files.values():
            if entry[3] == fid:
                entry[0], entry[2] = splice(entry[0]), NOW
                break
        else:
            self.model.orphans[fid] = splice(self.model.orphans[fid])

    @precondition(lambda self: bool(getattr(self, "model", None) and self.model.held))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        fid = data.draw(st.sampled_from(sorted(self.model.held)))
        assert self.both(lambda w: run(w.ops.release(w.held.pop(fid)))) == ("ok", None)
        self.model.held.discard(fid)
        self.model.orphans.pop(fid, None)

    @rule()
    def compact(self) -> None:
        for world in (self.lazy, self.twin):
            world.overlay.compact(turn_of(world.overlay))

    @rule()
    def crash(self) -> None:
        """kill -9 of the lazy overlay's daemon: a new one replays its journal and goes on."""
        self.lazy.overlay.write_held()
        self.lazy.close()
        settle_data_times(self.root / "lazy" / "sessions" / "s1" / "t1")
        self.lazy = World(self.root / "lazy", self.blobs, self.snap, self.limits, replay=True)
        # The twin closes its files too, so both hold the same.
        for fh in self.twin.held.values():
            run(self.twin.ops.release(fh))
        self.twin.held.clear()
        self.model.held.clear()
        self.model.orphans.clear()
        self.crashed = True

    # -- what must hold after every step -------------------------------------------------

    def replayed(self, state: Path) -> World:
        """A new daemon over a copy of ``state``: the turn replayed from its journal."""
        settle_data_times(state / "sessions" / "s1" / "t1")
        return World(state, self.blobs, self.snap, self.limits, replay=True)

    def copy_state(self, world: World) -> Path:
        target = self.root / f"copy-{next(self.runs)}"
        shutil.copytree(world.state / "sessions", target / "sessions")
        return target

    def check(self, overlay: Overlay, mount: MountTree, what: str, *, live: bool = False) -> None:
        """The tree and its counts are the model's (a live one's counts take in open orphans)."""
        want = self.model.listing()
        got = entries(overlay, mount)
        if not live:
            # A folder's times are not kept: not by the store, and not exactly by
            # a replay (an unlink's record does not move its folder's mtime).
            for entry in (want, got):
                entry.update((p, k[:2]) for p, k in entry.items() if k[0] == "dir")
        assert got == want, what
        orphans = list(self.model.orphans.values()) if what in ("lazy", "twin") else []
        assert (mount.files, mount.bytes) == (
            len(self.model.files) + len(orphans),
            sum(len(entry[0]) for entry in self.model.files.values()) + sum(map(len, orphans)),
        ), what

    @invariant()
    def trees_match_the_model(self) -> None:
        if not hasattr(self, "model"):
            return
        self.lazy.overlay.write_held()
        looked = copy_overlay(self.lazy.overlay)
        self.check(looked, turn_of(looked).mounts["rules"], "lazy", live=not self.crashed)
        self.check(self.twin.overlay, self.twin.mount, "twin", live=True)
        if not self.crashed:
            assert turn_of(looked).access_log() == turn_of(self.twin.overlay).access_log()

    @invariant()
    def a_crash_now_rebuilds_the_same_tree(self) -> None:
        if not hasattr(self, "model"):
            return
        self.lazy.overlay.write_held()
        again = self.replayed(self.copy_state(self.lazy))
        log = turn_of(self.lazy.overlay).access_log()
        try:
            self.check(again.overlay, again.mount, "replayed")
            assert turn_of(again.overlay).access_log() == log
            again.overlay.compact(turn_of(again.overlay))
            twice = self.replayed(self.copy_state(again))
            try:
                self.check(twice.overlay, twice.mount, "replayed, compacted, replayed")
                assert turn_of(twice.overlay).access_log() == log
            finally:
                twice.close()
        finally:
            again.close()

    @invariant()
    def a_compaction_now_then_a_crash_rebuilds_the_same_tree(self) -> None:
        if not hasattr(self, "model"):
            return
        self.lazy.overlay.write_held()
        state = self.copy_state(self.lazy)
        compacted = copy_overlay(self.lazy.overlay)
        turn = turn_of(compacted)
        turn.dir = state / "sessions" / "s1" / "t1"
        turn.journal = os.open(turn.dir / "journal", os.O_WRONLY | os.O_APPEND)
        compacted.compact(turn)
        os.close(turn.journal)
        again = self.replayed(state)
        try:
            self.check(again.overlay, again.mount, "compacted, replayed")
            assert turn_of(again.overlay).access_log() == turn_of(self.lazy.overlay).access_log()
        finally:
            again.close()

    @invariant()
    def a_turn_end_sees_the_same_planted_or_not(self) -> None:
        if not hasattr(self, "model"):
            return
        lazy = copy_overlay(self.lazy.overlay)
        mount = turn_of(lazy).mounts["rules"]
        before = planted(lazy, mount)
        found = turn_end(lazy, mount)
        assert planted(lazy, mount) == before, "a turn end planted a folder"
        eager = copy_overlay(self.lazy.overlay)
        eager_mount = turn_of(eager).mounts["rules"]
        plant_all(eager, eager_mount.root)
        assert turn_end(eager, eager_mount) == found
        twin = turn_end(self.twin.overlay, self.twin.mount)
        if not self.crashed:
            # The same history: the same touched paths, so the very same answers.
            assert (found.changes, found.folders) == (twin.changes, twin.folders)
        same_files(found.changes, twin.changes)
        common = found.folders.keys() & twin.folders.keys()
        assert {p: found.folders[p] for p in common} == {p: twin.folders[p] for p in common}
        assert {p: (m.mode, m.mtime_ns) for p, m in found.meta.items()} == {
            p: (m.mode, m.mtime_ns) for p, m in twin.meta.items()
        }
        self.model.check_changes(self.snap, found.changes)
        self.model.check_changes(self.snap, twin.changes)


def test_lazy_planting_compaction_and_replay_agree_with_the_model() -> None:
    run_state_machine_as_test(
        LazyPlanting,
        settings=fixed_seed(35, 25),
    )


# -- what the machine found, one by one -------------------------------------------------


def one_file(state: Path, blobs: Path, *, replay: bool = False) -> tuple[Overlay, MountTree]:
    """A turn over an empty space, on the real clock."""
    overlay = Overlay(state, BlobCache(blobs), Limits())
    overlay.open_session("s1")
    overlay.attach_turn("s1", "t1", {"rules": (False, {})}, replay=replay)
    return overlay, turn_of(overlay).mounts["rules"]


OLD = 1_000_000_000_000_000_000  # 2001


def stamp(overlay: Overlay, mount: MountTree, node: Node, how: str) -> None:
    """Journal a record of the file's times after its last ``w``, the way ``how`` does."""
    if how == "utime":
        overlay.setattr(node.inode, mtime_ns=OLD)
    elif how == "chmod":
        overlay.setattr(node.inode, mode=0o600)
    elif how == "create":
        pass  # only the create's own records
    elif how == "rename":
        overlay.rename(mount.root.inode, "f.md", mount.root.inode, "g.md")
    else:
        overlay.compact(turn_of(overlay))


@pytest.mark.parametrize("how", ["create", "utime", "chmod", "rename", "compaction"])
@pytest.mark.parametrize("write", ["write", "truncate"])
def test_a_write_after_its_times_were_journaled_keeps_its_mtime_after_a_crash(
    tmp_path: Path, how: str, write: str
) -> None:
    overlay, mount = one_file(tmp_path / "state", tmp_path / "blobs")
    node, fh = overlay.create_open(mount.root.inode, "f.md", 0o100644, 0, 0, os.O_WRONLY)
    overlay.write(fh, 0, b"one\n")
    stamp(overlay, mount, node, how)
    path = node.path()
    stamped = node.mtime_ns
    time.sleep(0.02)  # past the kernel's coarse file clock
    if write == "write":
        overlay.write(fh, 4, b"two\n")
    else:
        overlay.setattr(node.inode, size=2)
    overlay.release(fh)
    assert node.mtime_ns > stamped
    os.close(turn_of(overlay).journal)
    again, state = one_file(tmp_path / "state", tmp_path / "blobs", replay=True)
    replayed = again.node_at(state, path)
    assert replayed is not None and replayed.data is not None
    # The last change's time, as its data file has it: never the older one journaled before.
    assert replayed.mtime_ns == state.turn.data_path(replayed.data).stat().st_mtime_ns
    assert replayed.mtime_ns > stamped


def test_a_file_only_chmodded_is_in_no_trace_after_a_compaction_and_a_crash(
    tmp_path: Path,
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"x\n"])

    def start(*, replay: bool = False) -> Overlay:
        overlay = Overlay(tmp_path / "state", blobs, Limits())
        overlay.open_session("s1")
        overlay.attach_turn(
            "s1", "t1", {"rules": (False, {"d/f.md": (sha, 2, "rev-1")})}, replay=replay
        )
        return overlay

    overlay = start()
    mount = turn_of(overlay).mounts["rules"]
    overlay.setattr(
        overlay.find(overlay.find(mount.root.inode, "d").inode, "f.md").inode, mode=0o600
    )
    assert turn_of(overlay).access_log() == {}  # a mode is no access the trace keeps
    overlay.compact(turn_of(overlay))
    os.close(turn_of(overlay).journal)
    again = start(replay=True)
    assert turn_of(again).access_log() == {}
