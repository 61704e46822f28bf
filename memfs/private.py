"""Files and folders only this process's user can read: what ``state_dir`` and the stores hold.

Memory is private: a person's files, prompts and the identities in a turn's
record must not be readable by another local user, whoever made the folder
they live in. Everything here sets its mode explicitly (0700 folders, 0600
files) rather than trusting the process umask, so it holds when a store is
opened by the CLI or a library caller as much as inside the daemon (which
also sets its umask to 0o077 at start).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from memfs.core.errors import ConfigError

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
REACHABLE_DIR_MODE = 0o755  # folders above state_dir and the mount root: others pass through


def make_dirs(path: Path, mode: int) -> None:
    """``mkdir -p path``: every folder it makes gets ``mode``, whatever the umask.

    Folders that exist are left as they are. The daemon runs with umask
    0o077, under which a plain ``mkdir -p`` of the mount root's parents would
    lock every agent out of the mount.
    """
    missing: list[Path] = []
    probe = path
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:  # another thread or process made it first
            continue
        if mode & ~DIR_MODE:  # the umask may have taken group and other bits away
            os.chmod(folder, mode)


def make_private_dirs(path: Path) -> None:
    """``mkdir -p path``: every folder it makes is 0700 (existing ones are left as they are)."""
    make_dirs(path, DIR_MODE)


def open_private(path: Path | str, flags: int) -> int:
    """``os.open`` with ``O_CREAT``: a new file is 0600, and so is an old one this opens.

    The explicit ``fchmod`` covers a file left by an earlier run (a temp file
    after a crash) that was made with a wider mode.
    """
    fd = os.open(path, flags | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private_file(path: Path) -> None:
    """Make sure ``path`` exists and only its owner can read it; keeps any content.

    A file another user owns is left alone (this process could not narrow it,
    and the caller's own open reports what is wrong).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, FILE_MODE)
    except OSError:
        return  # let the caller's own open report it
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def narrow_if_ours(path: Path) -> None:
    """Take group and other bits off an existing file this user owns; nothing if it is absent."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and info.st_mode & 0o077:
        os.chmod(path, stat.S_IMODE(info.st_mode) & DIR_MODE)


def secure_state_dir(path: Path, *, what: str = "state_dir") -> None:
    """Make ``path`` a folder only this user can enter: create it 0700, or narrow it to 0700.

    Refused with ``ConfigError`` naming the path when it is not a folder, when
    another user owns it (they could open it again at any time), or when its
    mode cannot be narrowed. The folders above it are made, if missing,
    0755: the mount root may live beside it and must stay reachable.
    """
    make_dirs(path.parent, REACHABLE_DIR_MODE)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIR_MODE)
    try:
        info = os.stat(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"{what}: cannot reach it: {reason}", path=str(path)) from exc
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{what} is not a folder", path=str(path))
    me = os.geteuid()
    if info.st_uid != me:
        raise ConfigError(
            f"{what} belongs to uid {info.st_uid}, not to the daemon's user (uid {me}), so "
            "it cannot be kept private; chown it to the daemon's user or choose another",
            path=str(path),
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 or mode & DIR_MODE != DIR_MODE:
        try:
            os.chmod(path, DIR_MODE)
        except OSError as exc:
            raise ConfigError(
                f"{what} is mode {mode:04o} and cannot be narrowed to 0700: {exc.strerror or exc}",
                path=str(path),
            ) from exc
        log.warning("%s %s was mode %04o; narrowed it to 0700", what, path, mode)


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "REACHABLE_DIR_MODE",
    "create_private_file",
    "make_dirs",
    "make_private_dirs",
    "narrow_if_ours",
    "open_private",
    "secure_state_dir",
]
