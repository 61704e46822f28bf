"""Spare files and turn folders: the inodes of ended turns, emptied and used again.

A turn made about ten files and folders (its folder, ``data/``, its journal,
a data file per file written, ``ending``, the ``.tmp`` copies of ``turn.json``
and ``done.json``) and removed eight of them at its end. Making an inode is
cheap on a quiet filesystem, but ext4 without a journal (the filesystem the
benchmarks run on) passes over every inode of the group deleted in the last
half minute or so before it hands out a free one: under a busy daemon's own
deletions each new file cost it 0.5 to 1 ms of kernel time, on the trio thread
for a data file. So what an ended turn leaves is kept here and used again,
as PostgreSQL recycles its WAL segments rather than making new ones.

``<state_dir>/spare`` holds, under names of its own, empty files and turn
folders (each an empty ``data/`` and an empty ``journal``, nothing else).
What comes in is first moved here (it leaves its old place at once, as an
unlink would) and then emptied: a file is truncated, a folder's files are
each taken in as files and its journal truncated. Only then is it handed
out again, so a spare never carries what it held into another turn, or
another session. A crash between the move and the emptying leaves such
content here, never anywhere it is read: the folder is emptied whole when
the daemon starts (:meth:`Spares.__init__`), so nothing here outlives a
restart, and a forget never has to look here.

Nothing is kept past ``max_files`` files and ``max_folders`` folders: the
rest is removed as before. Blocking: call these from worker threads, but for
:meth:`Spares.file`, whose rename is as cheap as the create it replaces.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
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
        """Make ``path`` a turn folder (0700, with ``data/`` and ``journal``): a spare, else new.

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
        """Take the file at ``path`` in: it leaves ``path`` now and is kept empty, or removed."""
        with self._lock:
            full = len(self._files) >= self.max_files
        if full:
            os.unlink(path)
            return
        spare = self._moved_in(path)
        os.truncate(spare, 0)
        os.chmod(spare, FILE_MODE)  # as a new one would be, whatever it was given
        with self._lock:
            self._files.append(spare)

    def take_turn_folder(self, path: Path) -> None:
        """Take a detached turn's folder in; what it held goes (its files kept as spares)."""
        with self._lock:
            full = len(self._folders) >= self.max_folders
        if full:
            shutil.rmtree(path, ignore_errors=True)
            return
        spare = self._moved_in(path)
        try:
            self._empty_into_files(spare)
        except OSError:
            # Not a folder a turn left (a start cut short), or a disk failing: not kept.
            shutil.rmtree(spare, ignore_errors=True)
            return
        with self._lock:
            self._folders.append(spare)

    def _empty_into_files(self, folder: Path) -> None:
        """Leave ``folder`` holding an empty ``data/`` and an empty ``journal``, nothing else.

        Raises OSError where it cannot (no ``data/`` or ``journal``): the
        caller then removes the folder whole.
        """
        for name in (DATA_DIR, ""):
            with os.scandir(folder / name) as entries:
                for entry in entries:
                    if entry.name in (DATA_DIR, JOURNAL) and not name:
                        continue
                    if entry.is_file(follow_symlinks=False):
                        self.take_file(entry.path)
                    else:
                        shutil.rmtree(entry.path)
        os.truncate(folder / JOURNAL, 0)
        os.chmod(folder, DIR_MODE)
        os.chmod(folder / DATA_DIR, DIR_MODE)
        os.chmod(folder / JOURNAL, FILE_MODE)

    def _moved_in(self, path: Path | str) -> Path:
        if not self.folder.is_dir():
            make_private_dirs(self.folder)
        spare = self.folder / str(next(self._names))
        os.rename(path, spare)
        return spare

    def _pop(self, spares: list[Path]) -> Path | None:
        with self._lock:
            return spares.pop() if spares else None


__all__ = ["MAX_SPARE_FILES", "MAX_SPARE_FOLDERS", "Spares"]
