"""Making the store key file: a creator killed at any point leaves nothing behind.

``load_store_key`` writes a missing key into a file with no name
(``O_TMPFILE``), syncs it, and only then links it to the path: a process
killed before the link leaves no file at all, after it a whole key. Where
the filesystem refuses ``O_TMPFILE`` (some network filesystems) it writes a
named temporary file instead, and removes the temporary files that dead
creators left next to the key. The kill is real: a child process stopped
inside the creation (its ``os.write`` or ``os.fsync`` made to block) is
SIGKILLed.
"""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import pytest

from memfs.core import sealing
from memfs.core.errors import ConfigError
from memfs.stores.keyfile import load_store_key

# A creator that stops at ``point`` (``write`` or ``fsync``, once past the
# real call) and says so in the marker file, then waits to be killed;
# ``no-tmpfile`` makes its filesystem refuse O_TMPFILE.
CHILD = """
import errno, os, sys, time
from pathlib import Path
from memfs.stores.keyfile import load_store_key

key, marker, point, tmpfile = sys.argv[1:5]
real = getattr(os, point)
real_open = os.open

def stopping(*args):
    result = real(*args)
    Path(marker).write_text("stopped")
    time.sleep(60)
    return result

def refusing(path, flags, *args, **kwargs):
    if flags & os.O_TMPFILE == os.O_TMPFILE:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
    return real_open(path, flags, *args, **kwargs)

setattr(os, point, stopping)
if tmpfile == "no-tmpfile":
    os.open = refusing
load_store_key(Path(key))
"""


def kill_mid_creation(key: Path, tmp_path: Path, point: str, *, tmpfile: bool) -> int:
    """Start a creator of ``key``, SIGKILL it once stopped at ``point``; its pid."""
    marker = tmp_path / f"stopped-{point}"
    mode = "tmpfile" if tmpfile else "no-tmpfile"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(key), str(marker), point, mode])
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert child.poll() is None, "the creator ended before it was stopped"
            assert time.monotonic() < deadline, "the creator never reached the stop"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.pid


def refuse_tmpfile(monkeypatch: pytest.MonkeyPatch, code: int = errno.EOPNOTSUPP) -> None:
    """This process's filesystem refuses O_TMPFILE with ``code``, as a kernel or filesystem may."""
    real_open = os.open

    def refusing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(code, os.strerror(code))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


@pytest.mark.parametrize("point", ["write", "fsync"])
def test_a_creator_killed_mid_creation_leaves_no_file_and_the_next_load_makes_the_key(
    tmp_path: Path, point: str
) -> None:
    key = tmp_path / "keys" / "store.key"
    kill_mid_creation(key, tmp_path, point, tmpfile=True)
    assert names(key.parent) == []  # not a temporary file, not half a key
    made = load_store_key(key)
    assert len(made) == sealing.KEY_BYTES
    assert names(key.parent) == ["store.key"]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert load_store_key(key) == made


def test_where_o_tmpfile_is_refused_the_next_load_removes_a_killed_creators_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "keys" / "store.key"
    pid = kill_mid_creation(key, tmp_path, "fsync", tmpfile=False)
    [left] = names(key.parent)  # a named temporary file is all such a filesystem offers
    assert left.startswith(f".store.key.{pid}.") and left.endswith(".tmp")
    refuse_tmpfile(monkeypatch)
    made = load_store_key(key)
    assert names(key.parent) == ["store.key"]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert load_store_key(key) == made


def test_a_temp_key_file_an_older_memfs_left_is_removed_by_the_next_creation(
    tmp_path: Path,
) -> None:
    # A kill before this memfs left a named temporary file even where O_TMPFILE works.
    key = tmp_path / "store.key"
    left = tmp_path / ".store.key.4194304.0123abcd.tmp"  # past pid_max: not alive
    left.write_bytes(b"")
    load_store_key(key)
    assert names(tmp_path) == ["store.key"]


def test_a_temp_key_file_whose_creator_may_be_alive_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process's own (alive), and a dead pid's that a process elsewhere
    # holds locked (another host on a shared folder, its pid unknown here).
    key = tmp_path / "store.key"
    mine = tmp_path / f".store.key.{os.getpid()}.0123abcd.tmp"
    mine.write_bytes(b"")
    elsewhere = tmp_path / ".store.key.4194304.89abcdef.tmp"  # past pid_max: not alive here
    elsewhere.write_bytes(b"")
    unrelated = tmp_path / ".other.key.4194304.89abcdef.tmp"
    unrelated.write_bytes(b"")
    refuse_tmpfile(monkeypatch)
    with open(elsewhere, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        load_store_key(key)
    assert names(tmp_path) == sorted([key.name, mine.name, elsewhere.name, unrelated.name])
    # Once nobody holds it, the dead pid's is swept by the next creator of that key.
    key.unlink()
    load_store_key(key)
    assert names(tmp_path) == sorted([key.name, mine.name, unrelated.name])


@pytest.mark.parametrize(
    "code", [errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL], ids=errno.errorcode.get
)
def test_where_o_tmpfile_is_refused_a_missing_key_is_made_0600_whatever_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    refuse_tmpfile(monkeypatch, code)
    old = os.umask(0o000)
    try:
        made = load_store_key(tmp_path / "keys" / "store.key")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "keys" / "store.key").stat().st_mode) == 0o600
    assert names(tmp_path / "keys") == ["store.key"]
    assert load_store_key(tmp_path / "keys" / "store.key") == made


def _create(path: str, start: Event, out: Queue[str]) -> None:
    start.wait()
    out.put(load_store_key(Path(path)).hex())


@pytest.mark.parametrize("tmpfile", [True, False], ids=["o_tmpfile", "named-temp-file"])
def test_concurrent_creators_agree_on_one_key_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpfile: bool
) -> None:
    if not tmpfile:
        refuse_tmpfile(monkeypatch)  # inherited by the forked creators
    ctx = multiprocessing.get_context("fork")
    path = tmp_path / "store.key"
    start, out = ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_create, args=(str(path), start, out)) for _ in range(6)]
    for worker in workers:
        worker.start()
    start.set()
    keys = {out.get(timeout=30) for _ in workers}
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    assert keys == {load_store_key(path).hex()}
    assert names(tmp_path) == ["store.key"]


@pytest.mark.parametrize("tmpfile", [True, False], ids=["o_tmpfile", "named-temp-file"])
def test_a_key_that_cannot_be_written_is_a_clear_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpfile: bool
) -> None:
    if not tmpfile:
        refuse_tmpfile(monkeypatch)

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(ConfigError, match="store_key_file cannot be created: No space left"):
        load_store_key(tmp_path / "store.key")
    assert names(tmp_path) == []
