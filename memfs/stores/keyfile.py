"""The store key file (``store_key_file``): read it, or make it once, atomically.

The key's format and rules are ``memfs.core.sealing``. A missing file is made
with a fresh random key, 0600: the key is written to a file with no name in
the same folder (``O_TMPFILE``), synced, then hard-linked to the path, which
fails if the path exists. So two daemons starting at once on one path agree
on one key (the loser reads the winner's), nobody ever reads half a key
file, and a process killed at any point of it leaves nothing behind: before
the link the file has no name, and the kernel frees it with the process.

Where the filesystem refuses ``O_TMPFILE`` (``EOPNOTSUPP``, ``EISDIR`` or
``EINVAL``: some network filesystems, old kernels) the key is written to a
named temporary file ``.<name>.<pid>.<hex>.tmp`` instead, held under an
``flock`` while it exists, and linked the same way. A kill there leaves that
file, so each creation (either way) first removes those of dead creators:
a pid not alive on this host whose file nobody holds locked (a creator on
another host sharing the folder holds its lock).

A file that exists is never rewritten: a key that does not fit the store is
refused at open (``ConfigError``), never replaced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
from pathlib import Path

from memfs.core import sealing
from memfs.core.errors import ConfigError
from memfs.private import make_private_dirs

KEY_FILE_NAME = "store.key"

# What a filesystem or kernel answers an O_TMPFILE open it does not support with.
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL})


def default_key_file(state_dir: Path) -> Path:
    """Where a daemon's store key lives unless ``store_key_file`` says otherwise."""
    return state_dir / KEY_FILE_NAME


def _read(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"store_key_file cannot be read: {exc.strerror}", path=str(path)
        ) from None
    return sealing.parse_store_key(data, path=str(path))


def _cannot_create(exc: OSError, path: Path) -> ConfigError:
    return ConfigError(f"store_key_file cannot be created: {exc.strerror}", path=str(path))


def load_store_key(path: Path) -> bytes:
    """The store key in ``path``, made there first (0600, atomically) if the file is missing."""
    path = Path(os.path.abspath(path))
    if path.exists() or path.is_symlink():
        return _read(path)
    try:
        # A folder that cannot be made (a full disk, a file in the way) is
        # the same clear error as a key that cannot be written.
        make_private_dirs(path.parent)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise _cannot_create(exc, path) from None
    try:
        # Those a kill left (here, or an older memfs's anywhere) go first.
        _sweep(folder, path.name)
        if not _create_unnamed(folder, path.name):
            _create_named(folder, path.name)
    except OSError as exc:
        raise _cannot_create(exc, path) from None
    finally:
        os.close(folder)
    return _read(path)


def _write_key(fd: int) -> None:
    os.fchmod(fd, 0o600)  # whatever the umask
    os.write(fd, sealing.format_store_key(sealing.new_key()))
    os.fsync(fd)


def _link(source: str, folder: int, name: str, *, follow: bool) -> None:
    """Give ``source``'s file the name ``name`` in ``folder``, unless the name exists."""
    try:
        # linkat(2) (a dir fd makes os.link use it): with ``follow`` it follows
        # /proc/self/fd's link to the open file, which link(2) would not.
        os.link(source, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=follow)
    except FileExistsError:
        return  # another process made it first: its key is the store's
    os.fsync(folder)


def _create_unnamed(folder: int, name: str) -> bool:
    """Make the key with no name, then link it; False where O_TMPFILE is refused."""
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600, dir_fd=folder)
    except OSError as exc:
        if exc.errno in _NO_TMPFILE:
            return False
        raise
    try:
        _write_key(fd)
        try:
            _link(f"/proc/self/fd/{fd}", folder, name, follow=True)
        except FileNotFoundError:
            if os.path.isdir("/proc/self/fd"):
                raise
            return False  # no /proc to name the file by: a named temporary file it is
    finally:
        os.close(fd)
    return True


def _create_named(folder: int, name: str) -> None:
    """Make the key in a named temporary file, held locked while it exists, then link it."""
    tmp = f".{name}.{os.getpid()}.{sealing.new_key().hex()[:8]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a sweeper elsewhere sees its creator alive
            _write_key(fd)
            _link(tmp, folder, name, follow=False)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
    finally:
        os.close(fd)


def _sweep(folder: int, name: str) -> None:
    """Remove the temporary key files of ``name`` that dead creators left in ``folder``."""
    pattern = re.compile(rf"\.{re.escape(name)}\.(\d+)\.[0-9a-f]+\.tmp")
    for entry in os.listdir(folder):
        found = pattern.fullmatch(entry)
        if found is None or _alive(int(found.group(1))):
            continue
        try:
            fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except OSError:
            continue  # gone already, or not a file of ours to judge
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: its creator is alive (on another host)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry, dir_fd=folder)
        finally:
            os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except (OverflowError, ValueError):
        return False  # no process can have that number
    return True
