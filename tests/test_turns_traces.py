"""Every turn leaves a trace in a managed store: what it loaded and what became of it."""

from __future__ import annotations

from pathlib import Path

import memfs
from memfs.core.models import SpaceRef
from memfs.stores.memory import MemoryStore
from memfs.testing import FaultyStore
from tests.test_turns_copy_mode import DANA, RULES, desk, seed

ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")


async def test_a_turns_trace_names_its_snapshot_statuses_and_waiting_change(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    seed(store, RULES, {"rules.md": b"min score 600\n"})
    memory = desk(store, tmp_path, review="person")
    turn = await memory.start_turn("s1", DANA, prompt="raise the minimum")
    snapshot = dict(turn.mounts["lending-rules"].snapshot)
    (turn.mounts["lending-rules"].path / "rules.md").write_bytes(b"min score 620\n")
    (turn.mounts["me"].path / "prefs.md").write_bytes(b"short answers\n")
    result = await turn.end()

    [trace] = await store.traces()
    assert (trace.session, trace.turn, trace.prompt) == ("s1", turn.id, "raise the minimum")
    rules = trace.mounts["lending-rules"]
    assert rules.ref == RULES and rules.snapshot == snapshot == {"rules.md": "1"}
    assert (rules.status, rules.saved) == ("waiting", ("rules.md",))
    assert rules.change is not None and rules.change == result.spaces["lending-rules"].change
    assert [c.id for c in await store.list_changes()] == [rules.change]
    me = trace.mounts["me"]
    assert (me.ref.layer, me.ref.user) == ("user", "u_dana")
    assert (me.status, me.saved, me.change, me.snapshot) == ("saved", ("prefs.md",), None, {})
    # Copy mode cannot see which files were read, so it records none.
    assert trace.files == {}


async def test_each_turn_adds_a_trace_in_order_and_read_only_turns_are_traced_too(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    memory = desk(store, tmp_path)
    for session, body in [("s1", DANA), ("s2", {**DANA, "role": "officer"})]:
        turn = await memory.start_turn(session, body)
        await turn.end()
    traces = await store.traces()
    assert [t.session for t in traces] == ["s1", "s2"]
    assert [t.mounts["lending-rules"].read_only for t in traces] == [False, True]


async def test_persistent_dirs_are_left_out_of_the_trace(tmp_path: Path) -> None:
    async def load(ctx: memfs.TurnContext) -> dict[str, str]:
        return {"notes.md": "the app's own\n"}

    async def keep(ctx: memfs.TurnContext, changes: memfs.ChangeSet, cursor: str | None) -> None:
        return None

    store = MemoryStore()
    memory = memfs.Memory(
        store,
        [
            memfs.user_memory(user="userId"),
            memfs.persistent_dir(path="scratch", load=load, store=keep),
        ],
        workdir=tmp_path / "work",
    )
    turn = await memory.start_turn("s1", DANA)
    await turn.end()
    [trace] = await store.traces()
    assert set(trace.mounts) == {"me"}


async def test_a_failure_to_keep_the_trace_is_reported_and_the_turn_still_saves(
    tmp_path: Path,
) -> None:
    store = FaultyStore(MemoryStore(), fail={"record_trace": RuntimeError("trace table is gone")})
    reported: list[tuple[str, str]] = []
    memory = desk(store, tmp_path, on_error=lambda exc, where: reported.append((str(exc), where)))
    turn = await memory.start_turn("s1", DANA)
    (turn.mounts["me"].path / "prefs.md").write_bytes(b"kept\n")
    result = await turn.end()
    assert result.spaces["me"].status == "saved"
    assert await store.files(ME) == {"prefs.md": b"kept\n"}
    assert reported == [("trace table is gone", "trace")]
    assert not turn.root.exists()


async def test_a_copy_mode_trace_keeps_every_mounts_cursor_and_only_what_it_changed(
    tmp_path: Path,
) -> None:
    """What a turn carried is its cursor: the store answers the rest, so traces stay small."""
    inner = MemoryStore()
    seed(inner, RULES, {f"rules/r{i:03}.md": b"rule\n" for i in range(200)})
    seed(inner, ME, {"prefs.md": b"tea\n"})
    store = FaultyStore(inner)
    memory = desk(store, tmp_path)
    turn = await memory.start_turn("s1", DANA, prompt="edit one rule")
    carried = {name: dict(mount.snapshot) for name, mount in turn.mounts.items()}
    cursors = {name: mount.cursor for name, mount in turn.mounts.items()}
    (turn.mounts["lending-rules"].path / "rules/r007.md").write_bytes(b"changed\n")
    await turn.end()
    # An officer's read-only turn, then a turn whose load fails and runs on the last copy.
    await (await memory.start_turn("s2", {**DANA, "role": "officer"})).end()
    store.fail("load", memfs.StoreUnavailable("the store is down"))
    stale = await memory.start_turn("s1", DANA)
    assert stale.mounts["lending-rules"].from_last_known_copy
    await stale.end()
    store.heal()

    first, read_only, on_copy = await inner.traces()
    for name in ("lending-rules", "me"):
        assert first.mounts[name].cursor == cursors[name] is not None
        # Exactly what the turn carried, from the cursor alone.
        as_of = await inner.files_as_of(first.mounts[name].ref, str(cursors[name]))
        assert {p: f.revision for p, f in as_of.items()} == carried[name]
    assert first.mounts["lending-rules"].snapshot == {
        "rules/r007.md": carried["lending-rules"]["rules/r007.md"]
    }
    assert first.mounts["me"].snapshot == {}
    assert all(m.cursor is not None for m in read_only.mounts.values())
    assert on_copy.mounts["lending-rules"].from_last_known_copy
    assert on_copy.mounts["lending-rules"].cursor == read_only.mounts["lending-rules"].cursor
    # No per-file list of everything carried: the trace does not grow with the space.
    assert len(first.model_dump_json()) < 2_000
