"""Running the real daemon in-process for tests: a FUSE mount in a tmp dir, driven by real shells.

The suite's harness over the public helper, :func:`memfs.testing.mounted_daemon`:
the FUSE handlers run in the test's own trio loop, so the test must never
touch the mount with blocking calls from that loop: use :func:`sh` (a
subprocess) or ``trio.to_thread``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio

from memfs.core.models import Limits
from memfs.core.specs import MemorySpec
from memfs.testing.mount import MountedDaemon, fuse_missing, mounted_daemon, under_ci

Daemon = MountedDaemon

# Set by tests/conftest.py before each test: whether the test is marked ``fuse``.
MOUNT_ALLOWED = True


def require_fuse() -> None:
    """Skip where FUSE is truly missing, except under CI, where a missing FUSE fails the run.

    Every test that mounts comes here first; one the conftest did not mark
    ``fuse`` fails, so ``pytest -m "not fuse"`` never mounts.
    """
    if not MOUNT_ALLOWED:
        pytest.fail(
            "this test mounts FUSE but is not marked fuse: name a mount helper of "
            "tests/conftest.py's MOUNTS in its module, or mark it"
        )
    why = fuse_missing()
    if why is None:
        return
    if under_ci():
        pytest.fail(why + " (under CI=true this fails the run)")
    pytest.skip(why)


def require_root(why: str) -> None:
    """Skip a hostile-user test where the run is not root, except under CI, where it fails.

    CI runs as root; a CI run that cannot drop to other users would prove
    none of the isolation these tests pin.
    """
    if os.geteuid() == 0:
        return
    message = f"needs root: {why}"
    if under_ci():
        pytest.fail(message + " (under CI=true this fails the run)")
    pytest.skip(message)


@contextmanager
def tmpfs_disk(folder: Path, size: str, *, why: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``"4m"``) mounted on the empty ``folder``, unmounted after.

    A real full disk, for tests of what fills one; needs root (``require_root``).
    """
    require_root(why)
    folder.mkdir(exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)], check=True
    )
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


# The kill point the process crash tests prepend to their seam: ``point(name)``
# SIGKILLs the daemon at the MEMFS_TEST_KILL_AFTER-th (default first) time it
# reaches the point named MEMFS_TEST_KILL_AT.
KILL_POINT = """
import os, signal

AT = os.environ["MEMFS_TEST_KILL_AT"]
hits = {"n": int(os.environ.get("MEMFS_TEST_KILL_AFTER", "1"))}

def point(name):
    if name == AT:
        hits["n"] -= 1
        if hits["n"] == 0:
            os.kill(os.getpid(), signal.SIGKILL)
"""


@asynccontextmanager
async def running_daemon(
    tmp_path: Path,
    specs: Sequence[MemorySpec],
    *,
    store: str | None = None,
    limits: Limits | None = None,
    web_listen: str = "",
) -> AsyncIterator[Daemon]:
    """A daemon for ``specs`` in ``tmp_path``; no Memory tab unless ``web_listen`` says where."""
    require_fuse()
    async with mounted_daemon(
        specs, tmp_path, store=store, limits=limits, web_listen=web_listen
    ) as daemon:
        yield daemon


async def sh(script: str, cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run ``script`` in bash in ``cwd``, as an agent would."""
    done = await trio.run_process(
        ["bash", "-c", script], cwd=cwd, capture_stdout=True, capture_stderr=True, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"bash exited {done.returncode}: {script}\n{done.stdout.decode()}{done.stderr.decode()}"
        )
    return done
