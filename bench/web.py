"""The Memory tab's server time per request, on big memory: what a page costs memfs itself.

Two worlds in one SQLite store, built before anything is timed:

- **review**: ``CHANGES`` waiting changes (one per conversation, each a new
  file and an edit of a shared one) on one org space;
- **map**: a space of ``FILES`` files in 50 folders.

Each request is sent in process through httpx's ASGI transport (no socket,
no browser), so its time is the server's: routing, the store's queries, the
shaping and the template. Every URL is requested ``--runs`` times, the URLs
interleaved inside each run; the report gives the median and the spread
(min-max) per URL and notes a spread over NOISY_SPREAD of the median.
Timings are reported, never asserted.

    .venv/bin/python bench/web.py [--changes N] [--files N] [--runs N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

from memfs.core.members import Member
from memfs.core.models import ChangeSet, Limits, Provenance, SpaceRef
from memfs.stores.sqlite import SqliteStore
from memfs.web.app import web_app

ORG = "bench_org"
REVIEW = SpaceRef(layer="org", space="rules", org=ORG)
MAP = SpaceRef(layer="org", space="bench", org=ORG)
CHANGES = 1000
FILES = 10_000
RUNS = 7
NOISY_SPREAD = 0.25
# Limits large enough to hold the worlds (a 10k-file space is past the default space bound).
LIMITS = Limits(max_files=FILES * 2, max_space_bytes=1 << 34)
URLS = (
    ("review page", "/review"),
    ("review API", "/api/v1/review"),
    ("map page", "/map"),
    ("org space page", f"/org/{MAP.space}"),
    ("spaces API", "/api/v1/spaces"),
)


async def build(store: SqliteStore, changes: int, files: int) -> str:
    """Fill ``store`` with both worlds; the admin's token."""
    await store.put(
        REVIEW, ChangeSet(created={"shared.md": b"the rule\n"}), provenance=Provenance()
    )
    for n in range(changes):
        session = f"s{n:05}"
        loaded = await store.load(REVIEW, session)
        await store.store(
            REVIEW,
            ChangeSet(
                created={f"taught/{session}.md": f"lesson {n}\n".encode()},
                updated={"shared.md": f"the rule, as {session} says\n".encode()},
            ),
            cursor=loaded.cursor,
            provenance=Provenance(session=session, turn="t1", prompt=f"remember lesson {n}"),
            review="person",
        )
    corpus = {
        f"notes/folder-{i % 50:02}/note-{i:05}.md": f"note {i}\n".encode() * 20
        for i in range(files)
    }
    await store.put(
        MAP, ChangeSet(created=corpus), provenance=Provenance(origin="code"), limits=LIMITS
    )
    await store.add_member(Member(id="admin", org=ORG, role="admin"), by=None)
    return (await store.create_token("admin", ORG, by=None)).token


async def sign_in(client: httpx.AsyncClient, token: str) -> None:
    form = await client.get("/login")
    found = re.search(r'name="login" value="([^"]+)"', form.text)
    assert found is not None
    done = await client.post("/login", data={"token": token, "login": found.group(1)})
    assert done.status_code == 303, done.text


async def measure(changes: int, files: int, runs: int, db: Path) -> dict[str, list[float]]:
    store = SqliteStore(db)
    try:
        started = time.perf_counter()
        token = await build(store, changes, files)
        print(
            f"built {changes} changes and {files} files in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        app = web_app(store, limits=LIMITS)
        transport = httpx.ASGITransport(app=app)
        samples: dict[str, list[float]] = {label: [] for label, _ in URLS}
        async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
            await sign_in(client, token)
            headers = {"Authorization": f"Bearer {token}"}
            for run in range(runs):
                # Rotate the order per run, so no URL always goes first.
                order = URLS[run % len(URLS) :] + URLS[: run % len(URLS)]
                for label, url in order:
                    begin = time.perf_counter()
                    response = await client.get(url, headers=headers)
                    took = time.perf_counter() - begin
                    if response.status_code != 200:
                        raise SystemExit(f"{url}: {response.status_code} {response.text[:200]}")
                    samples[label].append(took)
        return samples
    finally:
        await store.aclose()


def report(samples: dict[str, list[float]], changes: int, files: int) -> str:
    rows = [
        f"Server time per request ({changes} waiting changes; a {files}-file space):",
        "",
        "| request | median | spread (min-max) | runs |",
        "|---|---|---|---|",
    ]
    notes = []
    for label, times in samples.items():
        median = statistics.median(times)
        low, high = min(times), max(times)
        rows.append(
            f"| {label} | {median * 1000:.0f} ms | {low * 1000:.0f}-{high * 1000:.0f} ms"
            f" | {len(times)} |"
        )
        if median and (high - low) / median > NOISY_SPREAD:
            notes.append(f"- {label}: spread over {NOISY_SPREAD:.0%} of the median (noisy)")
    return "\n".join(rows + (["", *notes] if notes else []))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=CHANGES)
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memfs-bench-web-") as tmp:
        samples = trio.run(measure, args.changes, args.files, args.runs, Path(tmp) / "memfs.db")
    table = report(samples, args.changes, args.files)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "web.md").write_text(table + "\n")
        (args.out / "web.json").write_text(json.dumps(samples, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
