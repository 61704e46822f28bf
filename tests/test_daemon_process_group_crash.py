"""`kill -9` of the daemon in the middle of a group commit: many turn ends at once, then a restart.

Six sessions, each a different person, write through real shell commands
on a real mount and end their turns at once, so their stores and traces go
to the store in shared batches (``memfs.engine.commits``,
``SqlStore.store_batch``; the seam holds the first store until others
queue, and slows each batch's commit, so batches form in every run).
The daemon SIGKILLs itself at a named point of that (a test-only seam, as in
``test_daemon_process_crash``); it is started again on the same state_dir
and store, and every turn still open is ended again, at once too. Then:
every write is in the store exactly once, each turn was reported saved
(never a conflict) and traced exactly once, and no other session's files
got into a person's space or a turn's waiting change.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from memfs.core.models import SpaceRef
from memfs.stores.postgres import PostgresStore
from memfs.stores.sql.store import SqlStore
from memfs.stores.sqlite import SqliteStore
from tests.daemon_harness import KILL_POINT
from tests.postgres_fixtures import Databases
from tests.test_daemon_process import DaemonProcess, memfs, root

__all__ = ["root"]  # the fixture, shared with test_daemon_process

SESSIONS = [f"s{i}" for i in range(6)]
ORG = "bank_17"

SEAM = (
    KILL_POINT
    + """
import time

from memfs.core.models import Trace
from memfs.stores.base import StoreRequest
import memfs.stores.sql.store as sql_store
import memfsd.workspace as workspace

# Stores in the batch; traces in it, if it is a batch (of two items or more).
def kinds(items):
    stores = sum(isinstance(item, StoreRequest) for item in items)
    return stores, (len(items) - stores if len(items) >= 2 else 0)

import trio
import memfs.engine.commits as commits
one = commits.GroupCommit._one
first = {"waiting": True}
async def one_once_others_wait(self, item):
    # The first turn end's lone store waits for others to queue behind it: a batch forms next.
    if first["waiting"]:
        first["waiting"] = False
        with trio.move_on_after(10):
            while len(self._queue) < 3:
                await trio.sleep(0.01)
    return await one(self, item)
commits.GroupCommit._one = one_once_others_wait

inner = sql_store._store_batch
def store_batch_or_die(db, items):
    # A slow commit: the turn ends behind it queue, traces among them.
    time.sleep(0.2)
    answers = inner(db, items)
    stores, traces = kinds(items)
    # Every item written, the transaction not yet committed.
    if stores >= 2:
        point("in-batch")
    if traces:
        point("in-trace-batch")
    return answers
sql_store._store_batch = store_batch_or_die

outer = sql_store.SqlStore.store_batch
async def committed_or_die(self, items):
    answers = await outer(self, items)
    stores, traces = kinds(items)
    # Committed; no caller has its answer, no done.json names it.
    if stores >= 2:
        point("after-batch")
    if traces:
        point("after-trace-batch")
    return answers
sql_store.SqlStore.store_batch = committed_or_die

record = workspace.OverlayWorkspace.record
async def record_or_die(self, session, turn, done, kept, **how):
    await record(self, session, turn, done, kept, **how)
    if done and all(r.status in ("saved", "waiting") for r in done.values()) and len(done) == 2:
        point("recorded")  # done.json names every space; no trace yet
workspace.OverlayWorkspace.record = record_or_die

from memfs.cli import main
main()
"""
)


def body(session: str) -> dict[str, str]:
    return {"userId": f"u_{session}", "name": session, "bankId": ORG, "role": "underwriter"}


def me(session: str) -> SpaceRef:
    return SpaceRef(layer="user", space="me", org=ORG, user=f"u_{session}")


WRITE = """
set -e
printf 'prefs of %s\\n' "$S" > me/prefs.md
mkdir -p me/notes
for i in 1 2 3; do printf '%s note %s\\n' "$S" $i > me/notes/n$i.md; done
printf 'draft\\n' > me/tmp && mv me/tmp me/moved.md
printf 'rule by %s\\n' "$S" > lending-rules/$S.md
"""


def end_all(root: Path) -> dict[str, subprocess.Popen[str]]:
    """``memfs turn end`` of every session at once: their stores meet in batches."""
    return {
        session: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memfs.cli",
                "turn",
                "end",
                session,
                "--socket",
                str(root / "state" / "memfs.sock"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for session in SESSIONS
    }


def answers(ends: dict[str, subprocess.Popen[str]]) -> dict[str, Any]:
    """The ends that were answered (the daemon may have died before the others)."""
    out: dict[str, Any] = {}
    for session, proc in ends.items():
        stdout, _ = proc.communicate(timeout=60)
        if proc.returncode == 0:
            out[session] = json.loads(stdout)
    return out


def check_saved(session: str, result: Any) -> None:
    spaces = result["spaces"]
    assert spaces["me"]["status"] == "saved", (session, spaces["me"])
    assert sorted(spaces["me"]["created"]) == [
        "moved.md",
        "notes/n1.md",
        "notes/n2.md",
        "notes/n3.md",
        "prefs.md",
    ], (session, spaces["me"])
    assert spaces["lending-rules"]["status"] == "waiting", (session, spaces["lending-rules"])
    assert spaces["lending-rules"]["created"] == [f"{session}.md"]


def in_the_store(store: SqlStore) -> tuple[dict[str, dict[str, bytes]], dict[str, int], Any, Any]:
    async def look() -> tuple[dict[str, dict[str, bytes]], dict[str, int], Any, Any]:
        try:
            files = {s: await store.files(me(s)) for s in SESSIONS}
            revisions = {
                s: sum([len(await store.history(me(s), path)) for path in files[s]])
                for s in SESSIONS
            }
            return files, revisions, await store.traces(), await store.list_changes(org=ORG)
        finally:
            await store.aclose()

    return trio.run(look)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_env(request: pytest.FixtureRequest, root: Path) -> dict[str, str]:
    """The daemons' store: SQLite in state_dir, or a schema of the throwaway PostgreSQL server."""
    if request.param == "sqlite":
        return {}
    databases: Databases = request.getfixturevalue("postgres_databases")
    return {"MEMFS_STORE": databases.url(), "MEMFS_STORE_KEY_FILE": str(databases.key_file)}


def opened(root: Path, env: dict[str, str]) -> SqlStore:
    if "MEMFS_STORE" in env:
        return PostgresStore(env["MEMFS_STORE"], key_file=Path(env["MEMFS_STORE_KEY_FILE"]))
    return SqliteStore(root / "state" / "memfs.db")


# SQLite at every moment; PostgreSQL where its transactions differ (the batch's own).
MOMENTS = [
    ("sqlite", "in-batch"),  # a batch of stores written, not committed
    ("sqlite", "after-batch"),  # a batch of stores committed, nobody answered, no done.json
    ("sqlite", "recorded"),  # a turn's done.json names every space, no trace yet
    ("sqlite", "in-trace-batch"),  # a batch holding traces written, not committed
    ("sqlite", "after-trace-batch"),  # a batch holding traces committed, working copies there
    ("postgresql", "in-batch"),
    ("postgresql", "after-batch"),
]


@pytest.mark.parametrize(("store_env", "moment"), MOMENTS, indirect=["store_env"])
def test_kill_9_in_the_middle_of_a_group_commit_stores_every_turn_once_and_reports_it_saved(
    root: Path, store_env: dict[str, str], moment: str
) -> None:
    daemon = DaemonProcess(root, {**store_env, "MEMFS_TEST_KILL_AT": moment}, python=["-c", SEAM])
    for session in SESSIONS:
        started = memfs(
            "turn", "start", session, "--extra-body", json.dumps(body(session)), root=root
        )
        subprocess.run(
            ["sh", "-c", WRITE],
            cwd=started["root"],
            env={"S": session, "PATH": "/usr/bin:/bin"},
            check=True,
            timeout=30,
        )
    first = answers(end_all(root))
    assert daemon.proc.wait(timeout=60) == -signal.SIGKILL, (root / "daemon.log").read_text()
    daemon.log.close()
    assert len(first) < len(SESSIONS)  # the kill came before every end was answered
    for session, result in first.items():
        check_saved(session, result)  # an answer given before the kill is the truth

    again = DaemonProcess(root, store_env)
    try:
        open_ = [s["session"] for s in memfs("status", root=root)["sessions"] if s["turn"]]
        # An answered turn is over; an unanswered one is back, or was over before the kill
        # (its answer lost with the daemon): the store below shows it whole either way.
        assert not set(open_) & first.keys()
        assert open_, "the kill came after every turn was over"
        for session in open_:
            assert (root / "mnt" / session / "me" / "notes" / "n3.md").read_text() == (
                f"{session} note 3\n"
            )
        ends = end_all(root)
        second = answers({s: p for s, p in ends.items() if s in open_})
        for session in SESSIONS:
            if session not in open_:
                ends[session].communicate(timeout=60)
        assert second.keys() == set(open_)
        for session, result in second.items():
            check_saved(session, result)  # stored before the kill or now: saved either way
        assert not [s for s in memfs("status", root=root)["sessions"] if s["turn"]]
    finally:
        assert again.stop() == 0

    files, revisions, traces, waiting = in_the_store(opened(root, store_env))
    for session in SESSIONS:
        assert files[session] == {
            "prefs.md": f"prefs of {session}\n".encode(),
            "notes/n1.md": f"{session} note 1\n".encode(),
            "notes/n2.md": f"{session} note 2\n".encode(),
            "notes/n3.md": f"{session} note 3\n".encode(),
            "moved.md": b"draft\n",
        }, session
        assert revisions[session] == 5, session  # each file stored once
    traced = sorted(trace.session for trace in traces)
    assert traced == sorted(SESSIONS)  # one trace per turn
    for trace in traces:
        assert trace.mounts["me"].status == "saved", trace
        assert trace.mounts["me"].ref == me(trace.session)
        # What the turn did, as the mount saw it, survived the restart: the trace tells it.
        assert trace.files["me/notes/n3.md"].created, trace.files
        assert trace.files["me/moved.md"].renamed_from == "me/tmp", trace.files
        mine = {f"lending-rules/{trace.session}.md"}
        assert {k for k in trace.files if k.startswith("lending-rules/")} == mine
    assert sorted(change.session for change in waiting) == sorted(SESSIONS)  # one per turn
    for change in waiting:
        assert list(change.files) == [f"{change.session}.md"], change  # its own file only


# The times a store holds: a signed 64-bit count of nanoseconds (SQLite's
# INTEGER, PostgreSQL's bigint), so from 1677 to 2262.
FAR = 100_000_000_000  # seconds: the year 5138, as ``touch -d @...`` sets it
OLD = -100  # 1969, as ``tar x`` of an old archive or ``touch -t 196912312358`` sets it


def test_a_file_dated_past_2262_or_before_1970_is_saved_and_sinks_no_turn_batched_with_it(
    root: Path,
) -> None:
    # The seam, killing nowhere: only its holds, so the turn ends meet in batches.
    daemon = DaemonProcess(root, {"MEMFS_TEST_KILL_AT": "never"}, python=["-c", SEAM])
    try:
        for session in SESSIONS:
            started = memfs(
                "turn", "start", session, "--extra-body", json.dumps(body(session)), root=root
            )
            script = f"printf 'mine\\n' > me/{session}.md"
            if session == "s3":  # one agent dates its files far out, both ways
                script += f" && touch -d @{FAR} me/far.md && touch -d @{OLD} me/old.md"
            subprocess.run(["sh", "-c", script], cwd=started["root"], check=True, timeout=30)
        ended = answers(end_all(root))
        assert ended.keys() == set(SESSIONS)  # every end answered
        statuses = {s: r["spaces"]["me"]["status"] for s, r in ended.items()}
        assert statuses == dict.fromkeys(SESSIONS, "saved")
        assert sorted(ended["s3"]["spaces"]["me"]["created"]) == ["far.md", "old.md", "s3.md"]

        # The next turn has the times back: before 1970 as it was, past 2262 at the last
        # time the store holds (as Linux clamps a time a filesystem cannot hold).
        started = memfs("turn", "start", "s3", "--extra-body", json.dumps(body("s3")), root=root)
        shown = subprocess.run(
            ["stat", "-c", "%n %Y", "me/old.md", "me/far.md"],
            cwd=started["root"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        assert shown[0] == f"me/old.md {OLD}"
        assert shown[1] == f"me/far.md {(2**63 - 1) // 10**9}"
        memfs("turn", "end", "s3", root=root)
    finally:
        assert daemon.stop() == 0
