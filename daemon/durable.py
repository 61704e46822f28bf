"""Group sync: writes that must reach the disk before their caller goes on share one sync.

Every turn start writes its blobs and ``turn.json``, and every turn end its
``done.json``, and each must be on disk (content, then the rename that
names it) before the daemon answers. Done one by one, that is an ``fsync``
of the file and one of its folder per write: with fifty turns in flight,
hundreds of disk flushes a second, each waiting for the one before.

:class:`GroupSync` keeps every one of those syncs but lets concurrent
callers share them, as a database's group commit does: a caller asks for
its writes to be made durable and blocks until they are. If nobody else is
asking, it syncs exactly its own files (``own``: the file's ``fsync``, or its
folder's). If others ask while a sync runs, they wait for it to end, and
the first of them then syncs for all of them at once with one ``syncfs(2)``
of the filesystem holding ``state_dir``, which flushes every file written
and every rename made on it before the call (and the disk's cache). A
caller never returns before a sync that began after its own writes has
finished, so what it wrote is on disk when it goes on, exactly as with its
own ``fsync``. A failed sync fails every caller that relied on it.

Writes on another filesystem than ``state_dir``'s (a folder mounted inside
it) are synced with their own ``fsync``, never counted as covered.

Blocking: called from worker threads, never the trio loop.

What must be synced, and when. A turn start's ``turn.json`` and new blobs
are written, not synced: everything the daemon writes is in the kernel's
page cache before a request returns, which a ``kill -9`` or any crash of the
daemon leaves whole, and a power cut is the agent's to guard against with
``fsync``, as on any local filesystem. So a turn is made durable (its blobs,
then ``turn.json``, then a ``durable`` mark in its folder) just before its
journal is first synced: at the agent's first ``fsync``, at every close with
``sync_on_close``, or when a failed store keeps the turn's files. Its
``done.json`` is synced only once it is. At start, a ``turn.json`` written in
this boot of the machine (:func:`boot_id`) is whole; one from an earlier
boot comes back only with its mark (or from a memfs that synced it at once),
and is dropped otherwise: its agent never asked for any of it to outlive a
power cut.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)


def syncfs(fd: int) -> None:
    """``syncfs(2)`` of the filesystem holding ``fd``; ``OSError`` on failure."""
    if _libc.syncfs(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@dataclass
class _Ask:
    own: Callable[[], None]
    device: int
    files: int
    done: bool = False
    error: OSError | None = None


class GroupSync:
    """Durable writes for many threads at once: their own ``fsync`` alone, one ``syncfs`` together.

    ``own``, ``shared`` and ``covered`` count what it did (syncs of a
    caller's own files, ``syncfs`` calls, and callers those covered), for
    tests and the benchmark.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.device = os.stat(folder).st_dev
        self._cv = threading.Condition()
        self._waiting: list[_Ask] = []
        self._running = False
        self.own = 0
        self.shared = 0
        self.covered = 0

    def sync(self, own: Callable[[], None], folder: Path | int, *, files: int = 1) -> None:
        """Return once what the caller wrote (and renamed) under ``folder`` is on disk.

        ``own`` syncs exactly the caller's writes (an ``fsync`` of each file,
        or of the folder after a rename), ``files`` of them; it runs when the
        caller is the only one asking and it is one ``fsync`` (more, and one
        ``syncfs`` is fewer flushes: many blobs at once). ``folder``: where
        the writes are (a path, or a device number), so writes elsewhere are
        never taken as covered by a ``syncfs`` of ``state_dir``'s filesystem.
        """
        device = folder if isinstance(folder, int) else os.stat(folder).st_dev
        if device != self.device:
            own()
            with self._cv:
                self.own += 1
            return
        ask = _Ask(own, device, files)
        with self._cv:
            self._waiting.append(ask)
            # Whoever runs a sync now may have begun it before this caller's
            # writes: wait for it to end, then lead the next one unless it
            # already covered this caller.
            while self._running and not ask.done:
                self._cv.wait()
            if ask.done:
                if ask.error is not None:
                    raise _copy(ask.error)
                return
            batch, self._waiting = self._waiting, []
            self._running = True
        error: OSError | None = None
        alone = len(batch) == 1 and ask.files <= 1
        try:
            if alone:
                own()
            else:
                # Opened per sync, not held: a descriptor less for the daemon's pools.
                fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    syncfs(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            error = exc
        finally:
            with self._cv:
                self._running = False
                if alone:
                    self.own += 1
                else:
                    self.shared += 1
                    self.covered += len(batch)
                for each in batch:
                    each.done = True
                    each.error = error
                self._cv.notify_all()
        if error is not None:
            raise _copy(error)


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id(source: Path = BOOT_ID) -> str | None:
    """This boot of the machine (Linux names each one); None where it cannot tell.

    With None the daemon cannot know whether the page cache of a ``turn.json``
    outlived a restart, so it makes every turn durable as it starts.
    """
    try:
        return source.read_text().strip() or None
    except OSError:
        return None


def _copy(error: OSError) -> OSError:
    """A fresh exception per caller: one instance raised in many threads would share a traceback."""
    return OSError(error.errno or errno.EIO, error.strerror or str(error))


def fsync_each(paths: Sequence[Path]) -> None:
    """``fsync`` each of ``paths`` by name (what a ``GroupSync`` caller syncs on its own)."""
    for path in paths:
        fsync_path(path)


def fsync_path(path: Path) -> None:
    """``fsync`` a file or folder by its name (a file already closed, a folder after a rename)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["BOOT_ID", "GroupSync", "boot_id", "fsync_each", "fsync_path", "syncfs"]
