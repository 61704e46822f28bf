"""Review through whole turns: an app's test, written with ``memfs.testing.test_memory``."""

from __future__ import annotations

from pathlib import Path

import pytest

import memfs
from memfs.core.models import SpaceRef
from memfs.core.note import UNREVIEWED_LINE
from memfs.core.review import NOTE_LINE
from memfs.stores.folder import FolderStore
from memfs.testing import test_memory

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}
CAROL = {"userId": "u_carol", "name": "Carol", "bankId": "bank_17", "role": "officer"}
ERIN = {"userId": "u_erin", "name": "Erin", "bankId": "bank_17", "role": "underwriter"}


def desk(store: memfs.Store, tmp_path: Path) -> memfs.Memory:
    return memfs.Memory(
        store,
        [
            memfs.org_memory(
                space="lending-rules",
                org="bankId",
                can_write=lambda eb: eb.get("role") == "underwriter",
                by=lambda eb: {"id": eb["userId"], "label": eb["name"], "role": eb["role"]},
            ),
            memfs.user_memory(org="bankId"),
        ],
        workdir=tmp_path,
    )


async def run(
    memory: memfs.Memory, session: str, person: dict[str, str], write: dict[str, str]
) -> memfs.CommitResult:
    turn = await memory.start_turn(session, person, prompt=f"{person['name']} says so")
    for path, text in write.items():
        target = turn.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return await turn.end()


async def test_the_loan_desk_story_underwriter_waits_officer_is_read_only_approve_makes_it_live(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    result = await run(
        memory, "s1", DANA, {"lending-rules/lessons/self-employed.md": "Two years of SA302s.\n"}
    )
    assert result.spaces["lending-rules"].status == "waiting"
    [waiting] = mem.waiting()
    assert (waiting["space"], waiting["org"]) == ("lending-rules", "bank_17")
    assert waiting["by"]["label"] == "Dana"
    assert waiting["prompt"] == "Dana says so"

    carol = await run(
        memory, "s2", CAROL, {"lending-rules/rule.md": "Approve any score above 600."}
    )
    assert carol.spaces["lending-rules"].status == "skipped"
    assert len(mem.waiting()) == 1

    assert mem.files("lending-rules", org="bank_17") == {}
    mem.approve(waiting["id"], by={"id": "ada", "label": "Ada"})
    assert mem.files("lending-rules", org="bank_17") == {
        "lessons/self-employed.md": b"Two years of SA302s.\n"
    }
    assert mem.waiting() == []


async def test_the_note_tells_the_agent_its_change_will_wait(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    assert NOTE_LINE in turn.note
    await turn.end()
    officer = await memory.start_turn("s2", CAROL)
    assert NOTE_LINE not in officer.note  # read-only: nothing of it will wait
    await officer.end()
    mem.set_review("lending-rules", "none", org="bank_17")
    again = await memory.start_turn("s1", DANA)
    assert NOTE_LINE not in again.note
    await again.end()


async def test_on_the_folder_store_the_note_says_org_changes_save_at_once_and_they_do(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "folders")
    memory = desk(store, tmp_path / "work")  # review "person" by default: the folder has none
    turn = await memory.start_turn("s1", DANA, prompt="learn this")
    assert NOTE_LINE not in turn.note
    assert UNREVIEWED_LINE in turn.note
    assert "nothing waits for review" in turn.note
    (turn.root / "lending-rules" / "rule.md").write_text("Two years of accounts.\n")
    result = await turn.end()
    assert result.spaces["lending-rules"].status == "saved"
    rules = SpaceRef(layer="org", space="lending-rules", org="bank_17")
    assert (store.folder(rules) / "rule.md").read_text() == "Two years of accounts.\n"
    officer = await memory.start_turn("s2", CAROL)
    assert UNREVIEWED_LINE not in officer.note  # read-only: it saves nothing
    await officer.end()


async def test_a_conversation_sees_its_own_waiting_change_and_others_do_not(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    await run(memory, "s1", DANA, {"lending-rules/rule.md": "v1"})
    own = await memory.start_turn("s1", DANA)
    assert (own.root / "lending-rules" / "rule.md").read_text() == "v1"
    (own.root / "lending-rules" / "rule.md").write_text("v2")
    await own.end()
    other = await memory.start_turn("s2", ERIN)
    assert not (other.root / "lending-rules" / "rule.md").exists()
    await other.end()
    [change] = mem.waiting()
    assert change["files"] == {"rule.md": b"v2"}  # the later turn replaced the file


async def test_two_conversations_editing_one_file_both_wait_and_the_later_is_stale(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    mem.put("lending-rules", {"rule.md": "v1"}, org="bank_17")
    memory = desk(mem.store, tmp_path)
    first = await memory.start_turn("s1", DANA)
    second = await memory.start_turn("s2", ERIN)
    (first.root / "lending-rules" / "rule.md").write_text("from dana")
    (second.root / "lending-rules" / "rule.md").write_text("from erin")
    assert (await first.end()).spaces["lending-rules"].status == "waiting"
    assert (await second.end()).spaces["lending-rules"].status == "waiting"
    dana, erin = mem.waiting()
    assert dana["stale"] == [] and erin["stale"] == ["rule.md"]
    assert mem.files("lending-rules", org="bank_17") == {"rule.md": b"v1"}  # nothing overwritten


async def test_a_persons_own_memory_saves_at_once(tmp_path: Path) -> None:
    mem = test_memory()
    result = await run(desk(mem.store, tmp_path), "s1", DANA, {"me/prefs.md": "short"})
    assert result.spaces["me"].status == "saved"
    assert mem.files("me", org="bank_17", user="u_dana") == {"prefs.md": b"short"}
    assert mem.waiting() == []


async def test_review_after_is_live_at_once_and_listed(tmp_path: Path) -> None:
    mem = test_memory()
    mem.set_review("lending-rules", "after", org="bank_17")
    result = await run(desk(mem.store, tmp_path), "s1", DANA, {"lending-rules/r.md": "r"})
    assert result.spaces["lending-rules"].status == "saved"
    assert mem.files("lending-rules", org="bank_17") == {"r.md": b"r"}
    [listed] = mem.waiting()
    assert listed["state"] == "live"


def test_review_outside_the_three_modes_is_a_config_error() -> None:
    with pytest.raises(memfs.ConfigError):
        memfs.org_memory(space="rules", review="sometimes")  # type: ignore[arg-type]


async def test_after_switched_to_person_mid_conversation_waits_apart_and_approval_makes_it_live(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    mem.set_review("lending-rules", "after", org="bank_17")
    first = await run(memory, "s1", DANA, {"lending-rules/a.md": "live at once\n"})
    assert first.spaces["lending-rules"].status == "saved"
    mem.set_review("lending-rules", "person", org="bank_17")

    second = await run(memory, "s1", DANA, {"lending-rules/b.md": "waits\n"})

    assert second.spaces["lending-rules"].status == "waiting"
    assert mem.files("lending-rules", org="bank_17") == {"a.md": b"live at once\n"}
    listed = {w["state"]: w for w in mem.waiting()}
    assert set(listed) == {"live", "waiting"}
    assert listed["live"]["files"] == {"a.md": b"live at once\n"}
    assert listed["waiting"]["files"] == {"b.md": b"waits\n"}
    mem.approve(listed["waiting"]["id"])
    assert mem.files("lending-rules", org="bank_17") == {
        "a.md": b"live at once\n",
        "b.md": b"waits\n",
    }


async def test_a_change_built_over_two_turns_records_each_files_own_prompt(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    turns = []
    for path, prompt in (("a.md", "prompt A"), ("b.md", "prompt B")):
        turn = await memory.start_turn("s1", DANA, prompt=prompt)
        (turn.root / "lending-rules" / path).write_text(f"{prompt}\n")
        turns.append(turn.id)
        assert (await turn.end()).spaces["lending-rules"].status == "waiting"
    [waiting] = mem.waiting()
    mem.approve(waiting["id"])
    ref = memfs.SpaceRef(layer="org", space="lending-rules", org="bank_17")
    for path, prompt, turn_id in (("a.md", "prompt A", turns[0]), ("b.md", "prompt B", turns[1])):
        [revision] = await mem.store.history(ref, path)
        assert (revision.provenance.prompt, revision.provenance.turn) == (prompt, turn_id)
