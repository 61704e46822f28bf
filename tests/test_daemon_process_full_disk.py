"""A full disk under state_dir while a kept space exists, across a ``kill -9`` and a restart.

``state_dir`` is a small tmpfs of its own; the test fills it to the last
byte as root (from outside the daemon), kills the daemon and starts it on
the full disk. The kept space must come back and be stored once the store
is back and room is freed; agents' writes get ENOSPC under the reserve while
turn ends still store.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from memfs.core.models import SpaceRef
from memfs.stores.sqlite import SqliteStore
from tests.daemon_harness import require_fuse
from tests.test_daemon_mount import CAROL
from tests.test_daemon_process import CONFIG, DANA, DaemonProcess, memfs

MIB = 1024 * 1024
RESERVE = 8 * MIB
LIMITS = f"disk_reserve_bytes = {RESERVE}\nmax_file_bytes = {64 * MIB}\n"
ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
CAROLS = SpaceRef(layer="user", space="me", org="bank_17", user="u_carol")


# The first daemon's store gives up on a lock after 0.1 s, not 5 (a test-only seam).
FAST_LOCK = [
    "-c",
    "import memfs.stores.sqlite as s; s.BUSY_TIMEOUT_MS = 100\nfrom memfs.cli import main\nmain()",
]


def with_limits(limits: str) -> str:
    head, _, rest = CONFIG.partition("[[memory]]")
    return f"{head}[limits]\n{limits}\n[[memory]]{rest}"


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A test folder whose ``state`` is a 32 MiB tmpfs, unmounted however the test ends."""
    require_fuse()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(state)], check=True
    )
    try:
        yield tmp_path
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(tmp_path / "mnt")], capture_output=True)
        subprocess.run(["umount", "-l", str(state)], check=False)


def free_bytes(state: Path) -> int:
    st = os.statvfs(state)
    return st.f_bavail * st.f_frsize


def fill(filler: Path) -> None:
    """Write zeros into ``filler`` until the disk has no byte left."""
    with open(filler, "ab", buffering=0) as out:
        chunk = b"\0" * MIB
        while chunk:
            try:
                out.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                chunk = chunk[: len(chunk) // 2]


def stored(root: Path) -> tuple[dict[str, bytes], int, dict[str, bytes]]:
    async def look() -> tuple[dict[str, bytes], int, dict[str, bytes]]:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            revisions = len(await store.history(ME, "prefs.md"))
            return await store.files(ME), revisions, await store.files(CAROLS)
        finally:
            await store.aclose()

    return trio.run(look)


def test_a_kept_space_survives_a_full_disk_and_a_kill_9_and_is_stored_once_room_is_back(
    root: Path,
) -> None:
    state = root / "state"
    config = with_limits(LIMITS)
    daemon = DaemonProcess(root, config=config, python=FAST_LOCK)
    dana = Path(memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)["root"])
    subprocess.run(["sh", "-c", "echo 'short answers' > me/prefs.md"], cwd=dana, check=True)
    carol = Path(memfs("turn", "start", "s2", "--extra-body", json.dumps(CAROL), root=root)["root"])
    subprocess.run(["sh", "-c", "echo 'Carol prefers email' > me/notes.md"], cwd=carol, check=True)
    locker = sqlite3.connect(state / "memfs.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # the store is locked: Dana's end keeps her space
    try:
        first = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
        assert first["kept"] is True and first["reason"] == "store failed"

        filler = state / "filler"
        fill(filler)
        assert free_bytes(state) == 0
        daemon.stop(signal.SIGKILL)
        again = DaemonProcess(root, config=config)  # on a disk with no byte free
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    try:
        sessions = {s["session"]: s for s in memfs("status", root=root)["sessions"]}
        assert sessions["s1"]["kept"] == ["me"]
        assert (dana / "me" / "prefs.md").read_text() == "short answers\n"
        assert (carol / "me" / "notes.md").read_text() == "Carol prefers email\n"

        # The store is back, the disk still full: the end fails again, and keeps it again.
        full = memfs("turn", "end", "s1", root=root, check=False)
        if full.returncode == 0:
            assert json.loads(full.stdout)["spaces"]["me"]["kept"] is True
        assert memfs("status", root=root)["sessions"][0]["kept"] == ["me"]
        assert (dana / "me" / "prefs.md").read_text() == "short answers\n"

        # Room comes back, but less than the reserve: agents get ENOSPC, ends still store.
        os.truncate(filler, os.path.getsize(filler) - RESERVE // 2)
        assert 0 < free_bytes(state) < RESERVE
        refused = subprocess.run(
            ["sh", "-c", "head -c 1M /dev/zero > me/big.bin"],
            cwd=carol,
            capture_output=True,
            check=False,
        )
        assert b"No space left on device" in refused.stderr
        theirs = memfs("turn", "end", "s2", root=root)["spaces"]["me"]
        assert theirs["status"] == "saved" and "notes.md" in theirs["created"]
        ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
        assert ended["status"] == "saved" and ended["created"] == ["prefs.md"]
        assert [s["turn"] for s in memfs("status", root=root)["sessions"]] == [None, None]
    finally:
        assert again.stop() == 0
    dana_files, revisions, carol_files = stored(root)
    assert dana_files == {"prefs.md": b"short answers\n"} and revisions == 1
    assert carol_files["notes.md"] == b"Carol prefers email\n"


def test_a_turn_ended_on_a_full_disk_loses_nothing_across_a_kill_9_and_stores_once_room_is_back(
    root: Path,
) -> None:
    state = root / "state"
    config = with_limits(LIMITS)
    daemon = DaemonProcess(root, config=config)
    dana = Path(memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)["root"])
    subprocess.run(["sh", "-c", "echo 'short answers' > me/prefs.md"], cwd=dana, check=True)
    filler = state / "filler"
    fill(filler)  # no byte left, the reserve included: the store cannot write
    first = memfs("turn", "end", "s1", root=root, check=False)
    if first.returncode == 0:
        space = json.loads(first.stdout)["spaces"]["me"]
        assert space["status"] == "saved" or space["kept"] is True, space
    else:  # DiskFull, said plainly, and no half-written record left behind
        assert first.returncode == 6, first.stderr
        assert "end it again once there is room" in first.stderr
        assert list(state.rglob("*.tmp")) == []
    daemon.stop(signal.SIGKILL)
    again = DaemonProcess(root, config=config)
    try:
        status = memfs("status", root=root)["sessions"]
        if status and status[0]["turn"] is not None:
            assert (dana / "me" / "prefs.md").read_text() == "short answers\n"
            os.truncate(filler, os.path.getsize(filler) - RESERVE // 2)
            ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
            assert ended["status"] == "saved" and ended["created"] == ["prefs.md"], ended
    finally:
        assert again.stop() == 0
    dana_files, revisions, _ = stored(root)
    assert dana_files == {"prefs.md": b"short answers\n"} and revisions == 1


def test_a_turn_started_on_a_full_disk_is_refused_with_disk_full_and_leaves_nothing_behind(
    root: Path,
) -> None:
    state = root / "state"
    daemon = DaemonProcess(root, config=with_limits(LIMITS))
    try:
        dana = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)["root"]
        subprocess.run(["sh", "-c", "echo 'short answers' > me/prefs.md"], cwd=dana, check=True)
        assert memfs("turn", "end", "s1", root=root)["spaces"]["me"]["status"] == "saved"
        filler = state / "filler"
        fill(filler)

        refused = memfs(
            "turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root, check=False
        )

        assert refused.returncode == 6, refused.stderr
        assert "the disk under state_dir is full, so the turn could not start" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert [s["turn"] for s in memfs("status", root=root)["sessions"]] == [None]
        session = state / "sessions" / "s1"
        assert sorted(p.name for p in session.iterdir()) == [], list(session.iterdir())
        os.truncate(filler, 0)
        again = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
        assert (Path(again["root"]) / "me" / "prefs.md").read_text() == "short answers\n"
        assert memfs("turn", "end", "s1", root=root)["spaces"]["me"]["status"] == "saved"
    finally:
        assert daemon.stop() == 0
