"""``memfs.testing.mounted_daemon``: a real memfs daemon for an app's integration tests.

It runs the daemon the way ``memfs daemon`` does (FUSE mount, control
socket, store) for the app's own specs, on a temporary mount root and state
dir, and takes it all down afterwards, unmounting even when the test
fails::

    async with memfs.testing.mounted_daemon(specs) as daemon:
        turn = await daemon.call(daemon.client.start_turn, "s1", {"userId": "u1", "name": "Dana"})
        await trio.run_process(["bash", "-c", "echo short > me/style.md"], cwd=turn.root)
        ended = await daemon.call(daemon.client.end_turn, "s1")

The daemon runs in the calling trio loop (so ``daemon.service`` is the live
daemon, open to inspection). That loop answers the mount and the control
socket, so it must never block on them: drive the mount with subprocesses
(``trio.run_process``, a real shell, as an agent would) or
``trio.to_thread``, and call the sync ``memfs.Client`` through
``daemon.call``, which runs it in a worker thread.

Where FUSE is missing (no ``/dev/fuse``, no ``fusermount3``, or a mount
refused to a non-root user) it raises :class:`FuseUnavailable`, saying what
is missing. The pytest plugin :mod:`memfs.testing.pytest_plugin` (loaded
by pytest wherever memfs is installed) offers it as the ``memfs_daemon``
fixture, which skips the test there instead, except under ``CI`` (set and
not ``false``/``0``), where a missing FUSE fails the run: a CI that cannot
mount would prove nothing these tests are for.

The Memory tab is off unless asked for (``web_listen="127.0.0.1:PORT"``):
``memfs daemon`` serves it on 127.0.0.1:8330 by default, but tests that run
side by side would fight over one fixed port, and an app's tests of its
turns need none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import trio

from memfs.client import Client
from memfs.core.errors import ConfigError, MemfsError, sole_memfs_error
from memfs.core.models import Limits
from memfs.core.specs import MemorySpec, as_spec

if TYPE_CHECKING:
    from memfsd.main import Settings
    from memfsd.service import DaemonService

P = ParamSpec("P")
T = TypeVar("T")


class FuseUnavailable(ConfigError):
    """This machine cannot mount FUSE here: what is missing is in the message."""


def fuse_missing() -> str | None:
    """Why a FUSE mount cannot work here, or None when the pieces are present."""
    missing = [
        what
        for what, present in (
            ("/dev/fuse", os.path.exists("/dev/fuse")),
            ("fusermount3", shutil.which("fusermount3") is not None),
        )
        if not present
    ]
    if missing:
        return f"FUSE is not available here: {', '.join(missing)} missing (apt-get install fuse3)"
    return None


def under_ci(env: dict[str, str] | None = None) -> bool:
    """True under CI (``CI`` set and not ``false``/``0``): missing FUSE then fails, never skips."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() not in ("", "0", "false", "no")


@dataclass
class MountedDaemon:
    """A running daemon: where it mounts, its control socket, and a client on it."""

    service: DaemonService
    settings: Settings
    client: Client

    @property
    def mount_root(self) -> Path:
        return self.settings.mount_root

    @property
    def state_dir(self) -> Path:
        return self.settings.state_dir

    @property
    def socket(self) -> Path:
        return self.settings.socket

    async def call(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function(*args, **kwargs)`` in a worker thread, while this loop serves the daemon."""
        return await trio.to_thread.run_sync(lambda: function(*args, **kwargs))


def _absolute(path: Path | str) -> Path:
    # Absolute now: the daemon resolves nothing against a cwd the test may change.
    return Path(path).absolute()


def _unmount(mount_root: Path) -> None:
    """Lazily unmount ``mount_root`` if something is still mounted there."""
    if os.path.ismount(mount_root):
        subprocess.run(["fusermount3", "-u", "-z", str(mount_root)], check=False)


@asynccontextmanager
async def mounted_daemon(
    specs: Sequence[MemorySpec],
    directory: Path | str | None = None,
    *,
    store: str | None = None,
    limits: Limits | None = None,
    web_listen: str = "",
) -> AsyncIterator[MountedDaemon]:
    """Run a daemon for ``specs`` until the block ends; the daemon's mount and state are temporary.

    ``directory`` holds the mount root (``mnt/``) and the state dir
    (``state/``); by default a new temporary folder, removed afterwards.
    ``store`` is a store URL (default: a SQLite file in the state dir);
    ``limits`` the daemon's limits (default ``Limits()``); ``web_listen``
    where it serves the Memory tab (loopback; default ``""``, nowhere).
    """
    why = fuse_missing()
    if why is not None:
        raise FuseUnavailable(why)
    # Imported here: the daemon needs pyfuse3, and nothing else in memfs
    # imports the daemon (a test checks that).
    import pyfuse3

    from memfsd.main import Settings, serve

    with tempfile.TemporaryDirectory(prefix="memfs-test-") as scratch:
        base = _absolute(scratch if directory is None else directory)
        state_dir = base / "state"
        settings = Settings(
            mount_root=base / "mnt",
            state_dir=state_dir,
            store=store or f"sqlite://{state_dir}/memfs.db",
            specs=[as_spec(spec) for spec in specs],
            limits=limits or Limits(),
            socket=state_dir / "memfs.sock",
            web_listen=web_listen,
            web_required=web_listen != "",
        )
        failure: Exception | None = None
        try:
            async with trio.open_nursery() as nursery:
                service = await nursery.start(serve, settings)
                try:
                    with Client(settings.socket) as client:
                        yield MountedDaemon(service, settings, client)
                except Exception as exc:
                    # Raised again below, as itself: not wrapped in the nursery's group.
                    failure = exc
                finally:
                    pyfuse3.terminate()
        except BaseExceptionGroup as group:
            found = sole_memfs_error(group)
            if found is None:
                raise
            raise _explained(found) from group
        except MemfsError as exc:
            raise _explained(exc) from exc
        finally:
            # The daemon unmounts when it stops; if it never got that far, do it here.
            await trio.to_thread.run_sync(_unmount, settings.mount_root)
        if failure is not None:
            raise failure


def _explained(exc: MemfsError) -> MemfsError:
    """A refused mount as a non-root user says so; any other error is itself."""
    if isinstance(exc, ConfigError) and "cannot mount" in str(exc) and os.geteuid() != 0:
        return FuseUnavailable(f"{exc} (not root: this user may not mount FUSE here)")
    return exc


__all__ = [
    "FuseUnavailable",
    "MountedDaemon",
    "fuse_missing",
    "mounted_daemon",
    "under_ci",
]
