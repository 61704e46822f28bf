"""Manual change sets across ends, kills, restarts and forgets, with real daemon processes.

Each test pins one behaviour the fixes promise and the daemon broke when it
was written: a turn's manual change set, once committed, is never held for
a commit again, whatever end, kill or restart comes after; and a forget that
comes in while a held change set commits stays applied to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import trio

from memfs.core.models import SpaceRef
from memfs.stores.sqlite import SqliteStore
from tests.test_daemon_process import CONFIG, DANA, DaemonProcess, memfs, root
from tests.test_daemon_process_crash import died, ended_with_the_store_locked, killed_at

__all__ = ["root"]  # the fixture, shared with test_daemon_process

ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")

# "me" waits for memfs turn commit; the bank's rules are stored at turn end.
MANUAL_AND_AFTER_TURN = CONFIG + 'commit = "manual"\n'


def revisions(root: Path, path: str) -> int:
    async def look() -> int:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            return len(await store.history(ME, path))
        finally:
            await store.aclose()

    return trio.run(look)


def test_a_manual_change_set_committed_before_a_retried_end_is_not_held_again(
    root: Path,
) -> None:
    # The end kept the rules (store locked) and held me/ for a commit; the
    # commit stored it; the retried end then held me/ again (keep_manual wrote
    # manual/<turn>.json beside its .committed mark), so after a restart the
    # same change set was committed a second time instead of AlreadyCommitted.
    daemon = DaemonProcess(root, config=MANUAL_AND_AFTER_TURN)
    started, first = ended_with_the_store_locked(root)
    turn = started["turn"]
    assert first["spaces"]["lending-rules"]["kept"] is True
    assert first["spaces"]["me"]["status"] == "manual"
    try:
        committed = memfs("turn", "commit", "s1", turn, root=root)
        assert committed["spaces"]["me"]["status"] == "saved"
        again = memfs("turn", "end", "s1", root=root)
        assert again["spaces"]["lending-rules"]["status"] == "waiting"
        held = root / "state" / "sessions" / "s1" / "manual" / f"{turn}.json"
        rewritten = held.exists()
    finally:
        assert daemon.stop() == 0

    restarted = DaemonProcess(root, config=MANUAL_AND_AFTER_TURN)
    try:
        twice = memfs("turn", "commit", "s1", turn, root=root, check=False)
    finally:
        assert restarted.stop() == 0
    assert revisions(root, "prefs.md") == 1
    assert twice.returncode == 5, twice.stdout  # AlreadyCommitted
    assert not rewritten, "the committed change set was held for a commit again"


def test_a_turn_killed_between_its_manual_hold_and_its_close_commits_once(root: Path) -> None:
    # Killed after keep_manual wrote the hold and before the turn's record
    # went: the turn comes back (frozen) and its hold too. Committing the hold
    # and then ending the turn must not make a second hold of the same changes.
    daemon = killed_at(root, "close", config=MANUAL_AND_AFTER_TURN)
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    turn = started["turn"]
    mnt = Path(started["root"])
    (mnt / "me" / "prefs.md").write_text("short answers\n")
    dead = memfs("turn", "end", "s1", root=root, check=False)
    assert dead.returncode != 0
    died(daemon)
    held = root / "state" / "sessions" / "s1" / "manual" / f"{turn}.json"
    assert held.exists()

    again = DaemonProcess(root, config=MANUAL_AND_AFTER_TURN)
    try:
        assert memfs("turn", "commit", "s1", turn, root=root)["spaces"]["me"]["status"] == "saved"
        ended = memfs("turn", "end", "s1", root=root)
        assert ended["turn"] == turn
        rewritten = held.exists()
    finally:
        assert again.stop() == 0

    last = DaemonProcess(root, config=MANUAL_AND_AFTER_TURN)
    try:
        twice = memfs("turn", "commit", "s1", turn, root=root, check=False)
        after = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
        assert (Path(after["root"]) / "me" / "prefs.md").read_text() == "short answers\n"
        memfs("turn", "discard", "s1", root=root)
    finally:
        assert last.stop() == 0
    assert revisions(root, "prefs.md") == 1
    assert twice.returncode == 5, twice.stdout  # AlreadyCommitted
    assert not rewritten, "the committed change set was held for a commit again"


BOTH_MANUAL = MANUAL_AND_AFTER_TURN.replace(
    'can_write = {{ role = ["underwriter"] }}\n',
    'can_write = {{ role = ["underwriter"] }}\ncommit = "manual"\n',
)

# A test-only seam, outside memfs: the first store of the bank's rules (the
# commit of the held change set) waits, so a forget comes in while it runs,
# and then fails as a store that went down does.
SLOW_FAILING_COMMIT = """
import trio
from memfs.stores.sqlite import SqliteStore

store = SqliteStore.store
calls = {"n": 0}
async def slow_then_down(self, ref, changes, **kw):
    if ref.space == "lending-rules":
        calls["n"] += 1
        if calls["n"] == 1:
            await trio.sleep(4)
            raise RuntimeError("the store went down")
    return await store(self, ref, changes, **kw)
SqliteStore.store = slow_then_down

from memfs.cli import main
main()
"""

SECRET_PROMPT = "dana asks about her divorce settlement"


def forget_user(root: Path, user: str) -> subprocess.CompletedProcess[str]:
    db = root / "state" / "memfs.db"
    admin = ["--org", "bank_17", "--as", "root-admin", "--role", "admin"]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memfs.cli",
            "forget-user",
            user,
            "--store",
            f"sqlite://{db}",
            *admin,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MEMFS_SOCKET": str(root / "state" / "memfs.sock")},
        check=False,
    )


def test_a_person_forgotten_while_her_held_change_set_commits_is_not_written_back(
    root: Path,
) -> None:
    # The forget's notice rewrote the hold without her (prompt, space) while
    # the commit stored the hold it had read before; the commit failed, and
    # held that older copy again, on disk: her prompt back in state_dir.
    # No look for forgets of its own (0: never; the CLI's notice is what tells it).
    never = {"MEMFS_FORGET_POLL_SECONDS": "0"}
    daemon = DaemonProcess(root, never, config=BOTH_MANUAL, python=["-c", SLOW_FAILING_COMMIT])
    try:
        started = memfs(
            "turn", "start", "s1", "--extra-body", json.dumps(DANA),
            "--prompt", SECRET_PROMPT, root=root,
        )  # fmt: skip
        turn = started["turn"]
        mnt = Path(started["root"])
        (mnt / "me" / "prefs.md").write_text("short answers\n")
        (mnt / "lending-rules" / "income.md").write_text("two years\n")
        ended = memfs("turn", "end", "s1", root=root)
        assert ended["spaces"]["lending-rules"]["status"] == "manual"
        socket = str(root / "state" / "memfs.sock")
        commit = subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", "turn", "commit", "s1", turn, "--socket", socket],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)  # the commit is in the store now
        forgot = forget_user(root, "u_dana")
        assert forgot.returncode == 0, forgot.stderr
        out, err = commit.communicate(timeout=60)
        assert commit.returncode == 0, err
        result = json.loads(out)
        assert result["spaces"]["lending-rules"]["kept"] is True  # the store went down
        time.sleep(3)
        status = memfs("status", root=root)
    finally:
        assert daemon.stop() == 0
    assert status is not None
    found = [
        str(path.relative_to(root))
        for path in (root / "state").rglob("*")
        if path.is_file() and SECRET_PROMPT.encode() in path.read_bytes()
    ]
    assert found == [], f"the forgotten person's prompt is still in {found}"
