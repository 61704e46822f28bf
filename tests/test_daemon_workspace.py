"""The daemon's workspace without a mount: what it writes down for a restart."""

from __future__ import annotations

import errno
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

import pytest
import trio

import memfs
import memfsd.journal as memfsd_journal
import memfsd.workspace as workspace_module
from memfs.api.models import ForgetNotice, StartTurnRequest
from memfs.core import ending
from memfs.core.errors import ConfigError, DiskFull, NotFound, StoreUnavailable, TurnOpen
from memfs.core.models import (
    ChangeSet,
    FileMeta,
    Limits,
    Loaded,
    Provenance,
    SpaceRef,
    SpaceResult,
    digest,
)
from memfs.engine.plan import ManualHold
from memfs.engine.turns import Memory, TurnState
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore
from memfsd.blobs import BlobCache
from memfsd.overlay import Overlay
from memfsd.service import DaemonService
from memfsd.spares import Spares
from memfsd.workspace import (
    DAMAGED_SUFFIX,
    DONE_FILE,
    FOLDER_KEY,
    MANIFEST_FORMAT,
    MANUAL_DIR,
    OverlayWorkspace,
)
from tests.overlay_helpers import source_of, turn_of

BODY = {"userId": "u1", "name": "U", "orgId": "o1"}


def workspace(tmp_path: Path) -> tuple[Memory, OverlayWorkspace]:
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
    specs = [
        memfs.org_memory(space="rules", org="orgId", review="none"),
        memfs.user_memory(org="orgId"),
    ]
    return Memory(MemoryStore(), specs, workspace=ws), ws


async def a_persons_workspace(
    tmp_path: Path,
) -> tuple[SqliteStore, OverlayWorkspace, Memory, SpaceRef]:
    """A person's memory over SQLite (a store that takes the trace with the store),
    holding ``prefs.md``."""
    store = SqliteStore(tmp_path / "memfs.db")
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
    memory = Memory(store, [memfs.user_memory()], workspace=ws)
    me = SpaceRef(layer="user", space="me", user="u1")
    await store.put(me, ChangeSet(created={"prefs.md": b"tea\n"}), provenance=Provenance())
    return store, ws, memory, me


def store_of(memory: Memory) -> MemoryStore:
    """The memory store ``workspace`` gives its ``Memory``."""
    assert isinstance(memory.store, MemoryStore)
    return memory.store


def restarted(tmp_path: Path, store: MemoryStore) -> tuple[Memory, OverlayWorkspace, DaemonService]:
    """The daemon started again over ``tmp_path``'s state, on the same store."""
    memory, ws = workspace(tmp_path)
    memory.store = store
    return memory, ws, DaemonService(memory, ws, "memory://", str(tmp_path / "state"))


def torn(state: Any) -> None:
    raise RuntimeError("a bug in the journal's replay")


def starts_and_fails_again(tmp_path: Path, store: MemoryStore) -> DaemonService:
    """A start that cannot bring s1's turn back: its journal's replay raises."""
    _, ws, service = restarted(tmp_path, store)
    ws.overlay._replay = torn  # type: ignore[method-assign]
    assert service.recover() == []
    return service


async def test_a_stored_space_is_written_down_beside_the_turn_not_into_it(tmp_path: Path) -> None:
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    manifest = ws.turn_file("s1").read_bytes()
    await ws.record(turn.session, turn.id, {"rules": SpaceResult(status="saved")}, {})
    assert ws.turn_file("s1").read_bytes() == manifest  # not rewritten
    [saved] = ws.saved_turns().records
    assert saved["state"]["done"]["rules"]["status"] == "saved"


async def test_a_record_left_by_an_earlier_turn_is_ignored(tmp_path: Path) -> None:
    memory, ws = workspace(tmp_path)
    await memory.start_turn("s1", BODY)
    ws.turn_file("s1").with_name(DONE_FILE).write_text(
        '{"turn": "t-old", "done": {"rules": {"status": "saved"}}}'
    )
    [saved] = ws.saved_turns().records
    assert saved["state"].get("done", {}) == {}


async def test_a_blob_discarded_after_a_lean_load_is_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ws, memory, _ = await a_persons_workspace(tmp_path)
    overlay = ws.overlay
    sha = digest(b"tea\n")
    await (await memory.start_turn("a", BODY)).end()
    assert sha not in overlay.blobs  # a person's blob leaves with their last turn
    # As if the load had run just before another turn of theirs let the blob go.
    monkeypatch.setattr(ws, "contents_held", lambda: {sha})
    turn = await memory.start_turn("b", BODY)
    mount = turn_of(overlay, "b").mounts["me"]
    assert source_of(overlay, mount, "prefs.md").read_bytes() == b"tea\n"
    await turn.end()
    await store.aclose()


async def test_the_manifest_written_down_round_trips_any_path(tmp_path: Path) -> None:
    memory, ws = workspace(tmp_path)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    odd = {"tab\there.md": b"1", "new\nline.md": b"22", "ünï/cødé.md": b"333"}
    await store_of(memory).put(rules, ChangeSet(created=odd), provenance=Provenance())
    turn = await memory.start_turn("s1", BODY)
    [saved] = ws.saved_turns().records
    assert saved["shas"]["rules"] == {path: digest(content) for path, content in odd.items()}
    state = saved["state"]["mounts"]["rules"]
    assert state["sizes"] == {"tab\there.md": 1, "new\nline.md": 2, "ünï/cødé.md": 3}
    assert state["snapshot"] == turn.mounts["rules"].snapshot
    assert saved["state"]["mounts"]["me"]["sizes"] == {}


async def test_a_daemon_turns_trace_keeps_the_revisions_of_what_it_touched_and_the_cursor(
    tmp_path: Path,
) -> None:
    memory, ws = workspace(tmp_path)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    files = {f"r{i}.md": b"rule\n" for i in range(50)}
    await store_of(memory).put(rules, ChangeSet(created=files), provenance=Provenance())
    turn = await memory.start_turn("s1", BODY)
    overlay = ws.overlay
    mount = turn_of(overlay).mounts["rules"]
    read = overlay.lookup(mount.root.inode, "r3.md").inode
    fh, _ = overlay.open(read, os.O_RDONLY)
    overlay.release(fh)
    written = overlay.lookup(mount.root.inode, "r7.md")
    fh, _ = overlay.open(written.inode, os.O_WRONLY | os.O_APPEND)
    overlay.write(fh, written.size, b"more\n")  # an append: the kernel sends the end
    overlay.release(fh)
    snapshot = dict(turn.mounts["rules"].snapshot)
    await turn.end()
    [trace] = await store_of(memory).traces()
    kept = trace.mounts["rules"]
    assert kept.snapshot == {"r3.md": snapshot["r3.md"], "r7.md": snapshot["r7.md"]}
    assert kept.cursor == turn.mounts["rules"].cursor is not None
    assert set(trace.files) == {"rules/r3.md", "rules/r7.md"}


async def test_a_daemon_turns_cursor_answers_exactly_what_it_carried_after_the_space_moved_on(
    tmp_path: Path,
) -> None:
    memory, ws = workspace(tmp_path)
    store = memory.store
    assert isinstance(store, MemoryStore)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    files = {f"r{i}.md": b"rule\n" for i in range(500)}
    await store.put(rules, ChangeSet(created=files), provenance=Provenance())
    await store.put(me, ChangeSet(created={"p.md": b"tea"}), provenance=Provenance())
    turn = await memory.start_turn("s1", BODY)
    carried = {name: dict(mount.snapshot) for name, mount in turn.mounts.items()}
    overlay = ws.overlay
    tree = overlay.sessions["s1"].turn
    assert tree is not None
    mount = tree.mounts["rules"]
    fh, _ = overlay.open(overlay.lookup(mount.root.inode, "r3.md").inode, os.O_RDONLY)
    overlay.release(fh)
    await turn.end()
    # The space moves on: an edit, a deletion, a new file.
    await store.put(
        rules,
        ChangeSet(updated={"r3.md": b"new\n"}, deleted=("r4.md",), created={"z.md": b"z"}),
        provenance=Provenance(),
    )
    [trace] = await store.traces()
    for name in ("rules", "me"):
        kept = trace.mounts[name]
        assert kept.cursor is not None  # every mount, touched or not
        assert kept.cursor == turn.mounts[name].cursor
        as_of = await store.files_as_of(kept.ref, kept.cursor)
        assert {path: file.revision for path, file in as_of.items()} == carried[name]
    assert trace.mounts["me"].snapshot == {}
    # What the trace holds is what the turn did, not the 500 files it carried.
    assert len(trace.model_dump_json()) < 2_000


async def test_in_an_outage_a_lean_copy_serves_shared_memory_but_not_a_persons_dropped_blobs(
    tmp_path: Path,
) -> None:
    class Flaky(SqliteStore):
        down = False

        async def load_lean(self, ref: SpaceRef, session: str, have: Container[str]) -> Loaded:
            if self.down:
                raise StoreUnavailable("database is down")
            return await super().load_lean(ref, session, have)

    store = Flaky(tmp_path / "memfs.db")
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
    specs = [
        memfs.org_memory(space="rules", org="orgId", review="none"),
        memfs.user_memory(org="orgId"),
    ]
    memory = Memory(store, specs, workspace=ws)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    me = SpaceRef(layer="user", space="me", user="u1")
    await store.put(rules, ChangeSet(created={"r.md": b"rule\n"}), provenance=Provenance())
    await store.put(me, ChangeSet(created={"p.md": b"tea\n"}), provenance=Provenance())
    first = await memory.start_turn("a", BODY)
    # While "a" holds the person's blob, "b" loads lean: names and shas only.
    await (await memory.start_turn("b", BODY)).end()
    await first.end()  # the last turn over the person's memory: their blob goes

    store.down = True
    turn = await memory.start_turn("c", BODY)
    assert turn.mounts["rules"].from_last_known_copy and turn.mounts["me"].from_last_known_copy
    state = turn_of(overlay, "c")
    assert source_of(overlay, state.mounts["rules"], "r.md").read_bytes() == b"rule\n"
    assert overlay.source(state.mounts["me"], "p.md") is None  # its bytes left with its turn
    await turn.end()
    await store.aclose()


async def test_a_turn_written_down_whole_as_json_by_an_older_memfs_is_still_read(
    tmp_path: Path,
) -> None:
    _, ws = workspace(tmp_path)
    old = {
        "state": {"session": "s1", "turn": "t1", "mounts": {"rules": {"snapshot": {"a.md": "3"}}}},
        "shas": {"rules": {"a.md": "ab" * 32}},
        "uid": None,
        "gid": None,
    }
    ws.turn_file("s1").parent.mkdir(parents=True)
    ws.turn_file("s1").write_text(json.dumps(old))
    assert ws.saved_turns().records == [{**old, FOLDER_KEY: "s1"}]


async def test_the_manifest_carries_modes_times_and_folders(tmp_path: Path) -> None:
    memory, ws = workspace(tmp_path)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    meta = FileMeta(
        mode=0o755, mtime_ns=1_700_000_000_000_000_001, ctime_ns=1_700_000_000_000_000_002
    )
    await store_of(memory).put(
        rules,
        ChangeSet(
            created={"run.sh": b"x", "a.md": b"a"},
            meta={"run.sh": meta},
            folders_created=("empty",),
        ),
        provenance=Provenance(),
    )
    turn = await memory.start_turn("s1", BODY)
    header = ws.turn_file("s1").read_text().partition("\n")[0]
    assert json.loads(header)["manifest"] == MANIFEST_FORMAT == 3
    [saved] = ws.saved_turns().records
    state = TurnState.model_validate_json(json.dumps(saved["state"]))
    assert state.mounts["rules"].meta["run.sh"] == meta
    assert state.mounts["rules"].meta == turn.mounts["rules"].meta
    assert state.mounts["rules"].folders == ("empty",)


async def test_a_manifest_of_format_1_is_still_read_with_default_modes(tmp_path: Path) -> None:
    _, ws = workspace(tmp_path)
    header = {
        "state": {"session": "s1", "turn": "t1", "mounts": {"rules": {"name": "rules"}}},
        "uid": None,
        "gid": None,
        "manifest": 1,
    }
    ws.turn_file("s1").parent.mkdir(parents=True)
    sha = "ab" * 32
    ws.turn_file("s1").write_text(json.dumps(header) + "\n" + f"rules\0a.md\0{sha}\x003\x007")
    [saved] = ws.saved_turns().records
    mount = saved["state"]["mounts"]["rules"]
    assert saved["shas"] == {"rules": {"a.md": sha}}
    assert (mount["sizes"], mount["snapshot"], mount["meta"]) == ({"a.md": 3}, {"a.md": "7"}, {})


async def test_a_manifest_of_a_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    _, ws = workspace(tmp_path)
    ws.turn_file("s1").parent.mkdir(parents=True)
    ws.turn_file("s1").write_text(json.dumps({"state": {"mounts": {}}, "manifest": 99}) + "\n")
    with pytest.raises(ConfigError, match="manifest format 99"):
        ws.saved_turns()


async def test_turn_json_keeps_the_note_the_agent_got_and_a_restored_turn_has_it(
    tmp_path: Path,
) -> None:
    memory, ws = workspace(tmp_path)
    store = memory.store
    assert isinstance(store, MemoryStore)
    store.put_nowait(
        SpaceRef(layer="org", space="rules", org="o1"),
        ChangeSet(created={"income.md": b"two years\n"}),
        provenance=Provenance(),
    )
    turn = await memory.start_turn("s1", BODY)
    assert "income.md" in turn.note
    [saved] = ws.saved_turns().records
    assert saved["state"]["note"] == turn.note
    # A restart: a new Memory over the same state brings the turn back, note and all.
    again, ws2 = workspace(tmp_path)
    [record] = ws2.saved_turns().records
    restored = again.restore_turn(TurnState.model_validate(record["state"]))
    ws2.reattach(restored.state(), record)
    assert restored.note == turn.note


def counting_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions run in worker threads from now on, in order."""
    trips: list[str] = []
    run_sync = trio.to_thread.run_sync

    async def counted(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        trips.append(getattr(fn, "__name__", repr(fn)))
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", counted)
    return trips


async def test_a_turn_start_takes_its_last_spaces_blobs_and_writes_turn_json_in_one_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each trip to a worker thread hands the interpreter lock over twice;
    # turn.json needs the last space's manifest and nothing after it.
    memory, ws = workspace(tmp_path)
    trips = counting_trips(monkeypatch)
    turn = await memory.start_turn("s1", BODY)
    assert trips.count("take") == 2  # rules, then me with turn.json
    assert "_write_state" not in trips
    [saved] = ws.saved_turns().records
    assert set(saved["state"]["mounts"]) == {"rules", "me"} == set(turn.mounts)


async def test_a_turn_json_that_cannot_be_written_leaves_none_of_a_persons_blobs_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ws = workspace(tmp_path)
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    tea = ChangeSet(created={"prefs.md": b"tea\n"})
    await store_of(memory).put(me, tea, provenance=Provenance())

    def full(*args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ws, "_write_state", full)
    with pytest.raises(DiskFull, match="the turn could not start; nothing of it was kept"):
        await memory.start_turn("s1", BODY)
    assert digest(b"tea\n") not in ws.overlay.blobs  # taken in the trip that failed, let go


async def test_a_turn_json_written_but_not_synced_at_a_failed_start_is_not_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rename went through and the folder's sync failed: the client is told
    # the start failed, so a restart must not bring that turn back.
    memory, ws = workspace(tmp_path)
    real = workspace_module._write_atomic

    def written_then_failed(target: Path, text: str, *args: Any, **kwargs: Any) -> None:
        real(target, text, *args, **kwargs)
        if target.name == "turn.json":
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(workspace_module, "_write_atomic", written_then_failed)
    with pytest.raises(OSError, match="Input/output error"):
        await memory.start_turn("s1", BODY)
    assert not ws.turn_file("s1").exists()
    assert sorted(ws.overlay.session_dir("s1").iterdir()) == []
    assert OverlayWorkspace(ws.overlay, tmp_path / "mnt", invalidate=None).saved_turns() == ([], [])


async def test_a_turn_end_writes_its_last_record_and_removes_its_turn_json_in_one_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store that takes the trace with the store: nothing can fail between
    # the last record and the turn's end, so both go in one trip.
    store, ws, memory, me = await a_persons_workspace(tmp_path)
    overlay = ws.overlay
    try:
        for n in range(2):  # and the session's next turn the same way
            turn = await memory.start_turn("s1", BODY)
            mount = turn_of(overlay, "s1").mounts["me"]
            fh, _ = overlay.open(overlay.lookup(mount.root.inode, "prefs.md").inode, os.O_WRONLY)
            overlay.write(fh, 0, f"coffee {n}\n".encode())
            overlay.release(fh)
            trips = counting_trips(monkeypatch)
            await turn.end()
            monkeypatch.undo()
            assert "write" in trips and "_remove_record" not in trips
            assert not ws.turn_file("s1").exists()
            assert not ws.turn_file("s1").with_name(DONE_FILE).exists()
            assert (await store.files(me)) == {"prefs.md": f"coffee {n}\n".encode()}
    finally:
        await store.aclose()


async def test_a_turn_json_stays_until_a_trace_recorded_after_the_last_record_is_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two spaces, a store that traces apart: the trace comes after the last
    # record and may fail, so the turn's record stays until it is in.
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    trips = counting_trips(monkeypatch)
    await turn.end()
    assert trips.index("_remove_record") > trips.index("write")
    assert not ws.turn_file("s1").exists()


@pytest.mark.parametrize("failing", ["attach_turn", "_arm"])
async def test_a_start_that_fails_after_turn_json_leaves_no_turn_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    # The client is told the start failed: a restart must not bring the turn
    # back (its base may be gone), and the session must start again at once.
    memory, ws = workspace(tmp_path)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    await store_of(memory).put(rules, ChangeSet(created={"r.md": b"r\n"}), provenance=Provenance())
    await (await memory.start_turn("s1", BODY)).end()
    await store_of(memory).put(rules, ChangeSet(created={"n.md": b"n\n"}), provenance=Provenance())
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    await store_of(memory).put(me, ChangeSet(created={"p.md": b"tea\n"}), provenance=Provenance())
    target = ws.overlay if failing == "attach_turn" else ws
    real = getattr(target, failing)

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(target, failing, full)
    with pytest.raises(DiskFull, match="start it again once there is room"):
        await memory.start_turn("s1", BODY)
    assert not ws.turn_file("s1").exists()
    assert sorted(ws.overlay.session_dir("s1").iterdir()) == []
    assert OverlayWorkspace(ws.overlay, tmp_path / "mnt", invalidate=None).saved_turns() == ([], [])
    assert digest(b"tea\n") not in ws.overlay.blobs  # a person's blobs: let go, once
    monkeypatch.setattr(target, failing, real)
    turn = await memory.start_turn("s1", BODY)
    assert set(turn.mounts["rules"].snapshot) == {"r.md", "n.md"}
    await turn.end()


async def test_a_failed_start_leaves_the_record_of_a_turn_that_did_not_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last turn's record was not brought back at start (the daemon logs
    # it and leaves it in place); a start that fails must not remove it.
    memory, ws = workspace(tmp_path)
    await memory.start_turn("s1", BODY)
    left = ws.turn_file("s1").read_bytes()
    memory, ws = workspace(tmp_path)  # a restart that did not restore it

    def full(*args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ws, "_write_state", full)
    with pytest.raises(DiskFull):
        await memory.start_turn("s1", BODY)
    assert ws.turn_file("s1").read_bytes() == left


async def test_a_start_the_disk_fills_under_mid_blob_holds_nothing_and_leaves_no_byte_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The disk fills between the person's two blobs: the first is written,
    # the second is not. Neither may stay held, nor on disk (a forget of the
    # person would not know of it), half-written or whole.
    memory, ws = workspace(tmp_path)
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    two = ChangeSet(created={"a.md": b"first secret\n", "b.md": b"second secret\n"})
    await store_of(memory).put(me, two, provenance=Provenance())
    real, made = tempfile.mkstemp, []

    def fills(*args: Any, **kwargs: Any) -> tuple[int, str]:
        made.append(1)
        if len(made) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", fills)
    with pytest.raises(DiskFull):
        await memory.start_turn("s1", BODY)
    blobs = ws.overlay.blobs
    assert [digest(b"first secret\n") in blobs, digest(b"second secret\n") in blobs] == [False] * 2
    leftovers = [p for p in (tmp_path / "state" / "blobs").rglob("*") if p.is_file()]
    assert not any(b"secret" in p.read_bytes() for p in leftovers), leftovers
    monkeypatch.setattr(tempfile, "mkstemp", real)
    turn = await memory.start_turn("s1", BODY)  # room again: it starts, and holds each once
    assert set(turn.mounts["me"].snapshot) == {"a.md", "b.md"}
    await turn.end()  # the last turn over them: no hold is left to keep them
    assert [digest(b"first secret\n") in blobs, digest(b"second secret\n") in blobs] == [False] * 2


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_session_whose_turn_did_not_come_back_refuses_a_new_turn_and_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The restart could not bring the turn back (logged, left in place): a
    # new turn would write over its record, and the sweep at the next
    # restart would then remove what its agent wrote.
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    record = ws.turn_file("s1").read_bytes()
    folder = ws.overlay.session_dir("s1") / turn.id
    memory, ws = workspace(tmp_path)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))

    def broken(state: TurnState) -> None:
        raise RuntimeError("a bug that keeps the turn from coming back")

    monkeypatch.setattr(memory, "restore_turn", broken)
    assert service.recover() == []

    with pytest.raises(TurnOpen, match="could not be brought back"):
        await service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
    # Closing the session would remove its record and files: refused, saying why.
    with pytest.raises(TurnOpen, match="could not be brought back"):
        await service.close_session("s1")
    assert ws.turn_file("s1").read_bytes() == record and folder.is_dir()
    other = await service.start_turn(StartTurnRequest(session="s2", extra_body=BODY))
    assert other.session == "s2"


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_turn_whose_journal_fails_to_replay_at_start_is_left_whole_and_not_half_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bringing the turn back failed after the engine took it back and the
    # overlay laid it out: it was open to the engine (a new turn was told
    # "end it first") but ending or discarding it failed (KeyError). The
    # turn must be all back or not at all, and a later start must still
    # bring it back whole.
    memory, ws = workspace(tmp_path)
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    await store_of(memory).put(
        me, ChangeSet(created={"prefs.md": b"tea\n"}), provenance=Provenance()
    )
    store = store_of(memory)
    await memory.start_turn("s1", BODY)
    overlay = ws.overlay
    mount = turn_of(overlay).mounts["me"]
    fh, _ = overlay.open(overlay.lookup(mount.root.inode, "prefs.md").inode, os.O_WRONLY)
    overlay.write(fh, 0, b"coffee")
    overlay.release(fh)
    record = ws.turn_file("s1").read_bytes()
    tea = digest(b"tea\n")

    service = starts_and_fails_again(tmp_path, store)
    memory, ws = service.memory, service.workspace
    assert memory.open_turns() == []
    with pytest.raises(TurnOpen, match="could not be brought back"):
        await service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
    for call in (service.end_turn, service.discard_turn):
        with pytest.raises(NotFound, match="could not be brought back"):
            await call("s1")
    with pytest.raises(TurnOpen, match="could not be brought back"):
        await service.close_session("s1")  # it would remove the record
    assert (await service.status()).left_behind == ["s1"]
    # All of it kept for a later start, the person's blob held as the turn would:
    # another turn over their memory ending (this refused one) discards nothing.
    assert ws.turn_file("s1").read_bytes() == record
    assert tea in ws.overlay.blobs and ws.overlay.blobs._refs.get(tea) == 1
    assert "s1" not in ws.overlay.sessions

    memory, ws, service = restarted(tmp_path, store)  # the bug fixed: the next start brings it back
    assert service.recover() == ["s1"]
    ended = await service.end_turn("s1")
    assert ended.spaces["me"].status == "saved"
    loaded = await store.load(me, "s2")
    assert loaded.files["prefs.md"] == b"coffee"


def test_a_blob_call_that_fails_waiting_on_another_writer_leaves_its_own_blobs_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This call writes x; y is another call's, in flight. That write fails,
    # and so does this call's own try at y (the disk is full): x was held by
    # this call alone and must not stay on disk, held by nobody.
    blobs = BlobCache(tmp_path / "blobs")
    x, y = b"her first secret\n", b"her second secret\n"
    theirs = threading.Event()
    blobs._writing[digest(y)] = theirs  # another call's write of y, in flight
    real = tempfile.mkstemp

    def full_for_y(*args: Any, **kwargs: Any) -> tuple[int, str]:
        if digest(y) in str(kwargs.get("prefix", "")):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", full_for_y)
    failed: list[BaseException] = []

    def call() -> None:
        try:
            blobs.put_many([x, y], hold=True)
        except OSError as exc:
            failed.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    while not blobs.path(digest(x)).exists() and worker.is_alive():
        time.sleep(0.001)
    del blobs._writing[digest(y)]
    theirs.set()  # the other call's write failed: y is not here
    worker.join(10)
    assert failed and not worker.is_alive()
    assert digest(x) not in blobs and digest(y) not in blobs


async def test_a_turn_over_its_own_waiting_change_writes_its_files_down_in_the_loads_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The change laid over a lean load brings its files' bytes without a
    # sha256; the manifest still follows the load's (path) order, not the
    # brought files last.
    store = SqliteStore(tmp_path / "memfs.db")
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
    spec = memfs.org_memory(space="rules", org="orgId", review="person")
    memory = Memory(store, [spec], workspace=ws)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    live = {"a.md": b"a\n", "b.md": b"b\n", "c.md": b"c\n"}
    await store.put(rules, ChangeSet(created=live), provenance=Provenance())
    turn = await memory.start_turn("s1", BODY)
    mount = turn_of(overlay, "s1").mounts["rules"]
    appended = overlay.lookup(mount.root.inode, "a.md")
    fh, _ = overlay.open(appended.inode, os.O_WRONLY | os.O_APPEND)
    overlay.write(fh, appended.size, b"more\n")  # an append: the kernel sends the end
    overlay.release(fh)
    await turn.end()  # a.md waits for review, laid over the session's next loads
    written: list[dict[str, str]] = []
    write_state = ws._write_state

    def noted(state: Any, manifests: Any, *args: Any) -> Any:
        written.append(dict(manifests["rules"]))
        return write_state(state, manifests, *args)

    monkeypatch.setattr(ws, "_write_state", noted)
    turn = await memory.start_turn("s1", BODY)
    try:
        [manifest] = written
        assert list(manifest) == ["a.md", "b.md", "c.md"]
        assert manifest["a.md"] == digest(b"a\nmore\n")
    finally:
        await turn.end()
        await store.aclose()


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_turn_whose_mounts_fail_to_lay_out_at_start_leaves_no_journal_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ws = workspace(tmp_path)
    await memory.start_turn("s1", BODY)
    memory, ws = workspace(tmp_path)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    journal = os.path.realpath(next(ws.overlay.session_dir("s1").glob("t-*")) / "journal")

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug laying out a mount")

    def opened() -> int:  # the crashed daemon's workspace (still in this process) has one
        fds = os.listdir("/proc/self/fd")
        return sum(os.path.realpath(f"/proc/self/fd/{fd}") == journal for fd in fds)

    monkeypatch.setattr(ws.overlay, "_mount_parent", broken)
    before = opened()
    assert service.recover() == []
    assert opened() == before
    assert set(ws.overlay.nodes) == {1}  # the mount root's folder alone: nothing of s1


async def left_behind_with_her_words(
    tmp_path: Path,
) -> tuple[MemoryStore, DaemonService, OverlayWorkspace]:
    """u1's turn wrote her own memory and an org rule, then the restart failed to bring it back."""
    memory, ws = workspace(tmp_path)
    store = store_of(memory)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    await store.put(rules, ChangeSet(created={"r.md": b"rule\n"}), provenance=Provenance())
    await store.put(me, ChangeSet(created={"g.md": b"my diagnosis\n"}), provenance=Provenance())
    await memory.start_turn("s1", BODY, prompt="okapi words")
    overlay = ws.overlay
    mounts = turn_of(overlay, "s1").mounts
    _, fh = overlay.create_open(mounts["me"].root.inode, "okapi.md", 0o644, 0, 0, os.O_WRONLY)
    overlay.write(fh, 0, b"her second diagnosis\n")
    overlay.release(fh)
    fh, _ = overlay.open(overlay.lookup(mounts["rules"].root.inode, "r.md").inode, os.O_WRONLY)
    overlay.write(fh, 0, b"RULE")
    overlay.release(fh)
    service = starts_and_fails_again(tmp_path, store)
    return store, service, service.workspace


HER_MEMORY = (b"my diagnosis", b"okapi.md", b"her second diagnosis", b"g.md")


def hers_in(state_dir: Path, hers: tuple[bytes, ...] = (*HER_MEMORY, b"okapi words")) -> list[str]:
    """Files under ``state_dir`` holding any of u1's words (her prompt), names or contents."""
    return sorted(
        str(path.relative_to(state_dir))
        for path in state_dir.rglob("*")
        if path.is_file() and any(word in path.read_bytes() for word in hers)
    )


async def the_rule_comes_back(tmp_path: Path, store: MemoryStore) -> None:
    """The next start brings the turn back, and ending it stores the org rule it wrote."""
    _, _, service = restarted(tmp_path, store)
    assert service.recover() == ["s1"]
    ended = await service.end_turn("s1")
    assert ended.spaces["rules"].status == "saved"
    rules = SpaceRef(layer="org", space="rules", org="o1")
    assert (await store.load(rules, "s9")).files["r.md"] == b"RULE\n"


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_forget_notice_reaches_a_turn_no_start_brought_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its record, journal, data and her held blob kept her memory, words and
    # file names until a start brought it back, which a lasting cause never does.
    store, service, _ = await left_behind_with_her_words(tmp_path)
    assert hers_in(tmp_path / "state")
    await store.forget_user("u1", "o1", by=None)
    applied = await service.forgotten(ForgetNotice(org="o1", user="u1"))
    assert applied.dropped == {"s1": ["me"]}
    assert hers_in(tmp_path / "state") == []
    await the_rule_comes_back(tmp_path, store)


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_forget_the_poll_finds_reaches_a_turn_no_start_brought_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, service, _ = await left_behind_with_her_words(tmp_path)
    await store.forget_user("u1", "o1", by=None)  # by another process: no notice here
    assert await service.poll_forgets() == [("s1", "me")]
    assert hers_in(tmp_path / "state") == []
    await the_rule_comes_back(tmp_path, store)


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_forgotten_file_takes_her_whole_space_out_of_a_turn_no_start_brought_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Which journal records are that file's is not known without a replay.
    store, service, _ = await left_behind_with_her_words(tmp_path)
    notice = ForgetNotice(org="o1", user="u1", space="me", path="g.md")
    assert (await service.forgotten(notice)).dropped == {"s1": ["me"]}
    assert hers_in(tmp_path / "state", HER_MEMORY) == []  # her prompt is hers to keep
    await the_rule_comes_back(tmp_path, store)


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_forget_of_a_turn_left_behind_cut_short_is_finished_by_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its space was marked forgotten (done.json) before its files were
    # cleaned out; every later forget took the mark for the whole of it.
    store, service, ws = await left_behind_with_her_words(tmp_path)
    await store.forget_user("u1", "o1", by=None)

    async def killed(*args: Any) -> None:
        raise KeyboardInterrupt  # the daemon dies right after done.json

    with monkeypatch.context() as patch:
        patch.setattr(ws, "drop_left_behind", killed)
        with pytest.raises(KeyboardInterrupt):
            await service.forgotten(ForgetNotice(org="o1", user="u1"))
    again = starts_and_fails_again(tmp_path, store)
    assert await again.catch_up_forgets() == [("s1", "me")]
    assert hers_in(tmp_path / "state") == []
    await the_rule_comes_back(tmp_path, store)


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_forget_of_a_space_a_turn_left_behind_stored_is_cleaned_out_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was ending: her space was stored, so its result is "saved", not
    # "forgotten"; its rows and journal records still name her files.
    store, service, ws = await left_behind_with_her_words(tmp_path)
    [turn] = service.memory.left_behind_turns()
    turn.done["me"] = SpaceResult(status="saved")
    await ws.record("s1", turn.id, turn.done, turn.kept)
    await store.forget_user("u1", "o1", by=None)
    assert await service.poll_forgets() == [("s1", "me")]
    assert hers_in(tmp_path / "state", HER_MEMORY) == []
    journal = ws.overlay.session_dir("s1") / turn.id / "journal"
    written = journal.stat().st_ino
    assert await service.poll_forgets() == []  # not again at every look
    assert journal.stat().st_ino == written


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_notice_and_the_look_at_once_leave_nothing_of_hers_in_a_turn_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The notice's rewrite of turn.json (her words) read it before the
    # look's took her rows out, and wrote them back after.
    store, service, ws = await left_behind_with_her_words(tmp_path)
    await store.forget_user("u1", "o1", by=None)
    restate, write = ws._restate, workspace_module._write_atomic
    restating = threading.local()

    def slow_restate(session: str, state: TurnState) -> None:
        restating.on = True
        try:
            restate(session, state)
        finally:
            restating.on = False

    def slow_write(target: Path, *args: Any, **kwargs: Any) -> None:
        if getattr(restating, "on", False):
            time.sleep(0.3)  # descheduled between reading turn.json and writing it
        write(target, *args, **kwargs)

    monkeypatch.setattr(ws, "_restate", slow_restate)
    monkeypatch.setattr(workspace_module, "_write_atomic", slow_write)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service.forgotten, ForgetNotice(org="o1", user="u1"))
        await trio.sleep(0.1)
        nursery.start_soon(service.poll_forgets)
    assert hers_in(tmp_path / "state") == []


@pytest.mark.error_log("could not bring back the open turn of session s1")
@pytest.mark.error_log("could not take me out of the files of session s1's turn")
async def test_a_clean_out_done_again_lets_go_of_her_blobs_once_not_of_anothers_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blobs are named by their bytes: u2's open turn holds the same one as
    # her g.md. A clean-out the full disk stopped, done again by the look,
    # let go of it a second time, and u2's agent lost its file.
    store, service, ws = await left_behind_with_her_words(tmp_path)
    theirs = SpaceRef(layer="user", space="me", org="o1", user="u2")
    await store.put(theirs, ChangeSet(created={"x.md": b"my diagnosis\n"}), provenance=Provenance())
    body = {"userId": "u2", "name": "V", "orgId": "o1"}
    await service.start_turn(StartTurnRequest(session="s2", extra_body=body))
    assert ws.overlay.blobs._refs.get(digest(b"my diagnosis\n")) == 2
    await store.forget_user("u1", "o1", by=None)

    def no_room(*args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(workspace_module, "_scrub_journal", no_room)
        await service.forgotten(ForgetNotice(org="o1", user="u1"))  # logged, not raised
    assert await service.poll_forgets() == [("s1", "me")]  # done again, and finished
    assert hers_in(tmp_path / "state", HER_MEMORY[1:]) == []  # her blob is u2's too now
    mount = turn_of(ws.overlay, "s2").mounts["me"]
    assert source_of(ws.overlay, mount, "x.md").read_bytes() == b"my diagnosis\n"


@pytest.mark.error_log("could not bring back the open turn of session s1")
@pytest.mark.error_log("could not take me out of the files of session s1's turn")
async def test_a_turn_left_behind_whose_journal_cannot_be_read_keeps_no_start_from_going_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The catch-up raised OSError out of the start (which stopped), and the
    # look raised before the other turns' words were judged.
    store, _, _ = await left_behind_with_her_words(tmp_path)
    await store.forget_user("u1", "o1", by=None)
    read_bytes = Path.read_bytes

    def unreadable(self: Path) -> bytes:
        if self.name == "journal":
            raise OSError(errno.EIO, "Input/output error")
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    again = starts_and_fails_again(tmp_path, store)
    assert await again.catch_up_forgets() == []  # logged; tried again at the next look
    record = (tmp_path / "state" / "sessions" / "s1" / "turn.json").read_bytes()
    assert b"okapi" not in record and b"g.md" not in record  # her words and rows went
    monkeypatch.undo()
    assert await again.poll_forgets() == [("s1", "me")]  # readable again: finished
    assert hers_in(tmp_path / "state") == []


@pytest.mark.error_log("could not bring back the open turn of session s1")
async def test_a_forget_notice_does_not_wait_for_a_look_the_store_holds_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, service, _ = await left_behind_with_her_words(tmp_path)
    asked, answer = trio.Event(), trio.Event()
    forgotten_since = store.forgotten_since

    async def slow(ref: SpaceRef, cursor: str | None) -> bool:
        asked.set()
        await answer.wait()
        return await forgotten_since(ref, cursor)

    monkeypatch.setattr(store, "forgotten_since", slow)
    await store.forget_user("u1", "o1", by=None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service.poll_forgets)
        await asked.wait()
        with trio.fail_after(5):
            applied = await service.forgotten(ForgetNotice(org="o1", user="u1"))
        answer.set()
    assert applied.dropped == {"s1": ["me"]}
    assert hers_in(tmp_path / "state") == []


async def test_a_forget_rewriting_turn_json_as_the_turn_ends_does_not_bring_the_turn_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The forget's rewrite read turn.json, the turn's end removed it, and the
    # rewrite wrote it back: the ended turn came back at the next start.
    memory, ws = workspace(tmp_path)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    await service.start_turn(StartTurnRequest(session="s1", extra_body=BODY, prompt="okapi"))
    edited, go = threading.Event(), threading.Event()
    write_atomic = workspace_module._write_atomic

    def held_up(target: Path, text: str, *args: Any, **kwargs: Any) -> None:
        if target.name == "turn.json" and not edited.is_set():
            edited.set()  # a rewrite has read and edited turn.json
            go.wait(10)
        write_atomic(target, text, *args, **kwargs)

    monkeypatch.setattr(workspace_module, "_write_atomic", held_up)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service.forgotten, ForgetNotice(org="o1", user="u1"))
        await trio.to_thread.run_sync(edited.wait, 10)
        nursery.start_soon(service.end_turn, "s1")
        await trio.sleep(0.2)  # the end waits for the rewrite, or removes turn.json under it
        go.set()
    assert not ws.turn_file("s1").exists(), "an ended turn's record came back"


@pytest.mark.error_log("could not bring back the open turn of session s1")
@pytest.mark.error_log("could not remove blob")
async def test_a_failed_unlink_in_a_clean_out_neither_lets_go_twice_nor_leaves_her_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Removing her only-hers blob failed midway through letting go of her
    # blobs; done again, it let go of the one u2's open turn holds too. And
    # the blob stayed on disk until the next start: her forget did not reach it.
    memory, ws = workspace(tmp_path)
    store = store_of(memory)
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    hers = {"a.md": b"my diagnosis\n", "b.md": b"only hers\n"}
    await store.put(me, ChangeSet(created=hers), provenance=Provenance())
    await memory.start_turn("s1", BODY, prompt="okapi words")
    service = starts_and_fails_again(tmp_path, store)
    ws = service.workspace
    theirs = SpaceRef(layer="user", space="me", org="o1", user="u2")
    await store.put(theirs, ChangeSet(created={"x.md": b"my diagnosis\n"}), provenance=Provenance())
    body = {"userId": "u2", "name": "V", "orgId": "o1"}
    await service.start_turn(StartTurnRequest(session="s2", extra_body=body))
    shared, alone = digest(b"my diagnosis\n"), digest(b"only hers\n")
    assert ws.overlay.blobs._refs.get(shared) == 2
    await store.forget_user("u1", "o1", by=None)
    unlink = Path.unlink
    failed: list[Path] = []

    def eio(self: Path, missing_ok: bool = False) -> None:
        if self.name == alone and not failed:
            failed.append(self)
            raise OSError(errno.EIO, "Input/output error")
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", eio)
    await service.forgotten(ForgetNotice(org="o1", user="u1"))  # the clean-out, then again
    assert failed
    monkeypatch.undo()
    assert ws.overlay.blobs.path(alone).exists()
    await service.poll_forgets()
    assert not ws.overlay.blobs.path(alone).exists(), "her bytes stayed after her forget"
    assert ws.overlay.blobs._refs.get(shared) == 1  # u2's hold
    mount = turn_of(ws.overlay, "s2").mounts["me"]
    assert source_of(ws.overlay, mount, "x.md").read_bytes() == b"my diagnosis\n"


@pytest.mark.error_log("could not read back the open turn of session s1")
async def test_a_turn_record_that_does_not_validate_leaves_its_session_waiting_not_the_start(
    tmp_path: Path,
) -> None:
    # TurnState's validation raised out of recover: no daemon started.
    memory, ws = workspace(tmp_path)
    await memory.start_turn("s1", BODY)
    await memory.start_turn("s2", BODY)
    path = ws.turn_file("s1")
    head, _, rows = path.read_text().partition("\n")
    record = json.loads(head)
    record["state"]["prompt"] = {"not": "a prompt"}
    path.write_text(json.dumps(record) + "\n" + rows)
    memory, ws = workspace(tmp_path)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    assert service.recover() == ["s2"]
    with pytest.raises(TurnOpen, match="could not be brought back"):
        await service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
    assert json.loads(path.read_text().partition("\n")[0]) == record  # kept as it was
    assert (await service.status()).left_behind == ["s1"]  # for its operator to see


async def her_turn_damaged(
    tmp_path: Path, damage: Callable[[dict[str, Any]], None]
) -> tuple[MemoryStore, Path]:
    """s1's open turn over her memory (prefs.md), its turn.json's head then edited by ``damage``."""
    memory, ws = workspace(tmp_path)
    store = store_of(memory)
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    await store.put(me, ChangeSet(created={"prefs.md": b"tea\n"}), provenance=Provenance())
    await memory.start_turn("s1", BODY)
    path = ws.turn_file("s1")
    head, _, rows = path.read_text().partition("\n")
    record = json.loads(head)
    damage(record)
    path.write_text(json.dumps(record) + "\n" + rows)
    return store, path


def bad_prompt(record: dict[str, Any]) -> None:
    record["state"]["prompt"] = {"not": "a prompt"}


@pytest.mark.error_log("could not read back the open turn of session s1")
async def test_a_turn_record_mended_after_it_did_not_validate_comes_back_whole(
    tmp_path: Path,
) -> None:
    # Nothing held its person's blobs meanwhile: her other turn's end
    # discarded them, and the mended turn came back without its files.
    store, path = await her_turn_damaged(tmp_path, bad_prompt)
    memory, _, service = restarted(tmp_path, store)
    assert service.recover() == []
    await (await memory.start_turn("s2", BODY)).end()  # the same person, another session
    head, _, rows = path.read_text().partition("\n")
    record = json.loads(head)
    record["state"]["prompt"] = None
    path.write_text(json.dumps(record) + "\n" + rows)  # mended; the daemon restarted
    _, ws, service = restarted(tmp_path, store)
    assert service.recover() == ["s1"]
    mount = turn_of(ws.overlay, "s1").mounts["me"]
    assert source_of(ws.overlay, mount, "prefs.md").read_bytes() == b"tea\n"


@pytest.mark.error_log("could not read back the open turn of session s1")
async def test_a_turn_record_that_does_not_validate_is_its_folders_session_whatever_it_says(
    tmp_path: Path,
) -> None:
    def elsewhere(record: dict[str, Any]) -> None:
        record["state"]["session"] = "s0"
        bad_prompt(record)

    store, _ = await her_turn_damaged(tmp_path, elsewhere)
    _, _, service = restarted(tmp_path, store)
    assert service.recover() == []
    assert (await service.status()).left_behind == ["s1"]
    started = await service.start_turn(StartTurnRequest(session="s0", extra_body=BODY))
    assert started.session == "s0"


@pytest.mark.error_log("cannot be read")
@pytest.mark.parametrize("mounts", [[1, 2], "x"])
async def test_a_turn_record_whose_mounts_are_not_a_map_is_set_aside_and_the_daemon_starts(
    tmp_path: Path, mounts: Any
) -> None:
    def garbled(record: dict[str, Any]) -> None:
        record["state"]["mounts"] = mounts

    store, path = await her_turn_damaged(tmp_path, garbled)
    _, _, service = restarted(tmp_path, store)
    assert service.recover() == []  # AttributeError stopped the start
    assert path.with_name(path.name + ".damaged").exists()


async def test_a_forgets_scrub_keeps_every_journal_record_an_agent_wrote_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scrub compacted the open turn's journal in a worker thread while
    # the agent's requests appended to it on the trio thread: a record
    # appended to the old journal then was gone from the new one, and a
    # crash lost the write the agent saw succeed.
    memory, ws = workspace(tmp_path)
    store = store_of(memory)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    me = SpaceRef(layer="user", space="me", org="o1", user="u1")
    await store.put(rules, ChangeSet(created={"r.md": b"rule\n"}), provenance=Provenance())
    await store.put(me, ChangeSet(created={"g.md": b"mine\n"}), provenance=Provenance())
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    await service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
    overlay = ws.overlay
    turn = turn_of(overlay, "s1")
    compacting, go = threading.Event(), threading.Event()
    encode = memfsd_journal.encode

    def slow(records: Any) -> bytes:
        if threading.current_thread() is not threading.main_thread():
            compacting.set()
            go.wait(10)
        return encode(records)

    monkeypatch.setattr(memfsd_journal, "encode", slow)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service.forgotten, ForgetNotice(org="o1", user="u1"))
        await trio.to_thread.run_sync(compacting.wait, 1)
        rule = overlay.lookup(turn.mounts["rules"].root.inode, "r.md")
        fh, _ = overlay.open(rule.inode, os.O_WRONLY | os.O_APPEND)
        overlay.write(fh, rule.size, b"RULE")  # the agent's append, journaled now
        overlay.release(fh)
        go.set()
    records = list(memfsd_journal.decode((turn.dir / "journal").read_bytes()))
    assert any(r["m"] == "rules" and r["p"] == "r.md" and r["o"] == "w" for r in records)


async def test_a_held_change_set_and_its_committed_mark_are_written_through_their_own_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both were written through manual/<turn>.tmp: a forget rewriting the held
    # change set while its commit wrote the mark could leave either holding
    # the other's bytes (an empty change set that stops the next start).
    _, ws = workspace(tmp_path)
    replaced: list[tuple[str, str]] = []
    real = os.replace

    def spy(src: str | Path, dst: str | Path) -> None:
        replaced.append((Path(src).name, Path(dst).name))
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    hold = ManualHold(session="s1", turn="t1", spaces={})
    await ws.save_manual(hold)
    await ws.committed_manual("s1", "t1")
    assert replaced == [("t1.json.tmp", "t1.json"), ("t1.committed.tmp", "t1.committed")]


async def two_turns_of_people_forgotten_while_the_daemon_was_down(
    tmp_path: Path,
) -> tuple[MemoryStore, DaemonService]:
    """u1's turn in s1 and u2's in s2, each over their own memory and an org rule they
    wrote; both people forgotten while the daemon was down; the daemon started again."""
    memory, ws = workspace(tmp_path)
    store = store_of(memory)
    rules = SpaceRef(layer="org", space="rules", org="o1")
    await store.put(rules, ChangeSet(created={"r.md": b"rule\n"}), provenance=Provenance())
    for session, user in (("s1", "u1"), ("s2", "u2")):
        me = SpaceRef(layer="user", space="me", org="o1", user=user)
        await store.put(me, ChangeSet(created={"g.md": b"my diagnosis\n"}), provenance=Provenance())
        body = {"userId": user, "name": user.upper(), "orgId": "o1"}
        await memory.start_turn(session, body, prompt=f"okapi words of {user}")
        overlay = ws.overlay
        root = turn_of(overlay, session).mounts["rules"].root.inode
        _, fh = overlay.create_open(root, f"{user}.md", 0o644, 0, 0, os.O_WRONLY)
        overlay.write(fh, 0, b"a rule\n")
        overlay.release(fh)
    for user in ("u1", "u2"):
        await store.forget_user(user, "o1", by=None)
    _, _, service = restarted(tmp_path, store)
    assert service.recover() == ["s1", "s2"]
    return store, service


def done_of(service: DaemonService, session: str) -> dict[str, Any]:
    """The session's ``done.json``, as it is on disk."""
    done = service.workspace.turn_file(session).with_name(DONE_FILE)
    record: dict[str, Any] = json.loads(done.read_text())
    return record


@pytest.mark.error_log("could not write down a forget in the turn of session s1")
@pytest.mark.parametrize("error", [errno.EIO, errno.EACCES, errno.ENOSPC])
async def test_a_turn_whose_record_cannot_be_written_at_start_keeps_no_other_turn_from_its_forget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, error: int
) -> None:
    # At start the look for forgets made while the daemon was down writes
    # down each turn it settles (done.json). Writing s1's failed with EIO:
    # the OSError went out of the start, and no session came up (ENOSPC was
    # a DiskFull the start logged, naming no session, s2 never looked at).
    store, service = await two_turns_of_people_forgotten_while_the_daemon_was_down(tmp_path)
    write_atomic = workspace_module._write_atomic

    def failing(target: Path, *args: Any, **kwargs: Any) -> None:
        if target.name == DONE_FILE and target.parent.name == "s1":
            raise OSError(error, os.strerror(error))
        write_atomic(target, *args, **kwargs)

    monkeypatch.setattr(workspace_module, "_write_atomic", failing)
    assert await service.catch_up_forgets() == [("s1", "me"), ("s2", "me")]  # hers out of both
    assert done_of(service, "s2")["done"]["me"]["reason"] == "forgotten"
    logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert logged and all("session s1 (" + os.strerror(error) in line for line in logged)
    caplog.clear()

    monkeypatch.undo()  # the disk is back: the next look writes s1's turn down
    await service.poll_forgets()
    assert done_of(service, "s1")["done"]["me"]["reason"] == "forgotten"
    assert b"okapi" not in service.workspace.turn_file("s1").read_bytes()
    for session in ("s1", "s2"):  # nothing else of either turn was lost
        ended = await service.end_turn(session)
        assert ended.spaces["me"].reason == "forgotten"
        assert ended.spaces["rules"].status == "saved"
    rules = SpaceRef(layer="org", space="rules", org="o1")
    assert {"u1.md", "u2.md"} <= (await store.load(rules, "s9")).files.keys()


@pytest.mark.error_log("could not bring back the open turn of session s1")
@pytest.mark.error_log("could not write down a forget in the turn of session s1")
async def test_a_turn_left_behind_whose_record_cannot_be_written_is_still_cleaned_out_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its space settled as forgotten could not be written down (EIO): the
    # OSError went out of the start's catch-up, her files left where they were.
    store, _, _ = await left_behind_with_her_words(tmp_path)
    await store.forget_user("u1", "o1", by=None)
    write_atomic = workspace_module._write_atomic

    def eio(target: Path, *args: Any, **kwargs: Any) -> None:
        if target.name == DONE_FILE:
            raise OSError(errno.EIO, "Input/output error")
        write_atomic(target, *args, **kwargs)

    monkeypatch.setattr(workspace_module, "_write_atomic", eio)
    again = starts_and_fails_again(tmp_path, store)
    assert await again.catch_up_forgets() == [("s1", "me")]
    assert hers_in(tmp_path / "state") == []
    monkeypatch.undo()
    await again.poll_forgets()  # written down now
    assert done_of(again, "s1")["done"]["me"]["reason"] == "forgotten"
    await the_rule_comes_back(tmp_path, store)


@pytest.mark.error_log("could not read back the open turn of session s1")
@pytest.mark.parametrize("damage", ["unreadable", "not json"])
async def test_a_done_record_that_cannot_be_read_leaves_its_session_waiting_not_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    # Reading s1's done.json raised out of recover (OSError, or ValueError
    # for bytes that are not JSON): no session came back, the daemon stopped.
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    await ws.record("s1", turn.id, {"rules": SpaceResult(status="saved")}, {})
    await memory.start_turn("s2", BODY)
    done = ws.turn_file("s1").with_name(DONE_FILE)
    if damage == "not json":
        done.write_bytes(b"\0\0\0")
    else:
        read_text = Path.read_text

        def eio(self: Path, *args: Any, **kwargs: Any) -> str:
            if self == done:
                raise OSError(errno.EIO, "Input/output error")
            return read_text(self, *args, **kwargs)

        monkeypatch.setattr(Path, "read_text", eio)
    store = store_of(memory)
    _, _, service = restarted(tmp_path, store)
    assert service.recover() == ["s2"]
    assert (await service.status()).left_behind == ["s1"]
    monkeypatch.undo()
    done.write_text(json.dumps({"turn": turn.id, "done": {"rules": {"status": "saved"}}}))
    _, _, service = restarted(tmp_path, store)  # mended: the next start brings it back
    assert service.recover() == ["s1", "s2"]
    assert service.memory.open_turn("s1").done["rules"].status == "saved"


@pytest.mark.error_log("could not finish discarding the turn of session s1")
async def test_a_discard_the_start_cannot_finish_for_one_session_keeps_the_others_finishing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both turns were written down as discarded when the daemon died. At
    # start, removing s1's record failed (EIO): the OSError went out of the
    # start, and s2's discard was never finished either.
    memory, ws = workspace(tmp_path)
    discarded = {
        "rules": ending.discarded(ChangeSet(), ()),
        "me": ending.discarded(ChangeSet(), ()),
    }
    for session in ("s1", "s2"):
        turn = await memory.start_turn(session, BODY)
        await ws.record(session, turn.id, discarded, {})
    _, ws, service = restarted(tmp_path, store_of(memory))
    assert service.recover() == ["s1", "s2"]
    take_file = Spares.take_file

    def eio(self: Spares, path: Path | str) -> None:  # the record's removal fails
        if Path(path) == ws.turn_file("s1"):
            raise OSError(errno.EIO, "Input/output error")
        take_file(self, path)

    monkeypatch.setattr(Spares, "take_file", eio)
    assert await service.finish_discards() == ["s2"]
    assert not ws.turn_file("s2").exists()
    monkeypatch.undo()
    assert ws.turn_file("s1").exists()  # kept: the next start finishes it
    _, _, service = restarted(tmp_path, store_of(memory))
    assert service.recover() == ["s1"]
    assert await service.finish_discards() == ["s1"]


@pytest.mark.error_log(r"could not read back the held change set")
@pytest.mark.parametrize("damage", [b"\0\0\0", b'{"session": "s1"}'])
async def test_a_held_change_set_that_cannot_be_read_is_set_aside_and_the_daemon_starts(
    tmp_path: Path, damage: bytes
) -> None:
    # One manual/<turn>.json that does not read back (damaged, or written by
    # another memfs) stopped the daemon's start: recover() raised out of it.
    memory, ws = workspace(tmp_path)
    store = store_of(memory)
    await memory.start_turn("s2", BODY)
    held = ws.overlay.state_dir / "sessions" / "s1" / MANUAL_DIR / "t-damaged.json"
    held.parent.mkdir(parents=True)
    held.write_bytes(damage)

    _, _, service = restarted(tmp_path, store)
    assert service.recover() == ["s2"]
    assert service.manual == {}
    aside = held.with_name(held.name + DAMAGED_SUFFIX)
    assert aside.read_bytes() == damage and not held.exists()  # kept for an operator
    # A person forgotten: what it holds cannot be told, so it goes.
    assert await ws.drop_damaged_records() == 1
    assert not aside.exists()
