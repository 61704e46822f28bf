"""The content-addressed blob cache: snapshot contents on disk, shared by every session.

A blob is stored once under ``<state_dir>/blobs/<sha[:2]>/<sha>``. New blobs
are written under temporary names and renamed into place, so a blob's name
never points at half its content while the machine stays up (a ``kill -9``
mid-write leaves only a temporary name). They are not synced when written:
page cache outlives the daemon, and a power cut loses only what no turn
asked to keep. A turn's blobs are synced when the turn is first made
durable (:meth:`make_durable`, at its agent's first ``fsync``; see
:mod:`memfsd.durable`), and only those not synced before; after a restart
none are known synced, so a restored turn syncs all of its own at its first
``fsync``. Two sessions loading the same space share one copy. Which blobs
are present is remembered in memory, so a turn start over a space already
cached costs no ``stat`` per file; a blob found on disk but not known (left
by an earlier run) is trusted only if its content still hashes to its name.
Shared (org) memory's blobs stay, marked *shared*. Turns over a person's
memory hold its blobs, and a blob no turn holds and no shared space has is
discarded when the last holder lets go, so forgetting a person leaves nothing
here; what a crash left held by nobody is swept at the next start. A blob
whose removal fails (EIO) is the cache's to remove: it is tried again at
every later release and at :meth:`remove_unheld` (the daemon's look for
forgets), unless a turn took the same bytes again meanwhile. Holding,
sharing and presence change under one lock, so a blob one turn is about to use
is never discarded by another turn ending at that moment.
Folders are 0700 and blobs 0600 (``mkstemp``): only the daemon reads them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Collection, Container, Iterable, Sequence
from functools import partial
from itertools import filterfalse
from pathlib import Path

from memfs.core.models import digest
from memfs.private import DIR_MODE, make_private_dirs
from memfsd.durable import GroupSync, fsync_each

log = logging.getLogger("memfsd.blobs")


class BlobCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._prefix = f"{root}/"
        make_private_dirs(root)
        # The daemon's group sync: its blobs', turn.json's and done.json's syncs
        # are shared among the turns starting and ending at the same moment.
        self.syncs = GroupSync(root)
        self._present: set[str] = set()
        # Blobs known to be on disk, not only in the page cache (make_durable).
        self._synced: set[str] = set()
        # Blobs a put_many is writing now, and what it sets once they are there.
        self._writing: dict[str, threading.Event] = {}
        self._refs: dict[str, int] = {}
        self._shared: set[str] = set()
        # Blobs no one holds or shares whose removal failed: still on disk, to go.
        self._unremoved: set[str] = set()
        self._lock = threading.Lock()

    def path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def location(self, sha: str) -> str:
        """:meth:`path` as a string, built without pathlib: the mount asks at every first read."""
        return f"{self._prefix}{sha[:2]}/{sha}"

    def put(self, content: bytes) -> str:
        """Store ``content`` if it is not there yet; return its address."""
        [sha] = self.put_many([content])
        return sha

    def put_many(
        self,
        contents: Sequence[bytes],
        known: Sequence[str | None] | None = None,
        *,
        hold: bool = False,
        share: bool = False,
    ) -> list[str]:
        """Store many blobs (not synced: :meth:`make_durable` syncs a turn's).

        ``known`` gives each content's sha256 where the caller already has it
        (a store keeps it with every revision); the rest are hashed here. With
        ``hold``, each returned blob is held (once per content) until
        :meth:`release`; with ``share``, each is marked shared (never discarded).
        """
        shas = [
            (known[index] if known is not None else None) or digest(content)
            for index, content in enumerate(contents)
        ]
        mine: dict[str, bytes] = {}  # blobs this call writes (or finds whole on disk)
        theirs: list[tuple[str, bytes, threading.Event]] = []  # being written by another
        with self._lock:
            if share:
                self._shared.update(shas)
            for sha, content in zip(shas, contents, strict=True):
                if hold:
                    self._refs[sha] = self._refs.get(sha, 0) + 1
                if sha in self._present or sha in mine:
                    continue
                writing = self._writing.get(sha)
                if writing is not None:
                    theirs.append((sha, content, writing))
                else:
                    mine[sha] = content
                    self._writing[sha] = threading.Event()
        try:
            try:
                # A file already under the name (an earlier run's) is trusted
                # only if it hashes to it; checked outside the lock, so hashing
                # a large one holds up no other turn.
                whole = {sha for sha in mine if _holds(self.path(sha), sha)}
                self._write({sha: content for sha, content in mine.items() if sha not in whole})
                with self._lock:
                    self._present.update(mine)
                    self._unremoved.difference_update(mine)
            finally:
                with self._lock:
                    for sha in mine:
                        self._writing.pop(sha).set()
            # Fifty turns starting at once over one space write each blob once:
            # the others wait for the one writing it (and write it themselves if it failed).
            for sha, content, writing in theirs:
                writing.wait()
                with self._lock:
                    here = sha in self._present
                if not here:
                    self.put_many([content], [sha])
        except BaseException:
            if hold:  # nothing of a failed call stays held, nor on disk held by nobody
                self.release([sha for sha in shas if sha in mine], discard=True)
                self.release([sha for sha in shas if sha not in mine], discard=False)
            raise
        return shas

    def _write(self, blobs: dict[str, bytes]) -> None:
        """Write ``blobs`` (none of them present); on failure none of their bytes stays.

        A person's bytes left behind (a disk full between two blobs) would
        be in no turn's hold, so a forget of them would not reach them.
        """
        pending: list[tuple[Path, Path]] = []
        placed: list[Path] = []
        try:
            for sha, content in blobs.items():
                target = self.path(sha)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(target.parent, DIR_MODE)
                # A name of its own: two turns starting at once may write the same blob.
                fd, name = tempfile.mkstemp(prefix=f".{sha}.", suffix=".tmp", dir=target.parent)
                pending.append((Path(name), target))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(content)
            for tmp, target in pending:
                os.replace(tmp, target)
                placed.append(target)
        except BaseException:
            # Being written here, they were no one else's (``put_many``'s ``_writing``).
            for path in [tmp for tmp, _ in pending] + placed:
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
            raise

    def make_durable(self, shas: Iterable[str]) -> int:
        """Sync every blob of ``shas`` not known synced, then their folders; how many.

        Called when a turn over them is made durable, before its ``turn.json``
        is: each blob's bytes and name are on disk before a record that
        survives a power cut names it. The syncs are shared with other
        threads syncing at the same moment (one ``syncfs`` for many).
        """
        with self._lock:
            todo = sorted(set(shas) - self._synced)
        if not todo:
            return 0
        files = [self.path(sha) for sha in todo]
        self.syncs.sync(partial(fsync_each, files), self.root, files=len(files))
        folders = sorted({path.parent for path in files})
        self.syncs.sync(partial(fsync_each, folders), self.root, files=len(folders))
        with self._lock:
            self._synced.update(todo)
        return len(todo)

    def held(self) -> Container[str]:
        """The blobs known to be here: a live set, for membership tests only (no ``stat``).

        The set itself, not a copy or a wrapper: a lean load tests every file
        of a space against it, and a set's own lookup is the fastest there is.
        """
        return self._present

    def present(self, shas: Sequence[str], *, hold: bool) -> list[bool]:
        """For each sha, whether its blob is here; with ``hold``, hold each one that is."""
        with self._lock:
            flags = list(map(self._present.__contains__, shas))
            if hold:
                for sha, here in zip(shas, flags, strict=True):
                    if here:
                        self._refs[sha] = self._refs.get(sha, 0) + 1
        return flags

    def share(self, shas: Iterable[str]) -> None:
        """Mark blobs as shared memory's: they stay in the cache for every later turn."""
        with self._lock:
            self._shared.update(shas)

    def share_here(self, shas: Collection[str]) -> list[str]:
        """Mark blobs as shared memory's, and return those of them not here.

        Shared blobs stay in the cache for every later turn, so where every
        one is marked and here already (each turn over an org space, but for
        the files that moved) this is two set tests, no Python call per blob.
        The ones not here are marked too: the caller stores them again.
        """
        with self._lock:
            if self._shared.issuperset(shas) and self._present.issuperset(shas):
                return []
            self._shared.update(shas)
            return list(filterfalse(self._present.__contains__, shas))

    def hold(self, shas: Sequence[str]) -> None:
        """Hold blobs already on disk (a turn brought back after a restart)."""
        with self._lock:
            for sha in shas:
                self._refs[sha] = self._refs.get(sha, 0) + 1

    def release(self, shas: Sequence[str], *, discard: bool) -> None:
        """Let go of blobs; with ``discard``, remove those no turn holds and none shares.

        A removal that fails is logged and tried again later (see the module
        docstring), never raised: the holds are let go of all the same, and
        a caller must not let go of them again.
        """
        with self._lock:
            if self._unremoved:  # the earlier failures first: not one just failed, again
                self._remove_unheld()
            for sha in shas:
                left = self._refs.get(sha, 0) - 1
                if left > 0:
                    self._refs[sha] = left
                    continue
                self._refs.pop(sha, None)
                if discard and sha not in self._shared:
                    self._remove(sha)

    def remove_unheld(self) -> int:
        """Try again to remove the blobs whose removal failed; how many are still there."""
        with self._lock:
            return self._remove_unheld()

    def unremoved(self) -> int:
        """How many blobs no one holds are still on disk because removing them failed."""
        with self._lock:
            return len(self._unremoved)

    def _remove_unheld(self) -> int:
        for sha in list(self._unremoved):
            if sha in self._refs or sha in self._shared or sha in self._present:
                self._unremoved.discard(sha)  # a turn took the same bytes again: they stay
            elif sha not in self._writing:  # being stored again: not ours to remove now
                self._remove(sha)
        return len(self._unremoved)

    def _remove(self, sha: str) -> bool:
        """Remove a blob no one holds or shares (under the lock); a failure is kept to retry."""
        self._present.discard(sha)
        self._synced.discard(sha)
        try:
            self.path(sha).unlink(missing_ok=True)
        except OSError as exc:
            if sha not in self._unremoved:
                log.error(
                    "could not remove blob %s, which no turn holds (%s); tried again at the "
                    "next release and the next look for forgets",
                    sha,
                    exc,
                )
            self._unremoved.add(sha)
            return False
        self._unremoved.discard(sha)
        return True

    def sweep(self) -> int:
        """Remove every blob no turn holds and none shares, and every torn write; return how many.

        Run once at start, after the open turns are brought back: a ``kill -9``
        between a turn start's blobs and its ``turn.json`` (or amid a write)
        leaves a person's content that no turn will ever let go of, and that
        a forget could not reach. Shared memory's other blobs go too; the next
        load brings them again.
        """
        removed = 0
        with self._lock:
            for folder in self.root.iterdir() if self.root.is_dir() else ():
                if not folder.is_dir():
                    continue
                for blob in folder.iterdir():
                    name = blob.name
                    if name.startswith("."):  # a torn write: a temporary name, no blob
                        try:
                            blob.unlink(missing_ok=True)
                        except OSError as exc:  # the start goes on; the next one tries again
                            log.error("could not remove a torn write %s: %s", blob, exc)
                            continue
                    elif name in self._refs or name in self._shared or not self._remove(name):
                        continue
                    removed += 1
        return removed

    def get(self, sha: str) -> bytes:
        return self.path(sha).read_bytes()

    def __contains__(self, sha: object) -> bool:
        return isinstance(sha, str) and self.path(sha).exists()


def _holds(path: Path, sha: str) -> bool:
    """Whether the file at ``path`` exists and holds the content named ``sha``."""
    try:
        return digest(path.read_bytes()) == sha
    except FileNotFoundError:
        return False


__all__ = ["BlobCache"]
