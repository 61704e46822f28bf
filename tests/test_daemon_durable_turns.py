"""When a turn's record reaches the disk: at its agent's first sync, not at its start.

A turn start writes ``turn.json`` and new blobs to the page cache, which a
``kill -9`` leaves whole; they are synced, blobs first and ``turn.json``
next and its ``durable`` mark last, just before the journal's first sync.
After a restart, a turn written in this boot comes back (and syncs all of
its blobs at its first sync); one from an earlier boot comes back only if it
was made durable, and is dropped otherwise. ``done.json`` is synced only for
a durable turn, and a space kept by a failed store makes its turn durable.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memfs.core.models import ChangeSet, Provenance, SpaceRef, SpaceResult, digest
from memfs.engine.turns import TurnState
from memfsd import workspace as workspace_module
from memfsd.durable import GroupSync
from memfsd.workspace import DAMAGED_SUFFIX, DONE_FILE, DURABLE_FILE, ENDING_FILE, TURN_FILE
from tests.overlay_helpers import turn_of
from tests.test_daemon_workspace import BODY, store_of, workspace

RULES = SpaceRef(layer="org", space="rules", org="o1")
RULE_FILES = {"a.md": b"rule a\n", "b.md": b"rule b\n"}

Synced = list[tuple[Any, bool]]


def spy_syncs(monkeypatch: pytest.MonkeyPatch, marker: Callable[[], Path]) -> Synced:
    """Every sync the daemon asks for: (what it syncs, whether the mark existed then)."""
    events: Synced = []
    real = GroupSync.sync

    def sync(self: GroupSync, own: Callable[[], None], folder: Path | int, **kw: Any) -> None:
        target = own.args[0] if isinstance(own, functools.partial) and own.args else own
        events.append((target, marker().exists()))
        real(self, own, folder, **kw)

    monkeypatch.setattr(GroupSync, "sync", sync)
    return events


async def test_a_turn_start_syncs_nothing_and_its_first_sync_makes_blobs_then_record_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ws = workspace(tmp_path)
    store_of(memory).put_nowait(RULES, ChangeSet(created=RULE_FILES), provenance=Provenance())
    events = spy_syncs(monkeypatch, lambda: marker)
    turn = await memory.start_turn("s1", BODY)
    turn_file = ws.turn_file("s1")
    marker = turn_file.parent / turn.id / DURABLE_FILE
    assert events == [] and turn_file.exists() and not marker.exists()

    turn_of(ws.overlay).sync()  # what the agent's fsync runs

    assert marker.exists()
    blobs = [ws.overlay.blobs.path(digest(content)) for content in RULE_FILES.values()]
    where = [i for i, (paths, _) in enumerate(events) if isinstance(paths, list)]
    synced = [(i, paths) for i in where for paths in [events[i][0]]]
    first_blob = next(i for i, paths in synced if set(blobs) <= set(paths))
    record = next(i for i, paths in synced if turn_file in paths)
    assert first_blob < record  # a record on disk never names a blob that is not
    assert not events[record][1]  # the mark comes after the record it vouches for
    events.clear()
    turn_of(ws.overlay).sync()
    assert events == []  # durable once: later syncs are the journal's alone


async def test_done_json_is_synced_only_once_the_turn_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    done = ws.turn_file("s1").with_name(DONE_FILE)
    events = spy_syncs(monkeypatch, lambda: done)
    await ws.record("s1", turn.id, {"rules": SpaceResult(status="saved")}, {})
    assert done.exists() and events == []
    turn_of(ws.overlay).sync()
    events.clear()
    await ws.record("s1", turn.id, {"rules": SpaceResult(status="saved")}, {})
    copy = done.with_name(done.name + ".tmp")
    assert any(paths in (copy, done.parent) for paths, _ in events)


async def test_an_ending_is_written_down_before_the_store_and_synced_once_the_turn_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its mark is what brings the turn back frozen after a crash between its
    # store and done.json; a durable turn's must survive a power cut there too.
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    mark = ws.turn_file("s1").parent / turn.id / ENDING_FILE
    events = spy_syncs(monkeypatch, lambda: mark)
    await ws.collect("s1", turn.mounts["rules"])
    assert mark.exists() and events == []  # not durable: nothing to sync it for
    mark.unlink()
    await memory.discard_turn("s1")
    turn = await memory.start_turn("s1", BODY)
    mark = ws.turn_file("s1").parent / turn.id / ENDING_FILE
    turn_of(ws.overlay).sync()  # the agent synced: the turn is durable
    events.clear()
    await ws.collect("s1", turn.mounts["rules"])
    assert (mark.parent, True) in events  # its folder synced once the mark was there


async def test_a_space_kept_by_a_failed_store_makes_its_turn_durable(tmp_path: Path) -> None:
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    marker = ws.turn_file("s1").parent / turn.id / DURABLE_FILE
    kept = SpaceResult(status="not_saved", kept=True, reason="store failed")
    await ws.record("s1", turn.id, {}, {"rules": kept})
    assert marker.exists()


def rebooted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspaces made from now on run in another boot of the machine."""
    monkeypatch.setattr(workspace_module, "boot_id", lambda: "a-later-boot")


async def test_after_a_reboot_only_the_turns_made_durable_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ws = workspace(tmp_path)
    synced = await memory.start_turn("s1", BODY)
    turn_of(ws.overlay, "s1").sync()
    never = await memory.start_turn("s2", BODY)
    rebooted(monkeypatch)
    _, ws2 = workspace(tmp_path)
    assert [r["state"]["session"] for r in ws2.saved_turns().records] == ["s1"]
    assert not ws2.turn_file("s2").exists()  # its record goes, and its folder at the sweep
    assert ws2.sweep_ended({("s1", synced.id)}) >= 1
    assert not (ws2.turn_file("s2").parent / never.id).exists()
    assert (ws2.turn_file("s1").parent / synced.id / DURABLE_FILE).exists()


@pytest.mark.error_log("turn.json that cannot be read")
async def test_a_turn_json_torn_by_a_power_cut_is_set_aside_and_nothing_else_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ws = workspace(tmp_path)
    await memory.start_turn("s1", BODY)
    await memory.start_turn("s2", BODY)
    ws.turn_file("s2").write_bytes(b"")  # what delayed allocation leaves of an unsynced file
    rebooted(monkeypatch)
    _, ws2 = workspace(tmp_path)
    assert ws2.saved_turns() == ([], [])  # s1 was never synced either
    assert ws2.turn_file("s2").with_name(TURN_FILE + DAMAGED_SUFFIX).exists()


async def test_a_turn_brought_back_in_the_same_boot_syncs_all_its_blobs_at_its_first_sync(
    tmp_path: Path,
) -> None:
    memory, ws = workspace(tmp_path)
    store_of(memory).put_nowait(RULES, ChangeSet(created=RULE_FILES), provenance=Provenance())
    turn = await memory.start_turn("s1", BODY)
    turn_of(ws.overlay).sync()  # synced in the first run...
    (ws.turn_file("s1").parent / turn.id / DURABLE_FILE).unlink()  # ...as far as the mark goes
    again, ws2 = workspace(tmp_path)  # a kill -9 and a restart, same boot
    [record] = ws2.saved_turns().records
    restored = again.restore_turn(TurnState.model_validate(record["state"]))
    ws2.reattach(restored.state(), record)
    blobs = ws2.overlay.blobs
    turn_of(ws2.overlay).sync()
    # None was known synced in this run, so its first sync synced every one.
    assert blobs.make_durable([digest(content) for content in RULE_FILES.values()]) == 0
    assert (ws2.turn_file("s1").parent / turn.id / DURABLE_FILE).exists()
