"""memfs's pytest plugin: the ``memfs_daemon`` fixture, a real daemon for an app's own specs.

pytest loads it wherever memfs is installed (the ``pytest11`` entry point).
An app names its specs in a ``memfs_specs`` fixture and asks for
``memfs_daemon`` in a trio test (pytest-trio)::

    @pytest.fixture
    def memfs_specs():
        return my_app.memory_specs()

    async def test_the_agent_keeps_a_note(memfs_daemon):
        turn = await memfs_daemon.call(memfs_daemon.client.start_turn, "s1", {"userId": "u1"})
        ...

``memfs_store`` (default: SQLite in the daemon's state dir) and
``memfs_limits`` (default ``Limits()``) may be overridden the same way.
Where FUSE is missing, ``memfs_fuse`` skips the test with the reason,
except under ``CI``, where it fails it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from memfs.core.models import Limits
from memfs.core.specs import MemorySpec
from memfs.testing.mount import MountedDaemon, fuse_missing, mounted_daemon, under_ci


@pytest.fixture
def memfs_fuse() -> None:
    """Skip where FUSE is missing (fail under ``CI``); a sync fixture, so the reason shows."""
    why = fuse_missing()
    if why is None:
        return
    if under_ci():
        pytest.fail(why + " (under CI this fails the run)")
    pytest.skip(why)


@pytest.fixture
def memfs_specs() -> Sequence[MemorySpec]:
    """The specs ``memfs_daemon`` mounts: override it with the app's own."""
    raise pytest.UsageError("define a memfs_specs fixture returning the app's memory specs")


@pytest.fixture
def memfs_store() -> str | None:
    """The store URL ``memfs_daemon`` uses; None: SQLite in its state dir."""
    return None


@pytest.fixture
def memfs_limits() -> Limits:
    return Limits()


@pytest.fixture
async def memfs_daemon(
    memfs_fuse: None,
    memfs_specs: Sequence[MemorySpec],
    memfs_store: str | None,
    memfs_limits: Limits,
    tmp_path: Path,
) -> AsyncIterator[MountedDaemon]:
    """A daemon on a FUSE mount under ``tmp_path`` for ``memfs_specs``, unmounted afterwards."""
    async with mounted_daemon(
        memfs_specs, tmp_path, store=memfs_store, limits=memfs_limits
    ) as daemon:
        yield daemon
