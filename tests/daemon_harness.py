"""Running the real daemon in-process for tests: a FUSE mount in a tmp dir, driven by real shells.

The suite's harness over the public helper, :func:`memfs.testing.mounted_daemon`:
the FUSE handlers run in the test's own trio loop, so the test must never
touch the mount with blocking calls from that loop: use :func:`sh` (a
subprocess) or ``trio.to_thread``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
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
