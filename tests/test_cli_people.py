"""The operator's commands for who signs in: people add|list|remove, token create|revoke.

Also ``forget-user`` on the folder store, which forgets people but keeps no history.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner

from memfs.cli import main
from memfs.cli_people import DEFAULT_ORG as CLI_DEFAULT_ORG
from memfs.core.errors import ConfigError, InvalidName, NotFound, PermissionDenied
from memfs.core.members import MAX_LABEL_BYTES, Member, token_hash
from memfs.core.models import DEFAULT_ORG, ChangeSet, Provenance, SpaceRef
from memfs.stores.folder import FolderStore
from memfs.stores.sqlite import SqliteStore

OPERATOR = f"operator:{os.getuid()}"


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False, env=env)


def ok(*args: str) -> Any:
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def audit_of(db: Path, org: str) -> list[Any]:
    async def go() -> list[Any]:
        store = SqliteStore(db)
        try:
            return await store.audit(org=org)
        finally:
            await store.aclose()

    return trio.run(go)


def resolve(db: Path, token: str) -> Member | None:
    async def go() -> Member | None:
        store = SqliteStore(db)
        try:
            return await store.resolve_token(token)
        finally:
            await store.aclose()

    return trio.run(go)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'memfs.db'}"


def test_people_add_list_change_and_remove(store: str) -> None:
    ada = ok(
        "people",
        "add",
        "ada",
        "--org",
        "bank_17",
        "--role",
        "admin",
        "--name",
        "Ada L",
        "--store",
        store,
    )
    assert ada == {"id": "ada", "org": "bank_17", "role": "admin", "label": "Ada L"}
    ok("people", "add", "ben", "--org", "bank_17", "--role", "viewer", "--store", store)
    ok("people", "add", "ada", "--org", "acme", "--role", "viewer", "--store", store)
    listed = ok("people", "list", "--org", "bank_17", "--store", store)
    assert [(m["id"], m["role"]) for m in listed] == [("ada", "admin"), ("ben", "viewer")]
    changed = ok("people", "add", "ben", "--org", "bank_17", "--role", "member", "--store", store)
    assert changed["role"] == "member"
    gone = ok("people", "remove", "ben", "--org", "bank_17", "--store", store)
    assert gone == {"id": "ben", "org": "bank_17", "role": "member", "label": None, "removed": True}
    assert [m["id"] for m in ok("people", "list", "--org", "bank_17", "--store", store)] == ["ada"]
    # Another org's "ada" is another person, untouched by all of it.
    assert ok("people", "list", "--org", "acme", "--store", store)[0]["role"] == "viewer"


def test_a_name_of_max_label_bytes_is_kept_and_one_byte_more_exits_2_and_adds_nobody(
    store: str,
) -> None:
    at = "é" * (MAX_LABEL_BYTES // 2)  # two bytes each in UTF-8
    assert len(at.encode()) == MAX_LABEL_BYTES
    added = ok(
        "people",
        "add",
        "ada",
        "--org",
        "bank_17",
        "--role",
        "member",
        "--name",
        at,
        "--store",
        store,
    )
    assert added["label"] == at
    past = cli(
        "people",
        "add",
        "ben",
        "--org",
        "bank_17",
        "--role",
        "member",
        "--name",
        at + "x",
        "--store",
        store,
    )
    assert past.exit_code == 2, past.output
    assert f"at most {MAX_LABEL_BYTES} are allowed" in past.stderr
    renamed = cli(
        "people",
        "add",
        "ada",
        "--org",
        "bank_17",
        "--role",
        "admin",
        "--name",
        at + "x",
        "--store",
        store,
    )
    assert renamed.exit_code == 2, renamed.output
    listed = ok("people", "list", "--org", "bank_17", "--store", store)
    assert [(m["id"], m["role"], m["label"]) for m in listed] == [("ada", "member", at)]


def test_token_create_prints_the_token_once_as_json_and_the_store_keeps_its_hash(
    store: str, tmp_path: Path
) -> None:
    ok("people", "add", "ada", "--org", "bank_17", "--role", "member", "--store", store)
    result = cli("token", "create", "ada", "--org", "bank_17", "--store", store)
    assert result.exit_code == 0 and result.stderr == ""
    printed = json.loads(result.stdout)
    assert set(printed) == {"token", "id", "org", "role"}
    assert printed["token"].startswith("memfs_")
    assert (printed["id"], printed["org"], printed["role"]) == ("ada", "bank_17", "member")
    db = tmp_path / "memfs.db"
    assert resolve(db, printed["token"]) == Member(id="ada", org="bank_17", role="member")
    assert printed["token"].encode() not in db.read_bytes()
    # No listing or audit shows it again.
    again = cli("people", "list", "--org", "bank_17", "--store", store).stdout
    assert printed["token"] not in again
    written = json.dumps([e.model_dump(mode="json") for e in audit_of(db, "bank_17")])
    assert printed["token"] not in written and token_hash(printed["token"]) not in written


def test_token_revoke_and_people_remove_end_a_token(store: str, tmp_path: Path) -> None:
    db = tmp_path / "memfs.db"
    ok("people", "add", "ada", "--org", "bank_17", "--role", "member", "--store", store)
    first = ok("token", "create", "ada", "--org", "bank_17", "--store", store)["token"]
    revoked = ok("token", "revoke", "ada", "--org", "bank_17", "--store", store)
    assert revoked == {"id": "ada", "org": "bank_17", "revoked": 1}
    assert resolve(db, first) is None
    second = ok("token", "create", "ada", "--org", "bank_17", "--store", store)["token"]
    assert resolve(db, second) is not None
    ok("people", "remove", "ada", "--org", "bank_17", "--store", store)
    assert resolve(db, second) is None


def test_every_operator_command_is_audited_with_the_operator_as_actor(
    store: str, tmp_path: Path
) -> None:
    ok("people", "add", "ada", "--org", "bank_17", "--role", "viewer", "--store", store)
    ok("people", "add", "ada", "--org", "bank_17", "--role", "admin", "--store", store)
    ok("token", "create", "ada", "--org", "bank_17", "--store", store)
    ok("token", "revoke", "ada", "--org", "bank_17", "--store", store)
    ok("people", "remove", "ada", "--org", "bank_17", "--store", store)
    entries = audit_of(tmp_path / "memfs.db", "bank_17")
    assert [(e.action, e.target) for e in entries] == [
        ("add-member", "ada"),
        ("change-member", "ada"),
        ("create-token", "ada"),
        ("revoke-tokens", "ada"),
        ("remove-member", "ada"),
    ]
    assert {(e.actor.id, e.actor.role) for e in entries if e.actor} == {(OPERATOR, "admin")}
    assert all(e.actor is not None for e in entries)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("people", "add", "../x", "--role", "admin"), InvalidName),
        (("people", "add", "a/b", "--role", "admin"), InvalidName),
        (("people", "add", "ada", "--role", "admin", "--org", ".."), InvalidName),
        (("people", "add", "ada", "--role", "admin", "--name", "\x1b[2J"), InvalidName),
        (("people", "remove", "nobody"), NotFound),
        (("token", "create", "nobody"), NotFound),
        (("token", "revoke", "nobody"), NotFound),
        (("people", "list", "--org", "a/b"), InvalidName),
    ],
)
def test_bad_input_is_a_clear_message_and_exit_code_and_changes_nothing(
    store: str, tmp_path: Path, args: tuple[str, ...], error: type[Exception]
) -> None:
    ok("people", "add", "ada", "--role", "member", "--store", store)
    before = audit_of(tmp_path / "memfs.db", DEFAULT_ORG)
    result = cli(*args, "--store", store)
    assert result.exit_code == error.exit_code  # type: ignore[attr-defined]
    assert result.stderr.startswith("memfs: error: ") and result.stdout == ""
    assert audit_of(tmp_path / "memfs.db", DEFAULT_ORG) == before
    assert [m["id"] for m in ok("people", "list", "--store", store)] == ["ada"]


def test_an_unknown_role_is_refused_by_the_command_line(store: str) -> None:
    result = cli("people", "add", "ada", "--role", "root", "--store", store)
    assert result.exit_code == 2 and "'root' is not one of" in result.stderr
    assert cli("people", "add", "ada", "--store", store).exit_code == 2  # --role is required


def test_the_folder_store_keeps_no_members_and_says_so(tmp_path: Path) -> None:
    result = cli("people", "add", "ada", "--role", "admin", "--store", f"folder://{tmp_path / 'f'}")
    assert result.exit_code == ConfigError.exit_code
    assert "keeps no members" in result.stderr


def test_the_default_org_and_store_are_the_other_commands(tmp_path: Path) -> None:
    assert CLI_DEFAULT_ORG == DEFAULT_ORG
    env = {"MEMFS_STATE_DIR": str(tmp_path), "MEMFS_STORE": ""}
    made = CliRunner().invoke(main, ["people", "add", "ada", "--role", "viewer"], env=env)
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["org"] == "default"
    assert (tmp_path / "memfs.db").exists()


def test_token_create_through_the_installed_command(store: str) -> None:
    ok("people", "add", "ada", "--role", "admin", "--store", store)
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "token", "create", "ada", "--store", store],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["role"] == "admin" and done.stderr == ""


# -- forget-user on the folder store: no history, but it forgets people ----


def _seed_folder(root: Path) -> None:
    async def go() -> None:
        store = FolderStore(root)
        dana = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
        rules = SpaceRef(layer="org", space="rules", org="bank_17")
        for ref, path in ((dana, "prefs.md"), (rules, "income.md")):
            loaded = await store.load(ref, "s1")
            await store.store(
                ref,
                ChangeSet(created={path: b"x\n"}),
                cursor=loaded.cursor,
                provenance=Provenance(),
            )
        await store.aclose()

    trio.run(go)


def test_forget_user_on_the_folder_store_removes_the_persons_folder(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    _seed_folder(root)
    url = f"folder://{root}"
    refused = cli(
        "forget-user", "u_dana", "--org", "bank_17", "--as", "m", "--role", "member", "--store", url
    )
    assert refused.exit_code == PermissionDenied.exit_code
    assert (root / "people" / "bank_17" / "u_dana" / "me" / "prefs.md").exists()
    done = cli(
        "forget-user",
        "u_dana",
        "--org",
        "bank_17",
        "--as",
        "root",
        "--role",
        "admin",
        "--store",
        url,
    )
    assert done.exit_code == 0, done.output
    out = json.loads(done.stdout)
    assert (out["forgotten_spaces"], out["forgotten_files"]) == (["me"], 1)
    assert not (root / "people" / "bank_17" / "u_dana").exists()
    assert (root / "org" / "bank_17" / "rules" / "income.md").exists()


def test_other_acts_on_the_folder_store_still_say_it_keeps_no_history(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    _seed_folder(root)
    result = cli(
        "audit",
        "--org",
        "bank_17",
        "--as",
        "root",
        "--role",
        "admin",
        "--store",
        f"folder://{root}",
    )
    assert result.exit_code == ConfigError.exit_code
    assert "keeps no history" in result.stderr


def test_a_command_names_the_store_key_file_by_flag_or_env_and_another_key_is_refused(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memfs.db"
    keys = tmp_path / "keys"
    store = f"sqlite://{db}"
    added = cli(
        "people", "add", "ada", "--role", "viewer", "--store", store,
        "--store-key-file", str(keys / "a.key"),
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    listed = cli(
        "people", "list", "--store", store, env={"MEMFS_STORE_KEY_FILE": str(keys / "a.key")}
    )
    assert listed.exit_code == 0 and "ada" in listed.stdout
    for args, env in [
        (("--store-key-file", str(keys / "b.key")), None),
        ((), {"MEMFS_STORE_KEY_FILE": str(keys / "b.key")}),
        ((), None),  # the default: store.key beside the database, another key
    ]:
        refused = cli("people", "list", "--store", store, *args, env=env)
        assert refused.exit_code == 78, refused.output
        assert "store_key_file" in refused.output
        assert ("b.key" if env or args else "store.key") in refused.output
    assert stat.S_IMODE((keys / "a.key").stat().st_mode) == 0o600
