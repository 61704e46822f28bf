"""The nodes of the daemon's filesystem state: the tree, each open turn's mounts, handles.

The tree is root -> sessions -> (folders on the way to a nested mount) ->
mounts -> entries. A ``MountTree`` is one space mounted for one turn over its
snapshot (blob, size and revision per path); its folders' entries become
nodes only when someone looks (``Node.children``). A ``TurnTree`` holds a
turn's mounts, its journal descriptor (:mod:`memfsd.journal` owns the
format), its data files and its access log (:mod:`memfsd.access`). The rules
of motion over these are :class:`memfsd.overlay.Overlay`'s.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from memfs.core.models import FileMeta
from memfsd import journal
from memfsd.access import AccessLog, FileAccess
from memfsd.journal import Record

ROOT_INODE = 1
Kind = Literal["dir", "file"]
# "parent": a folder on the way to a nested mount (``persistent/`` of ``persistent/user``).
Role = Literal["root", "session", "parent", "mount", "entry"]

FILE_MODE = 0o644
DIR_MODE = 0o755
SESSION_MODE = 0o700
PARENT_MODE = 0o555  # a nested mount's folders on the way: nothing to write there
# The mount root: anyone may pass through to a session they know the name of
# (and may enter), nobody but root may list which sessions there are.
ROOT_MODE = 0o711
READS_HELD = 256  # read records held back from the journal go in once this many wait (TurnTree.log)


@dataclass(eq=False, slots=True)
class Node:
    inode: int
    kind: Kind
    role: Role
    name: str
    parent: Node | None
    mode: int
    uid: int
    gid: int
    mtime_ns: int
    ctime_ns: int
    atime_ns: int
    kids: dict[str, Node] = field(default_factory=dict)  # read through ``children``
    tree: MountTree | None = None
    # A file holds either a snapshot blob (unmodified) or a data file of this turn.
    blob: str | None = None
    revision: str | None = None  # the snapshot revision of ``blob``
    # A snapshot file's path as the turn loaded it, wherever it was moved
    # since (None: made this turn): a forget of that path finds it by this.
    origin: str | None = None
    data: int | None = None
    size: int = 0
    written: bool = False  # its content was written during this turn
    lookups: int = 0
    opens: int = 0
    attached: bool = True
    # A snapshot folder whose entries are not nodes yet: its path in the snapshot.
    unplanted: str | None = None
    # How many of ``kids`` are folders, kept as they come and go: a folder's
    # link count is 2 + this, and counting at every getattr would make each
    # create in a folder of n files cost O(n).
    subdirs: int = 0
    # Why a write to this file was refused (EFBIG, ENOSPC): what it holds is
    # cut off, so it is not stored until truncated or rewritten.
    cut: str | None = None
    synced: bool = False  # an fsync reached its data file
    # A folder at a path the snapshot had no folder at (made, or moved there):
    # it counts toward ``max_folders`` (``MountTree.folders_stored``) while there.
    made: bool = False
    # Removed while a handle holds it: it still counts toward its space.
    orphan: bool = False
    # ``Overlay.moves`` when its path was last seen opened in the access log
    # (-1: never): an open at the same count has nothing to journal.
    read_checked: int = -1
    # A record of its times came after its ``w`` (a chmod, a utime, a rename, a
    # compaction): its next write journals ``w`` again, or a replay would give
    # it those older times instead of the write's (``Overlay._mark_written``).
    stamped: bool = False

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"

    @property
    def children(self) -> dict[str, Node]:
        """The folder's entries, made into nodes the first time anyone asks."""
        self.plant()
        return self.kids

    def plant(self) -> None:
        """Make this snapshot folder's entries nodes, if nobody has yet."""
        if self.unplanted is not None:
            assert self.tree is not None
            self.tree.plant(self)

    def path(self) -> str:
        """The node's path inside its mount."""
        parts: list[str] = []
        node: Node | None = self
        while node is not None and node.role == "entry":
            parts.append(node.name)
            node = node.parent
        return "/".join(reversed(parts))


# What a snapshot holds at one path: (blob sha256, size, revision). A plain
# tuple: a turn start makes one per file of the space, and a NamedTuple's
# constructor alone would cost more than the rest of the start.
Snapshot = tuple[str, int, str | None]


class SnapshotFile(NamedTuple):
    """A :data:`Snapshot` with names, for callers that build a few by hand."""

    sha: str
    size: int
    revision: str | None


@dataclass(eq=False)
class MountTree:
    """One space mounted for one turn."""

    name: str
    read_only: bool
    root: Node
    turn: TurnTree
    snapshot: dict[str, Snapshot]
    files: int = 0
    bytes: int = 0
    # The folders the space would store at the turn's end, as ``max_folders``
    # counts them: the stored paths still held by a folder, and every folder
    # (``Node.made``) at a path the snapshot neither stored nor implied.
    folders_stored: int = 0
    touched: set[str] = field(default_factory=set)
    private: bool = False  # a person's (or an app's) space: its blobs go with its last turn
    # The snapshot's paths, sorted, so a folder's entries are one contiguous run;
    # a stored folder is its path and a "/", so it is planted even when empty.
    paths: list[str] = field(default_factory=list)
    plant: Callable[[Node], None] = lambda node: None
    meta: Mapping[str, FileMeta] = field(default_factory=dict)  # the snapshot's, by path
    folders: tuple[str, ...] = ()  # the snapshot's stored folders
    stored_folders: frozenset[str] = frozenset()  # the same, to look paths up in
    touched_dirs: set[str] = field(default_factory=set)  # folders made, removed or moved
    inode_seeds: tuple[int, int] = (0, 1)  # of (session, mount), for ``Overlay._entry_inode``
    forgotten: bool = False  # its person was forgotten: a compacted journal names none of it

    def holds_files_at_snapshot(self, folder: str) -> bool:
        """Whether some file of the snapshot lies below ``folder``."""
        prefix = folder + "/"
        at = bisect.bisect_left(self.paths, prefix)
        end = bisect.bisect_left(self.paths, folder + "0", at)
        return any(path in self.snapshot for path in itertools.islice(self.paths, at, end))


@dataclass(eq=False)
class TurnTree:
    """A turn's working state: its mounts, journal, data files and access log."""

    session: SessionTree
    turn: str
    dir: Path
    journal: int  # fd, O_APPEND
    mounts: dict[str, MountTree] = field(default_factory=dict)
    next_data: int = 1
    frozen: bool = False
    access: AccessLog = field(default_factory=AccessLog)
    # Read records not yet in the journal. They go in ahead of the next change
    # (or a sync, or when READS_HELD are waiting), so a crash can lose only reads
    # that no surviving change came after: one write saved per file read.
    held_reads: list[bytes] = field(default_factory=list)
    batching: bool = False
    # How many bytes the journal holds, and past how many it is compacted;
    # ``due`` is the overlay's list of turns to compact after this request.
    journal_size: int = 0
    compact_at: int = 0
    due: list[TurnTree] | None = None
    unsynced: bool = False  # the journal took records since its last fsync
    # Data files of removed files no handle holds: unlinked once the records
    # that dropped them are in the journal (synced first if ``sync_freed``).
    freeing: list[int] = field(default_factory=list)
    sync_freed: bool = False
    gone: bool = False  # detached: its whole folder goes at once
    # What makes the turn's record (turn.json, its blobs) durable, run before
    # the journal's first sync: a journal on disk must not outlive the record
    # it replays onto. None once done (or for a turn durable from the start).
    make_durable: Callable[[], None] | None = None

    def data_path(self, data: int) -> Path:
        return self.dir / "data" / str(data)

    def log(self, *records: Record) -> None:
        """Journal records (several go in one write) and fold them into the access log."""
        for record in records:
            self.note(record)
        self.held_reads.append(journal.encode(records))
        if self.batching:
            return
        if all(map(journal.is_read, records)):
            if len(self.held_reads) >= READS_HELD:
                self.write_held()
            return
        self.write_held()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Journal every record logged inside in one write, at the end (a rename logs many)."""
        self.batching = True
        try:
            yield
        finally:
            self.batching = False
            self.write_held()

    def write_held(self) -> None:
        if self.held_reads:
            chunk = b"".join(self.held_reads)
            os.write(self.journal, chunk)
            self.held_reads.clear()
            self.unsynced = True
            self.journal_size += len(chunk)
            due = self.due
            if self.journal_size > self.compact_at and due is not None and self not in due:
                due.append(self)

    def sync(self) -> None:
        self.write_held()
        self.ensure_durable()
        os.fsync(self.journal)
        self.unsynced = False

    def ensure_durable(self) -> None:
        """Make the turn's record durable, once (a failure leaves it to the next sync)."""
        if self.make_durable is not None:
            self.make_durable()
            self.make_durable = None

    def release(self, data: int, *, sync: bool) -> None:
        """A removed file's data file is no one's any more: free it at :meth:`free_released`."""
        if not self.gone:
            self.freeing.append(data)
            self.sync_freed |= sync

    def free_released(self) -> None:
        """Unlink released data files, after the records that dropped them.

        A replayed journal then never needs one: every record naming a freed
        data file is followed by one removing its path. If the file was ever
        synced, the journal is synced first, so not even a power cut can
        bring its path back without its data.
        """
        if not self.freeing:
            return
        self.write_held()
        if self.sync_freed and self.unsynced:
            self.sync()
        for data in self.freeing:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.data_path(data))
        self.freeing.clear()
        self.sync_freed = False

    def note(self, record: Mapping[str, Any]) -> None:
        """Fold one journal record into what the turn knows (live, and on replay)."""
        mount = self.mounts[record["m"]]
        if record["o"] in ("D", "R"):
            mount.touched_dirs.add(record["p"])
        self.access.note(record, mount.snapshot)

    def access_log(self) -> dict[str, FileAccess]:
        return self.access.report()


@dataclass(eq=False)
class SessionTree:
    session: str
    node: Node
    uid: int
    gid: int
    turn: TurnTree | None = None
    open_files: int = 0  # handles its agents hold (at most Limits.max_open_files)


@dataclass(eq=False, slots=True)
class Handle:
    node: Node
    writable: bool
    # Opened O_RDWR: the one way to a shared writable mmap (see Overlay.mapped_for_writing).
    mappable: bool = False
    wrote: bool = False
    # Opened on first use, so an open whose reads the page cache answers costs
    # no system call; ``source`` names what ``fd`` reads (a data id or a sha).
    fd: int | None = None
    source: int | str | None = None


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "PARENT_MODE",
    "READS_HELD",
    "ROOT_INODE",
    "ROOT_MODE",
    "SESSION_MODE",
    "Handle",
    "Kind",
    "MountTree",
    "Node",
    "Role",
    "SessionTree",
    "Snapshot",
    "SnapshotFile",
    "TurnTree",
]
