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

log = logging.getLogger(__name__)

# Hypercorn logs through this logger. It announces the temporary path it bound
# (see serve_control) at INFO, which would mislead, so only warnings and errors
# get through; serve_control logs the real address itself.
_hypercorn_log = logging.getLogger("memfsd.control.hypercorn")
_hypercorn_log.setLevel(logging.WARNING)

# sockaddr_un.sun_path is 108 bytes on Linux, one of them the terminating NUL.
MAX_SOCKET_PATH = 107


def _check_path_length(path: Path) -> None:
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise ConfigError(
            f"control socket path is {size} bytes; Unix sockets allow {MAX_SOCKET_PATH} "
            "(choose a shorter state_dir)",
            path=str(path),
        )


def _clear_stale_socket(path: Path) -> None:
    """Remove a socket file left by a daemon that died; refuse to touch anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError("control socket path exists and is not a socket", path=str(path))
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)  # a live daemon with a full backlog must not hang our start
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        pass  # nobody listens: a stale file from a daemon that died
    except TimeoutError:
        raise Conflict(
            "another memfs daemon holds the control socket and does not answer", path=str(path)
        ) from None
    else:
        raise Conflict(
            "another memfs daemon is already serving on the control socket", path=str(path)
        )
    finally:
        probe.close()
    path.unlink(missing_ok=True)


def _config(bind: str) -> Config:
    config = Config()
    config.bind = [bind]
    config.accesslog = None  # the daemon logs turns itself; a line per request is noise
    config.errorlog = _hypercorn_log
    config.include_server_header = False
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
    socket_path = Path(socket_path).absolute()
    _check_path_length(socket_path)
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_socket(socket_path)

    # Bind in a fresh 0700 directory, narrow the socket to 0600, and only then
    # rename it into place: at no moment can another user connect through a
    # wider mode (a chmod after binding would leave that window open, and a
    # umask change would leak into files other threads create meanwhile).
    private = Path(tempfile.mkdtemp(prefix=".ctl", dir=socket_path.parent))
    bound = private / "s"
    identity: tuple[int, int] | None = None
    try:
        _check_path_length(bound)
        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(serve, app, _config(f"unix:{bound}"), shutdown_trigger=shutdown_trigger)
            )
            os.chmod(bound, 0o600)
            os.rename(bound, socket_path)
            st = socket_path.lstat()
            identity = (st.st_dev, st.st_ino)
            private.rmdir()
            log.info("control API listening on %s", socket_path)
            task_status.started()
    finally:
        _remove_if_ours(socket_path, identity)
        if private.exists():
            bound.unlink(missing_ok=True)
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


__all__ = ["MAX_SOCKET_PATH", "serve_control"]
