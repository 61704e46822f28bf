"""The memfs benchmark suite: memfs against a native directory and fuse-overlayfs, in one run.

Every workload runs on four trees, interleaved inside every run: run k runs a
workload on every tree before run k+1 starts, and the trees' order rotates from
run to run and from workload to workload, so no tree always goes first (cold
disk, page cache) or last (a neighbour's noise). The trees:

- **native**: the space's files in a local directory (the physical limit);
- **fuse-overlayfs**: the C FUSE overlay, a snapshot as lower dir and an empty
  upper dir (skipped, and said so, when ``fuse-overlayfs`` is not installed);
- **pyfuse3 floor** (read workloads only): ``bench/floor.py``, the cheapest
  read-only pyfuse3 filesystem, serving the same files from memory with the
  same caching: what any Python FUSE daemon costs per request here;
- **memfs**: a real turn on the daemon (``memfs daemon``, its own process, as
  in production) with the SQLite store.

Each tree's time is reported as the median and the spread (min-max) of its
runs. Each ratio (memfs / floor, floor / native, floor / fuse-overlayfs,
memfs / fuse-overlayfs, memfs / native) is the median and spread of the
per-run ratios, so the two sides of every sample were measured in the same
run, a few seconds apart. A time or ratio whose spread is more than
NOISY_SPREAD of its median gets a note: the machine was too busy for that row
to say much. memfs / floor is held to FLOOR_TARGET on every read workload.

Turn costs compare memfs with copy mode, interleaved the same way (the order
alternates per run); a concurrency run and a memory (RSS) reading complete
the suite, measured once. Timings are reported, never asserted. The table goes
to stdout and ``OUT/table.md``, every sample and statistic to
``OUT/results.json``, the ratio chart to ``OUT/ratios.png``.

    .venv/bin/python bench/run.py [--quick] [--runs N] [--out DIR] [--only PARTS]

The daemon runs as its own process, as fuse-overlayfs does, so the two are
measured alike and the daemon's RSS is its own; the runner drives it through
its control socket (``memfs.Client``) and runs every workload in bash.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

import memfs
from memfs.api.models import TurnEnded, TurnStarted
from memfs.client import Client
from memfs.core.errors import DaemonUnavailable
from memfs.core.models import ChangeSet, Limits, Provenance, SpaceRef
from memfs.stores.sqlite import SqliteStore

WORD = "needle"
SPACE = "bench"
MIB = 1024 * 1024
INSTALL_HINT = "apt-get install -y fuse-overlayfs"
TREES = ("native", "fuse-overlayfs", "pyfuse3 floor", "memfs")
FLOOR = Path(__file__).with_name("floor.py")
PARTS = ("workloads", "turns", "concurrency", "memory")
RUNS = 7  # default runs of the full suite: enough for a median and a spread
QUICK_RUNS = 3  # default runs with --quick
# A time or ratio whose (max - min) / median is above this gets a note.
NOISY_SPREAD = 0.25
# memfs's own overhead over the pyfuse3 floor, per read workload.
FLOOR_TARGET = 1.15
# The ratios reported per workload: (numerator, denominator, read workloads only).
RATIOS = (
    ("memfs", "pyfuse3 floor", True),
    ("pyfuse3 floor", "native", True),
    ("pyfuse3 floor", "fuse-overlayfs", True),
    ("memfs", "fuse-overlayfs", False),
    ("memfs", "native", False),
)


@dataclass(frozen=True)
class Sizes:
    """How big each workload is: the full suite or ``--quick``."""

    files: int
    big_mib: int
    creates: int
    seds: int
    turn_spaces: tuple[int, ...]
    sessions: int
    turns: int
    rss_sessions: int
    rss_space: int = 1000


FULL = Sizes(2000, 100, 1000, 40, (100, 1000, 10_000), 50, 20, 100)
QUICK = Sizes(200, 4, 100, 40, (100, 1000), 5, 3, 10)


def body(org: str) -> dict[str, str]:
    """The extra body of a turn: the org id picks which seeded space the ``bench`` mount is."""
    return {"userId": "u1", "name": "Bench", "orgId": org}


def corpus(files: int, folders: int = 50, size: int = 2048) -> dict[str, bytes]:
    """``files`` notes of ``size`` bytes in ``folders`` folders under ``notes/``; some hold WORD."""
    out = {}
    for i in range(files):
        line = f"file {i} of the bench corpus; "
        text = (line * (size // len(line) + 1))[: size - 8]
        if i % 97 == 0:
            text = text[:100] + WORD + text[106:]
        out[f"notes/folder-{i % folders:02}/note-{i:05}.md"] = text.encode() + b"\n" * 8
    return out


def big_file(mib: int) -> bytes:
    """A big file of ``mib`` MiB, not all zeros."""
    block = bytes(range(256)) * 4096  # 1 MiB
    return block * mib


async def seed(db: Path, org: str, files: dict[str, bytes]) -> None:
    """Store ``files`` as version 1 of the ``bench`` space of ``org``."""
    store = SqliteStore(db)
    try:
        ref = SpaceRef(layer="org", space=SPACE, org=org)
        # The daemon's limits: a put obeys limits as a turn does.
        await store.put(
            ref, ChangeSet(created=files), provenance=Provenance(origin="code"), limits=LIMITS
        )
    finally:
        await store.aclose()


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` under ``root`` (blocking: only for native directories)."""
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)


async def sh(script: str, cwd: Path) -> int:
    """Run ``script`` in bash in ``cwd`` as a subprocess; return its exit code."""
    done = await trio.run_process(
        ["bash", "-c", script], cwd=cwd, capture_stdout=True, capture_stderr=True, check=False
    )
    if done.returncode != 0:
        print(f"  ! exit {done.returncode} in {cwd}: {script[:80]}", file=sys.stderr)
        print("   ", done.stderr.decode(errors="replace")[:400], file=sys.stderr)
    return done.returncode


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    """Seconds ``fn`` took."""
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


READS = ("grep -r", "cat every", "ls -lR", "dd read")


def reads_only(label: str) -> bool:
    """Whether a workload only reads (the pyfuse3 floor serves nothing else)."""
    return label.startswith(READS)


def workloads(sizes: Sizes) -> list[tuple[str, str]]:
    """The shell workloads, in order: (row label, bash script run in the tree's root)."""
    sed_files = " ".join(
        f"notes/folder-{i % 50:02}/note-{i:05}.md" for i in range(0, sizes.files, sizes.files // 40)
    )
    sed_files = " ".join(sed_files.split()[: sizes.seds])
    mib = sizes.big_mib
    cat = "find notes -type f -exec cat {} + > /dev/null"
    return [
        (f"grep -r ({sizes.files} files), first pass", f"grep -r -c {WORD} notes > /dev/null"),
        (f"grep -r ({sizes.files} files), second pass", f"grep -r -c {WORD} notes > /dev/null"),
        (f"cat every file ({sizes.files}), first pass", cat),
        (f"cat every file ({sizes.files}), second pass", cat),
        (f"ls -lR ({sizes.files} files), first pass", "ls -lR notes > /dev/null"),
        (f"ls -lR ({sizes.files} files), second pass", "ls -lR notes > /dev/null"),
        (
            f"create {sizes.creates} files",
            f"mkdir new && cd new && for i in $(seq 1 {sizes.creates}); do echo x > f$i; done",
        ),
        (f"sed -i on {sizes.seds} files", f"sed -i 's/corpus/corpus/' {sed_files}"),
        (f"dd write {mib} MiB", f"dd if=/dev/zero of=out.bin bs=1M count={mib} status=none"),
        (f"dd read {mib} MiB, first pass", "dd if=big.bin of=/dev/null bs=1M status=none"),
        (f"dd read {mib} MiB, second pass", "dd if=big.bin of=/dev/null bs=1M status=none"),
    ]


@dataclass(frozen=True)
class Spread:
    """The median and the min-max of a few samples (times or per-run ratios)."""

    median: float
    low: float
    high: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: list[float]) -> Spread | None:
        if not samples:
            return None
        return cls(statistics.median(samples), min(samples), max(samples), tuple(samples))

    @property
    def relative(self) -> float:
        """(max - min) / median: 0 for a single sample."""
        return (self.high - self.low) / self.median if self.median > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return len(self.samples) > 1 and self.relative > NOISY_SPREAD

    def as_json(self) -> dict[str, object]:
        return {
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "spread": self.relative,
            "noisy": self.noisy,
            "samples": list(self.samples),
        }


@dataclass
class Results:
    """Every measurement of a run, in seconds unless named otherwise."""

    # (row, tree) -> run -> seconds: the run index pairs the trees of one run.
    times: dict[tuple[str, str], dict[int, float]] = field(default_factory=dict)
    # row -> the trees' order in each run
    orders: dict[str, list[list[str]]] = field(default_factory=dict)
    errors: int = 0
    concurrency: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    requests: dict[str, dict[str, int]] = field(default_factory=dict)  # per workload, last run

    def add(self, row: str, tree: str, seconds: float, run: int) -> None:
        self.times.setdefault((row, tree), {})[run] = seconds

    def spread(self, row: str, tree: str) -> Spread | None:
        return Spread.of(list(self.times.get((row, tree), {}).values()))

    def median(self, row: str, tree: str) -> float | None:
        found = self.spread(row, tree)
        return None if found is None else found.median

    def ratio(
        self, row: str, top: str, bottom: str, bottom_row: str | None = None
    ) -> Spread | None:
        """``top / bottom`` per run (both measured in that run), as a spread."""
        a = self.times.get((row, top), {})
        b = self.times.get((bottom_row or row, bottom), {})
        return Spread.of([a[run] / b[run] for run in sorted(a.keys() & b.keys()) if b[run] > 0])


def tree_order(trees: list[str], run: int, group: int) -> list[str]:
    """The trees rotated by run and workload: each takes every place in turn."""
    if not trees:
        return []
    shift = (run + group) % len(trees)
    return trees[shift:] + trees[:shift]


def mounts_under(base: Path) -> list[str]:
    """Mount points under ``base``, deepest first (from /proc/mounts)."""
    found = []
    with open("/proc/mounts") as table:
        for line in table:
            point = line.split()[1].replace("\\040", " ")
            if point.startswith(str(base)):
                found.append(point)
    return sorted(found, key=len, reverse=True)


async def unmount(point: Path) -> None:
    """Unmount a FUSE mount we made (fuse-overlayfs), lazily if it is busy."""
    done = await trio.run_process(["fusermount3", "-u", str(point)], check=False)
    if done.returncode != 0:
        await trio.run_process(["fusermount3", "-u", "-z", str(point)], check=False)


async def drop_caches() -> None:
    """Drop the page cache so first passes are cold (needs root; ignored otherwise)."""
    await trio.run_process(
        ["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"],
        check=False,
        capture_stderr=True,
    )


CONFIG = """\
mount_root = "{base}/mnt"
state_dir = "{base}/state"
store = "sqlite://{db}"
web_listen = ""  # the Memory tab is not measured here

[limits]
max_file_bytes = {max_file_bytes}
max_files = {max_files}
max_space_bytes = {max_space_bytes}

[[memory]]
layer = "org"
space = "{space}"
org = "orgId"
review = "none"
"""


class Daemon:
    """``memfs daemon`` as its own process, driven through its control socket."""

    def __init__(self, base: Path, db: Path, *, config_text: str | None = None) -> None:
        config = base / "memfs.toml"
        config.write_text(
            config_text
            if config_text is not None
            else CONFIG.format(base=base, db=db, space=SPACE, **LIMITS.model_dump())
        )
        self.log = open(base / "daemon.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", "daemon", "--config", str(config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.client = Client(base / "state" / "memfs.sock", timeout=600)

    async def ready(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                await trio.to_thread.run_sync(self.client.status)
                return
            except DaemonUnavailable:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                await trio.sleep(0.1)

    async def start_turn(self, session: str, org: str) -> TurnStarted:
        return await trio.to_thread.run_sync(self.client.start_turn, session, body(org))

    async def end_turn(self, session: str) -> TurnEnded:
        return await trio.to_thread.run_sync(self.client.end_turn, session)

    async def close_session(self, session: str) -> None:
        await trio.to_thread.run_sync(self.client.close_session, session)

    async def requests(self) -> dict[str, int]:
        """FUSE requests the daemon has served so far, by operation."""
        return (await trio.to_thread.run_sync(self.client.status)).requests

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mib(self) -> float:
        """The daemon's resident set size in MiB."""
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def outcome_errors(ended: TurnEnded) -> int:
    """How many spaces of an ended turn report an error or unsaved files."""
    return sum(
        1
        for space in ended.spaces.values()
        if space.error or space.errors or space.not_saved or space.conflicts
    )


async def tree_workloads(
    service: Daemon, base: Path, sizes: Sizes, runs: int, overlay: bool, res: Results
) -> None:
    """The shell workloads on every tree, interleaved, ``runs`` times."""
    native, snap = base / "native", base / "snap"
    scripts = workloads(sizes)
    for run in range(runs):
        print(f"run {run + 1}/{runs}: workloads", file=sys.stderr)
        await drop_caches()
        trees: dict[str, Path] = {"native": native}
        ovl = base / "ovl"
        if overlay:
            for part in ("up", "wk", "mnt"):
                (ovl / part).mkdir(parents=True, exist_ok=True)
            options = f"lowerdir={snap},upperdir={ovl / 'up'},workdir={ovl / 'wk'}"
            await trio.run_process(["fuse-overlayfs", "-o", options, str(ovl / "mnt")])
            trees["fuse-overlayfs"] = ovl / "mnt"
        floor_mnt = base / "floor"
        floor_mnt.mkdir(exist_ok=True)
        floor = await start_floor(snap, floor_mnt)
        trees["pyfuse3 floor"] = floor_mnt
        session = f"w{run}"
        started = await service.start_turn(session, "w")
        trees["memfs"] = Path(started.mounts[SPACE].path)
        try:
            for index, group in enumerate(passes(scripts)):
                present = [
                    tree
                    for tree in TREES
                    if tree in trees and (tree != "pyfuse3 floor" or reads_only(group[0][0]))
                ]
                order = tree_order(present, run, index)
                for label, _ in group:
                    res.orders.setdefault(label, []).append(order)
                for tree in order:
                    # Every tree starts each workload cold; a second pass follows its
                    # first on the same tree, so it alone runs warm.
                    await drop_caches()
                    for label, script in group:
                        await run_one(service, res, label, script, tree, trees[tree], run, runs)
            for tree, root in trees.items():
                if tree != "pyfuse3 floor":
                    await sh("rm -rf new out.bin", root)
        finally:
            await unmount(floor_mnt)
            with trio.move_on_after(30):
                await floor.wait()
            if floor.poll() is None:
                floor.kill()
            if overlay and (ovl / "mnt") in [Path(p) for p in mounts_under(ovl)]:
                await unmount(ovl / "mnt")
            shutil.rmtree(ovl, ignore_errors=True)
            res.errors += outcome_errors(await service.end_turn(session))
            await service.close_session(session)


def passes(scripts: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The workloads grouped so that each second pass follows its first pass."""
    groups: list[list[tuple[str, str]]] = []
    for label, script in scripts:
        if label.endswith("second pass") and groups:
            groups[-1].append((label, script))
        else:
            groups.append([(label, script)])
    return groups


async def run_one(
    service: Daemon,
    res: Results,
    label: str,
    script: str,
    tree: str,
    root: Path,
    run: int,
    runs: int,
) -> None:
    """Time one workload on one tree; on memfs's last run, count the FUSE requests it cost."""
    counting = tree == "memfs" and run == runs - 1
    before = await service.requests() if counting else {}
    res.add(label, tree, await timed(lambda: sh(script, root)), run)
    if counting:
        after = await service.requests()
        res.requests[label] = {
            op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)
        }


async def start_floor(source: Path, mountpoint: Path) -> trio.Process:
    """``bench/floor.py`` serving ``source`` at ``mountpoint``, once it is mounted."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(FLOOR), str(source), str(mountpoint)]
    )
    deadline = time.monotonic() + 60
    while str(mountpoint) not in mounts_under(mountpoint.parent):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the pyfuse3 floor did not mount at {mountpoint}")
        await trio.sleep(0.05)
    return proc


async def turn_costs(
    service: Daemon, base: Path, db: Path, sizes: Sizes, runs: int, res: Results
) -> None:
    """Turn start + end with 10 changed files: memfs against copy mode, per space size.

    Run -1 is a warm-up, not timed: the daemon's first turn over a space fills
    its blob cache once, and what is measured is every turn after that.
    """
    spec = memfs.org_memory(space=SPACE, org="orgId", review="none")
    copy = memfs.Memory(SqliteStore(db), [spec], workdir=base / "copy", limits=LIMITS)
    try:
        for run in range(-1, runs):
            for n in sizes.turn_spaces:
                step = "warm-up" if run < 0 else f"run {run + 1}/{runs}"
                print(f"{step}: turns on {n} files", file=sys.stderr)
                label = f"turn start+end, {n} files"
                org = f"t{n}"
                script = "; ".join(
                    f"echo x{run} >> notes/folder-{i:02}/note-{i:05}.md" for i in range(10)
                )

                async def daemon_turn(org: str = org, script: str = script, run: int = run) -> None:
                    session = f"{org}-d{run}"
                    started = await service.start_turn(session, org)
                    res.errors += await sh(script, Path(started.mounts[SPACE].path)) != 0
                    res.errors += outcome_errors(await service.end_turn(session))

                async def copy_turn(org: str = org, script: str = script, run: int = run) -> None:
                    turn = await copy.start_turn(f"{org}-c{run}", body(org))
                    res.errors += await sh(script, Path(turn.mounts[SPACE].path)) != 0
                    await turn.end()

                # Interleaved like the workloads: the order alternates per run.
                if run % 2:
                    daemon_spent, copy_spent = await timed(daemon_turn), await timed(copy_turn)
                else:
                    copy_spent, daemon_spent = await timed(copy_turn), await timed(daemon_turn)
                if run >= 0:
                    res.add(label, "copy mode", copy_spent, run)
                    res.add(label, "memfs", daemon_spent, run)
                await service.close_session(f"{org}-d{run}")
    finally:
        await copy.store.aclose()


# The syscalls that put data on disk, counted per turn by ``strace -c`` (see fsync_counts).
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "sync", "syncfs", "msync")
# The fsync-counting run, under strace (which slows it; not timed): as many sessions
# at once as the timed run, so syncs are shared as much, for this many turns each.
FSYNC_TURNS = 2
SINGLE_TURNS = 20  # turns alone on the idle daemon, after SINGLE_WARMUP untimed ones
SINGLE_WARMUP = 3


INODE_SAMPLES = 50  # files made to time a new inode in state_dir (inode_cost)


def inode_cost(folder: Path) -> float:
    """Median seconds to make an empty file in a new folder under ``folder`` (then removed).

    On ext4 without a journal this grows with the inodes of the folder's
    group deleted in the last half minute or so (docs/daemon.md, ``spare/``):
    it says whether a run found, or left, the disk in that slow state.
    """
    probe = Path(tempfile.mkdtemp(prefix="inode-cost-", dir=folder))
    times = []
    try:
        for n in range(INODE_SAMPLES):
            start = time.perf_counter()
            os.close(os.open(probe / str(n), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            times.append(time.perf_counter() - start)
    finally:
        shutil.rmtree(probe)
    return statistics.median(times)


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (every thread), from ``/proc/PID/stat``."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name may hold spaces and parentheses: the fields follow the last ")".
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def turn_script(s: int, t: int, expected: dict[str, bytes]) -> str:
    """Turn ``t`` of session ``s``: read 5 notes, write 2 new files (contents into ``expected``)."""
    picks = [(s * 7 + t * 5 + k) % 1000 for k in range(5)]
    reads = " ".join(f"notes/folder-{i % 50:02}/note-{i:05}.md" for i in picks)
    writes = []
    for k in range(2):
        path = f"notes/folder-{(s + k) % 50:02}/w-s{s}-t{t}-{k}.md"
        expected[path] = f"session {s} turn {t} write {k}\n".encode()
        writes.append(f"printf 'session {s} turn {t} write {k}\\n' > {path}")
    return f"cat {reads} > /dev/null && " + " && ".join(writes)


async def turns_at_once(
    service: Daemon, first: int, sessions: int, turns: int, expected: dict[str, bytes]
) -> tuple[list[float], int, float]:
    """Sessions ``first``.. running ``turns`` turns each, all at once: (latencies, errors, wall).

    Each session writes files of its own number, so every run's writes are new.
    """
    latencies: list[float] = []
    errors = 0

    async def one_session(s: int) -> None:
        nonlocal errors
        session = f"c{s}"
        for t in range(turns):
            script = turn_script(s, t, expected)
            start = time.perf_counter()
            try:
                started = await service.start_turn(session, "conc")
                errors += await sh(script, Path(started.mounts[SPACE].path)) != 0
                errors += outcome_errors(await service.end_turn(session))
            except Exception as error:  # counted and reported, never hidden
                print(f"  ! session {session} turn {t}: {error!r}", file=sys.stderr)
                errors += 1
            latencies.append(time.perf_counter() - start)
        await service.close_session(session)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for s in range(first, first + sessions):
            nursery.start_soon(one_session, s)
    return latencies, errors, time.perf_counter() - start


async def single_turns(service: Daemon, expected: dict[str, bytes]) -> tuple[float, int]:
    """A turn alone on the idle daemon (start, 5 reads, 2 writes, end): median seconds, errors."""
    times: list[float] = []
    errors = 0
    for t in range(SINGLE_WARMUP + SINGLE_TURNS):
        script = turn_script(2000, t, expected)
        start = time.perf_counter()
        started = await service.start_turn("alone", "conc")
        errors += await sh(script, Path(started.mounts[SPACE].path)) != 0
        errors += outcome_errors(await service.end_turn("alone"))
        if t >= SINGLE_WARMUP:
            times.append(time.perf_counter() - start)
    await service.close_session("alone")
    return statistics.median(times), errors


async def fsync_counts(
    service: Daemon, sessions: int, expected: dict[str, bytes]
) -> tuple[dict[str, int], int, int] | None:
    """Syncs by syscall over a short run at once under ``strace -f -c``: (counts, turns, errors).

    strace attaches to every thread of the daemon and counts each call
    exactly, whatever the load; it slows the daemon, so this run is not timed.
    None when strace is not installed.
    """
    if shutil.which("strace") is None:
        return None
    table = Path(tempfile.mkdtemp(prefix="memfs-strace-")) / "counts.txt"
    trace = ",".join(SYNC_CALLS)
    tracer = await trio.lowlevel.open_process(
        ["strace", "-f", "-c", "-o", str(table), "-e", f"trace={trace}", "-p", str(service.pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await trio.sleep(1.0)  # attached to every thread before the first turn
        latencies, errors, _ = await turns_at_once(service, 1000, sessions, FSYNC_TURNS, expected)
    finally:
        tracer.send_signal(signal.SIGINT)
        await tracer.wait()
    counts = {name: 0 for name in SYNC_CALLS}
    for line in table.read_text().splitlines():
        parts = line.split()
        # "% time  seconds  usecs/call  calls  [errors]  syscall"
        if len(parts) >= 5 and parts[-1] in counts and parts[3].isdigit():
            counts[parts[-1]] = int(parts[3])
    shutil.rmtree(table.parent, ignore_errors=True)
    return counts, len(latencies), errors


async def concurrency(service: Daemon, db: Path, sizes: Sizes, res: Results) -> None:
    """Sessions x turns at once; each turn reads 5 files and writes 2; then check every write.

    Also measured: a turn alone on the idle daemon (before the concurrent
    run), the daemon's CPU time per turn over the concurrent run (utime +
    stime of its process, every thread), and its syncs per turn over a
    short run under strace (after it).
    """
    expected: dict[str, bytes] = {}
    inode_before = inode_cost(db.parent)
    print("concurrency: turns alone", file=sys.stderr)
    alone, errors = await single_turns(service, expected)
    print(f"concurrency: {sizes.sessions} sessions x {sizes.turns} turns", file=sys.stderr)
    cpu_before, harness_before = cpu_seconds(service.pid), os.times()
    latencies, more, wall = await turns_at_once(service, 0, sizes.sessions, sizes.turns, expected)
    cpu, harness = cpu_seconds(service.pid) - cpu_before, os.times()
    inode_after = inode_cost(db.parent)
    # The rest of the machine's work per turn: this process (the client, its
    # threads, trio) and the shells it ran (bash and cat, kernel time for
    # their FUSE calls included), reaped into its children's times.
    client = harness.user + harness.system - harness_before.user - harness_before.system
    shells = (
        harness.children_user
        + harness.children_system
        - harness_before.children_user
        - harness_before.children_system
    )
    errors += more
    print("concurrency: syncs per turn (under strace)", file=sys.stderr)
    synced = await fsync_counts(service, sizes.sessions, expected)
    if synced is not None:
        errors += synced[2]
    store = SqliteStore(db)
    try:
        stored = await store.files(SpaceRef(layer="org", space=SPACE, org="conc"))
    finally:
        await store.aclose()
    lost = sum(1 for path, content in expected.items() if stored.get(path) != content)
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    res.concurrency = {
        "turns": len(latencies),
        "turns/s": len(latencies) / wall,
        "p50": statistics.median(latencies),
        "p99": quantiles[98],
        "errors": errors,
        "writes": len(expected),
        "lost": lost,
        "alone": alone,
        "cpu/turn": cpu / len(latencies),
        "client cpu/turn": client / len(latencies),
        "shell cpu/turn": shells / len(latencies),
        "cores busy": (cpu + client + shells) / wall,
        "inode before": inode_before,
        "inode after": inode_after,
    }
    if synced is not None:
        counts, turns, _ = synced
        res.concurrency["fsync turns"] = turns
        res.concurrency["syncs/turn"] = sum(counts.values()) / turns
        for name, n in counts.items():
            res.concurrency[f"{name}/turn"] = n / turns


async def memory(service: Daemon, sizes: Sizes, res: Results) -> None:
    """RSS of a fresh daemon, then with many sessions' turns open on one space, each listed."""
    print(f"rss: {sizes.rss_sessions} sessions", file=sys.stderr)
    before = service.rss_mib()
    sessions = [f"m{i}" for i in range(sizes.rss_sessions)]
    for session in sessions:
        started = await service.start_turn(session, "rss")
        await sh("ls -lR notes > /dev/null", Path(started.mounts[SPACE].path))
    after = service.rss_mib()
    for session in sessions:
        res.errors += outcome_errors(await service.end_turn(session))
        await service.close_session(session)
    res.rss = {"before": before, "after": after, "delta": after - before}


LIMITS = Limits(max_file_bytes=512 * MIB, max_files=100_000, max_space_bytes=4096 * MIB)


async def suite(
    sizes: Sizes, runs: int, overlay: bool, base: Path, parts: frozenset[str] = frozenset(PARTS)
) -> Results:
    """Seed the store, start the daemon and run every part of the suite."""
    res = Results()
    state = base / "state"
    state.mkdir()
    db = state / "memfs.db"
    work = corpus(sizes.files) | {"big.bin": big_file(sizes.big_mib)}
    print("seeding", file=sys.stderr)
    await seed(db, "w", work)
    for n in sizes.turn_spaces:
        await seed(db, f"t{n}", corpus(n))
    await seed(db, "conc", corpus(1000))
    await seed(db, "rss", corpus(sizes.rss_space))
    for tree in ("native", "snap"):
        await trio.to_thread.run_sync(write_tree, base / tree, work)
    del work
    service = Daemon(base, db)
    try:
        await service.ready()
        if "workloads" in parts:
            await tree_workloads(service, base, sizes, runs, overlay, res)
        if "turns" in parts:
            await turn_costs(service, base, db, sizes, runs, res)
        if "concurrency" in parts:
            await concurrency(service, db, sizes, res)
    finally:
        for point in mounts_under(base / "ovl"):
            await unmount(Path(point))
        await trio.to_thread.run_sync(service.stop)
    if "memory" in parts:
        # A fresh daemon, so its memory is what the sessions cost, not what
        # the workloads before them left behind.
        fresh = Daemon(base, db)
        try:
            await fresh.ready()
            await memory(fresh, sizes, res)
        finally:
            await trio.to_thread.run_sync(fresh.stop)
    return res


def machine() -> str:
    """nproc, CPU model and kernel of this machine."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs (nproc), {model}, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def fmt(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.4f}"


def cell(found: Spread | None, unit: str = "") -> str:
    """``median (min-max)``, or ``n/a``; a noisy one is marked ``*``."""
    if found is None:
        return "n/a"
    digits = 2 if unit else 4
    text = f"{found.median:.{digits}f}{unit}"
    if len(found.samples) > 1:
        text += f" ({found.low:.{digits}f}-{found.high:.{digits}f})"
    return text + (" *" if found.noisy else "")


def meets(found: Spread | None, target: float) -> str:
    """Whether a ratio is under its target: in every run, by its median only, or not."""
    if found is None:
        return "n/a"
    if found.high <= target:
        return "yes, every run"
    if found.median <= target:
        return "median only"
    return "no"


def ratio_name(top: str, bottom: str) -> str:
    return f"{top} / {bottom}"


def workload_ratios(res: Results, label: str) -> dict[str, Spread | None]:
    """The per-run ratios of one workload, by name (read-only ratios only on reads)."""
    return {
        ratio_name(top, bottom): res.ratio(label, top, bottom)
        for top, bottom, reads in RATIOS
        if reads_only(label) or not reads
    }


def noise_notes(res: Results, sizes: Sizes) -> list[str]:
    """One line per time or ratio whose spread is over NOISY_SPREAD of its median, by row."""
    notes = []
    rows = [label for label, _ in workloads(sizes)] + [turn_label(n) for n in sizes.turn_spaces]
    for row in rows:
        for tree in (*TREES, "copy mode"):
            found = res.spread(row, tree)
            if found is not None and found.noisy:
                notes.append(f"{row}: {tree} spread {found.relative:.0%} of its median")
        ratios = (
            {"copy mode / memfs": res.ratio(row, "copy mode", "memfs")}
            if row.startswith("turn ")
            else workload_ratios(res, row)
        )
        for name, ratio in ratios.items():
            if ratio is not None and ratio.noisy:
                notes.append(f"{row}: {name} spread {ratio.relative:.0%} of its median")
    return notes


def workload_rows(res: Results, sizes: Sizes, overlay: bool, chart: dict[str, float]) -> list[str]:
    lines = [
        "| workload | native | fuse-overlayfs | pyfuse3 floor | memfs |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, _ in workloads(sizes):
        nat, ovl, flo, mem = (res.spread(label, tree) for tree in TREES)
        ovl_cell = cell(ovl) if overlay else "skipped"
        flo_cell = cell(flo) if reads_only(label) else "—"
        lines.append(f"| {label} | {cell(nat)} | {ovl_cell} | {flo_cell} | {cell(mem)} |")
    lines += [
        "",
        f"| workload | memfs / pyfuse3 floor | ≤ {FLOOR_TARGET}x? | pyfuse3 floor / native "
        "| pyfuse3 floor / fuse-overlayfs | memfs / fuse-overlayfs | memfs / native |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for label, _ in workloads(sizes):
        found = workload_ratios(res, label)
        over_floor = found.get(ratio_name("memfs", "pyfuse3 floor"))
        reads = reads_only(label)
        floor_vs_c = cell(found.get(ratio_name("pyfuse3 floor", "fuse-overlayfs")), "x")
        if not reads:
            floor_vs_c = "—"
        elif not overlay:
            floor_vs_c = "skipped"
        cells = [
            cell(over_floor, "x") if reads else "—",
            meets(over_floor, FLOOR_TARGET) if reads else "—",
            cell(found.get(ratio_name("pyfuse3 floor", "native")), "x") if reads else "—",
            floor_vs_c,
            cell(found.get(ratio_name("memfs", "fuse-overlayfs")), "x") if overlay else "skipped",
            cell(found.get(ratio_name("memfs", "native")), "x"),
        ]
        lines.append(f"| {label} | {' | '.join(cells)} |")
        for name, spread in found.items():
            if spread is not None:
                chart[f"{label}\n{name}"] = spread.median
    if res.requests:
        lines += [
            "",
            "| FUSE requests memfs served (last run) | total | by operation |",
            "| --- | ---: | --- |",
        ]
        for label, _ in workloads(sizes):
            counts = res.requests.get(label, {})
            ops = ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda i: -i[1]))
            lines.append(f"| {label} | {sum(counts.values())} | {ops} |")
    return [*lines, ""]


def sync_cell(c: dict[str, float]) -> str:
    """Syncs per turn, in all and by syscall (the ones that occurred), or why there are none."""
    if "syncs/turn" not in c:
        return "n/a (no strace)"
    parts = [
        f"{name} {c[f'{name}/turn']:.2f}" for name in SYNC_CALLS if c.get(f"{name}/turn", 0) > 0
    ]
    return f"{c['syncs/turn']:.2f} ({', '.join(parts) or 'none'})"


def turn_label(n: int) -> str:
    return f"turn start+end, {n} files"


def turn_rows(res: Results, sizes: Sizes, chart: dict[str, float]) -> list[str]:
    lines = [
        "| turn start+end, 10 files changed | copy mode | memfs | copy mode / memfs |",
        "| --- | ---: | ---: | ---: |",
    ]
    for n in sizes.turn_spaces:
        label = turn_label(n)
        copy, mem = res.spread(label, "copy mode"), res.spread(label, "memfs")
        both = res.ratio(label, "copy mode", "memfs")
        lines.append(f"| {n} files | {cell(copy)} | {cell(mem)} | {cell(both, 'x')} |")
        if both:
            chart[f"turn {n} files\ncopy/memfs"] = both.median
    small, large = sizes.turn_spaces[0], sizes.turn_spaces[-1]
    growth = res.ratio(turn_label(large), "memfs", "memfs", bottom_row=turn_label(small))
    lines.append(f"| memfs turn {large} files / turn {small} files | | | {cell(growth, 'x')} |")
    if growth:
        chart[f"memfs turn {large}/{small}"] = growth.median
    return [*lines, ""]


def report(
    res: Results, sizes: Sizes, runs: int, overlay: bool, quick: bool
) -> tuple[str, dict[str, float]]:
    """The markdown table, and the ratios to chart."""
    chart: dict[str, float] = {}
    lines = [
        f"Machine: {machine()}",
        "",
        f"Mode: {'--quick' if quick else 'full'}, runs: {runs}, every tree in every run, "
        "order rotated per run. Times: median (min-max) in seconds; ratios: median "
        f"(min-max) of the per-run ratios. `*`: spread over {NOISY_SPREAD:.0%} of the median.",
        "",
    ]
    if not overlay:
        lines += [
            f"fuse-overlayfs: **skipped** (not installed; `{INSTALL_HINT}`)",
            "",
        ]
    if any(row == label for (row, _) in res.times for label, _ in workloads(sizes)):
        lines += workload_rows(res, sizes, overlay, chart)
    if any(row.startswith("turn start+end") for (row, _) in res.times):
        lines += turn_rows(res, sizes, chart)
    c = res.concurrency
    if c:
        lines += [
            "| concurrency (one run) | turns | turns/s | p50 turn (s) | p99 turn (s) | errors "
            "| lost writes | daemon CPU per turn | syncs per turn |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {sizes.sessions} sessions x {sizes.turns} turns (5 reads, 2 writes each) "
            f"| {c['turns']:.0f} | {c['turns/s']:.1f} | {c['p50']:.4f} | {c['p99']:.4f} "
            f"| {c['errors']:.0f} | {c['lost']:.0f} of {c['writes']:.0f} "
            f"| {c['cpu/turn'] * 1000:.2f} ms | {sync_cell(c)} |",
            "",
            f"A turn alone on the idle daemon (start, 5 reads, 2 writes, end; median of "
            f"{SINGLE_TURNS}): {c['alone'] * 1000:.1f} ms. Daemon CPU: utime + stime of the "
            "daemon process over the concurrent run, divided by its turns. Beside it, per "
            f"turn: the client {c['client cpu/turn'] * 1000:.2f} ms, its shells (bash, cat) "
            f"{c['shell cpu/turn'] * 1000:.2f} ms; all three kept {c['cores busy']:.2f} of "
            f"{os.cpu_count()} cores busy. Syncs: "
            f"`strace -f -c -e trace={','.join(SYNC_CALLS)}` attached to the daemon over "
            f"{sizes.sessions} sessions x {FSYNC_TURNS} turns at once, calls divided by turns. "
            "A new file in state_dir took "
            f"{c['inode before'] * 1e6:.0f} µs before the concurrent run and "
            f"{c['inode after'] * 1e6:.0f} µs after it (median of {INODE_SAMPLES}; on ext4 "
            "without a journal it grows with the inodes recently deleted near it).",
            "",
        ]
    if res.rss:
        lines += [
            "| daemon memory (VmRSS of the daemon process) | before | after | delta |",
            "| --- | ---: | ---: | ---: |",
            f"| {sizes.rss_sessions} sessions open on one {sizes.rss_space}-file space "
            f"| {res.rss['before']:.0f} MiB | {res.rss['after']:.0f} MiB "
            f"| {res.rss['delta']:.0f} MiB |",
            "",
        ]
    notes = noise_notes(res, sizes)
    if notes:
        lines += [
            f"Noisy (spread over {NOISY_SPREAD:.0%} of the median; rerun on a quieter "
            "machine before quoting these):",
            "",
            *(f"- {note}" for note in notes),
            "",
        ]
    lines.append(f"Errors in turns outside the concurrency run: {res.errors}")
    return "\n".join(lines), chart


def results_json(
    res: Results, sizes: Sizes, runs: int, overlay: bool, quick: bool
) -> dict[str, object]:
    """Every sample and statistic of a run, for ``OUT/results.json``."""

    def spread(found: Spread | None) -> dict[str, object] | None:
        return None if found is None else found.as_json()

    rows = []
    for label, _ in workloads(sizes):
        trees = {tree: spread(res.spread(label, tree)) for tree in TREES}
        ratios: dict[str, object] = {}
        for name, found in workload_ratios(res, label).items():
            entry = spread(found)
            if entry is not None and name == ratio_name("memfs", "pyfuse3 floor"):
                entry |= {"target": FLOOR_TARGET, "meets": meets(found, FLOOR_TARGET)}
            ratios[name] = entry
        if any(trees.values()):
            rows.append(
                {
                    "workload": label,
                    "reads_only": reads_only(label),
                    "trees": {tree: value for tree, value in trees.items() if value is not None},
                    "ratios": ratios,
                    "order": res.orders.get(label, []),
                    "requests": res.requests.get(label, {}),
                }
            )
    turns = [
        {
            "files": n,
            "copy mode": spread(res.spread(turn_label(n), "copy mode")),
            "memfs": spread(res.spread(turn_label(n), "memfs")),
            "copy mode / memfs": spread(res.ratio(turn_label(n), "copy mode", "memfs")),
        }
        for n in sizes.turn_spaces
        if res.spread(turn_label(n), "memfs") is not None
    ]
    return {
        "machine": machine(),
        "mode": "quick" if quick else "full",
        "runs": runs,
        "fuse_overlayfs": overlay,
        "noisy_spread": NOISY_SPREAD,
        "floor_target": FLOOR_TARGET,
        "workloads": rows,
        "turns": turns,
        "concurrency": res.concurrency,
        "rss_mib": res.rss,
        "notes": noise_notes(res, sizes),
        "errors": res.errors,
    }


def plot(chart: dict[str, float], out: Path) -> Path | None:
    """A horizontal bar chart of the ratios (log scale, 1x marked) as ``out/ratios.png``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install -e .[bench])", file=sys.stderr)
        return None
    out.mkdir(parents=True, exist_ok=True)
    labels = [label.replace("\n", " — ") for label in chart]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(chart) + 1.5))
    ax.barh(labels, list(chart.values()), color="tab:blue")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("ratio (log scale; 1x = equal)")
    ax.set_title("memfs benchmark ratios")
    fig.tight_layout()
    path = out / "ratios.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> int:
    """Parse arguments, run the suite, print the table, write the chart, clean up."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a CI smoke run")
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"runs of every workload on every tree (default {RUNS}, --quick {QUICK_RUNS})",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument(
        "--only",
        type=lambda text: frozenset(text.split(",")),
        default=frozenset(PARTS),
        help=f"comma-separated parts to run (default all: {','.join(PARTS)})",
    )
    args = parser.parse_args()
    if unknown := args.only - set(PARTS):
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}; known: {', '.join(PARTS)}")
    sizes = QUICK if args.quick else FULL
    runs = args.runs or (QUICK_RUNS if args.quick else RUNS)
    if runs < 1:
        parser.error("--runs must be at least 1")
    overlay = shutil.which("fuse-overlayfs") is not None
    if not overlay:
        print(
            f"fuse-overlayfs is not on PATH: its column is skipped. Install it: {INSTALL_HINT}",
            file=sys.stderr,
        )
    base = Path(tempfile.mkdtemp(prefix="memfs-bench-"))
    try:
        res = trio.run(suite, sizes, runs, overlay, base, args.only)
    finally:
        for point in mounts_under(base):
            os.system(f"fusermount3 -u -z '{point}' 2>/dev/null")
        shutil.rmtree(base, ignore_errors=True)
    table, chart = report(res, sizes, runs, overlay, args.quick)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(table + "\n")
    data = results_json(res, sizes, runs, overlay, args.quick)
    (args.out / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    print(f"\nTable: {args.out / 'table.md'}; every sample: {args.out / 'results.json'}")
    path = plot(chart, args.out)
    if path:
        print(f"Chart: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
