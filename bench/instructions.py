"""Instructions the daemon executes per turn alone, counted by callgrind.

On the VMs memfs is measured on, wall-clock and CPU seconds of one tree
swing by tens of percent from one run to the next (``docs/benchmarks.md``),
so a change worth 5% cannot be seen in them. Callgrind counts the
instructions a process executes in user space: the same for the same tree,
inputs and environment, whatever else the machine is doing. That is the
daemon's work under its interpreter lock, which bounds a daemon's turns per
second; the kernel's side (syscalls, FUSE) is not counted.

For each tree the daemon (``memfs daemon``, SQLite store, a space of
``bench/run.py``'s notes, 1,000 unless ``--files`` says) runs under
``valgrind --tool=callgrind`` twice: for ``--warm`` turns alone, then for
``--warm`` + ``--turns``. The difference divided by ``--turns`` is what one
steady-state turn costs (start, 5 reads, 2 writes, end, as in the
concurrency part), start-up and the cold first turns left out. ``--tree
PATH`` counts another checkout beside this one (a worktree of an older
commit, say; its daemon imported from there), so trees are compared in one
run. Two runs with different ``--files`` give what each file of a space
costs a turn that touches none of them.

Usage (root, valgrind installed)::

    python bench/instructions.py [--turns 20] [--warm 5] [--files 1000] [--tree PATH ...]

Prints a Markdown table; with ``--out``, writes ``instructions.json`` there too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run  # bench/run.py
import trio
from run import LIMITS, SPACE, body, outcome_errors, sh, turn_script

from memfs.client import Client
from memfs.core.errors import DaemonUnavailable

HERE = Path(__file__).resolve().parent.parent
START_SECONDS = 600  # a daemon under callgrind imports everything 50 times slower


def tree_env(tree: Path) -> dict[str, str]:
    """The environment a daemon of ``tree`` runs in: memfs and memfsd imported from there."""
    env = dict(os.environ)
    if tree != HERE:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / ".typecheck")])
    return env


async def counted(tree: Path, turns: int, files: int) -> int:
    """Instructions a daemon of ``tree`` executes over its whole life with ``turns`` turns alone."""
    base = Path(tempfile.mkdtemp(prefix="memfs-instructions-"))
    try:
        (base / "state").mkdir()
        db = base / "state" / "memfs.db"
        await seeded(tree, db, files)
        config = base / "memfs.toml"
        config.write_text(run.CONFIG.format(base=base, db=db, space=SPACE, **LIMITS.model_dump()))
        out = base / "callgrind.out"
        proc = start_daemon(tree, config, out, base / "daemon.log")
        try:
            await drive(base, proc, turns)
        finally:
            await trio.to_thread.run_sync(stop, proc)
        return totals(out)
    finally:
        for point in run.mounts_under(base):
            await run.unmount(Path(point))
        shutil.rmtree(base, ignore_errors=True)


SEED = (
    "import sys, trio; from pathlib import Path; sys.path.insert(0, 'bench'); import run; "
    "trio.run(run.seed, Path(sys.argv[1]), 'conc', run.corpus(int(sys.argv[2])))"
)


async def seeded(tree: Path, db: Path, files: int) -> None:
    """``files`` notes stored by ``tree``'s own code: its schema, which its daemon opens."""
    await trio.run_process(
        [sys.executable, "-c", SEED, str(db), str(files)], env=tree_env(tree), cwd=tree, check=True
    )


def start_daemon(tree: Path, config: Path, out: Path, log: Path) -> subprocess.Popen[bytes]:
    """``memfs daemon`` of ``tree`` under callgrind, its output into ``log``."""
    with open(log, "wb") as sink:
        return subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                sys.executable, "-m", "memfs.cli", "daemon", "--config", str(config),
            ],
            stdout=sink, stderr=subprocess.STDOUT, env=tree_env(tree), cwd=tree,
        )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then wait: callgrind writes its counts as the daemon exits."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=START_SECONDS)


async def drive(base: Path, proc: subprocess.Popen[bytes], turns: int) -> None:
    """Wait for the daemon, then run ``turns`` turns alone through its control socket."""
    client = Client(base / "state" / "memfs.sock", timeout=START_SECONDS)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                await trio.to_thread.run_sync(client.status)
                break
            except DaemonUnavailable:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                await trio.sleep(0.5)
        expected: dict[str, bytes] = {}
        for t in range(turns):
            started = await trio.to_thread.run_sync(client.start_turn, "alone", body("conc"))
            if await sh(turn_script(2000, t, expected), Path(started.mounts[SPACE].path)) != 0:
                raise RuntimeError(f"turn {t}: the shell failed")
            ended = await trio.to_thread.run_sync(client.end_turn, "alone")
            if outcome_errors(ended):
                raise RuntimeError(f"turn {t}: {ended}")
        await trio.to_thread.run_sync(client.close_session, "alone")
    finally:
        client.close()


def totals(out: Path) -> int:
    """The instruction count callgrind wrote for the whole process."""
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


async def main_async(args: argparse.Namespace) -> int:
    trees = [HERE, *(tree.resolve() for tree in args.tree)]
    per_turn: dict[str, list[float]] = {str(tree): [] for tree in trees}
    for run_no in range(args.runs):
        for tree in trees:
            warm = await counted(tree, args.warm, args.files)
            more = await counted(tree, args.warm + args.turns, args.files)
            per_turn[str(tree)].append((more - warm) / args.turns)
            print(
                f"run {run_no + 1}: {tree}: {per_turn[str(tree)][-1] / 1e6:.2f} M", file=sys.stderr
            )
    print(f"| tree | instructions per turn alone, {args.files:,} files (M) |")
    print("| --- | ---: |")
    for tree, counts in per_turn.items():
        print(f"| {tree} | {', '.join(f'{c / 1e6:.2f}' for c in counts)} |")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "instructions.json").write_text(json.dumps(per_turn, indent=2))
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked: a count below 1 is a usage error (exit 2)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--files", type=int, default=1000, help="files in the space (1 or more)")
    parser.add_argument("--tree", type=Path, action="append", default=[])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.turns < 1 or args.warm < 1 or args.files < 1:
        parser.error("--turns, --warm and --files must be 1 or more")
    return args


def main() -> int:
    args = parse()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install -y valgrind", file=sys.stderr)
        return 2
    return trio.run(main_async, args)


if __name__ == "__main__":
    raise SystemExit(main())
