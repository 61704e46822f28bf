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
from tests.test_store_sqlite import raw

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


def test_review_approve_with_a_version_shown_before_a_later_turn_fails_and_decides_nothing(
    db: Path,
) -> None:
    [change] = ok(db, "review", "list")
    shown = ok(db, "review", "show", change["id"])
    assert shown["version"] == change["version"]

    async def later_turn() -> None:  # the same conversation rewrites income.md
        store = SqliteStore(db)
        try:
            loaded = await store.load(RULES, "s1")
            await store.store(
                RULES,
                ChangeSet(updated={"income.md": b"four years\n"}),
                cursor=loaded.cursor,
                provenance=Provenance(session="s1", turn="t9", prompt="four now"),
                review="person",
            )
        finally:
            await store.aclose()

    trio.run(later_turn)
    stale = memfs_cli(db, "review", "approve", change["id"], "--version", shown["version"])
    assert stale.exit_code == 5 and "changed since it was shown" in stale.output
    assert ok(db, "review", "list")[0]["state"] == "waiting"
    now = ok(db, "review", "show", change["id"])
    assert now["files"]["income.md"]["text"] == "four years\n"
    done = ok(db, "review", "approve", change["id"], "--version", now["version"])
    assert done["state"] == "approved"


def test_review_approve_forced_with_a_live_version_shown_before_a_live_write_decides_nothing(
    db: Path,
) -> None:
    async def live_write(content: bytes | None) -> bytes:  # another person's, no review
        store = SqliteStore(db)
        try:
            if content is not None:
                changes = ChangeSet(updated={"income.md": content})
                await store.put(RULES, changes, provenance=Provenance())
            return (await store.files(RULES))["income.md"]
        finally:
            await store.aclose()

    trio.run(live_write, b"five years\n")
    [change] = ok(db, "review", "list")
    shown = ok(db, "review", "show", change["id"])  # income.md stale over "five years"
    assert shown["stale"] == ["income.md"] and shown["live_version"] == change["live_version"]
    trio.run(live_write, b"six years\n")  # not shown
    named = ("--version", shown["version"], "--live-version", shown["live_version"])
    forced = memfs_cli(db, "review", "approve", change["id"], "--force", *named)
    assert forced.exit_code == 5 and "changed live since" in forced.output
    assert trio.run(live_write, None) == b"six years\n"
    now = ok(db, "review", "show", change["id"])
    named = ("--version", now["version"], "--live-version", now["live_version"])
    assert ok(db, "review", "approve", change["id"], "--force", *named)["state"] == "approved"
    assert trio.run(live_write, None) == b"three years\n"


def test_review_show_gives_each_file_a_unified_diff_against_the_live_file(db: Path) -> None:
    [change] = ok(db, "review", "list")
    shown = ok(db, "review", "show", change["id"])
    income, new = shown["files"]["income.md"], shown["files"]["new.md"]
    assert income["diff"] == (
        "--- a/income.md\n+++ b/income.md\n@@ -1 +1 @@\n-two years\n+three years\n"
    )
    assert income["text"] == "three years\n"  # the shape stays: the new content is there too
    assert new["diff"] == "--- /dev/null\n+++ b/new.md\n@@ -0,0 +1 @@\n+new\n"


def test_review_show_diffs_a_change_in_code_from_a_seed(tmp_path: Path) -> None:
    db = tmp_path / "memfs.db"
    folder = tmp_path / "repo" / "lending-rules"
    folder.mkdir(parents=True)
    (folder / "income.md").write_text("two years\nno gaps\n")
    (folder / "scan.bin").write_bytes(b"\xff\x00")

    async def go() -> None:
        store = SqliteStore(db)
        try:
            memory = memfs.Memory(
                store,
                [memfs.org_memory(space="lending-rules", org="bankId", seed=folder)],
                workdir=tmp_path / "work",
                seed_record=tmp_path / "seeds.json",
            )
            await (await memory.start_turn("s1", DANA)).end()
            (folder / "income.md").write_text("three years\nno gaps\n")
            (folder / "scan.bin").write_bytes(b"\xff\x00\x01")
            await memory.refresh_seeds()
        finally:
            await store.aclose()

    trio.run(go)
    [change] = ok(db, "review", "list")
    assert change["origin"] == "code"
    shown = ok(db, "review", "show", change["id"])
    assert shown["files"]["income.md"]["diff"] == (
        "--- a/income.md\n+++ b/income.md\n@@ -1,2 +1,2 @@\n-two years\n+three years\n no gaps\n"
    )
    assert shown["files"]["scan.bin"]["diff"] == "binary, 3 bytes (was 2 bytes)\n"


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
    assert (gone["forgotten_spaces"], gone["forgotten_files"]) == (["me"], 1)
    assert ok(db, "files", role="admin", actor="root-admin") == []
    actions = [e["action"] for e in ok(db, "audit", role="admin", actor="root-admin")]
    assert "forget-user" in actions


def test_setting_review_is_audited(db: Path) -> None:
    ok(db, "review", "set", "lending-rules", "after", role="admin", actor="root-admin")
    [entry] = [e for e in ok(db, "audit", role="admin", actor="x") if e["action"] == "set-review"]
    assert entry["detail"] == "after"


def cli_as(db: Path, *args: str, org: str = "bank_17", role: str = "member", **kw: Any) -> Any:
    return CliRunner().invoke(
        main,
        [*args, "--store", f"sqlite://{db}", "--org", org, "--as", "mallory", "--role", role],
        catch_exceptions=False,
        **kw,
    )


def test_another_orgs_change_is_not_found_in_review_with_the_missing_message(db: Path) -> None:
    [change] = ok(db, "review", "list")
    for args, role in (
        (("review", "show", change["id"]), "viewer"),
        (("review", "approve", change["id"]), "member"),
        (("review", "approve", change["id"], "--force"), "admin"),
        (("review", "reject", change["id"]), "member"),
        (("review", "edit", change["id"], "income.md", "-"), "member"),
    ):
        foreign = cli_as(db, *args, org="acme", role=role, input=b"mallory's rule\n")
        missing_args = tuple("424242" if a == change["id"] else a for a in args)
        missing = cli_as(db, *missing_args, org="acme", role=role, input=b"x")
        assert foreign.exit_code == missing.exit_code == 3, foreign.output
        assert foreign.stderr.replace(change["id"], "ID") == missing.stderr.replace("424242", "ID")
        assert "three years" not in foreign.output and "bank_17" not in foreign.output
    assert ok(db, "review", "list") == [change]
    assert ok(db, "files", "lending-rules")["files"] == {"income.md": 10}
    assert ok(db, "audit", role="admin") == []


def test_approving_a_stale_file_needs_force_on_the_command_line(db: Path) -> None:
    async def second_conversation() -> None:
        store = SqliteStore(db)
        try:
            loaded = await store.load(RULES, "s2")
            await store.store(
                RULES,
                ChangeSet(updated={"income.md": b"four years\n"}),
                cursor=loaded.cursor,
                provenance=Provenance(session="s2", turn="t1"),
                review="person",
            )
        finally:
            await store.aclose()

    trio.run(second_conversation)
    first, second = ok(db, "review", "list")
    ok(db, "review", "approve", first["id"])  # the live file moves on under the second
    assert ok(db, "review", "show", second["id"])["stale"] == ["income.md"]
    refused = memfs_cli(db, "review", "approve", second["id"])
    assert refused.exit_code == 5
    assert "income.md" in refused.stderr and "force" in refused.stderr
    assert ok(db, "review", "show", second["id"])["state"] == "waiting"
    assert ok(db, "files", "lending-rules")["files"]["income.md"] == len("three years\n")
    forced = ok(db, "review", "approve", second["id"], "--force")
    assert forced["state"] == "approved"
    assert ok(db, "files", "lending-rules")["files"]["income.md"] == len("four years\n")


def test_a_reviewers_edit_past_the_file_limit_is_refused_with_exit_6(
    db: Path, tmp_path: Path
) -> None:
    [change] = ok(db, "review", "list")
    huge = cli_as(db, "review", "edit", change["id"], "income.md", "-", input=b"x" * (5 << 20))
    assert huge.exit_code == 6, huge.output
    assert "limit" in huge.stderr
    config = tmp_path / "memfs.toml"
    config.write_text("[limits]\nmax_file_bytes = 8\n")
    small = cli_as(
        db,
        "review",
        "edit",
        change["id"],
        "income.md",
        "-",
        "--config",
        str(config),
        input=b"nine byte",
    )
    assert small.exit_code == 6, small.output
    assert ok(db, "review", "show", change["id"])["state"] == "waiting"
    assert ok(db, "files", "lending-rules")["files"] == {"income.md": 10}
    edited = cli_as(db, "review", "edit", change["id"], "income.md", "-", input=b"nine byte")
    assert edited.exit_code == 0, edited.output


def test_an_admin_reading_a_persons_history_is_an_audited_open(db: Path) -> None:
    revisions = ok(db, "history", "me", "prefs.md", "--user", "u_dana", role="admin")
    assert revisions[0]["provenance"]["prompt"] == "three years now"
    [entry] = ok(db, "audit", role="admin")
    assert (entry["action"], entry["space"], entry["target"], entry["detail"]) == (
        "open",
        "me",
        "u_dana",
        "1 revision",
    )
    assert entry["actor"]["id"] == "ada"
    assert "prefs" not in json.dumps(entry)


def test_audit_verify_checks_the_chain_and_names_the_first_broken_entry(db: Path) -> None:
    ok(db, "files", "--user", "u_dana", role="admin")
    ok(db, "review", "set", "lending-rules", "after", role="admin")
    ok(db, "files", "--user", "u_dana", role="admin")
    checked = ok(db, "audit", "--verify", role="admin")
    entries = ok(db, "audit", role="admin")
    assert checked == {"ok": True, "entries": 3, "head": entries[-1]["hash"]}
    assert memfs_cli(db, "audit", "--verify", role="member").exit_code == 4
    with raw(db) as conn:
        conn.execute("DROP TRIGGER audit_no_update")
        conn.execute("UPDATE audit SET detail = 'none' WHERE id = ?", (int(entries[1]["id"]),))
    broken = memfs_cli(db, "audit", "--verify", role="admin")
    assert broken.exit_code == 10
    assert f"'{entries[1]['id']}'" in broken.stderr and "changed" in broken.stderr


def test_history_forget_files_and_forget_user_of_another_org_reach_nothing(db: Path) -> None:
    before = ok(db, "files", "lending-rules")
    assert ok(db, "history", "lending-rules", "income.md") != []
    assert json.loads(cli_as(db, "history", "lending-rules", "income.md", org="acme").stdout) == []
    foreign = cli_as(db, "forget", "lending-rules", "income.md", org="acme")
    missing = cli_as(db, "forget", "lending-rules", "never.md", org="acme")
    assert foreign.exit_code == missing.exit_code == 3
    assert foreign.stderr.replace("income.md", "P") == missing.stderr.replace("never.md", "P")
    assert json.loads(cli_as(db, "files", "lending-rules", org="acme").stdout)["files"] == {}
    gone = cli_as(db, "forget-user", "u_dana", org="acme", role="admin")
    assert json.loads(gone.stdout)["forgotten_spaces"] == []
    opened = cli_as(db, "files", "--user", "u_dana", org="acme", role="admin")
    nobody = cli_as(db, "files", "--user", "u_nobody", org="acme", role="admin")
    assert opened.exit_code == nobody.exit_code == 3
    assert opened.stderr.replace("u_dana", "U") == nobody.stderr.replace("u_nobody", "U")
    audit = json.loads(cli_as(db, "audit", org="acme", role="admin").stdout)
    assert {e["org"] for e in audit} == {"acme"}
    assert ok(db, "files", "lending-rules") == before
    assert ok(db, "files", "--user", "u_dana", role="admin")["spaces"] == {"me": {"prefs.md": 6}}


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


def test_put_from_stdin_and_from_a_file_writes_live_and_is_audited(
    db: Path, tmp_path: Path
) -> None:
    made = cli_as(db, "put", "lending-rules", "rules/new.md", "-", input=b"from stdin\n")
    assert made.exit_code == 0, made.output
    out = json.loads(made.stdout)
    assert (out["space"], out["org"], out["path"], out["size"], out["status"]) == (
        "lending-rules",
        "bank_17",
        "rules/new.md",
        11,
        "saved",
    )
    source = tmp_path / "income.md"
    source.write_bytes(b"four years\n")
    edited = cli_as(db, "put", "lending-rules", "income.md", str(source))
    assert edited.exit_code == 0, edited.output
    live = ok(db, "files", "lending-rules")["files"]
    assert live == {"income.md": len("four years\n"), "rules/new.md": 11}
    history = ok(db, "history", "lending-rules", "income.md")
    assert history[-1]["provenance"]["origin"] == "edited"
    assert history[-1]["provenance"]["by"]["id"] == "mallory"
    entries = ok(db, "audit", role="admin")
    assert [(e["action"], e["actor"]["id"], e["target"]) for e in entries] == [
        ("put", "mallory", "rules/new.md"),
        ("put", "mallory", "income.md"),
    ]


def test_put_by_a_viewer_exits_4_and_writes_nothing(db: Path) -> None:
    refused = cli_as(db, "put", "lending-rules", "x.md", "-", role="viewer", input=b"x")
    assert refused.exit_code == 4
    assert "viewer may not put" in refused.stderr
    assert ok(db, "files", "lending-rules")["files"] == {"income.md": 10}
    assert ok(db, "audit", role="admin") == []


def test_put_past_the_file_limit_exits_6_and_a_bad_path_exits_2(db: Path, tmp_path: Path) -> None:
    config = tmp_path / "memfs.toml"
    config.write_text("[limits]\nmax_file_bytes = 8\n")
    at = cli_as(db, "put", "lending-rules", "a.md", "-", "--config", str(config), input=b"8 bytes!")
    assert at.exit_code == 0, at.output
    past = cli_as(
        db, "put", "lending-rules", "b.md", "-", "--config", str(config), input=b"nine byte"
    )
    assert past.exit_code == 6, past.output
    bad = cli_as(db, "put", "lending-rules", "../up.md", "-", input=b"x")
    assert bad.exit_code == 2, bad.output
    assert ok(db, "files", "lending-rules")["files"] == {"a.md": 8, "income.md": 10}
    missing = cli_as(db, "put", "lending-rules", "c.md", str(tmp_path / "nope"))
    assert missing.exit_code == 2  # click: the source file does not exist


def store_state(db: Path) -> tuple[object, ...]:
    """Everything the people's commands could change: live files, Dana's, changes, the audit."""

    async def go() -> tuple[object, ...]:
        store = SqliteStore(db)
        try:
            dana = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
            changes = await store.list_changes(org="bank_17")
            return (
                await store.files(RULES),
                await store.files(dana),
                [(c.id, c.state, sorted(c.files)) for c in changes],
                await store.audit(),
            )
        finally:
            await store.aclose()

    return trio.run(go)


@pytest.mark.parametrize(
    "args",
    [
        ("put", "lending-rules", "../up.md", "-"),
        ("put", "lending-rules", "bad\x01name.md", "-"),
        ("put", "Lending Rules", "a.md", "-"),
        ("history", "lending-rules", "a/../income.md"),
        ("history", "me", "prefs.md", "--user", ".."),
        ("restore", "lending-rules", "../income.md", "1"),
        ("forget", "lending-rules", "../income.md"),
        ("forget", "../lending-rules", "income.md"),
        ("forget", "me", "prefs.md", "--user", "u_dana/.."),
        ("forget-user", ".."),
        ("files", "Lending-Rules"),
        ("files", "--user", ".."),
        ("review", "set", "..", "none"),
        ("review", "approve", "CHANGE", "--path", "../new.md"),
        ("review", "reject", "CHANGE", "--path", "/new.md"),
        ("review", "edit", "CHANGE", "../new.md", "-"),
    ],
    ids=lambda args: " ".join(args).encode("unicode_escape").decode(),
)
def test_a_bad_path_or_space_name_exits_2_as_invalid_name_and_changes_nothing(
    db: Path, args: tuple[str, ...]
) -> None:
    [change] = ok(db, "review", "list")
    before = store_state(db)
    args = tuple(change["id"] if a == "CHANGE" else a for a in args)
    refused = cli_as(db, *args, role="admin", input=b"x")
    # Exit 2 is InvalidName's code; the memfs prefix tells it from a click usage error.
    assert refused.exit_code == memfs.InvalidName.exit_code == 2, refused.output
    assert refused.stderr.startswith("memfs: error: ")
    assert store_state(db) == before
