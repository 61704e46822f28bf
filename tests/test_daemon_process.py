"""The daemon as a process: started by the CLI, killed, restarted, stopped — nothing lost."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.stores.sqlite import SqliteStore
from tests.daemon_harness import require_fuse

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}

# The parts of a daemon's config the process tests put together ({root}: theirs).
PLACES = """
mount_root = "{root}/mnt"
state_dir = "{root}/state"
"""
# Dana's own memory, the last table of each config (a test may add a key to it).
ME_TABLE = """
[[memory]]
layer = "user"
space = "me"
user = "userId"
label = "name"
org = "bankId"
"""
CONFIG = (
    PLACES
    + """
[[memory]]
layer = "org"
space = "lending-rules"
org = "bankId"
description = "The bank's lending rules."
can_write = {{ role = ["underwriter"] }}
"""
    + ME_TABLE
)


def memfs(*args: str, root: Path, check: bool = True) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", *args, "--socket", str(root / "state" / "memfs.sock")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)
    return done


class DaemonProcess:
    def __init__(
        self,
        root: Path,
        env: dict[str, str] | None = None,
        *,
        config: str = CONFIG,
        python: list[str] | None = None,
    ) -> None:
        """``python``: what runs the CLI (default ``-m memfs.cli``; a test may pass ``-c CODE``)."""
        self.root = root
        self.config = root / "memfs.toml"
        self.config.write_text(config.format(root=root))
        self.log = open(root / "daemon.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *(python or ["-m", "memfs.cli"]),
                "daemon",
                "--config",
                str(self.config),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            # No Memory tab unless a test asks for one: daemons of tests run
            # side by side must not fight over the default 127.0.0.1:8330.
            env={**os.environ, "MEMFS_WEB_LISTEN": "", **(env or {})},
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                raise AssertionError(f"daemon exited: {(root / 'daemon.log').read_text()}")
            done = memfs("status", root=root, check=False)
            if done.returncode == 0:
                return
            time.sleep(0.1)
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        raise AssertionError("daemon did not start")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        self.log.close()
        return code


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    require_fuse()
    yield tmp_path
    subprocess.run(["fusermount3", "-u", "-z", str(tmp_path / "mnt")], capture_output=True)


def test_kill_9_then_restart_commits_everything_closed_before_the_kill_once(root: Path) -> None:
    daemon = DaemonProcess(root)
    started = memfs(
        "turn", "start", "s1", "--extra-body", json.dumps(DANA), "--prompt", "p", root=root
    )
    mnt = Path(started["root"])
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    (mnt / "lending-rules" / "rules").mkdir()
    (mnt / "lending-rules" / "rules" / "income.md").write_bytes(b"two years\n")
    os.rename(mnt / "lending-rules" / "rules" / "income.md", mnt / "lending-rules" / "income.md")
    daemon.stop(signal.SIGKILL)

    again = DaemonProcess(root)  # finds the dead mount, unmounts it, brings the turn back
    assert (mnt / "me" / "prefs.md").read_text() == "short answers\n"
    ended = memfs("turn", "end", "s1", root=root)
    assert ended["turn"] == started["turn"]
    assert ended["spaces"]["me"]["created"] == ["prefs.md"]
    assert ended["spaces"]["lending-rules"]["created"] == ["income.md"]
    assert ended["spaces"]["lending-rules"]["status"] == "waiting"  # org rules wait for a person
    moved = ended["files"]["lending-rules/income.md"]
    assert moved["renamed_from"] == "lending-rules/rules/income.md"  # NAME/ like the keys
    twice = memfs("turn", "end", "s1", root=root, check=False)
    assert twice.returncode == 3  # NotFound: the turn is over, nothing is committed twice
    assert again.stop() == 0

    import trio

    from memfs.core.models import SpaceRef

    async def history() -> int:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            ref = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
            return len(await store.history(ref, "prefs.md"))
        finally:
            await store.aclose()

    assert trio.run(history) == 1


def test_kill_9_keeps_a_chmod_and_empty_folders_of_the_open_turn_and_of_the_snapshot(
    root: Path,
) -> None:
    daemon = DaemonProcess(root)
    first = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(first["root"])
    (mnt / "me" / "kept").mkdir()
    (mnt / "me" / "old.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(mnt / "me" / "old.sh", 0o755)
    os.utime(mnt / "me" / "old.sh", ns=(1, 1_234_567_890_123_456_789))
    assert memfs("turn", "end", "s1", root=root)["spaces"]["me"]["folders_created"] == ["kept"]

    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    (mnt / "me" / "new" / "empty").mkdir(parents=True)
    (mnt / "me" / "run.sh").write_bytes(b"#!/bin/sh\necho ran\n")
    os.chmod(mnt / "me" / "run.sh", 0o700)
    os.chmod(mnt / "me" / "old.sh", 0o750)  # a chmod alone, of a snapshot file
    daemon.stop(signal.SIGKILL)

    again = DaemonProcess(root)  # the turn comes back from turn.json and its journal
    assert stat.S_IMODE(os.stat(mnt / "me" / "run.sh").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(mnt / "me" / "old.sh").st_mode) == 0o750
    assert os.stat(mnt / "me" / "old.sh").st_mtime_ns == 1_234_567_890_123_456_789
    assert (mnt / "me" / "kept").is_dir() and (mnt / "me" / "new" / "empty").is_dir()
    ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
    assert ended["created"] == ["run.sh"] and ended["updated"] == ["old.sh"]
    assert ended["folders_created"] == ["new", "new/empty"]
    third = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(third["root"])
    assert stat.S_IMODE(os.stat(mnt / "me" / "old.sh").st_mode) == 0o750
    assert (mnt / "me" / "new" / "empty").is_dir()
    memfs("turn", "end", "s1", root=root)
    assert again.stop() == 0


def test_sigterm_unmounts_cleanly_and_keeps_the_open_turn(root: Path) -> None:
    daemon = DaemonProcess(root)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    (Path(started["root"]) / "me" / "kept.md").write_text("kept\n")
    assert daemon.stop() == 0
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(root / "mnt") not in mounts
    assert not (root / "state" / "memfs.sock").exists()

    again = DaemonProcess(root)
    status = memfs("status", root=root)
    assert [s["session"] for s in status["sessions"]] == ["s1"]
    assert status["sessions"][0]["turn"] == started["turn"]
    ended = memfs("turn", "end", "s1", root=root)
    assert ended["spaces"]["me"]["created"] == ["kept.md"]
    again.stop()


def test_daemon_tells_systemd_it_is_ready(root: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    address = str(root / "notify.sock")
    listener.bind(address)
    listener.settimeout(10)
    try:
        daemon = DaemonProcess(root, env={"NOTIFY_SOCKET": address})
        messages = []
        while b"READY=1" not in messages:
            messages.append(listener.recv(4096))
        daemon.stop()
        messages.append(listener.recv(4096))
        assert b"STOPPING=1" in messages
    finally:
        listener.close()


def test_a_bad_config_fails_at_start_naming_the_key(root: Path) -> None:
    config = root / "bad.toml"
    config.write_text(
        'mount_root = "/tmp/x"\n[[memory]]\nlayer = "org"\nspace = "rules"\ncommit = "sometimes"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "daemon", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 78
    assert "memory[0].commit" in done.stderr


def test_a_second_daemon_refuses_to_start_and_the_first_keeps_serving(root: Path) -> None:
    daemon = DaemonProcess(root)
    second = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "daemon", "--config", str(daemon.config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 78
    assert "already running" in second.stderr
    assert memfs("status", root=root)["sessions"] == []
    assert daemon.stop() == 0


MANUAL_CONFIG = """
mount_root = "{root}/mnt"
state_dir = "{root}/state"

[[memory]]
layer = "user"
space = "me"
user = "userId"
label = "name"
commit = "manual"
"""


def test_a_manual_change_set_survives_a_restart_and_a_second_commit_is_already_committed(
    root: Path,
) -> None:
    daemon = DaemonProcess(root, config=MANUAL_CONFIG)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    (Path(started["root"]) / "me" / "prefs.md").write_bytes(b"short answers\n\xff binary\n")
    ended = memfs("turn", "end", "s1", root=root)
    assert ended["spaces"]["me"]["status"] == "manual"
    held = root / "state" / "sessions" / "s1" / "manual" / f"{started['turn']}.json"
    assert stat.S_IMODE(held.stat().st_mode) == 0o600
    daemon.stop(signal.SIGKILL)

    again = DaemonProcess(root, config=MANUAL_CONFIG)
    committed = memfs("turn", "commit", "s1", started["turn"], root=root)
    assert committed["spaces"]["me"]["status"] == "saved"
    assert committed["spaces"]["me"]["created"] == ["prefs.md"]
    twice = memfs("turn", "commit", "s1", started["turn"], root=root, check=False)
    assert twice.returncode == 5, twice.stderr  # AlreadyCommitted, not "not found"
    assert "already committed" in twice.stderr
    assert again.stop() == 0

    third = DaemonProcess(root, config=MANUAL_CONFIG)  # and after another restart
    thrice = memfs("turn", "commit", "s1", started["turn"], root=root, check=False)
    assert thrice.returncode == 5, thrice.stderr
    unknown = memfs("turn", "commit", "s1", "t-nosuchturn", root=root, check=False)
    assert unknown.returncode == 3  # a turn that held nothing is still "not found"
    assert third.stop() == 0

    import trio

    from memfs.core.models import SpaceRef

    async def files() -> dict[str, bytes]:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            ref = SpaceRef(layer="user", space="me", user="u_dana")
            return (await store.load(ref, "check")).files
        finally:
            await store.aclose()

    assert trio.run(files) == {"prefs.md": b"short answers\n\xff binary\n"}


def test_a_manual_change_set_left_uncommitted_survives_two_restarts(root: Path) -> None:
    # A start sweeps the folders of turns already over; the manual holds
    # sit beside them and must not go with them.
    daemon = DaemonProcess(root, config=MANUAL_CONFIG)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    (Path(started["root"]) / "me" / "prefs.md").write_bytes(b"long answers\n")
    memfs("turn", "end", "s1", root=root)
    daemon.stop()
    DaemonProcess(root, config=MANUAL_CONFIG).stop()

    again = DaemonProcess(root, config=MANUAL_CONFIG)
    committed = memfs("turn", "commit", "s1", started["turn"], root=root)
    assert committed["spaces"]["me"]["created"] == ["prefs.md"]
    again.stop()
    last = DaemonProcess(root, config=MANUAL_CONFIG)  # the commit's mark outlives a restart too
    twice = memfs("turn", "commit", "s1", started["turn"], root=root, check=False)
    assert twice.returncode == 5, twice.stderr
    assert last.stop() == 0
