"""People acting from Python: an explicit actor and role, checked before the store is asked."""

from __future__ import annotations

import pytest

import memfs
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.memory import MemoryStore

RULES = SpaceRef(layer="org", space="rules", org="bank_17")
DANA_ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")


async def waiting_change(store: MemoryStore) -> str:
    loaded = await store.load(RULES, "s1")
    stored = await store.store(
        RULES,
        ChangeSet(created={"r.md": b"rule"}),
        cursor=loaded.cursor,
        provenance=Provenance(session="s1", turn="t1", prompt="p"),
        review="person",
    )
    assert stored.change is not None
    return stored.change


async def test_a_member_approves_and_the_audit_names_them() -> None:
    store = MemoryStore()
    change = await waiting_change(store)
    ada = memfs.act_as(store, "ada", "member", org="bank_17")
    [waiting] = await ada.waiting()
    assert waiting.id == change
    await ada.approve(change)
    assert await ada.files("rules") == {"r.md": b"rule"}
    entries = await memfs.act_as(store, "root", "admin", org="bank_17").audit()
    assert [(e.action, e.actor.id if e.actor else None) for e in entries] == [("approve", "ada")]


async def test_a_viewer_may_read_but_not_review_and_nothing_is_recorded() -> None:
    store = MemoryStore()
    change = await waiting_change(store)
    viewer = memfs.act_as(store, "vic", "viewer", org="bank_17")
    assert len(await viewer.waiting()) == 1
    with pytest.raises(memfs.PermissionDenied):
        await viewer.approve(change)
    with pytest.raises(memfs.PermissionDenied):
        await viewer.audit()
    assert await store.audit() == []


async def test_only_admins_open_people_and_members_see_no_one_by_name() -> None:
    store = MemoryStore()
    await store.put(DANA_ME, ChangeSet(created={"p.md": b"pref"}), provenance=Provenance())
    member = memfs.act_as(store, "ada", "member", org="bank_17")
    assert await member.people() == [{"space": "me", "org": "bank_17", "bytes": 4, "person": None}]
    with pytest.raises(memfs.PermissionDenied):
        await member.open_person("u_dana")
    admin = memfs.act_as(store, "root", "admin", org="bank_17")
    assert (await admin.people())[0]["person"] == "u_dana"
    assert await admin.open_person("u_dana") == {"me": {"p.md": b"pref"}}
    assert [e.action for e in await admin.audit()] == ["open"]
