"""Nothing a turn wrote is lost to a failed store: kept spaces, retries, discards (copy mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import memfs
from memfs.core.errors import Forgotten, InvalidName, NameTooLong, StoreUnavailable
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.memory import MemoryStore
from memfs.testing import FaultyStore
from tests.test_turns_copy_mode import DANA, RULES, desk, seed

ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")


async def revision(store: MemoryStore, ref: SpaceRef, path: str) -> str:
    return (await store.load(ref, "look")).revisions[path]


def failing() -> Any:
    """A memory store whose ``store`` a test makes fail (``fail``) and work again (``heal``)."""
    return FaultyStore(MemoryStore())


async def test_a_failed_store_keeps_the_working_copy_and_ending_again_stores_exactly_it(
    tmp_path: Path,
) -> None:
    store = failing()
    seed(store, RULES, {"a.md": b"a1"})
    memory = desk(store, tmp_path)
    turn = await memory.start_turn("s1", DANA, prompt="p")
    (turn.root / "lending-rules" / "a.md").write_bytes(b"a2")
    (turn.root / "me" / "prefs.md").write_bytes(b"tea")
    (turn.root / "me" / "notes.md").write_bytes(b"n")
    store.fail("store", StoreUnavailable("database is locked"))

    first = await turn.end()

    for name in ("lending-rules", "me"):
        result = first.spaces[name]
        assert (result.status, result.reason, result.kept) == ("not_saved", "store failed", True)
        assert "database is locked" in (result.error or "")
    assert first.spaces["lending-rules"].bases == {"a.md": await revision(store, RULES, "a.md")}
    assert first.spaces["me"].bases == {"notes.md": None, "prefs.md": None}
    # The writes are still on disk, and the session cannot start over them.
    assert (turn.root / "me" / "prefs.md").read_bytes() == b"tea"
    with pytest.raises(memfs.TurnOpen, match="kept spaces"):
        await memory.start_turn("s1", DANA)
    kept = await memory.kept_changes("s1")
    assert kept["me"][2].created == {"notes.md": b"n", "prefs.md": b"tea"}

    store.heal("store")
    again = await turn.end()

    statuses = {n: r.status for n, r in again.spaces.items()}
    assert statuses == {"lending-rules": "saved", "me": "saved"}
    assert store.files_nowait(ME) == {"notes.md": b"n", "prefs.md": b"tea"}
    assert store.files_nowait(RULES) == {"a.md": b"a2"}
    assert len(store.events) == 3  # the seed, then each space once
    assert [t.turn for t in await store.traces()] == [turn.id]  # traced once, at the end
    assert not (turn.root).exists()  # stored, so the working copy goes
    await memory.start_turn("s1", DANA)


async def test_ending_again_retries_only_the_kept_spaces(tmp_path: Path) -> None:
    store = failing()
    memory = desk(store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "prefs.md").write_bytes(b"tea")
    (turn.root / "lending-rules" / "r.md").write_bytes(b"r")
    store.fail("store", StoreUnavailable("disk full"), when=lambda ref, *a, **kw: ref == ME)
    first = await turn.end()
    assert first.spaces["lending-rules"].status == "saved"
    assert first.spaces["me"].kept
    calls = store.calls["store"]
    store.heal("store")
    again = await turn.end()
    assert store.calls["store"] == calls + 1  # only the kept space is sent again
    assert again.spaces["lending-rules"] == first.spaces["lending-rules"]
    assert again.spaces["me"].status == "saved"


async def test_a_conflict_keeps_the_space_with_its_bases_and_discard_drops_it(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    seed(store, RULES, {"a.md": b"v1"})
    base = await revision(store, RULES, "a.md")
    memory = desk(store, tmp_path)
    first = await memory.start_turn("s1", DANA)
    second = await memory.start_turn("s2", DANA)
    (first.root / "lending-rules" / "a.md").write_bytes(b"from s1")
    (second.root / "lending-rules" / "a.md").write_bytes(b"from s2")
    (second.root / "lending-rules" / "c.md").write_bytes(b"new in s2")
    await first.end()

    result = (await second.end()).spaces["lending-rules"]

    assert (result.status, result.reason, result.kept) == ("not_saved", "conflict", True)
    assert result.conflicts == ("a.md",)
    assert result.bases == {"a.md": base, "c.md": None}
    kept = await memory.kept_changes("s2")
    assert kept["lending-rules"][2].updated == {"a.md": b"from s2"}

    dropped = await memory.discard_turn("s2")

    assert dropped.spaces["lending-rules"].reason == "discarded"
    assert dropped.spaces["lending-rules"].not_saved == ("a.md", "c.md")
    assert dropped.spaces["me"].status == "saved"  # nothing to store; done at the end
    assert not second.root.exists()
    assert store.files_nowait(RULES) == {"a.md": b"from s1"}
    with pytest.raises(memfs.NotFound):
        memory.open_turn("s2")
    await memory.start_turn("s2", DANA)


@pytest.mark.parametrize(
    "refusal",
    [
        NameTooLong("the store's path limit", path="long/name.md"),
        InvalidName("cannot delete a file the space does not hold", path="long/name.md"),
    ],
)
async def test_a_path_the_store_refuses_is_named_and_the_rest_commits(
    refusal: InvalidName, tmp_path: Path
) -> None:
    store = FaultyStore(MemoryStore())
    store.fail("store", refusal, when=lambda ref, changes, **kw: "long/name.md" in changes.paths)
    memory = desk(store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "long").mkdir()
    (turn.root / "me" / "long" / "name.md").write_bytes(b"x")
    (turn.root / "me" / "ok.md").write_bytes(b"ok")
    (turn.root / "lending-rules" / "r.md").write_bytes(b"r")

    result = await turn.end()

    me = result.spaces["me"]
    assert (me.status, me.not_saved, me.reason, me.kept) == (
        "saved",
        ("long/name.md",),
        "refused",
        False,
    )
    assert str(refusal) in me.errors["long/name.md"]
    assert store.files_nowait(ME) == {"ok.md": b"ok"}
    assert store.files_nowait(RULES) == {"r.md": b"r"}
    assert result.spaces["lending-rules"].status == "saved"


async def test_a_store_refused_as_forgotten_is_not_kept(tmp_path: Path) -> None:
    store = MemoryStore()
    store.put_nowait(ME, ChangeSet(created={"g.md": b"secret"}), provenance=Provenance())
    memory = desk(store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "g2.md").write_bytes((turn.root / "me" / "g.md").read_bytes())
    await store.forget_user("u_dana", "bank_17", by=None)

    result = (await turn.end()).spaces["me"]

    assert (result.status, result.reason, result.kept) == ("not_saved", "forgotten", False)
    assert result.not_saved == ("g2.md",)
    assert store.files_nowait(ME) == {}
    assert not turn.root.exists()
    assert isinstance(Forgotten("x"), memfs.Conflict)


async def test_an_open_turn_can_be_discarded_whole(tmp_path: Path) -> None:
    store = MemoryStore()
    memory = desk(store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "prefs.md").write_bytes(b"tea")
    result = await memory.discard_turn("s1")
    assert result.spaces["me"].not_saved == ("prefs.md",)
    assert store.files_nowait(ME) == {}
    with pytest.raises(memfs.NotFound):
        await turn.end()


async def test_a_manual_commit_whose_store_fails_can_be_committed_again(tmp_path: Path) -> None:
    store = failing()
    memory = memfs.Memory(
        store, [memfs.user_memory(commit="manual")], org="bankId", workdir=tmp_path / "w"
    )
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "a.md").write_bytes(b"draft")
    ended = await turn.end()
    store.fail("store", StoreUnavailable("down"))
    failed = await ended.commit_manual()
    assert failed.spaces["me"].kept and failed.pending == ["me"]
    store.heal("store")
    done = await failed.commit_manual()
    assert done.spaces["me"].status == "saved" and done.pending == []
    assert store.files_nowait(ME) == {"a.md": b"draft"}
