"""Spare files and turn folders: inodes of ended turns, emptied and used again.

A turn made about ten files and folders (its folder, ``data/``, its journal,
a data file per file written, ``ending``, the ``.tmp`` copies of ``turn.json``
and ``done.json``) and removed eight of them at its end. Making an inode is
cheap on a quiet filesystem, but ext4 without a journal (the filesystem the
benchmarks run on) passes over every inode of the group deleted in the last
half minute or so before it hands out a free one: under a busy daemon's own
deletions each new file cost it 0.5 to 1 ms of kernel time. So some of what
an ended turn leaves is kept here and used again, as PostgreSQL recycles its
WAL segments rather than making new ones.

Only inodes nobody may still be reading are used again. A turn's data files
and journal are read by path in worker threads while a turn ends or is shown
(``collect``, the kept view), and a read whose open came before the turn's
folder went must see that turn's bytes, never another session's: those are
unlinked, as before (an unlinked file keeps its bytes for whoever holds it).
What is used again: the turn's folder and its ``data/`` (a folder holds no
bytes), its marks (empty files the workspace names), and the session's records
(``turn.json``, ``done.json``), which are read only under the workspace's
record lock, the same one their removal takes, or at start.

``<state_dir>/spare`` holds, under names of its own, empty files and turn
folders (each an empty ``data/``, nothing else). What comes in is first moved
here (it leaves its old place at once, as an unlink would) and then emptied:
a file is truncated, a folder's files unlinked (or, the marks, taken in as
files). Only then is it handed out again. Where the move fails (no room for
the folder, another filesystem) the file is unlinked in place; where the
emptying fails it is unlinked here: nothing waits here holding what it held.
What a crash left half emptied is removed with the folder when the daemon
starts (:meth:`Spares.__init__`), so nothing here outlives a restart.

Nothing is kept past ``max_files`` files and ``max_folders`` folders: the
rest is removed as before. Blocking: call these from worker threads, but for
:meth:`Spares.file`, whose rename is as cheap as the create it replaces.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import threading
from collections.abc import Collection
from pathlib import Path

from memfs.private import DIR_MODE, FILE_MODE, make_private_dirs, open_private

SPARE_DIR = "spare"
MAX_SPARE_FILES = 256  # empty files kept for use again; past it, what comes in is removed
MAX_SPARE_FOLDERS = 64  # empty turn folders kept; about the turns that end at once
DATA_DIR = "data"  # a turn folder's data files, data/<n>
JOURNAL = "journal"  # a turn folder's journal


class Spares:
    """The spare files and turn folders of one daemon's ``state_dir``; thread-safe."""

    def __init__(
        self,
        state_dir: Path,
        *,
        max_files: int = MAX_SPARE_FILES,
        max_folders: int = MAX_SPARE_FOLDERS,
    ) -> None:
        self.folder = state_dir / SPARE_DIR
        self.max_files = max_files
        self.max_folders = max_folders
        self._lock = threading.Lock()
        self._files: list[Path] = []
        self._folders: list[Path] = []
        self._names = itertools.count()
        # Names of this instance's own: another on the same state_dir (a test's
        # restart), or what a start failed to remove, never shares one.
        self._prefix = secrets.token_hex(4)
        # What an earlier run left is of no use: a crash may have cut its emptying short.
        shutil.rmtree(self.folder, ignore_errors=True)

    def __len__(self) -> int:
        """How many files and folders are ready to be handed out."""
        with self._lock:
            return len(self._files) + len(self._folders)

    def file(self, path: Path | str) -> None:
        """Leave an empty file (0600) at ``path``: a spare moved there, else a new one."""
        if not self._place(self._files, path):
            os.close(open_private(path, os.O_WRONLY | os.O_TRUNC))

    def turn_folder(self, path: Path) -> None:
        """Make ``path`` a turn folder (0700, ``data/`` and a new ``journal``): a spare, else new.

        A folder already there (a start tried again) is kept as it is.
        """
        make_private_dirs(path.parent)
        if not self._place(self._folders, path):
            make_private_dirs(path / DATA_DIR)
        os.close(open_private(path / JOURNAL, os.O_WRONLY | os.O_APPEND))

    def _place(self, spares: list[Path], path: Path | str) -> bool:
        """Move a spare of ``spares`` to ``path``; False where there is none to move there."""
        while (spare := self._pop(spares)) is not None:
            try:
                os.rename(spare, path)
                return True
            except OSError:
                if not os.path.lexists(spare):
                    continue  # emptied under it at a start (another Overlay on this state_dir)
                # ``path`` is the trouble (its folder gone, a folder there): the spare stays.
                with self._lock:
                    spares.append(spare)
                return False
        return False

    def take_file(self, path: Path | str) -> None:
        """Take the file at ``path`` in: it leaves ``path`` now and is kept empty, or removed.

        Raises only where it could neither move nor unlink it (``path``
        still holds it) or, moved, neither empty nor unlink it.
        """
        try:
            spare = self._moved_in(path)
        except FileNotFoundError:
            if os.path.lexists(path):
                os.unlink(path)  # the spare folder could not be made
                return
            raise
        except OSError:
            os.unlink(path)  # no room for the spare folder's entry, another filesystem
            return
        try:
            os.truncate(spare, 0)
            os.chmod(spare, FILE_MODE)  # as a new one would be, whatever it was given
        except OSError:
            os.unlink(spare)  # what it held must not wait here
            return
        if not self._keep(self._files, spare, self.max_files):
            os.unlink(spare)

    def take_turn_folder(self, path: Path, marks: Collection[str] = ()) -> None:
        """Take a detached turn's folder in; what it held goes.

        ``marks``: names of empty files in it that nobody reads (the caller
        owns them), taken in as spare files; every other file is unlinked.
        """
        spare = self._moved_in(path)
        try:
            self._empty(spare, marks)
        except OSError:
            # Not a folder a turn left (a start cut short), or a disk failing: not kept.
            shutil.rmtree(spare, ignore_errors=True)
            return
        if not self._keep(self._folders, spare, self.max_folders):
            shutil.rmtree(spare, ignore_errors=True)

    def _empty(self, folder: Path, marks: Collection[str]) -> None:
        """Leave ``folder`` holding an empty ``data/``, nothing else; its marks taken in.

        Raises OSError where it cannot (no ``data/``): the caller then
        removes the folder whole.
        """
        for name in (DATA_DIR, ""):
            with os.scandir(folder / name) as entries:
                for entry in entries:
                    if entry.name == DATA_DIR and not name:
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    elif entry.name in marks and not name:
                        self.take_file(entry.path)
                    else:
                        os.unlink(entry.path)  # data and journals: a reader may hold them
        os.chmod(folder, DIR_MODE)
        os.chmod(folder / DATA_DIR, DIR_MODE)

    def _moved_in(self, path: Path | str) -> Path:
        if not self.folder.is_dir():
            make_private_dirs(self.folder)
        spare = self.folder / f"{self._prefix}-{next(self._names)}"
        os.rename(path, spare)
        return spare

    def _keep(self, spares: list[Path], spare: Path, most: int) -> bool:
        """Add an emptied ``spare`` to ``spares`` unless they are ``most`` already (one lock)."""
        with self._lock:
            if len(spares) >= most:
                return False
            spares.append(spare)
            return True

    def _pop(self, spares: list[Path]) -> Path | None:
        with self._lock:
            return spares.pop() if spares else None


__all__ = ["MAX_SPARE_FILES", "MAX_SPARE_FOLDERS", "Spares"]
