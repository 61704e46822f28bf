"""Seeds: a repo folder is version 1 of a space; later edits wait as "Changed in code"."""

from __future__ import annotations

from pathlib import Path

import pytest

import memfs
from memfs.core.models import SpaceRef
from memfs.core.seeds import CHANGED_IN_CODE
from memfs.stores.memory import MemoryStore
from memfs.testing import test_memory

RULES = SpaceRef(layer="org", space="lending-rules")


def seed_folder(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "repo" / "memory" / "lending-rules"
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


def desk(store: memfs.Store, tmp_path: Path, folder: Path) -> memfs.Memory:
    return memfs.Memory(
        store,
        [memfs.org_memory(space="lending-rules", seed=folder)],
        workdir=tmp_path / "work",
        seed_record=tmp_path / "state" / "seeds.json",
    )


async def test_the_seed_is_version_1_of_the_space_from_code(tmp_path: Path) -> None:
    store = MemoryStore()
    folder = seed_folder(tmp_path, {"income.md": "two years\n", "scores/min.md": "600\n"})
    turn = await desk(store, tmp_path, folder).start_turn("s1", {})
    assert (turn.root / "lending-rules" / "scores" / "min.md").read_text() == "600\n"
    await turn.end()
    [revision] = await store.history(RULES, "income.md")
    assert revision.provenance.origin == "code"
    assert await store.list_changes() == []


async def test_an_edit_in_code_waits_as_one_change_and_never_overwrites_what_was_approved(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    folder = seed_folder(tmp_path, {"income.md": "two years\n", "scores.md": "600\n"})
    first = await desk(mem.store, tmp_path, folder).start_turn("s1", {})
    await first.end()
    mem.put("lending-rules", {"scores.md": "620 (a person's edit)\n"}, by="ada")

    (folder / "income.md").write_text("three years\n")
    (folder / "new.md").write_text("new rule\n")
    memory = desk(mem.store, tmp_path, folder)  # a restart: the record is on disk
    turn = await memory.start_turn("s2", {})
    assert (turn.root / "lending-rules" / "income.md").read_text() == "two years\n"
    await turn.end()
    [change] = mem.waiting()
    assert change["prompt"] == CHANGED_IN_CODE
    assert change["files"] == {"income.md": b"three years\n", "new.md": b"new rule\n"}
    assert mem.files("lending-rules")["scores.md"] == b"620 (a person's edit)\n"

    again = await memory.start_turn("s3", {})  # nothing new in code: nothing more waits
    await again.end()
    assert len(mem.waiting()) == 1
    mem.approve(change["id"])
    [_, approved] = await mem.store.history(RULES, "income.md")
    assert approved.provenance.origin == "code"  # approved, and still from the code
    assert approved.approved_by is not None
    assert mem.files("lending-rules") == {
        "income.md": b"three years\n",
        "new.md": b"new rule\n",
        "scores.md": b"620 (a person's edit)\n",
    }


async def test_a_missing_seed_folder_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(memfs.ConfigError):
        desk(MemoryStore(), tmp_path, tmp_path / "no-such-folder")


async def test_a_seed_changed_while_nothing_ran_is_proposed_at_the_start_up_check(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    folder = seed_folder(tmp_path, {"income.md": "two years\n"})
    turn = await desk(mem.store, tmp_path, folder).start_turn("s1", {})
    await turn.end()
    (folder / "income.md").write_text("three years\n")  # while nothing runs
    restarted = desk(mem.store, tmp_path, folder)
    await restarted.refresh_seeds()  # what the daemon does at start, before any turn
    [change] = mem.waiting()
    assert change["files"] == {"income.md": b"three years\n"}
