"""An actor acts in one org: nothing of another org is seen or changed, and it reads as missing.

Every method of ``memfs.act_as`` is tried by an actor of org ``acme`` on what
org ``globex`` holds, on both managed stores; each call either fails with the
same ``NotFound`` (same message) as for something that does not exist, or
answers as if ``globex`` held nothing, and ``globex`` is unchanged after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import memfs
from memfs.core.errors import NotFound
from memfs.core.models import ChangeSet, Forgot, Provenance, SpaceRef
from memfs.engine.acting import Acting
from memfs.stores.base import ReviewingStore
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore

GLOBEX_RULES = SpaceRef(layer="org", space="rules", org="globex")
GLOBEX_DANA = SpaceRef(layer="user", space="me", org="globex", user="dana")


@dataclass
class World:
    store: ReviewingStore
    change: str  # globex's waiting change
    revision: str  # a revision of globex's rules/r.md

    def acme(self, role: Any = "admin") -> Acting:
        return memfs.act_as(self.store, "mallory", role, org="acme")

    async def globex_state(self) -> tuple[object, ...]:
        change = await self.store.get_change(self.change)
        return (
            await self.store.files(GLOBEX_RULES),
            await self.store.files(GLOBEX_DANA),
            await self.store.history(GLOBEX_RULES, "r.md"),
            change.state,
            change.files,
            [c.id for c in await self.store.list_changes(org="globex")],
        )


@pytest.fixture(params=["memory", "sqlite"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    store: ReviewingStore = (
        MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "memfs.db")
    )
    edit = Provenance(origin="code")
    stored = await store.put(
        GLOBEX_RULES, ChangeSet(created={"r.md": b"globex rule"}), provenance=edit
    )
    await store.put(GLOBEX_DANA, ChangeSet(created={"p.md": b"globex dana"}), provenance=edit)
    loaded = await store.load(GLOBEX_RULES, "s1")
    waiting = await store.store(
        GLOBEX_RULES,
        ChangeSet(updated={"r.md": b"proposed"}),
        cursor=loaded.cursor,
        provenance=Provenance(session="s1", turn="t1", prompt="globex's prompt"),
        review="person",
    )
    assert waiting.change is not None
    try:
        yield World(store, waiting.change, stored.revisions["r.md"])
    finally:
        await store.aclose()


async def _same_not_found(
    call: Awaitable[object], missing: Awaitable[object], ids: tuple[str, str] = ("", "")
) -> None:
    """Both fail alike: the same message, but for the id each names (``ids``)."""
    with pytest.raises(memfs.NotFound) as foreign:
        await call
    with pytest.raises(memfs.NotFound) as absent:
        await missing
    foreign_id, missing_id = ids
    assert str(foreign.value).replace(foreign_id, "ID") == str(absent.value).replace(
        missing_id, "ID"
    )
    assert "globex" not in str(foreign.value)


Move = Callable[[Acting, str], Awaitable[object]]
MOVES: dict[str, Move] = {
    "change": lambda a, id: a.change(id),
    "approve": lambda a, id: a.approve(id),
    "approve_forced": lambda a, id: a.approve(id, force=True),
    "reject": lambda a, id: a.reject(id),
    "edit": lambda a, id: a.edit(id, {"r.md": b"mallory was here"}),
    "decide_part": lambda a, id: a.decide(id, "approve", paths=["r.md"]),
}


# A viewer may only look; any move of theirs is PermissionDenied before the store is asked.
CASES = [("viewer", "change")] + [(role, move) for role in ("member", "admin") for move in MOVES]


@pytest.mark.parametrize(("role", "move"), CASES)
async def test_a_change_of_another_org_is_not_found_as_a_missing_one_and_stays_put(
    world: World, role: str, move: str
) -> None:
    before = await world.globex_state()
    acme = world.acme(role)
    await _same_not_found(
        MOVES[move](acme, world.change), MOVES[move](acme, "999999"), (world.change, "999999")
    )
    assert await world.globex_state() == before
    assert await world.store.audit() == []


async def test_waiting_lists_only_the_actors_org(world: World) -> None:
    assert await world.acme().waiting() == []
    globex = memfs.act_as(world.store, "gina", "member", org="globex")
    assert [c.id for c in await globex.waiting()] == [world.change]


async def test_files_history_and_restore_look_in_the_actors_org_only(world: World) -> None:
    before = await world.globex_state()
    acme = world.acme()
    assert await acme.files("rules") == {}
    assert await acme.history("rules", "r.md") == []
    assert await acme.history("me", "p.md", user="dana") == []
    await _same_not_found(
        acme.restore("rules", "r.md", world.revision),
        acme.restore("rules", "r.md", "999999"),
        (world.revision, "999999"),
    )
    assert await world.globex_state() == before


async def test_forget_and_forget_user_reach_the_actors_org_only(world: World) -> None:
    before = await world.globex_state()
    acme = world.acme()
    await _same_not_found(
        acme.forget("rules", "r.md"), acme.forget("rules", "never.md"), ("r.md", "never.md")
    )
    await _same_not_found(
        acme.forget("me", "p.md", user="dana"),
        acme.forget("me", "never.md", user="dana"),
        ("p.md", "never.md"),
    )
    assert await acme.forget_user("dana") == Forgot()
    assert await world.globex_state() == before


async def test_people_open_person_and_audit_show_the_actors_org_only(world: World) -> None:
    acme = world.acme()
    assert await acme.people() == []
    with pytest.raises(NotFound, match="nobody of this id has memory in this org"):
        await acme.open_person("dana")
    await acme.set_review("rules", "none")
    entries = await acme.audit()
    assert {e.org for e in entries} == {"acme"}
    # acme's own acts are in acme's log; globex's log has none of them.
    assert await memfs.act_as(world.store, "gina", "admin", org="globex").audit() == []
    assert await world.store.review_mode(GLOBEX_RULES) is None


async def test_the_same_actor_in_the_right_org_reaches_the_change(world: World) -> None:
    globex = memfs.act_as(world.store, "gina", "member", org="globex")
    assert (await globex.change(world.change)).ref == GLOBEX_RULES
    approved = await globex.approve(world.change)
    assert approved.state == "approved"
    assert await world.store.files(GLOBEX_RULES) == {"r.md": b"proposed"}
