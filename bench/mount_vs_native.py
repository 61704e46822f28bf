"""Quick measurements for the daemon (step 2): the mount against a native directory, same run.

- ``grep -r`` over 2,000 files of 2 KB in 50 folders: first pass after the turn
  starts and a second pass, on the mount and on a native copy.
- Turn start + end with 10 changed files on a 1,000-file space: the daemon
  (FUSE overlay) against copy mode (copy the space into a folder, scan it back).

Runs the daemon in-process on a temporary SQLite store. Prints a markdown
table of medians and ratios. Not a test: timings live here, never in tests.

    .venv/bin/python bench/mount_vs_native.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import pyfuse3
import trio

import memfs
from memfs.api.models import StartTurnRequest
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.sqlite import SqliteStore
from memfsd.main import Settings, serve

BODY = {"userId": "u1", "name": "Bench"}
WORD = "needle"


def corpus(files: int, folders: int = 50, size: int = 2048) -> dict[str, bytes]:
    out = {}
    for i in range(files):
        line = f"file {i} of the bench corpus; "
        body = (line * (size // len(line) + 1))[: size - 8]
        if i % 97 == 0:
            body = body[:100] + WORD + body[106:]
        out[f"folder-{i % folders:02}/note-{i:05}.md"] = body.encode() + b"\n" * 8
    return out


async def seed(db: Path, space: str, files: dict[str, bytes]) -> None:
    store = SqliteStore(db)
    try:
        ref = SpaceRef(layer="org", space=space)
        await store.put(ref, ChangeSet(created=files), provenance=Provenance(origin="code"))
    finally:
        await store.aclose()


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def grep(root: Path) -> None:
    await trio.run_process(["grep", "-r", "-c", WORD, str(root)], capture_stdout=True, check=False)


def write_native(root: Path, files: dict[str, bytes]) -> None:
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)


async def main(runs: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="memfs-bench-"))
    state = base / "state"
    state.mkdir()
    db = state / "memfs.db"
    big, small = corpus(2000), corpus(1000)
    await seed(db, "grep", big)
    await seed(db, "turns", small)
    native = base / "native"
    await trio.to_thread.run_sync(write_native, native, big)
    specs = [
        memfs.org_memory(space="grep", review="none"),
        memfs.org_memory(space="turns", review="none"),
    ]
    settings = Settings(
        mount_root=base / "mnt",
        state_dir=state,
        store=f"sqlite://{db}",
        specs=specs,
        limits=memfs.Limits(),
        socket=state / "memfs.sock",
    )
    rows: dict[str, list[float]] = {}
    copy_mode = memfs.Memory(
        SqliteStore(db), [memfs.org_memory(space="turns", review="none")], workdir=base / "copy"
    )
    async with trio.open_nursery() as nursery:
        service = await nursery.start(serve, settings)
        for run in range(runs):
            # grep: A (native) B (mount) interleaved, first and second pass.
            drop = "sync; echo 3 > /proc/sys/vm/drop_caches"
            await trio.run_process(["sh", "-c", drop], check=False)
            for label, tree in (("native", native), ("memfs", None)):
                if tree is None:
                    request = StartTurnRequest(session=f"g{run}", extra_body=BODY)
                    tree = Path((await service.start_turn(request)).mounts["grep"].path)
                for nth in ("first", "second"):
                    spent = await timed(partial(grep, tree))
                    rows.setdefault(f"grep -r, {label}, {nth}", []).append(spent)
            await service.end_turn(f"g{run}")

            # Turn start + end, 10 files changed, on 1,000 files.
            async def daemon_turn(run: int = run) -> None:
                request = StartTurnRequest(session=f"t{run}", extra_body=BODY)
                started = await service.start_turn(request)
                root = Path(started.mounts["turns"].path)
                script = "; ".join(f"echo x >> folder-{i:02}/note-{i:05}.md" for i in range(10))
                await trio.run_process(["sh", "-c", script], cwd=root)
                await service.end_turn(f"t{run}")

            async def copy_turn(run: int = run) -> None:
                turn = await copy_mode.start_turn(f"c{run}", BODY)
                root = turn.mounts["turns"].path
                script = "; ".join(f"echo x >> folder-{i:02}/note-{i:05}.md" for i in range(10))
                await trio.run_process(["sh", "-c", script], cwd=root)
                await turn.end()

            rows.setdefault("turn start+end (1,000 files, 10 changed), copy mode", []).append(
                await timed(copy_turn)
            )
            rows.setdefault("turn start+end (1,000 files, 10 changed), memfs", []).append(
                await timed(daemon_turn)
            )
        pyfuse3.terminate()
    await copy_mode.store.aclose()

    med = {name: statistics.median(values) for name, values in rows.items()}
    print(f"runs: {runs} (medians, seconds)\n")
    print("| measurement | native / copy mode | memfs | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, a, b in (
        ("grep -r 2,000 files, first pass", "grep -r, native, first", "grep -r, memfs, first"),
        ("grep -r 2,000 files, second pass", "grep -r, native, second", "grep -r, memfs, second"),
        (
            "turn start+end, 1,000 files, 10 changed",
            "turn start+end (1,000 files, 10 changed), copy mode",
            "turn start+end (1,000 files, 10 changed), memfs",
        ),
    ):
        print(f"| {label} | {med[a]:.4f} | {med[b]:.4f} | {med[b] / med[a]:.2f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    trio.run(main, parser.parse_args().runs)
