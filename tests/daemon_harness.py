"""Running the real daemon in-process for tests: a FUSE mount in a tmp dir, driven by real shells.

The FUSE handlers run in the test's own trio loop, so the test must never
touch the mount with blocking calls from that loop: use :func:`sh` (a
subprocess) or ``trio.to_thread``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pyfuse3
import pytest
import trio

from memfs.core.models import Limits
from memfs.core.specs import Spec
from memfsd.main import Settings, serve
from memfsd.service import DaemonService


def require_fuse() -> None:
    """Skip where FUSE is truly missing, except under CI, where a missing FUSE fails the run."""
    missing = [
        what
        for what, present in (
            ("/dev/fuse", os.path.exists("/dev/fuse")),
            ("fusermount3", shutil.which("fusermount3") is not None),
        )
        if not present
    ]
    if not missing:
        return
    message = f"FUSE is not available here: {', '.join(missing)} missing"
    if os.environ.get("CI"):
        pytest.fail(message + " (under CI=true this fails the run)")
    pytest.skip(message)


def require_root(why: str) -> None:
    """Skip a hostile-user test where the run is not root, except under CI, where it fails.

    CI runs as root; a CI run that cannot drop to other users would prove
    none of the isolation these tests pin.
    """
    if os.geteuid() == 0:
        return
    message = f"needs root: {why}"
    if os.environ.get("CI"):
        pytest.fail(message + " (under CI=true this fails the run)")
    pytest.skip(message)


@dataclass
class Daemon:
    service: DaemonService
    settings: Settings

    @property
    def mount_root(self) -> Path:
        return self.settings.mount_root


@asynccontextmanager
async def running_daemon(
    tmp_path: Path,
    specs: Sequence[Spec],
    *,
    store: str | None = None,
    limits: Limits | None = None,
) -> AsyncIterator[Daemon]:
    require_fuse()
    state_dir = tmp_path / "state"
    settings = Settings(
        mount_root=tmp_path / "mnt",
        state_dir=state_dir,
        store=store or f"sqlite://{state_dir}/memfs.db",
        specs=list(specs),
        limits=limits or Limits(),
        socket=state_dir / "memfs.sock",
    )
    async with trio.open_nursery() as nursery:
        service = await nursery.start(serve, settings)
        try:
            yield Daemon(service, settings)
        finally:
            pyfuse3.terminate()


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
