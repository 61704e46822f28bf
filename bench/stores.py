"""Concurrent turns by store: SQLite, PostgreSQL with one daemon, PostgreSQL with two.

Issue 12's targets for the shared store, measured in one run each time:

- PostgreSQL, one daemon: within 1.5x of SQLite's turns/s;
- PostgreSQL, two daemons on one database: >= 1.6x one daemon (each daemon
  its own process, mount root and state dir; the sessions split between them).

Each setup runs the workload of ``bench/run.py --only concurrency`` (every
session's turn reads 5 notes and writes 2 files, over real FUSE mounts, through
the daemons' control sockets) on a fresh store seeded with the same 1,000
notes, then every write is checked in the store: errors and lost writes are
counted, never hidden. Setups alternate their order from run to run, and the
ratios are taken within a run, so a machine that slows down mid-run moves
both sides. PostgreSQL is a throwaway server in a temp dir
(``memfs.testing.postgres``), never a system cluster.

Usage (root, on an idle machine)::

    python bench/stores.py [--sessions 50] [--turns 20] [--runs 3] [--out DIR]

Prints a Markdown table; with ``--out``, writes ``stores.json`` there too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import run  # bench/run.py
import trio
from run import LIMITS, SPACE, body, corpus, outcome_errors, sh

from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.open import open_store
from memfs.testing.postgres import postgres_bindir, throwaway_postgres

ORG = "conc"
SETUPS = ("sqlite, 1 daemon", "postgresql, 1 daemon", "postgresql, 2 daemons")

CONFIG = """\
mount_root = "{base}/mnt"
state_dir = "{base}/state"
store = "{store}"
store_key_file = "{key}"
web_listen = ""

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


class Daemon(run.Daemon):
    """``bench/run.py``'s daemon process, on ``store`` with the key file ``key``, in ``base``."""

    def __init__(self, base: Path, store: str, key: Path) -> None:
        base.mkdir(parents=True)
        self.base = base
        text = CONFIG.format(base=base, store=store, key=key, space=SPACE, **LIMITS.model_dump())
        super().__init__(base, base / "unused.db", config_text=text)

    def cpu_seconds(self) -> float:
        return run.cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        super().stop()
        mnt = self.base / "mnt"
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True, check=False)


@dataclass
class Outcome:
    turns: int
    seconds: float
    p50: float
    p99: float
    errors: int
    lost: int
    writes: int
    cpu_per_turn: float
    server_cpu_per_turn: float = 0.0  # the PostgreSQL server's processes; 0 for SQLite
    cores_busy: float = 0.0  # daemons, server, this client and its shells, over the run

    @property
    def rate(self) -> float:
        return self.turns / self.seconds


async def seed(store_url: str, key: Path) -> None:
    store = open_store(store_url, key_file=key)
    try:
        ref = SpaceRef(layer="org", space=SPACE, org=ORG)
        await store.put(
            ref,
            ChangeSet(created=corpus(1000)),
            provenance=Provenance(origin="code"),
            limits=LIMITS,
        )
    finally:
        await store.aclose()


def server_cpu_seconds(data: Path | None) -> float:
    """utime + stime of a PostgreSQL server's processes (0 for none).

    The postmaster, its children, and the children it reaped (backends whose
    connection closed).
    """
    if data is None:
        return 0.0
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid, parent = int(entry), int(fields[1])
        if pid == postmaster or parent == postmaster:
            ticks = int(fields[11]) + int(fields[12])
            if pid == postmaster:
                ticks += int(fields[13]) + int(fields[14])
            total += ticks / os.sysconf("SC_CLK_TCK")
    return total


async def workload(
    daemons: list[Daemon], sessions: int, turns: int, server: Path | None = None
) -> tuple[Outcome, dict]:
    """Every session's turns on daemon ``s % len(daemons)``; what the store must hold after."""
    latencies: list[float] = []
    errors = 0
    expected: dict[str, bytes] = {}

    async def one_session(s: int) -> None:
        nonlocal errors
        daemon, session = daemons[s % len(daemons)], f"c{s}"
        for t in range(turns):
            script = run.turn_script(s, t, expected)
            start = time.perf_counter()
            try:
                started = await trio.to_thread.run_sync(
                    daemon.client.start_turn, session, body(ORG)
                )
                errors += await sh(script, Path(started.mounts[SPACE].path)) != 0
                ended = await trio.to_thread.run_sync(daemon.client.end_turn, session)
                errors += outcome_errors(ended)
            except Exception as error:  # counted and reported, never hidden
                print(f"  ! session {session} turn {t}: {error!r}", file=sys.stderr)
                errors += 1
            latencies.append(time.perf_counter() - start)
        await trio.to_thread.run_sync(daemon.client.close_session, session)

    cpu_before = sum(d.cpu_seconds() for d in daemons)
    server_before, harness_before = server_cpu_seconds(server), os.times()
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for s in range(sessions):
            nursery.start_soon(one_session, s)
    wall = time.perf_counter() - start
    cpu = sum(d.cpu_seconds() for d in daemons) - cpu_before
    server_cpu, harness = server_cpu_seconds(server) - server_before, os.times()
    harness_cpu = sum(harness[:4]) - sum(harness_before[:4])  # client and its shells
    quantiles = statistics.quantiles(latencies, n=100)
    outcome = Outcome(
        turns=len(latencies),
        seconds=wall,
        p50=statistics.median(latencies),
        p99=quantiles[98],
        errors=errors,
        lost=0,
        writes=len(expected),
        cpu_per_turn=cpu / len(latencies),
        server_cpu_per_turn=server_cpu / len(latencies),
        cores_busy=(cpu + server_cpu + harness_cpu) / wall,
    )
    return outcome, expected


async def lost_writes(store_url: str, key: Path, expected: dict[str, bytes]) -> int:
    store = open_store(store_url, key_file=key)
    try:
        stored = await store.files(SpaceRef(layer="org", space=SPACE, org=ORG))
    finally:
        await store.aclose()
    return sum(1 for path, content in expected.items() if stored.get(path) != content)


async def one_setup(
    setup: str,
    base: Path,
    pg_url: str | None,
    sessions: int,
    turns: int,
    server: Path | None = None,
) -> Outcome:
    key = base / "store.key"
    store_url = f"sqlite://{base / 'memfs.db'}" if pg_url is None else pg_url
    await seed(store_url, key)
    count = 2 if setup.endswith("2 daemons") else 1
    daemons = [Daemon(base / f"host-{n}", store_url, key) for n in range(count)]
    try:
        for daemon in daemons:
            await daemon.ready()
        outcome, expected = await workload(daemons, sessions, turns, server)
    finally:
        for daemon in daemons:
            daemon.stop()
    outcome.lost = await lost_writes(store_url, key, expected)
    return outcome


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


async def main_async(args: argparse.Namespace) -> int:
    bindir = postgres_bindir()
    if bindir is None:
        print("PostgreSQL is not installed here (apt-get install -y postgresql)", file=sys.stderr)
        return 2
    results: dict[str, list[Outcome]] = {setup: [] for setup in SETUPS}
    with throwaway_postgres(bindir) as server, tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            order = SETUPS if run % 2 == 0 else tuple(reversed(SETUPS))
            for setup in order:
                base = Path(tmp) / f"run{run}-{SETUPS.index(setup)}"
                pg_url = None if setup.startswith("sqlite") else server.new_database()
                print(f"run {run + 1}/{args.runs}: {setup}", file=sys.stderr)
                data = None if pg_url is None else server.data
                outcome = await one_setup(setup, base, pg_url, args.sessions, args.turns, data)
                results[setup].append(outcome)
    rows = [
        f"| setup ({args.sessions} sessions x {args.turns} turns, {args.runs} runs)"
        " | turns/s | p50 (s) | p99 (s) | daemon CPU per turn (ms) | server CPU per turn (ms)"
        " | cores busy | errors | lost writes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for setup, outcomes in results.items():
        rows.append(
            f"| {setup} | {spread([o.rate for o in outcomes])}"
            f" | {spread([o.p50 for o in outcomes])} | {spread([o.p99 for o in outcomes])}"
            f" | {spread([o.cpu_per_turn * 1000 for o in outcomes])}"
            f" | {spread([o.server_cpu_per_turn * 1000 for o in outcomes])}"
            f" | {spread([o.cores_busy for o in outcomes])} of {os.cpu_count()}"
            f" | {sum(o.errors for o in outcomes)}"
            f" | {sum(o.lost for o in outcomes)} of {sum(o.writes for o in outcomes)} |"
        )
    sqlite, pg1, pg2 = (results[s] for s in SETUPS)
    pg_vs_sqlite = [p.rate / s.rate for p, s in zip(pg1, sqlite, strict=True)]
    two_vs_one = [two.rate / one.rate for two, one in zip(pg2, pg1, strict=True)]
    rows += [
        "",
        "| ratio, within each run | median (range) | target |",
        "| --- | ---: | --- |",
        f"| PostgreSQL 1 daemon / SQLite | {spread(pg_vs_sqlite)}x | >= 0.67x (within 1.5x) |",
        f"| PostgreSQL 2 daemons / 1 daemon | {spread(two_vs_one)}x | >= 1.6x |",
    ]
    print("\n".join(rows))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "stores.json").write_text(
            json.dumps(
                {
                    setup: [o.__dict__ | {"turns/s": o.rate} for o in outcomes]
                    for setup, outcomes in results.items()
                },
                indent=2,
            )
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    return trio.run(main_async, args)


if __name__ == "__main__":
    sys.exit(main())
