"""The daemon's workspace without a mount: what it writes down for a restart."""

from __future__ import annotations

from pathlib import Path

import memfs
from memfs.core.models import Limits, SpaceResult
from memfs.stores.memory import MemoryStore
from memfs.turns import Memory
from memfsd.blobs import BlobCache
from memfsd.overlay import Overlay
from memfsd.workspace import DONE_FILE, OverlayWorkspace

BODY = {"userId": "u1", "name": "U", "orgId": "o1"}


def workspace(tmp_path: Path) -> tuple[Memory, OverlayWorkspace]:
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
    specs = [memfs.org_memory(space="rules", org="orgId", review="none"), memfs.user_memory()]
    return Memory(MemoryStore(), specs, workspace=ws), ws


async def test_a_stored_space_is_written_down_beside_the_turn_not_into_it(tmp_path: Path) -> None:
    memory, ws = workspace(tmp_path)
    turn = await memory.start_turn("s1", BODY)
    manifest = ws.turn_file("s1").read_bytes()
    turn.done["rules"] = SpaceResult(status="saved")
    await ws.record(turn, "rules", turn.done["rules"])
    assert ws.turn_file("s1").read_bytes() == manifest  # not rewritten
    [saved] = ws.saved_turns()
    assert saved["state"]["done"]["rules"]["status"] == "saved"


async def test_a_record_left_by_an_earlier_turn_is_ignored(tmp_path: Path) -> None:
    memory, ws = workspace(tmp_path)
    await memory.start_turn("s1", BODY)
    ws.turn_file("s1").with_name(DONE_FILE).write_text(
        '{"turn": "t-old", "done": {"rules": {"status": "saved"}}}'
    )
    [saved] = ws.saved_turns()
    assert saved["state"].get("done", {}) == {}
