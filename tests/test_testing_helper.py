"""``memfs.testing.test_memory()``: what an app's own tests are written with."""

from __future__ import annotations

from pathlib import Path

import pytest

import memfs
from memfs.core.errors import Conflict
from memfs.testing import test_memory

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}


async def test_an_apps_test_reads_like_the_story(tmp_path: Path) -> None:
    mem = test_memory()
    mem.put("lending-rules", {"income.md": "Two years of accounts.\n"}, org="bank_17", by="ada")
    app = memfs.Memory(
        mem.store,
        [
            memfs.org_memory(space="lending-rules", org="bankId"),
            memfs.user_memory(org="bankId"),
        ],
        workdir=tmp_path,
    )
    turn = await app.start_turn("s1", DANA, prompt="Prefer bullet points")
    assert (turn.root / "lending-rules" / "income.md").read_text() == "Two years of accounts.\n"
    (turn.root / "me" / "style.md").write_text("Bullet points.\n")
    await turn.end()

    assert mem.files("me", org="bank_17", user="u_dana") == {"style.md": b"Bullet points.\n"}
    assert mem.files("lending-rules", org="bank_17") == {"income.md": b"Two years of accounts.\n"}
    edit, saved = mem.changes()
    assert edit["origin"] == "edited"
    assert edit["by"] == {"id": "ada", "label": None, "role": None}
    assert saved["layer"] == "user"
    assert saved["user"] == "u_dana"
    assert saved["created"] == {"style.md": b"Bullet points.\n"}
    assert saved["prompt"] == "Prefer bullet points"


def test_put_updates_and_deletes_as_a_persons_edit() -> None:
    mem = test_memory()
    mem.put("rules", {"a.md": "1", "b.md": b"2"})
    mem.put("rules", {"a.md": "one", "b.md": None})
    assert mem.files("rules") == {"a.md": b"one"}
    last = mem.changes()[-1]
    assert last["updated"] == {"a.md": b"one"}
    assert last["deleted"] == ["b.md"]


async def test_an_apps_test_approves_only_the_change_and_live_files_it_was_shown(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    mem.put("lending-rules", {"income.md": "Two years.\n"}, org="bank_17", by="ada")
    mem.set_review("lending-rules", "person", org="bank_17")
    app = memfs.Memory(
        mem.store, [memfs.org_memory(space="lending-rules", org="bankId")], workdir=tmp_path
    )
    turn = await app.start_turn("s1", DANA, prompt="Three years now")
    (turn.root / "lending-rules" / "income.md").write_text("Three years.\n")
    await turn.end()
    [shown] = mem.waiting(org="bank_17")
    mem.put("lending-rules", {"income.md": "Two years, audited.\n"}, org="bank_17", by="ada")

    with pytest.raises(Conflict):  # the live file moved after it was shown
        mem.approve(shown["id"], force=True, live_version=shown["live_version"])
    with pytest.raises(Conflict):  # a version the change never had
        mem.approve(shown["id"], version="0" * 16, force=True)
    assert mem.files("lending-rules", org="bank_17") == {"income.md": b"Two years, audited.\n"}
    [again] = mem.waiting(org="bank_17")
    mem.approve(
        again["id"], force=True, version=again["version"], live_version=again["live_version"]
    )
    assert mem.files("lending-rules", org="bank_17") == {"income.md": b"Three years.\n"}


def test_helpers_are_not_collected_as_tests() -> None:
    from memfs.testing import TestMemory

    assert getattr(test_memory, "__test__", True) is False
    assert getattr(TestMemory, "__test__", True) is False
