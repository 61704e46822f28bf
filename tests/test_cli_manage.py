"""The people's commands: review, history, restore, forget, forget-user, audit, files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner

import memfs
from memfs.cli import main
from memfs.core.models import ChangeSet, FileMeta, Provenance, SpaceRef
from memfs.stores.sqlite import SqliteStore

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}
RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")


def seed_store(db: Path) -> None:
    """One waiting change to the rules from Dana's conversation, and Dana's own preferences."""

    async def go() -> None:
        store = SqliteStore(db)
        try:
            memory = memfs.Memory(
                store,
                [
                    memfs.org_memory(space="lending-rules", org="bankId"),
                    memfs.user_memory(org="bankId"),
                ],
                workdir=db.parent / "work",
            )
            await store.put(
                RULES,
                ChangeSet(created={"income.md": b"two years\n"}),
                provenance=Provenance(origin="code"),
            )
            turn = await memory.start_turn("s1", DANA, prompt="three years now")
            (turn.root / "lending-rules" / "income.md").write_text("three years\n")
            (turn.root / "lending-rules" / "new.md").write_text("new\n")
            (turn.root / "me" / "prefs.md").write_text("short\n")
            await turn.end()
        finally:
            await store.aclose()

    trio.run(go)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memfs.db"
    seed_store(path)
    return path


def memfs_cli(db: Path, *args: str, role: str = "member", actor: str = "ada") -> Any:
    result = CliRunner().invoke(
        main,
        [*args, "--store", f"sqlite://{db}", "--org", "bank_17", "--as", actor, "--role", role],
        catch_exceptions=False,
    )
    return result


def ok(db: Path, *args: str, **kw: str) -> Any:
    result = memfs_cli(db, *args, **kw)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_review_list_show_and_approve_part_then_the_rest(db: Path) -> None:
    [change] = ok(db, "review", "list")
    assert change["files"] == ["income.md", "new.md"]
    assert change["prompt"] == "three years now"
    shown = ok(db, "review", "show", change["id"])
    assert shown["files"]["income.md"]["text"] == "three years\n"
    partly = ok(db, "review", "approve", change["id"], "--path", "new.md")
    assert partly["state"] == "waiting" and partly["files"] == ["income.md"]
    done = ok(db, "review", "approve", change["id"])
    assert done["state"] == "approved"
    history = ok(db, "history", "lending-rules", "income.md")
    assert [r["provenance"]["origin"] for r in history] == ["code", "conversation"]
    assert history[-1]["approved_by"]["id"] == "ada"


def test_reject_then_approve_is_an_illegal_move_with_exit_code_5(db: Path) -> None:
    [change] = ok(db, "review", "list")
    ok(db, "review", "reject", change["id"])
    again = memfs_cli(db, "review", "approve", change["id"])
    assert again.exit_code == 5
    assert "cannot be approved" in again.stderr


def test_restore_and_forget_an_org_file(db: Path) -> None:
    [first] = ok(db, "history", "lending-rules", "income.md")
    ok(db, "forget", "lending-rules", "income.md")
    assert ok(db, "files", "lending-rules")["files"] == {}
    ok(db, "restore", "lending-rules", "income.md", first["id"])
    assert ok(db, "files", "lending-rules")["files"] == {"income.md": 10}


def test_viewers_cannot_review_and_members_cannot_forget_people(db: Path) -> None:
    [change] = ok(db, "review", "list", role="viewer")
    refused = memfs_cli(db, "review", "approve", change["id"], role="viewer")
    assert refused.exit_code == 4
    refused = memfs_cli(db, "forget-user", "u_dana", role="member")
    assert refused.exit_code == 4
    refused = memfs_cli(db, "review", "set", "lending-rules", "none", role="member")
    assert refused.exit_code == 4


def test_members_see_that_a_persons_memory_exists_not_whose_admins_open_it_audited(
    db: Path,
) -> None:
    [person] = ok(db, "files", role="member")
    assert person["person"] is None and person["bytes"] == 6
    [person] = ok(db, "files", role="admin", actor="root-admin")
    assert person["person"] == "u_dana"
    opened = ok(db, "files", "--user", "u_dana", role="admin", actor="root-admin")
    assert opened["spaces"] == {"me": {"prefs.md": 6}}
    entries = ok(db, "audit", role="admin", actor="root-admin")
    assert [(e["action"], e["target"]) for e in entries][-1] == ("open", "u_dana")
    assert entries[-1]["actor"]["id"] == "root-admin"


def test_forget_user_removes_the_persons_memory_and_is_audited(db: Path) -> None:
    gone = ok(db, "forget-user", "u_dana", role="admin", actor="root-admin")
    assert gone["forgotten_spaces"] == ["me"]
    assert ok(db, "files", role="admin", actor="root-admin") == []
    actions = [e["action"] for e in ok(db, "audit", role="admin", actor="root-admin")]
    assert "forget-user" in actions


def test_setting_review_is_audited(db: Path) -> None:
    ok(db, "review", "set", "lending-rules", "after", role="admin", actor="root-admin")
    [entry] = [e for e in ok(db, "audit", role="admin", actor="x") if e["action"] == "set-review"]
    assert entry["detail"] == "after"


def test_review_show_names_a_files_new_mode_and_the_folders_and_history_shows_modes(
    db: Path,
) -> None:
    async def propose() -> None:
        store = SqliteStore(db)
        try:
            loaded = await store.load(RULES, "s9")
            await store.store(
                RULES,
                ChangeSet(
                    updated={"income.md": b"two years\n"},
                    meta={"income.md": FileMeta(mode=0o755)},
                    folders_created=("drafts",),
                ),
                cursor=loaded.cursor,
                provenance=Provenance(session="s9"),
                review="person",
            )
        finally:
            await store.aclose()

    trio.run(propose)
    change = next(c for c in ok(db, "review", "list") if c["session"] == "s9")
    assert change["folders"] == {"drafts": True}
    shown = ok(db, "review", "show", change["id"])
    assert shown["files"]["income.md"]["file_mode"] == "755"
    ok(db, "review", "approve", change["id"])
    history = ok(db, "history", "lending-rules", "income.md")
    assert [r["mode"] for r in history] == [0o644, 0o755]
