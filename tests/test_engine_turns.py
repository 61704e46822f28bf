"""The turn engine's own rules, driven through ``memfs.Memory`` in copy mode.

What a turn is (a plan decided before anything is written), how ending is
reported, and which failures fall back to the last known copy.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

import memfs
from memfs.api import my_memory
from memfs.core.models import SpaceRef
from memfs.engine.plan import ManualHold
from memfs.stores.memory import MemoryStore
from memfs.testing import test_memory

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
            return {"a.md": {"b.md": "x"}["missing"]}  # the app's own KeyError
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


async def test_a_held_manual_change_set_is_a_value_committed_once_even_by_another_memory(
    tmp_path: Path,
) -> None:
    mem = test_memory()
    store = mem.store
    me = SpaceRef(layer="user", space="me", user="u_dana")
    specs = [memfs.user_memory(commit="manual"), memfs.org_memory(space="rules", review="none")]
    memory = memfs.Memory(store, specs, workdir=tmp_path / "a")
    turn = await memory.start_turn("s1", DANA, prompt="p")
    (turn.mounts["me"].path / "bin.dat").write_bytes(b"\x00\xff")
    (turn.mounts["rules"].path / "r.md").write_text("r\n")
    ended = await memory.end_turn("s1")
    assert ended.held is not None and ended.pending == ["me"]
    assert ended.spaces["rules"].status == "saved"
    # What a daemon writes down and reads back after a restart: the same value.
    held = ManualHold.model_validate_json(ended.held.model_dump_json())
    assert held == ended.held
    fresh = memfs.Memory(store, specs, workdir=tmp_path / "b")
    committed = await fresh.commit_manual(held)
    assert committed.spaces["me"].status == "saved"
    assert committed.spaces["rules"].status == "saved"  # the whole turn is reported
    assert committed.held is None and committed.committed
    assert store.files_nowait(me) == {"bin.dat": b"\x00\xff"}
    with pytest.raises(memfs.AlreadyCommitted):
        await fresh.commit_manual(held)
    with pytest.raises(memfs.AlreadyCommitted):
        await committed.commit_manual()
    [change] = [c for c in mem.changes() if c["space"] == "me"]
    assert change["prompt"] == "p" and change["turn"] == turn.id


def bank_of(request: Request) -> dict[str, str] | None:
    """The app's sign-in as the reference declares it: Dana of bank_17."""
    return {"user": "u_dana", "org": "bank_17"}


async def test_a_memory_org_resolver_puts_the_persons_memory_in_the_turns_org(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    memory = memfs.Memory(
        store,
        [
            memfs.org_memory(space="lending-rules", review="none"),
            memfs.user_memory(user="userId", label="name"),
        ],
        org="bankId",
        workdir=tmp_path,
    )
    turn = await memory.start_turn("s1", DANA)
    assert turn.mounts["me"].ref == SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
    assert turn.mounts["lending-rules"].ref.org == "bank_17"
    (turn.mounts["me"].path / "prefs.md").write_text("short answers\n")
    assert (await turn.end()).spaces["me"].status == "saved"

    app = Starlette(routes=[Mount("/mine", app=my_memory(store, bank_of))])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        listed = (await http.get("/mine/")).json()
    assert listed["spaces"]["me"]["prefs.md"]["text"] == "short answers\n"
    assert await store.user_files("u_dana", "bank_17") != {}
    await store.forget_user("u_dana", "bank_17", by=None)
    assert await store.user_files("u_dana", "bank_17") == {}
    assert await store.user_files("u_dana", "default") == {}  # nothing landed elsewhere


async def test_a_spec_naming_its_own_org_wins_over_the_memorys(tmp_path: Path) -> None:
    memory = memfs.Memory(
        MemoryStore(),
        [memfs.org_memory(space="rules", org="bankId"), memfs.user_memory()],
        org=lambda eb: eb["bankId"],
        workdir=tmp_path,
    )
    turn = await memory.start_turn("s1", DANA)
    assert {m.ref.org for m in turn.mounts.values()} == {"bank_17"}
    await turn.end()


async def test_specs_of_one_turn_in_two_orgs_are_a_config_error_and_mount_nothing(
    tmp_path: Path,
) -> None:
    memory = memfs.Memory(
        MemoryStore(),
        [memfs.org_memory(space="rules", org="bankId"), memfs.user_memory()],
        workdir=tmp_path / "w",
    )
    with pytest.raises(memfs.ConfigError, match="different orgs"):
        await memory.start_turn("s1", DANA)  # rules in bank_17, me in default
    assert not (tmp_path / "w" / "s1").exists()


def test_a_memory_org_resolver_must_be_a_field_name_or_a_callable() -> None:
    with pytest.raises(memfs.ConfigError):
        memfs.Memory(MemoryStore(), [memfs.user_memory()], org=17)  # type: ignore[arg-type]


async def test_with_the_store_down_no_session_is_served_another_sessions_waiting_change(
    tmp_path: Path,
) -> None:
    # A session's load lays its own waiting change over the live files: its
    # view alone. Kept as the last known copy, it was served to every other
    # session's turn while the store was down (a change nobody approved).
    store = Flaky()
    rules = SpaceRef(layer="org", space="rules", org="bank_17")
    bob = {**DANA, "userId": "u_bob", "name": "Bob"}
    spec = memfs.org_memory(space="rules", org="bankId", review="person")
    memory = memfs.Memory(store, [spec], workdir=tmp_path)
    await (await memory.start_turn("y", bob)).end()  # a view everyone may see
    turn = await memory.start_turn("x", DANA)
    (turn.mounts["rules"].path / "pending.md").write_text("not approved\n")
    assert (await turn.end()).spaces["rules"].status == "waiting"
    again = await memory.start_turn("x", DANA)  # x sees its own change: its load, not y's
    assert (again.mounts["rules"].path / "pending.md").exists()
    await again.end()
    store.down = True
    theirs = await memory.start_turn("y", bob)
    assert theirs.mounts["rules"].from_last_known_copy
    assert not (theirs.mounts["rules"].path / "pending.md").exists()
    assert "pending.md" not in theirs.note
    await theirs.end()
    assert await store.files(rules) == {}
