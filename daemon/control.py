"""Serving the control API on the daemon's Unix socket (hypercorn on trio).

This module owns the socket file: it refuses to take over a socket another
daemon is serving, replaces a stale one, makes sure nobody but the daemon's
user can ever connect (mode 0600 from the first moment it is reachable), and
removes the file when serving stops.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from memfs.core.errors import ConfigError, Conflict
from memfs.unix_http import SERVER_KEEP_ALIVE_SECONDS

log = logging.getLogger(__name__)

# Hypercorn logs through this logger. It announces the temporary path it bound
# (see serve_control) at INFO, which would mislead, so only warnings and errors
# get through; serve_control logs the real address itself.
_hypercorn_log = logging.getLogger("memfsd.control.hypercorn")
_hypercorn_log.setLevel(logging.WARNING)

# sockaddr_un.sun_path is 108 bytes on Linux, one of them the terminating NUL.
MAX_SOCKET_PATH = 107
# The socket is bound in a private folder beside it first (see _prepare):
# "<folder>/.ctlXXXXXXXX/socket", mkdtemp's eight random characters.
_PRIVATE_PREFIX = ".ctl"
_BOUND_NAME = "socket"
_BIND_EXTRA = len(f"/{_PRIVATE_PREFIX}xxxxxxxx/{_BOUND_NAME}")
# So the socket's folder may be at most this long.
MAX_SOCKET_FOLDER = MAX_SOCKET_PATH - _BIND_EXTRA


def check_socket_path(path: Path) -> None:
    """Refuse a socket path Unix sockets cannot bind, before anything is made for it."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise ConfigError(
            f"control socket path is {size} bytes; Unix sockets allow {MAX_SOCKET_PATH} "
            "(choose a shorter state_dir)",
            path=str(path),
        )
    folder = len(os.fsencode(path.parent))
    if folder > MAX_SOCKET_FOLDER:
        raise ConfigError(
            f"the control socket's folder is {folder} bytes; the daemon binds the socket in "
            f"a folder beside it, so Unix sockets allow it {MAX_SOCKET_FOLDER} "
            "(choose a shorter state_dir)",
            path=str(path),
        )


def socket_in_use(path: Path) -> bool:
    """True if something listens on the Unix socket ``path`` (a running daemon).

    The daemon's start asks this before touching anything a running daemon
    owns, such as a mount at ``mount_root`` that looks stale but is not.
    """
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)  # a live daemon with a full backlog must not hang our start
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False  # nobody listens: at most a stale file from a daemon that died
    except TimeoutError:
        return True  # it is there, just busy
    finally:
        probe.close()
    return True


def _clear_stale_socket(path: Path) -> None:
    """Remove a socket file left by a daemon that died; refuse to touch anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError("control socket path exists and is not a socket", path=str(path))
    if socket_in_use(path):
        raise Conflict(
            "another memfs daemon is already serving on the control socket", path=str(path)
        )
    path.unlink(missing_ok=True)


def _config(bind: str) -> Config:
    config = Config()
    config.bind = [bind]
    config.accesslog = None  # the daemon logs turns itself; a line per request is noise
    config.errorlog = _hypercorn_log
    config.include_server_header = False
    # Named where the client's reuse of idle connections is kept below it.
    config.keep_alive_timeout = SERVER_KEEP_ALIVE_SECONDS
    return config


async def serve_control(
    app: Any,
    socket_path: Path,
    *,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``socket_path`` until cancelled (or ``shutdown_trigger`` returns).

    ``task_status.started()`` is called once the socket accepts connections,
    so ``await nursery.start(serve_control, app, path)`` returns with a
    working control API. Cancelling stops serving at once; returning from
    ``shutdown_trigger`` stops accepting and lets requests in flight finish
    (hypercorn's graceful timeout). Either way the socket file is removed.
    """
    socket_path, private = _prepare(Path(socket_path))
    identity: tuple[int, int] | None = None
    try:
        async with trio.open_nursery() as nursery:
            bind = f"unix:{private / _BOUND_NAME}"
            await nursery.start(
                partial(serve, app, _config(bind), shutdown_trigger=shutdown_trigger)
            )
            identity = _publish(private, socket_path)
            log.info("control API listening on %s", socket_path)
            task_status.started()
    finally:
        _remove_if_ours(socket_path, identity)
        _remove_private(private)


def _prepare(socket_path: Path) -> tuple[Path, Path]:
    """Check the path, clear a stale socket, and make the private directory to bind in.

    Binding in a fresh 0700 directory, narrowing the socket to 0600 and only
    then renaming it into place means no other user can ever connect through
    a wider mode (a chmod after binding would leave that window open, and a
    umask change would leak into files other threads create meanwhile).
    """
    socket_path = socket_path.absolute()
    check_socket_path(socket_path)
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_socket(socket_path)
    private = Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX, dir=socket_path.parent))
    if len(os.fsencode(private / _BOUND_NAME)) > MAX_SOCKET_PATH:  # mkdtemp made a longer name
        private.rmdir()
        raise ConfigError(
            f"the control socket's folder leaves no room to bind it (Unix sockets allow "
            f"{MAX_SOCKET_PATH} bytes; choose a shorter state_dir)",
            path=str(socket_path),
        )
    return socket_path, private


def _publish(private: Path, socket_path: Path) -> tuple[int, int]:
    """Narrow the bound socket to 0600 and move it into place; returns its identity."""
    bound = private / _BOUND_NAME
    os.chmod(bound, 0o600)
    os.rename(bound, socket_path)
    private.rmdir()
    st = socket_path.lstat()
    return st.st_dev, st.st_ino


def _remove_private(private: Path) -> None:
    (private / _BOUND_NAME).unlink(missing_ok=True)
    if private.exists():
        private.rmdir()


def _remove_if_ours(path: Path, identity: tuple[int, int] | None) -> None:
    # A newer daemon may have replaced the file since; its socket is not ours to remove.
    if identity is None:
        return
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if (st.st_dev, st.st_ino) == identity:
        path.unlink(missing_ok=True)


__all__ = [
    "MAX_SOCKET_FOLDER",
    "MAX_SOCKET_PATH",
    "check_socket_path",
    "serve_control",
    "socket_in_use",
]
