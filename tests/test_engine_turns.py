"""The turn engine's own rules, driven through ``memfs.Memory`` in copy mode.

What a turn is (a plan decided before anything is written), how ending is
reported, and which failures fall back to the last known copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import memfs
from memfs.core.models import SpaceRef
from memfs.stores.memory import MemoryStore

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}


class Flaky(MemoryStore):
    """A memory store whose loads fail as unavailable while ``down``."""

    down = False

    async def load(self, ref: SpaceRef, session: str) -> memfs.Loaded:
        if self.down:
            raise memfs.StoreUnavailable("database is down")
        return await super().load(ref, session)


async def test_a_manual_space_loaded_from_the_last_copy_is_never_stored_by_commit_manual(
    tmp_path: Path,
) -> None:
    store = Flaky()
    me = SpaceRef(layer="user", space="me", user="u_dana")
    store.put_nowait(me, memfs.ChangeSet(created={"p.md": b"v1\n"}), provenance=memfs.Provenance())
    memory = memfs.Memory(store, [memfs.user_memory(commit="manual")], workdir=tmp_path)
    await (await memory.start_turn("s1", DANA)).end()  # a good load: the last known copy
    store.put_nowait(
        me, memfs.ChangeSet(updated={"p.md": b"v2 by another\n"}), provenance=memfs.Provenance()
    )
    store.down = True
    turn = await memory.start_turn("s1", DANA)
    assert turn.mounts["me"].from_last_known_copy
    (turn.mounts["me"].path / "p.md").write_text("edited against the stale copy\n")
    ended = await turn.end()
    assert ended.spaces["me"].status == "not_saved"
    assert ended.spaces["me"].reason == "last known copy"
    assert ended.spaces["me"].not_saved == ("p.md",)
    store.down = False
    committed = await ended.commit_manual()
    assert committed.spaces["me"].status == "not_saved"
    assert committed.spaces["me"].reason == "last known copy"
    assert store.files_nowait(me) == {"p.md": b"v2 by another\n"}


async def test_a_bug_in_an_apps_own_load_fails_the_turn_start_and_writes_nothing(
    tmp_path: Path,
) -> None:
    calls = {"n": 0}
    stored: list[memfs.ChangeSet] = []

    async def load(ctx: memfs.TurnContext) -> dict[str, str]:
        calls["n"] += 1
        if calls["n"] > 1:
            return {"a.md": "x"}["missing"]  # the app's own KeyError
        return {"a.md": "first\n"}

    async def store(ctx: memfs.TurnContext, changes: memfs.ChangeSet, cursor: str | None) -> None:
        stored.append(changes)

    memory = memfs.Memory(
        MemoryStore(),
        [memfs.persistent_dir(path="scratch", load=load, store=store)],
        workdir=tmp_path / "w",
    )
    await (await memory.start_turn("s1", DANA)).end()  # a last known copy exists
    with pytest.raises(KeyError):
        await memory.start_turn("s1", DANA)
    assert not (tmp_path / "w" / "s1").exists()
    with pytest.raises(memfs.NotFound):
        memory.open_turn("s1")
    assert stored == []
