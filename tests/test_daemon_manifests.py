"""Shared memory's manifest bases: turn.json writes what changed, and a restart still has it all."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest

import memfs
from memfs.core.models import ChangeSet, FileMeta, Limits, Loaded, Provenance, SpaceRef, digest
from memfs.engine.turns import Memory, TurnState
from memfs.stores.base import Store
from memfs.stores.manifests import Manifest
from memfs.stores.memory import MemoryStore
from memfs.stores.sql.files import _load_lean
from memfs.stores.sql.lean import LeanCache
from memfs.stores.sqlite import SqliteStore
from memfs.stores.sqlite.db import SqliteDb
from memfsd import manifests
from memfsd.blobs import BlobCache
from memfsd.manifests import MANIFEST_DIR, REBASE_AT, SharedManifests, Written, snapshots
from memfsd.overlay import Overlay
from memfsd.workspace import OverlayWorkspace, _write_atomic
from tests.overlay_helpers import node_of, source_of, turn_of

BODY = {"userId": "u1", "name": "U", "orgId": "o1"}
P = Provenance()
RULES = SpaceRef(layer="org", space="rules", org="o1")
ME = SpaceRef(layer="user", space="me", user="u1", org="o1")


def workspace(tmp_path: Path, store: Store) -> tuple[Memory, OverlayWorkspace]:
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
    specs = [
        memfs.org_memory(space="rules", org="orgId", review="none"),
        memfs.user_memory(org="orgId"),
    ]
    return Memory(store, specs, workspace=ws), ws


def rows(ws: OverlayWorkspace, session: str) -> tuple[dict[str, object], list[str]]:
    """turn.json's header and its rows (one string per file, fields NUL-separated)."""
    head, _, body = ws.turn_file(session).read_text().partition("\n")
    parts = body.split("\0") if body else []
    return json.loads(head), ["\0".join(parts[at : at + 8]) for at in range(0, len(parts), 8)]


def bases(tmp_path: Path) -> set[str]:
    folder = tmp_path / "state" / MANIFEST_DIR
    return {path.name for path in folder.iterdir()} if folder.is_dir() else set()


def _compares_every_file(*args: object) -> object:
    raise AssertionError("compared every file of the space with its base")


def a_store(kind: str, tmp_path: Path) -> MemoryStore | SqliteStore:
    """The memory store (tells no lineage) or SQLite (tells which paths moved)."""
    return MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "memfs.db")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_shared_space_changed_by_a_few_files_writes_only_those_and_restores_whole(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = a_store(kind, tmp_path)
    files = {f"notes/r{i:03}.md": f"rule {i}\n".encode() for i in range(100)}
    await store.put(RULES, ChangeSet(created=files), provenance=Provenance())
    memory, ws = workspace(tmp_path, store)
    if kind == "sqlite":  # told which paths moved, the daemon compares only those
        monkeypatch.setattr(manifests, "_off", _compares_every_file)
    await (await memory.start_turn("s1", BODY)).end()
    # Between two turns: one file updated, one made, one deleted, one only chmod-ed.
    run = FileMeta(mode=0o755, mtime_ns=1_700_000_000_000_000_001, ctime_ns=None)
    await store.put(
        RULES,
        ChangeSet(
            created={"notes/new.md": b"new\n"},
            updated={"notes/r001.md": b"changed\n", "notes/r002.md": files["notes/r002.md"]},
            deleted=("notes/r003.md",),
            meta={"notes/r002.md": run},
        ),
        provenance=Provenance(),
    )
    turn = await memory.start_turn("s1", BODY)
    header, written = rows(ws, "s1")
    assert list(header["bases"]) == ["rules"]  # type: ignore[call-overload]
    # Only what differs from the base the first turn wrote, and nothing of the rest.
    assert sorted(line.split("\0")[1] for line in written) == [
        "notes/new.md",
        "notes/r001.md",
        "notes/r002.md",
        "notes/r003.md",
    ]
    loaded = turn.mounts["rules"]
    expected_shas = {
        path: digest(content)
        for path, content in {
            **files,
            "notes/new.md": b"new\n",
            "notes/r001.md": b"changed\n",
        }.items()
        if path != "notes/r003.md"
    }
    # A restart (a new workspace over the same state_dir) reads the turn back whole.
    again, ws2 = workspace(tmp_path, store)
    [record] = ws2.saved_turns().records
    assert record["shas"]["rules"] == expected_shas
    state = record["state"]["mounts"]["rules"]
    assert state["sizes"] == dict(loaded.sizes)
    assert state["snapshot"] == dict(loaded.snapshot)
    restored = again.restore_turn(TurnState.model_validate(record["state"]))
    assert restored.mounts["rules"].meta == loaded.meta
    assert restored.mounts["rules"].meta["notes/r002.md"].mode == 0o755
    ws2.reattach(restored.state(), record)
    mount = turn_of(ws2.overlay).mounts["rules"]
    assert source_of(ws2.overlay, mount, "notes/r001.md").read_bytes() == b"changed\n"
    assert source_of(ws2.overlay, mount, "notes/r050.md").read_bytes() == b"rule 50\n"
    assert ws2.overlay.source(mount, "notes/r003.md") is None
    assert node_of(ws2.overlay, mount, "notes/r002.md").mode == 0o755


async def test_an_unchanged_shared_space_writes_no_rows_at_all(tmp_path: Path) -> None:
    store = MemoryStore()
    files = {f"r{i}.md": b"x" * i for i in range(50)}
    await store.put(RULES, ChangeSet(created=files), provenance=Provenance())
    memory, ws = workspace(tmp_path, store)
    await (await memory.start_turn("s1", BODY)).end()
    await memory.start_turn("s1", BODY)
    header, written = rows(ws, "s1")
    assert written == [] and len(bases(tmp_path)) == 1
    base = (tmp_path / "state" / MANIFEST_DIR / header["bases"]["rules"]).read_text()  # type: ignore[index]
    assert base.count("\0") == 50 * 7 - 1


async def test_a_persons_memory_is_written_whole_and_never_into_a_base(tmp_path: Path) -> None:
    store = MemoryStore()
    await store.put(RULES, ChangeSet(created={"r.md": b"rule\n"}), provenance=Provenance())
    await store.put(ME, ChangeSet(created={"secret-plans.md": b"tea\n"}), provenance=Provenance())
    memory, ws = workspace(tmp_path, store)
    await (await memory.start_turn("s1", BODY)).end()
    await memory.start_turn("s1", BODY)
    header, written = rows(ws, "s1")
    assert "me" not in header["bases"]  # type: ignore[operator]
    assert [line.split("\0")[:2] for line in written] == [["me", "secret-plans.md"]]
    for name in bases(tmp_path):
        assert "secret-plans" not in (tmp_path / "state" / MANIFEST_DIR / name).read_text()


async def test_a_base_file_goes_once_no_written_down_turn_names_it_and_a_start_sweeps_the_rest(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    files = {f"r{i:04}.md": b"a\n" for i in range(REBASE_AT + 10)}
    await store.put(RULES, ChangeSet(created=files), provenance=Provenance())
    memory, ws = workspace(tmp_path, store)
    other = await memory.start_turn("s2", BODY)
    [first] = bases(tmp_path)
    # More files changed than a turn writes off a base: the next turn writes a new one.
    await store.put(
        RULES, ChangeSet(updated={path: b"b\n" for path in files}), provenance=Provenance()
    )
    turn = await memory.start_turn("s1", BODY)
    header, written = rows(ws, "s1")
    second = header["bases"]["rules"]  # type: ignore[index]
    assert written == [] and bases(tmp_path) == {first, second}
    await other.end()  # the last turn naming the first base
    assert bases(tmp_path) == {second}
    await turn.end()  # the current base stays for the next turn over the space
    assert bases(tmp_path) == {second}
    # What a crash leaves (a base no turn.json names) goes at the next start.
    again, ws2 = workspace(tmp_path, store)
    assert ws2.saved_turns() == ([], [])
    ws2.sweep_ended(set())
    assert bases(tmp_path) == set()
    await (await again.start_turn("s1", BODY)).end()
    assert len(bases(tmp_path)) == 1


async def test_a_base_named_by_a_restored_turn_survives_the_start_sweep(tmp_path: Path) -> None:
    store = MemoryStore()
    await store.put(RULES, ChangeSet(created={"r.md": b"rule\n"}), provenance=Provenance())
    memory, _ = workspace(tmp_path, store)
    turn = await memory.start_turn("s1", BODY)
    named = bases(tmp_path)
    again, ws2 = workspace(tmp_path, store)
    [record] = ws2.saved_turns().records
    restored = again.restore_turn(TurnState.model_validate(record["state"]))
    ws2.reattach(restored.state(), record)
    ws2.sweep_ended({("s1", turn.id)})
    assert bases(tmp_path) == named
    await restored.end()
    # This daemon never made it its space's current base: it goes with the turn.
    assert bases(tmp_path) == set()


@pytest.mark.parametrize("seed", range(4))
async def test_a_shared_space_changed_at_random_between_turns_restores_as_the_store_has_it(
    tmp_path: Path, seed: int
) -> None:
    # SQLite tells the daemon which paths moved since its base (a lineage);
    # whatever the writes (made, rewritten, chmod-ed, removed, written back),
    # what turn.json holds must be the space exactly as the turn loaded it.
    rng = random.Random(seed)
    store = SqliteStore(tmp_path / "memfs.db")
    files = {f"d{i % 7}/f{i:03}.md": f"{i}\n".encode() for i in range(60)}
    await store.put(RULES, ChangeSet(created=files), provenance=Provenance())
    memory, ws = workspace(tmp_path, store)
    try:
        for _ in range(12):
            await (await memory.start_turn("s1", BODY)).end()
            live = await store.files(RULES)
            paths = sorted(live)
            gone = rng.sample(paths, rng.randint(0, 3))
            rest = [path for path in paths if path not in gone]
            updated = {path: rng.randbytes(4) for path in rng.sample(rest, rng.randint(0, 3))}
            modes = {
                path: FileMeta(mode=rng.choice([0o600, 0o644, 0o755]), mtime_ns=None, ctime_ns=None)
                for path in rng.sample(rest, rng.randint(0, 2))
            }
            updated.update({path: live[path] for path in modes if path not in updated})
            created = {f"new/{rng.randrange(10**6)}.md": rng.randbytes(3) for _ in range(2)}
            await store.put(
                RULES,
                ChangeSet(created=created, updated=updated, deleted=tuple(gone), meta=modes),
                provenance=Provenance(),
            )
            turn = await memory.start_turn("s1", BODY)
            [record] = (
                OverlayWorkspace(ws.overlay, tmp_path / "mnt", invalidate=None)
                .saved_turns()
                .records
            )
            want = await store.files(RULES)
            assert record["shas"]["rules"] == {p: digest(c) for p, c in want.items()}
            state = record["state"]["mounts"]["rules"]
            assert state["snapshot"] == dict(turn.mounts["rules"].snapshot)
            assert state["meta"] == {
                path: meta._asdict() for path, meta in turn.mounts["rules"].meta.items()
            }
            await turn.end()
    finally:
        await store.aclose()


async def test_a_backup_put_back_in_place_under_a_base_restores_the_turn_as_the_store_has_it(
    tmp_path: Path,
) -> None:
    # The backup sends the space's version back below the base's; later
    # writes carry it past again. The line the base was taken on must not
    # answer for it: a.md is a1 again, never the base's a2.
    path, backup = tmp_path / "memfs.db", tmp_path / "backup.db"
    store = SqliteStore(path)
    memory, ws = workspace(tmp_path, store)
    other = SpaceRef(layer="org", space="other", org="o1")
    try:
        await store.put(RULES, ChangeSet(created={"a.md": b"a1", "b.md": b"b1"}), provenance=P)
        with sqlite3.connect(path) as live, sqlite3.connect(backup) as copy:
            live.backup(copy)
        await store.put(RULES, ChangeSet(updated={"a.md": b"a2"}), provenance=P)
        await (await memory.start_turn("s1", BODY)).end()  # the base: a2
        with sqlite3.connect(backup) as copy, sqlite3.connect(path) as live:
            copy.backup(live)
        await (await memory.start_turn("s1", BODY)).end()  # the version went back
        for i in range(5):
            await store.put(other, ChangeSet(created={f"x{i}.md": b"x"}), provenance=P)
        await store.put(RULES, ChangeSet(created={"c.md": b"c"}), provenance=P)
        turn = await memory.start_turn("s1", BODY)
        [record] = (
            OverlayWorkspace(ws.overlay, tmp_path / "mnt", invalidate=None).saved_turns().records
        )
        want = {p: digest(c) for p, c in (await store.files(RULES)).items()}
        assert want["a.md"] == digest(b"a1") and record["shas"]["rules"] == want
        mount = turn_of(ws.overlay).mounts["rules"]
        assert source_of(ws.overlay, mount, "a.md").read_bytes() == b"a1"
        await turn.end()
    finally:
        await store.aclose()


async def test_a_base_from_one_threads_refresh_says_nothing_to_another_threads_branch(
    tmp_path: Path,
) -> None:
    # PostgreSQL's pool threads each read at their own snapshot, and each
    # refreshes the manifest the store holds: thread A (snapshot {a, x})
    # puts its refresh after thread B's ({a, x, q}), from which the daemon
    # took its base. q.md removed later must leave the next turn's snapshot.
    # (SQLite emulates it: a second connection holds A's read transaction.)
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    late = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    shared = SharedManifests(tmp_path / "state", _write_atomic)

    def written(session: str, loaded: Loaded) -> Written:
        return shared.written(
            session, "rules", RULES, loaded.shas, loaded.sizes, loaded.revisions, loaded.meta,
            loaded.lineage,
        )  # fmt: skip

    class HeldBefore:
        """The store's manifests as thread A saw them: held before thread B's put."""

        def __init__(self, lean: LeanCache, held: Manifest | None) -> None:
            self.lean, self._held = lean, held

        def held(self, generation: int, space_id: int, version: int) -> Manifest | None:
            return self._held

        def get(self, generation: int, space_id: int, version: int) -> Manifest | None:
            return None

        def put(self, generation: int, space_id: int, manifest: Manifest) -> Manifest:
            return self.lean.put(generation, space_id, manifest)

    try:
        await store.put(RULES, ChangeSet(created={"a.md": b"a"}), provenance=P)
        first = await store.load_lean(RULES, "s0", set())
        (space_id,) = sqlite3.connect(path).execute("SELECT id FROM spaces").fetchone()
        assert first.lineage is not None
        held = store._lean.held(0, space_id, 2**62)  # the newest; SQLite's generation is 0
        await store.put(RULES, ChangeSet(created={"x.md": b"x"}), provenance=P)
        late.execute("BEGIN")
        late.execute("SELECT version FROM spaces").fetchall()  # A's snapshot: {a, x}
        await store.put(RULES, ChangeSet(created={"q.md": b"q"}), provenance=P)
        written("s1", await store.load_lean(RULES, "s1", set()))  # the base, from B
        thread_a = HeldBefore(store._lean, held)
        _load_lean(SqliteDb(late, store._store_key), RULES, "s2", set(), thread_a)  # type: ignore[arg-type]
        late.execute("COMMIT")
        await store.put(RULES, ChangeSet(deleted=("q.md",)), provenance=P)
        now = await store.load_lean(RULES, "s3", set())
        assert written("s3", now).snapshot == snapshots(now.shas, now.sizes, now.revisions)
    finally:
        late.close()
        await store.aclose()
