"""`kill -9` of the daemon process at the worst moments: compaction, a kept retry, discard.

Each moment is hit exactly, not raced: the daemon runs under a test-only
seam (``SEAM`` below, outside memfs, patched into the daemon process before
it starts) that SIGKILLs the process at the named point,
``MEMFS_TEST_KILL_AT``, on its ``MEMFS_TEST_KILL_AFTER``-th hit (default
1st). The daemon is then started again without it, as an operator would.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from memfs.core.models import SpaceRef, Trace
from memfs.stores.sqlite import SqliteStore
from tests.daemon_harness import KILL_POINT
from tests.test_daemon_process import CONFIG, DANA, DaemonProcess, memfs, root

__all__ = ["root"]  # the fixture, shared with test_daemon_process

ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")

SEAM = (
    KILL_POINT
    + """
import sys
from pathlib import Path

import memfs.stores.sqlite as sqlite
sqlite.BUSY_TIMEOUT_MS = 100  # the tests' locked store fails fast

import memfsd.overlay as overlay
import memfsd.workspace as workspace
from memfs.stores.sqlite import SqliteStore

class Os:
    # The overlay's view of os: the journal's compaction dies where named.
    tmp = set()
    def __getattr__(self, name):
        return getattr(os, name)
    def open(self, path, flags, mode=0o777, **kw):
        fd = os.open(path, flags, mode, **kw)
        if str(path).endswith("journal.tmp"):
            self.tmp.add(fd)
        return fd
    def write(self, fd, data):
        if fd in self.tmp and AT == "compact-mid-write" and len(data) > 1:
            self.tmp.discard(fd)  # one cut per compaction
            half = os.write(fd, bytes(data)[: len(data) // 2])
            point("compact-mid-write")
            return half  # the caller writes the rest
        return os.write(fd, data)
    def replace(self, src, dst):
        if Path(dst).name == "journal":
            point("compact-before-replace")
            os.replace(src, dst)
            point("compact-after-replace")
            return
        os.replace(src, dst)
    def close(self, fd):
        self.tmp.discard(fd)
        os.close(fd)

overlay.os = Os()

store = SqliteStore.store
async def store_or_die(self, ref, changes, **kw):
    if ref.space == "me":
        point("store")
    return await store(self, ref, changes, **kw)
SqliteStore.store = store_or_die

record = workspace.OverlayWorkspace.record
async def record_or_die(self, session, turn, done, kept, **how):
    if "me" in done and done["me"].status == "saved":
        point("record-saved")
    await record(self, session, turn, done, kept, **how)
workspace.OverlayWorkspace.record = record_or_die

trace = SqliteStore.record_trace
async def trace_or_die(self, t):
    point("trace")
    await trace(self, t)
SqliteStore.record_trace = trace_or_die

close = workspace.OverlayWorkspace.close
async def close_or_die(self, session):
    point("close")
    await close(self, session)
workspace.OverlayWorkspace.close = close_or_die

import memfsd.spares as spares
empty = spares.Spares._empty
def empty_or_die(self, folder, marks):
    if AT == "emptying":
        # The turn's folder is moved aside, half emptied: its journal gone, its data not.
        os.unlink(Path(folder, "journal"))
        point("emptying")
    empty(self, folder, marks)
spares.Spares._empty = empty_or_die

from memfs.cli import main
main()
"""
)


def with_limits(limits: str) -> str:
    head, _, rest = CONFIG.partition("[[memory]]")
    return f"{head}[limits]\n{limits}\n\n[[memory]]{rest}"


def killed_at(root: Path, at: str, *, after: int = 1, config: str = CONFIG) -> DaemonProcess:
    env = {"MEMFS_TEST_KILL_AT": at, "MEMFS_TEST_KILL_AFTER": str(after)}
    return DaemonProcess(root, env, config=config, python=["-c", SEAM])


def died(daemon: DaemonProcess) -> None:
    assert daemon.proc.wait(timeout=60) == -signal.SIGKILL, (daemon.root / "daemon.log").read_text()
    daemon.log.close()


def stored(root: Path) -> tuple[dict[str, bytes], int, list[Trace], int]:
    """Dana's files in the store, me/prefs.md's revisions, the session's traces, changes waiting."""

    async def look() -> tuple[dict[str, bytes], int, list[Trace], int]:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            files = await store.files(ME)
            revisions = len(await store.history(ME, "prefs.md"))
            waiting = len(await store.list_changes(org=RULES.org))
            return files, revisions, await store.traces(session="s1"), waiting
        finally:
            await store.aclose()

    return trio.run(look)


# -- (a) in the middle of a journal compaction ------------------------------------------

CHURN = """
i=0
while [ $i -lt 2000 ]; do
  i=$((i + 1))
  echo "spin $i" > me/t && mv me/t me/spin.md && echo "file $i" > me/f$i.md || exit 0
  echo $i >> "$OK"
done
exit 1
"""


@pytest.mark.parametrize(
    "moment", ["compact-mid-write", "compact-before-replace", "compact-after-replace"]
)
def test_kill_9_in_the_middle_of_a_compaction_loses_no_acknowledged_write(
    root: Path, moment: str
) -> None:
    config = with_limits("journal_bytes = 4096")
    # The second compaction dies: the journal it replaces is itself a compacted one.
    daemon = killed_at(root, moment, after=2, config=config)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    ok = root / "ok"
    churn = subprocess.run(
        ["sh", "-c", CHURN], cwd=mnt, env={**os.environ, "OK": str(ok)}, check=False, timeout=120
    )
    assert churn.returncode == 0  # it stopped because the daemon died, not after 2,000 steps
    died(daemon)
    done = [int(line) for line in ok.read_text().split()]
    last = done[-1]
    assert done == list(range(1, last + 1)) and last > 7

    again = DaemonProcess(root, config=config)
    try:
        for i in (1, last // 2, last):
            assert (mnt / "me" / f"f{i}.md").read_text() == f"file {i}\n"
        ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
        assert ended["status"] == "saved", ended
    finally:
        assert again.stop() == 0
    files = stored(root)[0]
    for i in range(1, last + 1):
        assert files[f"f{i}.md"] == f"file {i}\n".encode()
    # The step cut short by the kill may have got as far as its mv.
    assert files["spin.md"] in (f"spin {last}\n".encode(), f"spin {last + 1}\n".encode())
    assert "t" not in files or files["t"] == f"spin {last + 1}\n".encode()


# -- (b) in the middle of the retry of a kept space --------------------------------------


def ended_with_the_store_locked(root: Path) -> tuple[Any, Any]:
    """Dana's turn in s1 writes prefs.md and income.md and ends with the store locked.

    Its start and its end, as the CLI printed them.
    """
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    (mnt / "lending-rules" / "income.md").write_text("two years\n")
    locker = sqlite3.connect(root / "state" / "memfs.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        return started, memfs("turn", "end", "s1", root=root)
    finally:
        locker.execute("ROLLBACK")
        locker.close()


def keep_both_spaces(root: Path) -> Path:
    """A turn whose store was locked at its end: both of its spaces are kept."""
    started, first = ended_with_the_store_locked(root)
    mnt = Path(started["root"])
    assert first["spaces"]["me"]["kept"] is True
    assert first["spaces"]["lending-rules"]["kept"] is True
    return mnt


def frozen(path: Path) -> bool:
    try:
        path.write_text("written after the restart\n")
    except OSError as exc:
        return exc.errno == errno.EROFS
    return False


@pytest.mark.parametrize(
    ("moment", "after"),
    [
        ("store", 2),  # the retry's store of me, before it commits (the 1st was locked)
        ("record-saved", 1),  # me committed, not yet written down in done.json
        ("trace", 1),  # every space stored and written down, no trace yet
        ("close", 1),  # traced, the working copy not yet removed
    ],
)
def test_kill_9_in_the_middle_of_a_retry_stores_the_kept_space_exactly_once(
    root: Path, moment: str, after: int
) -> None:
    daemon = killed_at(root, moment, after=after)
    mnt = keep_both_spaces(root)
    dead = memfs("turn", "end", "s1", root=root, check=False)
    assert dead.returncode != 0  # the daemon died answering the retry
    died(daemon)

    again = DaemonProcess(root)
    try:
        assert (mnt / "me" / "prefs.md").read_text() == "short answers\n"
        # What was being ended is what ends: no write gets in after the restart.
        assert frozen(mnt / "me" / "prefs.md")
        assert frozen(mnt / "lending-rules" / "late.md")
        ended = memfs("turn", "end", "s1", root=root)
        assert ended["spaces"]["me"]["status"] == "saved", ended
        assert ended["spaces"]["me"]["created"] == ["prefs.md"]
        assert ended["spaces"]["lending-rules"]["status"] == "waiting", ended
        assert memfs("status", root=root)["sessions"][0]["turn"] is None
    finally:
        assert again.stop() == 0
    files, revisions, traces, waiting = stored(root)
    assert files == {"prefs.md": b"short answers\n"}
    assert revisions == 1 and waiting == 1
    assert len(traces) == 1
    assert traces[0].mounts["me"].status == "saved"


# -- (c) in the middle of a discard ------------------------------------------------------


# trace: written down as discarded, not traced; close: traced, nothing removed;
# emptying: the working copy moved aside to be used again, half emptied.
@pytest.mark.parametrize("moment", ["trace", "close", "emptying"])
def test_kill_9_in_the_middle_of_a_discard_leaves_the_space_kept_or_discarded_never_half(
    root: Path, moment: str
) -> None:
    daemon = killed_at(root, moment)
    mnt = keep_both_spaces(root)
    dead = memfs("turn", "discard", "s1", root=root, check=False)
    assert dead.returncode != 0
    died(daemon)

    again = DaemonProcess(root)
    try:
        session = memfs("status", root=root)["sessions"]
        if session and session[0]["turn"] is not None:
            # Still kept, whole: every file readable, and it can be stored.
            assert session[0]["kept"] == ["lending-rules", "me"]
            assert (mnt / "me" / "prefs.md").read_text() == "short answers\n"
            kept = memfs("turn", "kept", "s1", root=root)["spaces"]["me"]["files"]
            assert kept["prefs.md"]["change"] == "created"
            ended = memfs("turn", "end", "s1", root=root)
            assert ended["spaces"]["me"]["status"] == "saved"
            outcome = "kept"
        else:
            assert not (root / "state" / "sessions" / "s1").exists() or not any(
                (root / "state" / "sessions" / "s1").rglob("journal")
            )
            ended = memfs("turn", "end", "s1", root=root, check=False)
            assert ended.returncode == 3  # nothing open to end
            outcome = "discarded"
    finally:
        assert again.stop() == 0
    files, revisions, traces, waiting = stored(root)
    assert len(traces) == 1
    if outcome == "kept":
        assert files == {"prefs.md": b"short answers\n"} and revisions == 1 and waiting == 1
        assert traces[0].mounts["me"].status == "saved"
    else:
        assert files == {} and revisions == 0 and waiting == 0
        assert traces[0].mounts["me"].status == "not_saved"
    # No data of the discarded turn is left behind in state_dir, spares included.
    if outcome == "discarded":
        assert list((root / "state" / "sessions").rglob("data/*")) == []
    assert not (root / "state" / "spare").exists() or not any(
        f.stat().st_size for f in (root / "state" / "spare").rglob("*") if f.is_file()
    )
