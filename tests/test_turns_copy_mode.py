"""Turns in copy mode, end to end through ``memfs.Memory`` against the in-memory store."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

import memfs
from memfs.core.models import SpaceRef
from memfs.core.specs import MemorySpec, PersistentDir
from memfs.engine import copymode
from memfs.stores.memory import MemoryStore
from memfs.testing import FaultyStore, test_memory

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}
CAROL = {"userId": "u_carol", "name": "Carol", "bankId": "bank_17", "role": "officer"}
RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")


def desk(
    store: memfs.Store, tmp_path: Path, review: memfs.ReviewMode = "none", **kwargs: Any
) -> memfs.Memory:
    """The loan desk; its rules save at once unless a test asks for review."""
    return memfs.Memory(
        store,
        [
            memfs.org_memory(
                space="lending-rules",
                description="The bank's lending rules.",
                can_write=lambda eb: eb.get("role") == "underwriter",
                by=lambda eb: {"id": eb["userId"], "label": eb["name"], "role": eb["role"]},
                review=review,
            ),
            memfs.user_memory(user="userId", label="name", description="Your own preferences."),
        ],
        org="bankId",  # a turn belongs to one org: both spaces are bank_17's
        workdir=tmp_path / "work",
        **kwargs,
    )


def seed(store: MemoryStore | FaultyStore, ref: SpaceRef, files: dict[str, bytes]) -> None:
    store.put_nowait(
        ref, memfs.ChangeSet(created=files), provenance=memfs.Provenance(origin="code")
    )


async def test_turn_mounts_each_space_under_the_session_root(tmp_path: Path) -> None:
    store = MemoryStore()
    seed(store, RULES, {"rules/income.md": b"Two years of accounts.\n"})
    turn = await desk(store, tmp_path).start_turn("s1", DANA, prompt="hi")
    assert turn.root == tmp_path / "work" / "s1"
    assert turn.mounts["lending-rules"].path == turn.root / "lending-rules"
    assert turn.mounts["me"].space == "me"
    assert (
        turn.root / "lending-rules" / "rules/income.md"
    ).read_bytes() == b"Two years of accounts.\n"
    assert turn.mounts["lending-rules"].snapshot == {"rules/income.md": "1"}
    await turn.end()
    assert not turn.root.exists()


async def test_written_files_are_saved_with_provenance(tmp_path: Path) -> None:
    mem = test_memory()
    turn = await desk(mem.store, tmp_path).start_turn("s1", DANA, prompt="I like short answers")
    (turn.root / "me" / "prefs.md").write_text("Short answers.\n")
    result = await turn.end()
    assert result.spaces["me"].status == "saved"
    assert result.spaces["me"].changes.created == {"prefs.md": b"Short answers.\n"}
    assert mem.files("me", org="bank_17", user="u_dana") == {"prefs.md": b"Short answers.\n"}
    [change] = mem.changes()
    assert change["session"] == "s1"
    assert change["turn"] == turn.id
    assert change["prompt"] == "I like short answers"
    assert change["by"] == {"id": "u_dana", "label": "Dana", "role": None}
    assert change["origin"] == "conversation"


async def test_org_revision_records_by_from_the_spec(tmp_path: Path) -> None:
    store = MemoryStore()
    turn = await desk(store, tmp_path).start_turn("s1", DANA, prompt="SA302s")
    (turn.root / "lending-rules" / "self-employed.md").write_text("Two years of SA302s.\n")
    await turn.end()
    [rev] = await store.history(RULES, "self-employed.md")
    assert rev.provenance.by == memfs.By(id="u_dana", label="Dana", role="underwriter")
    assert rev.provenance.prompt == "SA302s"


async def test_rewriting_a_file_with_identical_bytes_is_not_an_update(tmp_path: Path) -> None:
    store = MemoryStore()
    seed(store, RULES, {"a.md": b"same\n"})
    turn = await desk(store, tmp_path).start_turn("s1", DANA)
    (turn.root / "lending-rules" / "a.md").write_bytes(b"same\n")
    result = await turn.end()
    assert result.spaces["lending-rules"].status == "saved"
    assert result.spaces["lending-rules"].changes.is_empty()
    assert len(await store.history(RULES, "a.md")) == 1


async def test_rename_is_delete_plus_create(tmp_path: Path) -> None:
    store = MemoryStore()
    seed(store, RULES, {"old.md": b"x"})
    turn = await desk(store, tmp_path).start_turn("s1", DANA)
    os.rename(turn.root / "lending-rules" / "old.md", turn.root / "lending-rules" / "new.md")
    changes = (await turn.end()).spaces["lending-rules"].changes
    assert changes.created == {"new.md": b"x"}
    assert changes.deleted == ("old.md",)
    assert changes.updated == {}


async def test_file_created_then_deleted_in_one_turn_is_absent(tmp_path: Path) -> None:
    store = MemoryStore()
    turn = await desk(store, tmp_path).start_turn("s1", DANA)
    scratch = turn.root / "me" / "scratch.md"
    scratch.write_text("temp")
    scratch.unlink()
    result = await turn.end()
    assert result.spaces["me"].changes.is_empty()
    assert store.events == []


async def test_binary_content_and_non_ascii_names_round_trip(tmp_path: Path) -> None:
    mem = test_memory()
    blob = bytes(range(256)) + b"\x00\xff" * 100
    name = "notizen/über-straße 🙂.bin"
    memory = desk(mem.store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "notizen").mkdir()
    (turn.root / "me" / name).write_bytes(blob)
    await turn.end()
    assert mem.files("me", org="bank_17", user="u_dana") == {name: blob}
    again = await memory.start_turn("s1", DANA)
    assert (again.root / "me" / name).read_bytes() == blob
    await again.end()


async def test_empty_folders_are_kept_across_turns_until_removed(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "empty" / "deeper").mkdir(parents=True)
    result = await turn.end()
    assert result.spaces["me"].changes.folders_created == ("empty", "empty/deeper")
    again = await memory.start_turn("s1", DANA)
    assert (again.root / "me" / "empty" / "deeper").is_dir()
    (again.root / "me" / "empty" / "deeper").rmdir()
    removed = await again.end()
    assert removed.spaces["me"].changes.folders_deleted == ("empty/deeper",)
    third = await memory.start_turn("s1", DANA)
    assert (third.root / "me" / "empty").is_dir()
    assert not (third.root / "me" / "empty" / "deeper").exists()
    assert (await third.end()).spaces["me"].changes.is_empty()


async def test_a_folder_outlives_its_last_file(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    first = await memory.start_turn("s1", DANA)
    (first.root / "me" / "d").mkdir()
    (first.root / "me" / "d" / "only.md").write_bytes(b"x")
    await first.end()
    second = await memory.start_turn("s1", DANA)
    (second.root / "me" / "d" / "only.md").unlink()
    await second.end()
    third = await memory.start_turn("s1", DANA)
    assert (third.root / "me" / "d").is_dir()
    await third.end()


async def test_chmod_x_and_mtime_come_back_next_turn(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    turn = await memory.start_turn("s1", DANA)
    script = turn.root / "me" / "run.sh"
    script.write_bytes(b"#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    os.utime(script, ns=(1_600_000_000_000_000_000, 1_600_000_000_123_456_789))
    await turn.end()
    again = await memory.start_turn("s1", DANA)
    info = (again.root / "me" / "run.sh").stat()
    assert stat.S_IMODE(info.st_mode) == 0o755
    assert info.st_mtime_ns == 1_600_000_000_123_456_789
    assert (await again.end()).spaces["me"].changes.is_empty()


async def test_a_turn_that_changes_nothing_is_no_change_whatever_the_umask(tmp_path: Path) -> None:
    mem = test_memory()
    seed(
        mem.store, SpaceRef(layer="user", space="me", org="bank_17", user="u_dana"), {"a.md": b"x"}
    )
    old = os.umask(0o002)
    try:
        turn = await desk(mem.store, tmp_path).start_turn("s1", DANA)
        assert stat.S_IMODE((turn.root / "me" / "a.md").stat().st_mode) == 0o644
        assert (await turn.end()).spaces["me"].changes.is_empty()
    finally:
        os.umask(old)


def test_a_file_loaded_without_a_mode_is_written_0644_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        copymode.materialize(tmp_path / "w", {"a.md": b"x"}, read_only=False)
    finally:
        os.umask(old)
    scan = copymode.scan(tmp_path / "w", max_file_bytes=10)
    assert scan.meta["a.md"].mode == 0o644


async def test_a_mode_only_change_is_an_update_and_a_touch_is_no_change(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path)
    seed(
        mem.store, SpaceRef(layer="user", space="me", org="bank_17", user="u_dana"), {"a.sh": b"x"}
    )
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "a.sh").chmod(0o700)
    changed = await turn.end()
    assert changed.spaces["me"].changes.updated == {"a.sh": b"x"}
    again = await memory.start_turn("s1", DANA)
    os.utime(again.root / "me" / "a.sh", ns=(1, 2))
    (again.root / "me" / "a.sh").write_bytes(b"x")  # rewritten with the same bytes
    assert (await again.end()).spaces["me"].changes.is_empty()
    third = await memory.start_turn("s1", DANA)
    assert stat.S_IMODE((third.root / "me" / "a.sh").stat().st_mode) == 0o700
    await third.end()


@pytest.mark.parametrize("why", ["can_write false", "can_write awaitable false", "read-only mode"])
async def test_read_only_mount_has_no_write_bits_and_skips_store(why: str, tmp_path: Path) -> None:
    async def no(eb: Any) -> bool:
        return False

    store = FaultyStore(MemoryStore())
    seed(store, RULES, {"rules.md": b"Rule 1\n"})
    choices: dict[str, dict[str, Any]] = {
        "can_write false": {"can_write": lambda eb: False},
        "can_write awaitable false": {"can_write": no},
        "read-only mode": {"commit": "read-only"},
    }
    spec_args = choices[why]
    mem = memfs.Memory(
        store,
        [memfs.org_memory(space="lending-rules", org="bankId", **spec_args)],
        workdir=tmp_path,
    )
    turn = await mem.start_turn("s1", DANA)
    mount = turn.mounts["lending-rules"]
    assert mount.read_only
    file = mount.path / "rules.md"
    assert stat.S_IMODE(file.stat().st_mode) & 0o222 == 0
    assert stat.S_IMODE(mount.path.stat().st_mode) & 0o222 == 0
    assert "read-only this turn" in turn.note
    # Root ignores mode bits; whatever gets changed anyway is discarded at the end.
    os.chmod(mount.path, 0o755)
    os.chmod(file, 0o644)
    file.write_text("Rule 1, weakened\n")
    (mount.path / "new.md").write_text("sneaky\n")
    result = await turn.end()
    space = result.spaces["lending-rules"]
    assert space.status == "skipped"
    assert space.not_saved == ("new.md", "rules.md")
    assert store.calls["store"] == 0
    assert store.files_nowait(RULES) == {"rules.md": b"Rule 1\n"}


async def test_can_write_is_evaluated_every_turn_before_load(tmp_path: Path) -> None:
    store = FaultyStore(MemoryStore())
    seen: list[tuple[str, int]] = []  # each can_write, with how many loads came before it

    def can_write(eb: Any) -> bool:
        seen.append(("can_write", store.calls["load"]))
        return bool(eb["role"] == "underwriter")

    mem = memfs.Memory(
        store, [memfs.org_memory(space="rules", can_write=can_write)], workdir=tmp_path
    )
    first = await mem.start_turn("s1", DANA)
    assert not first.mounts["rules"].read_only
    await first.end()
    second = await mem.start_turn("s1", CAROL)
    assert second.mounts["rules"].read_only
    await second.end()
    assert seen == [("can_write", 0), ("can_write", 1)]
    assert store.calls["load"] == 2


async def test_manual_mount_stores_nothing_until_commit_manual(tmp_path: Path) -> None:
    mem = test_memory()
    memory = memfs.Memory(mem.store, [memfs.user_memory(commit="manual")], workdir=tmp_path)
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "a.md").write_text("draft\n")
    result = await turn.end()
    assert result.spaces["me"].status == "manual"
    assert result.spaces["me"].changes.created == {"a.md": b"draft\n"}
    assert mem.changes() == []
    committed = await result.commit_manual()
    assert committed.spaces["me"].status == "saved"
    assert mem.files("me", user="u_dana") == {"a.md": b"draft\n"}
    with pytest.raises(memfs.AlreadyCommitted):
        await result.commit_manual()
    assert len(mem.changes()) == 1


async def test_conflicting_turns_lose_nothing_and_keep_the_change_set(tmp_path: Path) -> None:
    store = MemoryStore()
    seed(store, RULES, {"a.md": b"v1", "b.md": b"b1"})
    memory = desk(store, tmp_path)
    first = await memory.start_turn("s1", DANA)
    second = await memory.start_turn("s2", DANA)
    (first.root / "lending-rules" / "a.md").write_bytes(b"from s1")
    (second.root / "lending-rules" / "a.md").write_bytes(b"from s2")
    (second.root / "lending-rules" / "c.md").write_bytes(b"new in s2")
    assert (await first.end()).spaces["lending-rules"].status == "saved"
    result = (await second.end()).spaces["lending-rules"]
    assert result.status == "not_saved"
    assert result.conflicts == ("a.md",)
    assert result.not_saved == ("a.md", "c.md")
    assert "a.md" in (result.error or "")
    assert result.changes.updated == {"a.md": b"from s2"}
    assert result.changes.created == {"c.md": b"new in s2"}
    assert store.files_nowait(RULES) == {"a.md": b"from s1", "b.md": b"b1"}


async def test_another_sessions_change_to_other_files_does_not_block(tmp_path: Path) -> None:
    store = MemoryStore()
    seed(store, RULES, {"a.md": b"a", "b.md": b"b"})
    memory = desk(store, tmp_path)
    first = await memory.start_turn("s1", DANA)
    second = await memory.start_turn("s2", DANA)
    (first.root / "lending-rules" / "a.md").write_bytes(b"a2")
    (second.root / "lending-rules" / "b.md").write_bytes(b"b2")
    await first.end()
    assert (await second.end()).spaces["lending-rules"].status == "saved"
    assert store.files_nowait(RULES) == {"a.md": b"a2", "b.md": b"b2"}


async def test_missing_identity_fails_the_turn_and_mounts_nothing(tmp_path: Path) -> None:
    store = MemoryStore()
    memory = desk(store, tmp_path)
    with pytest.raises(memfs.NoIdentity):
        await memory.start_turn("s1", {"userId": "u1", "name": "U", "role": "underwriter"})
    with pytest.raises(memfs.NoIdentity):
        await memory.start_turn("s1", {"bankId": "bank_17"})
    assert not (tmp_path / "work" / "s1").exists()
    ok = await memory.start_turn("s1", DANA)  # the failed starts left no open turn behind
    await ok.end()


async def test_org_resolver_returning_nothing_never_falls_back(tmp_path: Path) -> None:
    memory = memfs.Memory(
        MemoryStore(), [memfs.org_memory(space="rules", org=lambda eb: None)], workdir=tmp_path
    )
    with pytest.raises(memfs.NoIdentity):
        await memory.start_turn("s1", DANA)


async def test_org_left_out_means_default(tmp_path: Path) -> None:
    mem = test_memory()
    memory = memfs.Memory(
        mem.store, [memfs.org_memory(space="rules", review="none")], workdir=tmp_path
    )
    turn = await memory.start_turn("s1", {})
    assert turn.mounts["rules"].ref.org == "default"
    (turn.root / "rules" / "r.md").write_text("r")
    await turn.end()
    assert mem.files("rules", org="default") == {"r.md": b"r"}


async def test_file_over_the_size_limit_is_refused_and_the_rest_commits(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path, limits=memfs.Limits(max_file_bytes=10))
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "at-limit.md").write_bytes(b"x" * 10)
    (turn.root / "me" / "past-limit.md").write_bytes(b"x" * 11)
    result = (await turn.end()).spaces["me"]
    assert result.status == "saved"
    assert result.not_saved == ("past-limit.md",)
    assert "limit is 10" in result.errors["past-limit.md"]
    assert mem.files("me", org="bank_17", user="u_dana") == {"at-limit.md": b"x" * 10}


async def test_files_per_space_limit_refuses_the_file_past_it(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path, limits=memfs.Limits(max_files=2))
    turn = await memory.start_turn("s1", DANA)
    for name in ("a.md", "b.md", "c.md"):
        (turn.root / "me" / name).write_text(name)
    result = (await turn.end()).spaces["me"]
    assert result.status == "saved"
    assert result.not_saved == ("c.md",)
    assert set(mem.files("me", org="bank_17", user="u_dana")) == {"a.md", "b.md"}


async def test_bytes_per_space_limit_refuses_the_file_past_it(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path, limits=memfs.Limits(max_space_bytes=10))
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "a.md").write_bytes(b"x" * 6)
    (turn.root / "me" / "b.md").write_bytes(b"x" * 4)
    (turn.root / "me" / "c.md").write_bytes(b"x")
    result = (await turn.end()).spaces["me"]
    assert result.not_saved == ("c.md",)
    assert set(mem.files("me", org="bank_17", user="u_dana")) == {"a.md", "b.md"}


async def test_symlinks_and_fifos_are_refused_and_nothing_is_deleted(tmp_path: Path) -> None:
    mem = test_memory()
    mem.put("me", {"keep.md": "keep"}, org="bank_17", user="u_dana")
    turn = await desk(mem.store, tmp_path).start_turn("s1", DANA)
    me = turn.root / "me"
    os.unlink(me / "keep.md")
    os.symlink("/etc/passwd", me / "keep.md")
    os.mkfifo(me / "pipe")
    (me / "fine.md").write_text("fine")
    result = (await turn.end()).spaces["me"]
    assert result.status == "saved"
    assert result.not_saved == ("keep.md", "pipe")
    assert "symlinks" in result.errors["pipe"]
    assert mem.files("me", org="bank_17", user="u_dana") == {"keep.md": b"keep", "fine.md": b"fine"}


async def test_path_over_the_length_limit_is_refused(tmp_path: Path) -> None:
    mem = test_memory()
    turn = await desk(mem.store, tmp_path).start_turn("s1", DANA)
    deep = turn.root / "me"
    parts = ["d" * 200] * 6  # 6 * 200 bytes + separators > 1024
    (deep.joinpath(*parts[:-1])).mkdir(parents=True)
    deep.joinpath(*parts).write_text("too deep")
    (deep / "ok.md").write_text("ok")
    result = (await turn.end()).spaces["me"]
    assert result.not_saved == ("/".join(parts),)
    assert mem.files("me", org="bank_17", user="u_dana") == {"ok.md": b"ok"}


async def test_non_utf8_file_name_is_refused(tmp_path: Path) -> None:
    mem = test_memory()
    turn = await desk(mem.store, tmp_path).start_turn("s1", DANA)
    Path(os.fsdecode(os.path.join(os.fsencode(turn.root / "me"), b"bad-\xff.md"))).write_bytes(b"x")
    result = (await turn.end()).spaces["me"]
    assert result.not_saved == ("bad-\\xff.md",)
    assert "UTF-8" in result.errors["bad-\\xff.md"]
    assert mem.changes() == []


async def test_failed_load_uses_the_last_known_copy_and_refuses_to_store(tmp_path: Path) -> None:
    heard: list[tuple[str, str]] = []
    store = FaultyStore(MemoryStore())
    seed(store, RULES, {"rules.md": b"Rule 1\n"})
    memory = desk(store, tmp_path, on_error=lambda exc, space: heard.append((space, str(exc))))
    first = await memory.start_turn("s1", DANA)
    await first.end()

    store.fail("load", lambda: memfs.StoreUnavailable("database is down"))
    turn = await memory.start_turn("s1", DANA)
    rules = turn.mounts["lending-rules"]
    assert rules.from_last_known_copy
    assert (rules.path / "rules.md").read_bytes() == b"Rule 1\n"
    assert turn.mounts["me"].from_last_known_copy
    assert "last files this machine loaded" in turn.note
    (rules.path / "rules.md").write_text("edited during outage\n")
    (turn.root / "me" / "p.md").write_text("pref\n")
    result = await turn.end()
    assert result.spaces["lending-rules"].status == "not_saved"
    assert result.spaces["lending-rules"].not_saved == ("rules.md",)
    assert result.spaces["me"].not_saved == ("p.md",)
    # Loads run concurrently, so the two load reports may come in either order.
    assert sorted(space for space, _ in heard[:2]) == ["lending-rules", "me"]
    assert heard[2][0] == "lending-rules" and "rules.md" in heard[2][1]
    assert heard[3][0] == "me" and "p.md" in heard[3][1]
    assert store.files_nowait(RULES) == {"rules.md": b"Rule 1\n"}


async def test_failed_load_with_no_copy_gives_an_empty_folder(tmp_path: Path) -> None:
    down = FaultyStore(
        MemoryStore(), fail={"load": lambda: memfs.StoreUnavailable("connection refused")}
    )
    heard: list[BaseException] = []

    async def report(exc: BaseException, space: str) -> None:
        heard.append(exc)

    memory = desk(down, tmp_path, on_error=report)
    turn = await memory.start_turn("s1", DANA)
    assert list(turn.mounts["me"].path.iterdir()) == []
    assert turn.mounts["me"].from_last_known_copy
    await turn.end()
    assert len(heard) == 2
    assert all(isinstance(exc, memfs.StoreUnavailable) for exc in heard)


async def test_failed_store_reports_and_lists_every_unsaved_file(tmp_path: Path) -> None:
    broken = FaultyStore(MemoryStore(), fail={"store": memfs.StoreUnavailable("disk full")})
    heard: list[str] = []
    memory = desk(broken, tmp_path, on_error=lambda exc, space: heard.append(space))
    turn = await memory.start_turn("s1", DANA)
    (turn.root / "me" / "a.md").write_text("a")
    (turn.root / "me" / "b.md").write_text("b")
    result = (await turn.end()).spaces["me"]
    assert result.status == "not_saved"
    assert result.not_saved == ("a.md", "b.md")
    assert result.changes.created == {"a.md": b"a", "b.md": b"b"}
    assert heard == ["me"]


async def test_config_mistake_in_load_is_raised_not_hidden(tmp_path: Path) -> None:
    async def load(ctx: memfs.TurnContext) -> dict[str, str]:
        return {"../escape.md": "x"}

    async def store(ctx: memfs.TurnContext, changes: memfs.ChangeSet, cursor: str | None) -> None:
        raise AssertionError("never called")

    memory = memfs.Memory(
        MemoryStore(),
        [memfs.persistent_dir(path="scratch", load=load, store=store)],
        workdir=tmp_path,
    )
    with pytest.raises(memfs.InvalidName):
        await memory.start_turn("s1", {})


async def test_persistent_dir_loads_and_stores_through_the_app(tmp_path: Path) -> None:
    saved: list[tuple[memfs.TurnContext, memfs.ChangeSet, str | None]] = []

    async def load(ctx: memfs.TurnContext) -> tuple[dict[str, str | bytes], str]:
        return {"notes.md": "hello\n", "raw.bin": b"\x00\x01"}, "etag-1"

    async def store(ctx: memfs.TurnContext, changes: memfs.ChangeSet, cursor: str | None) -> None:
        saved.append((ctx, changes, cursor))

    memory = memfs.Memory(
        MemoryStore(),
        [memfs.persistent_dir(path="scratch", load=load, store=store, description="Scratch.")],
        workdir=tmp_path,
    )
    turn = await memory.start_turn("s1", {"k": "v"}, prompt="p")
    assert (turn.root / "scratch" / "notes.md").read_text() == "hello\n"
    (turn.root / "scratch" / "notes.md").write_text("hello again\n")
    os.unlink(turn.root / "scratch" / "raw.bin")
    result = await turn.end()
    assert result.spaces["scratch"].status == "saved"
    [(ctx, changes, cursor)] = saved
    assert cursor == "etag-1"
    assert ctx.session == "s1" and ctx.prompt == "p" and ctx.extra_body == {"k": "v"}
    assert changes.updated == {"notes.md": b"hello again\n"}
    assert changes.deleted == ("raw.bin",)


async def test_persistent_dir_conflict_from_the_app_is_not_saved(tmp_path: Path) -> None:
    async def load(ctx: memfs.TurnContext) -> dict[str, str]:
        return {}

    async def store(ctx: memfs.TurnContext, changes: memfs.ChangeSet, cursor: str | None) -> None:
        raise memfs.Conflict("etag mismatch", paths=("n.md",))

    memory = memfs.Memory(
        MemoryStore(),
        [memfs.persistent_dir(path="scratch", load=load, store=store)],
        workdir=tmp_path,
    )
    turn = await memory.start_turn("s1", {})
    (turn.root / "scratch" / "n.md").write_text("n")
    result = (await turn.end()).spaces["scratch"]
    assert result.status == "not_saved"
    assert result.conflicts == ("n.md",)


async def test_one_open_turn_per_session(tmp_path: Path) -> None:
    memory = desk(MemoryStore(), tmp_path)
    turn = await memory.start_turn("s1", DANA)
    with pytest.raises(memfs.TurnOpen):
        await memory.start_turn("s1", DANA)
    other = await memory.start_turn("s2", DANA)
    await other.end()
    await turn.end()
    with pytest.raises(memfs.NotFound):
        await turn.end()


async def test_sessions_do_not_see_each_others_uncommitted_writes(tmp_path: Path) -> None:
    memory = desk(MemoryStore(), tmp_path)
    first = await memory.start_turn("s1", DANA)
    second = await memory.start_turn("s2", DANA)
    (first.root / "lending-rules" / "draft.md").write_text("draft")
    assert not (second.root / "lending-rules" / "draft.md").exists()
    await first.end()
    await second.end()


@pytest.mark.parametrize("session", ["", ".", "..", "a/b", "a\0b", "x" * 256])
async def test_bad_session_ids_are_refused(session: str, tmp_path: Path) -> None:
    with pytest.raises(memfs.InvalidName):
        await desk(MemoryStore(), tmp_path).start_turn(session, DANA)


def test_two_specs_on_one_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(memfs.ConfigError):
        memfs.Memory(
            MemoryStore(),
            [memfs.org_memory(space="a", path="x"), memfs.user_memory(path="x")],
        )


def test_a_spec_that_is_not_a_spec_is_a_config_error() -> None:
    with pytest.raises(memfs.ConfigError):
        memfs.Memory(MemoryStore(), [{"space": "rules"}])  # type: ignore[list-item]


def test_an_apps_loaded_files_never_bring_content_addresses_along() -> None:
    from memfs.core.models import Loaded
    from memfs.engine.sources import normalize_loaded

    lying = Loaded(files={"a.md": b"a"}, shas={"a.md": "0" * 64})
    assert normalize_loaded(lying).shas == {}
    assert normalize_loaded(lying).files == {"a.md": b"a"}


async def test_folders_past_max_folders_are_not_saved_and_the_rest_commits(tmp_path: Path) -> None:
    mem = test_memory()
    memory = desk(mem.store, tmp_path, limits=memfs.Limits(max_folders=2))
    turn = await memory.start_turn("s1", DANA)
    for name in ("a", "b", "c"):
        (turn.root / "me" / name).mkdir()
    (turn.root / "me" / "f.md").write_bytes(b"f")
    result = (await turn.end()).spaces["me"]
    assert result.not_saved == ("c",)
    assert "2 folders" in result.errors["c"]
    again = await memory.start_turn("s1", DANA)
    assert sorted(p.name for p in (again.root / "me").iterdir()) == ["a", "b", "f.md"]
    await again.end()


def nested_dirs(saved: dict[str, list[memfs.ChangeSet]], *paths: str) -> list[PersistentDir]:
    """Persistent dirs at ``paths``; each loads one file and keeps what is stored, by path."""

    def made(path: str) -> PersistentDir:
        async def load(ctx: memfs.TurnContext) -> dict[str, str]:
            return {"notes.md": f"{path}\n"}

        async def store(
            ctx: memfs.TurnContext, changes: memfs.ChangeSet, cursor: str | None
        ) -> None:
            saved.setdefault(path, []).append(changes)

        return memfs.persistent_dir(path=path, load=load, store=store)

    return [made(path) for path in paths]


async def test_a_persistent_dir_may_be_nested_and_its_parent_is_read_only(tmp_path: Path) -> None:
    saved: dict[str, list[memfs.ChangeSet]] = {}
    memory = memfs.Memory(
        MemoryStore(),
        [*nested_dirs(saved, "persistent/user", "persistent/team"), memfs.user_memory()],
        workdir=tmp_path,
    )
    turn = await memory.start_turn("s1", {"userId": "u_dana"})
    assert turn.mounts["persistent/user"].path == turn.root / "persistent" / "user"
    assert (turn.root / "persistent" / "user" / "notes.md").read_text() == "persistent/user\n"
    assert (turn.root / "persistent" / "team" / "notes.md").read_text() == "persistent/team\n"
    assert stat.S_IMODE((turn.root / "persistent").stat().st_mode) == 0o555
    assert sorted(os.listdir(turn.root / "persistent")) == ["team", "user"]
    assert "## persistent/user/ — a persistent folder" in turn.note
    (turn.root / "persistent" / "user" / "new.md").write_text("kept\n")
    result = await turn.end()
    assert result.spaces["persistent/user"].status == "saved"
    [changes] = saved["persistent/user"]
    assert changes.created == {"new.md": b"kept\n"}
    assert "persistent/team" not in saved  # nothing changed there
    assert not turn.root.exists()  # the read-only parent is no obstacle to cleaning up
    again = await memory.start_turn("s1", {"userId": "u_dana"})
    assert (again.root / "persistent" / "user" / "notes.md").exists()
    await again.end()


@pytest.mark.parametrize(
    "paths",
    [("persistent", "persistent/user"), ("a/b/c", "a/b"), ("lending-rules", "lending-rules/x")],
)
def test_a_mount_inside_another_mounts_folder_is_a_config_error(paths: tuple[str, str]) -> None:
    outer, inner = paths
    specs: list[MemorySpec] = list(nested_dirs({}, inner))
    if "/" in outer:
        specs += nested_dirs({}, outer)
    else:
        specs.append(memfs.org_memory(space=outer, path=outer))
    with pytest.raises(memfs.ConfigError, match="inside another mount's folder"):
        memfs.Memory(MemoryStore(), specs)


def test_siblings_under_one_parent_are_no_overlap() -> None:
    memfs.Memory(MemoryStore(), nested_dirs({}, "p/a", "p/b", "pa"))


@pytest.mark.parametrize("path", ["a//b", "/a", "a/", "a/../b", "./a", "a/\nb"])
def test_a_nested_path_with_an_empty_dot_or_control_segment_is_refused(path: str) -> None:
    with pytest.raises(memfs.InvalidName):
        nested_dirs({}, path)


def test_spaces_still_mount_at_one_segment() -> None:
    with pytest.raises(memfs.InvalidName):
        memfs.org_memory(space="lending-rules", path="shared/lending-rules")
