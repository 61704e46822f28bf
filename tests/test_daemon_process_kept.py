"""The daemon as a process: kept spaces, exactly-once ends and changed configs survive restarts."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from memfs.core.models import SpaceRef, Trace
from memfs.stores.sqlite import SqliteStore
from tests.test_daemon_process import CONFIG, DANA, ME_TABLE, PLACES, DaemonProcess, memfs, root

__all__ = ["root"]  # the fixture, shared with test_daemon_process

ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")

# A test-only seam, outside memfs: the daemon stops dead (SIGKILL) right after
# the store committed the "me" space and before it wrote that down in done.json.
KILL_AFTER_STORE = """
import os, signal, sys
import memfsd.workspace as workspace

record = workspace.OverlayWorkspace.record

async def record_or_die(self, session, turn, done, kept, **how):
    if "me" in done and done["me"].status == "saved":
        os.kill(os.getpid(), signal.SIGKILL)
    await record(self, session, turn, done, kept, **how)

workspace.OverlayWorkspace.record = record_or_die
from memfs.cli import main
main()
"""


def history_and_traces(root: Path, ref: SpaceRef, path: str) -> tuple[int, list[Trace]]:
    async def look() -> tuple[int, list[Trace]]:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            return len(await store.history(ref, path)), await store.traces(session="s1")
        finally:
            await store.aclose()

    return trio.run(look)


def test_kill_9_between_the_store_and_its_record_ends_exactly_once(root: Path) -> None:
    daemon = DaemonProcess(root, python=["-c", KILL_AFTER_STORE])
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    (mnt / "lending-rules" / "income.md").write_text("two years\n")
    dead = memfs("turn", "end", "s1", root=root, check=False)
    assert dead.returncode != 0  # the daemon died answering
    assert daemon.proc.wait(timeout=30) == -signal.SIGKILL
    daemon.log.close()

    again = DaemonProcess(root)
    ended = memfs("turn", "end", "s1", root=root)

    assert ended["turn"] == started["turn"]
    assert ended["spaces"]["me"]["status"] == "saved"  # not "changed by someone else"
    assert ended["spaces"]["me"]["created"] == ["prefs.md"]
    assert ended["spaces"]["lending-rules"]["status"] == "waiting"
    assert again.stop() == 0
    revisions, traces = history_and_traces(root, ME, "prefs.md")
    assert revisions == 1
    assert len(traces) == 1
    assert traces[0].mounts["me"].status == "saved"


# One space only: the turn end's first record (done.json) is the one the kill skips.
ME_ONLY = PLACES + ME_TABLE


def killed_between_the_store_and_done_json(root: Path) -> Path:
    """A turn that wrote prefs.md, killed after its store and before done.json; its mount."""
    daemon = DaemonProcess(root, config=ME_ONLY, python=["-c", KILL_AFTER_STORE])
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    dead = memfs("turn", "end", "s1", root=root, check=False)
    assert dead.returncode != 0  # the daemon died answering, after the store committed
    assert daemon.proc.wait(timeout=30) == -signal.SIGKILL
    daemon.log.close()
    assert not (root / "state" / "sessions" / "s1" / "done.json").exists()
    return mnt


def test_a_turn_killed_between_its_store_and_done_json_comes_back_read_only(root: Path) -> None:
    # It came back open: a write let in then was to a space already stored, so
    # the next end conflicted with the turn's own revision at every try, and a
    # new folder or mode was answered with the first store's result, unstored.
    mnt = killed_between_the_store_and_done_json(root)
    again = DaemonProcess(root, config=ME_ONLY)
    try:
        attempts: list[Callable[[], object]] = [
            lambda: (mnt / "me" / "prefs.md").write_text("long answers\n"),
            lambda: (mnt / "me" / "late.md").write_text("written after the restart\n"),
            lambda: (mnt / "me" / "projects").mkdir(),
            lambda: os.chmod(mnt / "me" / "prefs.md", 0o600),
        ]
        for attempt in attempts:
            with pytest.raises(OSError) as refused:
                attempt()
            assert refused.value.errno == errno.EROFS
        assert (mnt / "me" / "prefs.md").read_text() == "short answers\n"  # it still reads
        ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
    finally:
        assert again.stop() == 0
    assert ended["status"] == "saved", ended
    assert ended["created"] == ["prefs.md"]
    revisions, _ = history_and_traces(root, ME, "prefs.md")
    assert revisions == 1


def test_a_turn_end_with_a_folder_and_a_mode_repeated_after_a_kill_is_saved_once(
    root: Path,
) -> None:
    # The fingerprint covers folders and modes (82d821f): a repeat is still one.
    daemon = DaemonProcess(root, config=ME_ONLY, python=["-c", KILL_AFTER_STORE])
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    (mnt / "me" / "projects").mkdir()
    (mnt / "me" / "projects" / "plan.md").write_text("ship it\n")
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    os.chmod(mnt / "me" / "prefs.md", 0o600)
    dead = memfs("turn", "end", "s1", root=root, check=False)
    assert dead.returncode != 0  # the daemon died answering, after the store committed
    assert daemon.proc.wait(timeout=30) == -signal.SIGKILL
    daemon.log.close()

    again = DaemonProcess(root, config=ME_ONLY)
    try:
        ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
    finally:
        assert again.stop() == 0
    assert ended["status"] == "saved", ended
    assert history_and_traces(root, ME, "prefs.md")[0] == 1


def test_kept_spaces_survive_a_restart_and_the_cli_retries_or_reads_them(root: Path) -> None:
    daemon = DaemonProcess(root)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    locker = sqlite3.connect(root / "state" / "memfs.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        first = memfs("turn", "end", "s1", root=root)
        assert first["spaces"]["me"]["kept"] is True
        assert first["spaces"]["me"]["reason"] == "store failed"
        assert daemon.stop() == 0  # SIGTERM: open (and kept) turns stay for the next start

        again = DaemonProcess(root)
        status = memfs("status", root=root)
        assert status["sessions"][0]["kept"] == ["me"]
        kept = memfs("turn", "kept", "s1", root=root)
        assert kept["spaces"]["me"]["files"]["prefs.md"]["change"] == "created"
        socket = str(root / "state" / "memfs.sock")
        argv = ["turn", "kept", "s1", "me", "prefs.md", "--socket", socket]
        content = subprocess.run(
            [sys.executable, "-m", "memfs.cli", *argv],
            capture_output=True,
            check=True,
        )
        assert content.stdout == b"short answers\n"
        assert (mnt / "me" / "prefs.md").read_text() == "short answers\n"
        blocked = memfs("turn", "start", "s1", "--extra-body", "{}", root=root, check=False)
        assert blocked.returncode == 5 and "kept spaces" in blocked.stderr
    finally:
        locker.execute("ROLLBACK")
        locker.close()

    ended = memfs("turn", "end", "s1", root=root)

    assert ended["spaces"]["me"]["status"] == "saved"
    assert ended["spaces"]["me"]["created"] == ["prefs.md"]
    assert again.stop() == 0
    assert history_and_traces(root, ME, "prefs.md")[0] == 1


def test_a_turn_whose_space_left_the_config_is_restored_listed_and_ended(root: Path) -> None:
    daemon = DaemonProcess(root)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    (mnt / "lending-rules" / "income.md").write_text("two years\n")
    assert daemon.stop() == 0
    without_me = CONFIG.split('[[memory]]\nlayer = "user"')[0]
    assert "user" not in without_me.split("[[memory]]")[-1]

    again = DaemonProcess(root, config=without_me)
    status = memfs("status", root=root)
    assert status["sessions"][0]["orphaned"] == ["me"]
    assert sorted(status["sessions"][0]["mounts"]) == ["lending-rules", "me"]
    ended = memfs("turn", "end", "s1", root=root)

    assert ended["spaces"]["me"]["status"] == "saved"  # through the store its record names
    assert ended["spaces"]["me"]["created"] == ["prefs.md"]
    assert again.stop() == 0
    assert history_and_traces(root, ME, "prefs.md")[0] == 1


def test_a_turn_whose_space_left_the_config_can_be_discarded(root: Path) -> None:
    daemon = DaemonProcess(root)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    (Path(started["root"]) / "me" / "prefs.md").write_text("short answers\n")
    assert daemon.stop() == 0
    again = DaemonProcess(root, config=CONFIG.split('[[memory]]\nlayer = "user"')[0])
    dropped = memfs("turn", "discard", "s1", root=root)
    assert dropped["spaces"]["me"]["reason"] == "discarded"
    assert dropped["spaces"]["me"]["not_saved"] == ["prefs.md"]
    assert memfs("status", root=root)["sessions"][0]["turn"] is None
    assert again.stop() == 0
    assert history_and_traces(root, ME, "prefs.md")[0] == 0
