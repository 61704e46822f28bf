"""Chaos: `kill -9` of a busy daemon at seeded random moments; no write an agent saw is lost.

A real ``memfs daemon`` process (as in test_daemon_process) serves ten
sessions at once, each running turns one after another, each turn: start;
bash writes three files (one through a temporary file and ``mv``) and
appends a line to its session's log; end. A killer thread ``kill -9``s the
daemon at moments drawn from a seeded random plan: anywhere, or right
after a session sent a turn start or a turn end, or just after a restart.
The second test kills exactly instead: each daemon runs under a seam
(:data:`SEAM`) that SIGKILLs it at a seeded moment of a start, an end or a
compaction (:data:`MOMENTS`, e.g. between the store's commit and
``done.json``), on a seeded pass of it, also while it starts. Either way
the daemon is started again at once, as an operator (or systemd) would, and
every session goes on as an agent would: a turn that came back is finished
and ended again; one whose end came back open takes a late write, one whose
end had begun must refuse it (frozen).

An agent "saw a write succeed" when its bash command returned 0: every
such write is acknowledged into a file outside the mount right after it
returned. At the end, the store must hold:

1. every acknowledged write of every turn, byte for byte (a turn whose end
   answered "saved", or one brought back after a kill and ended again);
2. nothing of a write the agent never made (a path or log line no turn wrote);
3. each write stored once, from the turn and session that wrote it: one
   revision per file a turn wrote once, no log line twice, one trace per turn;
4. and the daemon starts again after every kill, with a sane ``memfs status``.

The seeds are fixed, so a failing plan can be run again (the threads'
interleaving is not, so a failure names the kill, the session and the turn).
Two seeds of each kind run by default, which keeps the suite within CI's
time; ``CHAOS_SEEDS=1-20`` (a range, or ``1,5,9``) runs more.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
import trio

from memfs.api.models import DaemonStatus, SessionStatus, TurnEnded
from memfs.client import Client
from memfs.core.errors import DaemonUnavailable
from memfs.core.models import Revision, SpaceRef, Trace
from memfs.stores.sqlite import SqliteStore
from tests.daemon_harness import KILL_POINT
from tests.test_daemon_process import PLACES, DaemonProcess, root

__all__ = ["root"]  # the fixture, shared with test_daemon_process

ORG = "acme"
CONFIG = (
    PLACES
    + """
[limits]
journal_bytes = 1024  # compacted at almost every turn, so kills fall in compactions too

[[memory]]
layer = "org"
space = "team"
org = "orgId"
review = "none"

[[memory]]
layer = "user"
space = "me"
user = "userId"
label = "name"
org = "orgId"
"""
)
SESSIONS = 10
TURNS = 3  # per session, at least: each goes on until the killer is done
KILLS = 10  # per test
WAIT = 40.0  # seconds anything may take before the test calls it hung

T = TypeVar("T")


def team(session: str) -> str:
    """The folder of the shared org space that one session writes in."""
    return f"by-{session}"


@dataclass
class Op:
    """One bash step of a turn: a write (``put``, ``mv``) or the append to the session's log."""

    kind: str  # "put" | "mv" | "sync" | "append"
    space: str  # "me" | "team"
    path: str  # in the space
    data: str

    @property
    def tmp(self) -> str:
        """Where a ``mv`` step writes first."""
        return f"{self.space}/.{os.path.basename(self.path)}.tmp"

    def script(self) -> str:
        where = f"{self.space}/{self.path}"
        if self.kind == "put":
            return f"printf '%s' '{self.data}' > {where}"
        if self.kind == "sync":  # written, then fsync(2)ed: the turn is made durable
            return f"printf '%s' '{self.data}' | dd of={where} conv=fsync status=none"
        if self.kind == "mv":
            return f"printf '%s' '{self.data}' > {self.tmp} && mv {self.tmp} {where}"
        return f"printf '%s' '{self.data}' >> {where}"


@dataclass
class TurnPlan:
    n: int
    ops: list[Op]
    turn: str | None = None  # its id, once known
    acked: list[Op] = field(default_factory=list)
    tried: list[Op] = field(default_factory=list)  # begun, never acknowledged
    ended: TurnEnded | None = None


@dataclass
class Run:
    """What one test saw: the daemon's life, every session's turns, and what went wrong."""

    root: Path
    rng: random.Random
    daemon: DaemonProcess
    generation: int = 0
    up: bool = True
    stopping: bool = False
    kills: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)
    turns: dict[str, list[TurnPlan]] = field(default_factory=dict)
    armed: tuple[str, int] | None = None  # where the running daemon kills itself
    cond: threading.Condition = field(default_factory=threading.Condition)
    asked: dict[str, threading.Event] = field(
        default_factory=lambda: {"start": threading.Event(), "end": threading.Event()}
    )

    def saw(self, what: str) -> None:
        with self.cond:
            self.seen[what] += 1

    def problem(self, text: str) -> None:
        with self.cond:
            self.problems.append(text)

    def alive(self) -> int:
        """The daemon's generation, once it is up."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.up, timeout=WAIT):
                raise AssertionError("the daemon did not come back")
            return self.generation

    def after(self, generation: int, what: str) -> bool:
        """Wait for the daemon that replaces ``generation``; False if none came (no kill)."""
        with self.cond:
            came = self.cond.wait_for(
                lambda: self.up and self.generation > generation, timeout=WAIT
            )
        if not came:
            self.problem(f"{what} failed with no kill of the daemon")
        return came

    def client(self) -> Client:
        return Client(self.root / "state" / "memfs.sock", timeout=WAIT)


def call(run: Run, do: Callable[[Client], T]) -> T:
    with run.client() as client:
        return do(client)


def back_after(
    run: Run, generation: int, session: str, what: str
) -> tuple[int, SessionStatus | None]:
    """The session as the daemon that replaced ``generation`` has it (and that daemon's generation).

    Raises if no kill came: the failure was the daemon's, not the killer's.
    """
    while True:
        if not run.after(generation, what):
            raise AssertionError(run.problems[-1])
        generation = run.alive()
        try:
            status = call(run, lambda c: c.status())
        except DaemonUnavailable:
            continue  # killed again
        return generation, next((s for s in status.sessions if s.session == session), None)


def plan_turn(rng: random.Random, session: str, n: int) -> TurnPlan:
    token = f"{rng.getrandbits(48):012x}"
    tag = f"{session} n{n} {token}"
    return TurnPlan(
        n,
        [
            Op("put", "me", f"n{n}-a.md", f"a {tag}\n"),
            Op("mv", "me", f"n{n}-b.md", f"b {tag}\n"),
            Op("append", "me", "log.md", f"log {tag}\n"),
            Op("sync", "me", f"n{n}-c.md", f"c {tag}\n"),
            Op("put", "team", f"{team(session)}/n{n}.md", f"t {tag}\n"),
        ],
    )


def body(session: str) -> dict[str, str]:
    return {"userId": f"u-{session}", "name": f"User {session}", "orgId": ORG}


def run_ops(run: Run, session: str, plan: TurnPlan, mnt: Path) -> bool:
    """Run the turn's steps not yet done in one bash, as an agent would; True if all went."""
    ack = run.root / f"ack-{session}-n{plan.n}"
    # A write not acknowledged is done again (it is idempotent); an append is not.
    todo = [
        op
        for op in plan.ops
        if op not in plan.acked and not (op.kind == "append" and op in plan.tried)
    ]
    lines = ["mkdir -p team/" + team(session) + " || exit 1"]
    for i, op in enumerate(todo):
        # Mark the step begun, do it, acknowledge it: a step begun and not
        # acknowledged may or may not have reached the daemon.
        lines.append(f"echo 'B {i}' >> {ack} && {{ {op.script()}; }} || exit 1")
        lines.append(f"echo 'A {i}' >> {ack}")
    ack.unlink(missing_ok=True)
    try:
        done = subprocess.run(
            ["bash", "-c", "\n".join(lines)],
            cwd=mnt,
            capture_output=True,
            timeout=WAIT,
            check=False,
        )
    except OSError as exc:  # its cwd: the mount of a daemon that just died
        done = subprocess.CompletedProcess([], 1, b"", str(exc).encode())
    marks = ack.read_text().split("\n") if ack.exists() else []
    for mark in marks:
        if mark.startswith("A "):
            plan.acked.append(todo[int(mark[2:])])
    for mark in marks:
        if mark.startswith("B ") and todo[int(mark[2:])] not in plan.acked:
            plan.tried.append(todo[int(mark[2:])])
    if done.returncode != 0 and not done.stderr:
        run.problem(f"{session} n{plan.n}: bash failed silently")
    return done.returncode == 0


def dead(run: Run, generation: int) -> bool:
    """Whether the daemon of ``generation`` was killed since (or killed itself at its seam)."""
    with run.cond:
        if not run.up or run.generation != generation:
            return True
        daemon = run.daemon
    try:
        daemon.proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        return False
    return True


def check_back(run: Run, generation: int, session: str, plan: TurnPlan, mnt: Path) -> None:
    """A turn back after a kill shows every write its agent saw succeed in this turn."""
    seen: dict[str, str] = {}
    for op in plan.acked:
        seen[f"{op.space}/{op.path}"] = (
            seen.get(f"{op.space}/{op.path}", "") + op.data if op.kind == "append" else op.data
        )
    for where, data in seen.items():
        try:
            text = (mnt / where).read_text()
        except OSError as exc:
            if dead(run, generation):
                return
            run.problem(f"{session} n{plan.n} {plan.turn}: {where} unreadable after restart: {exc}")
            continue
        if (where.endswith("log.md") and data in text) or text == data:
            continue
        run.problem(
            f"{session} n{plan.n} {plan.turn}: {where} after restart is {text!r}, not {data!r}"
        )


def start(run: Run, session: str, plan: TurnPlan) -> Path:
    """Start the turn; after a kill, take the one that came back or start again."""
    while True:
        generation = run.alive()
        run.asked["start"].set()
        try:
            started = call(
                run,
                lambda c: c.start_turn(session, body(session), prompt=f"{session} n{plan.n}"),
            )
            plan.turn = started.turn
            return Path(started.root)
        except DaemonUnavailable:
            generation, back = back_after(run, generation, session, f"{session} n{plan.n} start")
        if back is not None and back.turn is not None:
            plan.turn = back.turn  # the start was done when the daemon died
            run.saw("start done before the kill")
            return Path(back.root)
        run.saw("start redone")


def write(run: Run, session: str, plan: TurnPlan, mnt: Path) -> None:
    """Run the turn's bash; after a kill, the turn must be back, open, with what it wrote."""
    while True:
        generation = run.alive()
        if run_ops(run, session, plan, mnt):
            return
        generation, back = back_after(run, generation, session, f"{session} n{plan.n} bash")
        if back is None or back.turn != plan.turn:
            run.problem(
                f"{session} n{plan.n}: turn {plan.turn}, never ended, did not come back after "
                f"the kill ({back})"
            )
            return
        run.saw("bash cut, turn back open")
        mnt = Path(back.root)
        check_back(run, generation, session, plan, mnt)


def late(run: Run, session: str, plan: TurnPlan, mnt: Path) -> None:
    """A write after the restart into a turn whose end was asked for before the kill.

    Refused (``EROFS``) if the end had begun: the turn came back frozen. Let
    in only if it had not, and then the end that follows must store it.
    """
    op = Op(
        "put", "me", f"late-n{plan.n}-{len(plan.ops)}.md", f"late {session} n{plan.n} {plan.turn}\n"
    )
    plan.ops.append(op)
    try:
        (mnt / op.space / op.path).write_text(op.data)
    except OSError as exc:
        if exc.errno == errno.EROFS:
            run.saw("end back frozen")
            plan.ops.remove(op)
        else:
            plan.tried.append(op)
        return
    run.saw("end back open, written after the restart")
    plan.acked.append(op)


def end(run: Run, session: str, plan: TurnPlan) -> None:
    """End the turn until every space is stored; after a kill, end what came back again."""
    retries = 0
    while True:
        generation = run.alive()
        run.asked["end"].set()
        try:
            ended = call(run, lambda c: c.end_turn(session))
        except DaemonUnavailable:
            generation, back = back_after(run, generation, session, f"{session} n{plan.n} end")
            if back is None or back.turn is None:
                run.saw("end done before the kill")
                return
            if back.turn != plan.turn:
                run.problem(f"{session} n{plan.n}: {back.turn} open, not {plan.turn}")
                return
            late(run, session, plan, Path(back.root))
            continue
        plan.ended = ended
        if ended.turn != plan.turn:
            run.problem(f"{session} n{plan.n}: ended {ended.turn}, not {plan.turn}")
        kept = [name for name, space in ended.spaces.items() if space.kept]
        bad = {
            name: space
            for name, space in ended.spaces.items()
            if space.status != "saved" and not space.kept
        }
        if bad:
            run.problem(f"{session} n{plan.n} {plan.turn}: not saved: {bad}")
        if not kept:
            return
        run.saw("kept, ended again")
        retries += 1
        if retries > 5:  # nothing here fails a store: one kept five times stays kept
            outcome = {name: ended.spaces[name] for name in kept}
            run.problem(f"KEPT {session} n{plan.n} {plan.turn}: ended 6 times, kept: {outcome}")
            return
        time.sleep(0.05)  # a kept space (its store failed): ending again retries it


def agent(run: Run, session: str) -> None:
    rng = random.Random(f"{run.rng.random()}-{session}")
    try:
        n = 0
        while n < TURNS or not run.stopping:
            plan = plan_turn(rng, session, n)
            run.turns[session].append(plan)
            mnt = start(run, session, plan)
            write(run, session, plan, mnt)
            end(run, session, plan)
            n += 1
    except Exception as exc:
        run.problem(f"{session}: {type(exc).__name__}: {exc}")


def kill_and_restart(run: Run, why: str) -> None:
    """``kill -9`` the daemon now, then start it again."""
    with run.cond:
        run.up = False
        daemon = run.daemon
    daemon.proc.send_signal(signal.SIGKILL)
    restart(run, why)


def restart(run: Run, why: str, seam: tuple[str, int] | None = None) -> None:
    """Start the daemon again after its ``kill -9`` (armed to die at ``seam``, if given)."""
    with run.cond:
        run.up = False
        daemon = run.daemon
    assert daemon.proc.wait(timeout=WAIT) == -signal.SIGKILL, why
    daemon.log.close()
    run.kills.append(why)
    # (4) It always starts again: DaemonProcess fails the test if it does not answer.
    while True:
        try:
            again = armed(run.root, seam)
            break
        except AssertionError:
            # Armed, it may die at its moment as it starts (bringing the turns back):
            # a kill during a restart, and it must start again after that too.
            if seam is None or "daemon exited" not in str(sys.exc_info()[1]):
                raise
            run.kills.append(f"{seam[0]} #{seam[1]} as it started")
            seam = next_seam(run.rng) if len(run.kills) < KILLS else None
    run.armed = seam
    status = call(run, lambda c: c.status())
    sane(run, status, f"after kill {len(run.kills)} ({why})")
    with run.cond:
        run.daemon = again
        run.generation += 1
        run.up = True
        run.cond.notify_all()


def armed(root: Path, seam: tuple[str, int] | None) -> DaemonProcess:
    """The daemon, under :data:`SEAM` set to die at its ``seam[1]``-th pass of ``seam[0]``."""
    if seam is None:
        return DaemonProcess(root, config=CONFIG)
    env = {"MEMFS_TEST_KILL_AT": seam[0], "MEMFS_TEST_KILL_AFTER": str(seam[1])}
    return DaemonProcess(root, env, config=CONFIG, python=["-c", SEAM])


def sane(run: Run, status: DaemonStatus, when: str) -> None:
    if status.left_behind:
        run.problem(f"{when}: status leaves sessions behind: {status.left_behind}")
    names = {s.session for s in status.sessions}
    if len(names) != len(status.sessions) or not names <= set(run.turns):
        run.problem(f"{when}: status names sessions {sorted(names)}")
    for s in status.sessions:
        if s.turn is not None and sorted(s.mounts) != ["me", "team"]:
            run.problem(f"{when}: {s.session} mounts {s.mounts}")
        if s.kept and s.turn is None:
            run.problem(f"{when}: {s.session} has kept spaces and no turn")


def killer(run: Run, workers: list[threading.Thread]) -> None:
    rng = run.rng
    for k in range(KILLS):
        moment = rng.choice(["anywhere", "anywhere", "start", "end", "end", "end", "again"])
        if moment != "again":  # again: as the daemon is back and its turns are ended again
            time.sleep(rng.uniform(0.3, 1.5))  # let turns run between kills
        if not any(w.is_alive() for w in workers):
            break
        if moment in run.asked:
            run.asked[moment].clear()
            if not run.asked[moment].wait(timeout=10):
                continue
        delay = rng.uniform(0, 0.15 if moment == "end" else 0.4)
        time.sleep(delay)
        kill_and_restart(run, f"{k}: {moment} +{delay * 1000:.0f}ms")
    time.sleep(rng.uniform(0.3, 1.0))  # turns after the last restart
    run.stopping = True


Stored = tuple[dict[str, dict[str, bytes]], dict[str, list[Revision]], list[Trace]]


# The moments a turn end passes (and a write, a start) where the seam kills the
# daemon: each is a window the random killer hits only by luck.
MOMENTS = [
    "turn-written",  # a start's turn.json is written, its answer not yet sent
    "ending",  # an end's `ending` mark is written, nothing stored
    "before-store",  # a store (or a batch of them) about to commit
    "stored",  # committed in the store, not yet written down in done.json
    "recorded",  # written down in done.json, not yet traced or removed
    "close",  # every space stored and traced, the working copy not yet removed
    "compact",  # a journal's compaction, its new journal written, not yet renamed over
]

SEAM = (
    KILL_POINT
    + """
import memfsd.overlay as overlay
import memfsd.workspace as workspace
from memfs.stores.sqlite import SqliteStore

def around(cls, name, before=None, after=None):
    inner = getattr(cls, name)
    async def wrapped(self, *args, **kw):
        if before:
            point(before)
        out = await inner(self, *args, **kw)
        if after:
            point(after)
        return out
    setattr(cls, name, wrapped)

around(SqliteStore, "store", "before-store", "stored")
around(SqliteStore, "store_batch", "before-store", "stored")
around(workspace.OverlayWorkspace, "record", None, "recorded")
around(workspace.OverlayWorkspace, "close", "close")

def after_sync(cls, name, at):
    inner = getattr(cls, name)
    def wrapped(self, *args, **kw):
        out = inner(self, *args, **kw)
        point(at)
        return out
    setattr(cls, name, wrapped)

after_sync(workspace.OverlayWorkspace, "_write_state", "turn-written")
after_sync(workspace.OverlayWorkspace, "_mark_ending", "ending")

class Os:
    def __getattr__(self, name):
        return getattr(os, name)
    def replace(self, src, dst):
        if os.path.basename(dst) == "journal":
            point("compact")
        os.replace(src, dst)

overlay.os = Os()

from memfs.cli import main
main()
"""
)


def next_seam(rng: random.Random) -> tuple[str, int]:
    return rng.choice(MOMENTS), rng.randint(1, 12)


def seam_killer(run: Run, workers: list[threading.Thread]) -> None:
    """Each daemon dies at a seeded moment of :data:`MOMENTS`, on a seeded pass of it."""
    for k in range(KILLS):
        with run.cond:
            daemon, at = run.daemon, run.armed
        assert at is not None
        try:
            daemon.proc.wait(timeout=8)
            why = f"{k}: {at[0]} #{at[1]}"
        except subprocess.TimeoutExpired:  # the moment did not come that often
            if not any(w.is_alive() for w in workers):
                break
            daemon.proc.send_signal(signal.SIGKILL)
            why = f"{k}: {at[0]} #{at[1]} not reached, killed"
        restart(run, why, next_seam(run.rng) if len(run.kills) < KILLS - 1 else None)
        if run.armed is None:
            break
    time.sleep(run.rng.uniform(0.3, 1.0))  # turns after the last restart
    run.stopping = True


def stored(root: Path) -> Stored:
    """Every session's files (its own memory, and its folder of team), their revisions, traces."""

    async def look() -> Stored:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            files: dict[str, dict[str, bytes]] = {}
            history: dict[str, list[Revision]] = {}
            shared = await store.files(SpaceRef(layer="org", space="team", org=ORG))
            for i in range(SESSIONS):
                session = f"s{i}"
                me = SpaceRef(layer="user", space="me", org=ORG, user=f"u-{session}")
                mine = {f"me/{p}": b for p, b in (await store.files(me)).items()}
                for p in list(mine):
                    history[f"{session}:{p}"] = await store.history(me, p[3:])
                prefix = team(session) + "/"
                for p, b in shared.items():
                    if p.startswith(prefix):
                        mine[f"team/{p}"] = b
                        ref = SpaceRef(layer="org", space="team", org=ORG)
                        history[f"{session}:team/{p}"] = await store.history(ref, p)
                files[session] = mine
            stray = [p for p in shared if not p.startswith("by-s")]
            if stray:
                files["stray"] = {p: shared[p] for p in stray}
            return files, history, await store.traces()
        finally:
            await store.aclose()

    return trio.run(look)


def check_store(run: Run) -> list[str]:
    """(1)-(3) against the store: every acknowledged write, once, from its own turn."""
    problems: list[str] = []
    files, history, traces = stored(run.root)
    if "stray" in files:
        problems.append(f"team holds files no session wrote: {sorted(files['stray'])}")
    for session, plans in run.turns.items():
        mine = files.get(session, {})
        log = mine.pop("me/log.md", b"").decode()
        written: dict[str, tuple[TurnPlan, Op]] = {}
        for plan in plans:
            for op in plan.acked + plan.tried:
                if op.kind != "append":
                    written[f"{op.space}/{op.path}"] = (plan, op)
                # A mv killed between its write and its mv leaves its temporary file.
                if op.kind == "mv" and op in plan.tried and mine.get(op.tmp) == op.data.encode():
                    mine.pop(op.tmp)
        for where, (plan, op) in written.items():
            got = mine.pop(where, None)
            if op in plan.acked and got is None:
                problems.append(
                    f"LOST {session} n{plan.n} turn {plan.turn}: {where} ({op.kind}) was "
                    f"acknowledged and is not in the store"
                )
            # A write the kill cut off (never acknowledged: the agent saw it fail)
            # may leave the file it created, empty or holding a prefix.
            elif (
                got is not None
                and got != op.data.encode()
                and (op in plan.acked or not op.data.encode().startswith(got))
            ):
                seen = "acknowledged" if op in plan.acked else "tried"
                problems.append(f"{session} {where}: stored {got!r}, wrote {op.data!r} ({seen})")
            if got is None:
                continue
            revisions = history[f"{session}:{where}"]
            if len(revisions) != 1:
                problems.append(f"DUPLICATE {session} {where}: {len(revisions)} revisions")
            for rev in revisions:
                if (rev.provenance.session, rev.provenance.turn) != (session, plan.turn):
                    problems.append(
                        f"WRONG TURN {session} {where}: stored from "
                        f"{rev.provenance.session}/{rev.provenance.turn}, written by {plan.turn}"
                    )
        for where in mine:
            problems.append(f"{session}: {where} is stored and no turn wrote it")
        # The log: every acknowledged line, in order, none twice, none unwritten.
        lines = log.splitlines(keepends=True)
        appended = {op.data: plan for plan in plans for op in plan.acked + plan.tried}
        if len(set(lines)) != len(lines):
            problems.append(f"DUPLICATE {session} log.md lines: {lines}")
        for line in lines:
            if line not in appended:
                problems.append(f"{session} log.md holds {line!r}, never appended")
        at = -1
        for plan in plans:
            for op in plan.acked:
                if op.kind != "append":
                    continue
                if op.data not in lines:
                    problems.append(
                        f"LOST {session} n{plan.n} turn {plan.turn}: log line {op.data!r} was "
                        f"acknowledged and is not in the stored log.md"
                    )
                    continue
                if lines.index(op.data) < at:
                    problems.append(f"{session} log.md out of order at {op.data!r}")
                at = lines.index(op.data)
        if log:
            turns = [r.provenance.turn for r in history.get(f"{session}:me/log.md", [])]
            known = {plan.turn for plan in plans}
            if len(set(turns)) != len(turns) or not set(turns) <= known:
                problems.append(f"{session} log.md revisions from turns {turns}, known {known}")
        # One trace per turn that was started and ended, none of another.
        traced = [t.turn for t in traces if t.session == session]
        if len(set(traced)) != len(traced):
            problems.append(f"DUPLICATE {session} traces: {traced}")
        for plan in plans:
            if plan.turn is not None and plan.turn not in traced:
                problems.append(f"{session} n{plan.n}: turn {plan.turn} has no trace")
        strays = set(traced) - {plan.turn for plan in plans}
        if strays:
            problems.append(f"{session} traces of turns it never started: {strays}")
    return problems


def chaos(root: Path, seed: int, *, seams: bool = False) -> Run:
    """Ten sessions' turns under the random killer, or (``seams``) the seam's kills."""
    rng = random.Random(seed)
    first = next_seam(rng) if seams else None
    run = Run(root, rng, armed(root, first), armed=first)
    sessions = [f"s{i}" for i in range(SESSIONS)]
    for session in sessions:
        run.turns[session] = []
    workers = [threading.Thread(target=agent, args=(run, s), name=s) for s in sessions]
    for w in workers:
        w.start()
    kill = seam_killer if seams else killer
    killing = threading.Thread(target=kill, args=(run, workers), name="killer")
    killing.start()
    deadline = time.monotonic() + 150
    for thread in [killing, *workers]:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in [killing, *workers] if t.is_alive()]
    assert not hung, f"hung: {hung}\n" + "\n".join(run.problems)
    status = call(run, lambda c: c.status())
    sane(run, status, "at the end")
    for s in status.sessions:
        if s.turn is not None or s.kept:
            run.problem(f"at the end: {s.session} still has turn {s.turn}, kept {s.kept}")
    assert run.daemon.stop() == 0
    log = (root / "daemon.log").read_text()
    for line in log.splitlines():
        if " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback"):
            run.problem(f"daemon.log: {line}")
    return run


def report(run: Run, seed: int, began: float) -> None:
    problems = run.problems + check_store(run)
    took = time.monotonic() - began
    acked = sum(len(p.acked) for plans in run.turns.values() for p in plans)
    summary = (
        f"seed {seed}: {len(run.kills)} kills {run.kills}, {acked} writes acked, "
        f"{took:.1f}s, {dict(run.seen)}"
    )
    print(summary)
    assert len(run.kills) >= 2, summary  # the plan must really have killed
    assert not problems, summary + "\n" + "\n".join(problems)


def _seeds(default: str = "1-2") -> list[int]:
    """The seeds to run: ``CHAOS_SEEDS`` (``1-20`` or ``1,5,9``), else ``default``."""
    spec = os.environ.get("CHAOS_SEEDS", default)
    if "-" in spec:
        first, last = spec.split("-", 1)
        return list(range(int(first), int(last) + 1))
    return [int(seed) for seed in spec.split(",")]


SEEDS = _seeds()


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_at_random_moments_loses_no_acknowledged_write(root: Path, seed: int) -> None:
    began = time.monotonic()
    report(chaos(root, seed), seed, began)


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_at_the_moments_of_a_turn_end_loses_no_acknowledged_write(
    root: Path, seed: int
) -> None:
    """The same turns, each daemon killed exactly at a seeded moment of :data:`MOMENTS`."""
    began = time.monotonic()
    report(chaos(root, seed, seams=True), seed, began)
