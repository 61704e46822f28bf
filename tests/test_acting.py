"""People acting from Python: an explicit actor and role, checked before the store is asked."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

import memfs
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.core.roles import Role
from memfs.stores.base import ReviewingStore
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore
from memfs.testing import FaultyStore

RULES = SpaceRef(layer="org", space="rules", org="bank_17")
DANA_ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")


async def waiting_change(store: MemoryStore) -> str:
    return await waiting_change_in(store)


async def waiting_change_in(store: ReviewingStore) -> str:
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


# -- put: a member adds or edits a live org file ------------------------------


@pytest.fixture(params=["memory", "sqlite"])
async def managed(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ReviewingStore]:
    store: ReviewingStore = (
        MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "memfs.db")
    )
    yield store
    await store.aclose()


async def test_a_member_puts_a_live_org_file_with_no_review_and_the_audit_names_them(
    managed: ReviewingStore,
) -> None:
    ada = memfs.act_as(managed, "ada", "member", org="bank_17")
    await ada.put("rules", "r.md", b"first")
    stored = await ada.put("rules", "r.md", b"second")
    assert stored.status == "saved"
    assert await ada.files("rules") == {"r.md": b"second"}
    assert await managed.list_changes() == []  # live at once: nothing waits
    history = await ada.history("rules", "r.md")
    assert [(r.provenance.origin, r.provenance.by) for r in history] == [
        ("edited", memfs.By(id="ada", role="member")),
        ("edited", memfs.By(id="ada", role="member")),
    ]
    entries = await memfs.act_as(managed, "root", "admin", org="bank_17").audit()
    assert [(e.action, e.actor, e.space, e.target) for e in entries] == [
        ("put", memfs.By(id="ada", role="member"), "rules", "r.md"),
        ("put", memfs.By(id="ada", role="member"), "rules", "r.md"),
    ]
    assert (await managed.verify_audit()).entries == 2


async def test_a_viewer_may_not_put_and_nothing_is_written_or_recorded(
    managed: ReviewingStore,
) -> None:
    viewer = memfs.act_as(managed, "vic", "viewer", org="bank_17")
    with pytest.raises(memfs.PermissionDenied, match="viewer may not put"):
        await viewer.put("rules", "r.md", b"x")
    assert await managed.files(RULES) == {}
    assert await managed.audit() == []
    admin = memfs.act_as(managed, "root", "admin", org="bank_17")
    await admin.put("rules", "r.md", b"x")
    assert await managed.files(RULES) == {"r.md": b"x"}


async def test_put_lands_in_the_actors_org_only(managed: ReviewingStore) -> None:
    await memfs.act_as(managed, "gina", "member", org="globex").put("rules", "r.md", b"globex")
    assert await managed.files(RULES) == {}
    assert await managed.files(RULES.model_copy(update={"org": "globex"})) == {"r.md": b"globex"}
    assert await managed.audit(org="bank_17") == []
    [entry] = await managed.audit(org="globex")
    assert entry.action == "put"


async def test_put_obeys_limits_at_and_past_them_and_a_refused_put_is_not_recorded(
    managed: ReviewingStore,
) -> None:
    ada = memfs.act_as(
        managed, "ada", "member", org="bank_17", limits=memfs.Limits(max_file_bytes=8)
    )
    await ada.put("rules", "at.md", b"x" * 8)
    with pytest.raises(memfs.TooLarge):
        await ada.put("rules", "past.md", b"x" * 9)
    assert await managed.files(RULES) == {"at.md": b"x" * 8}
    assert [e.target for e in await managed.audit()] == ["at.md"]


async def test_put_refuses_a_bad_path_before_the_store_is_asked(
    managed: ReviewingStore,
) -> None:
    ada = memfs.act_as(managed, "ada", "member", org="bank_17")
    with pytest.raises(memfs.InvalidName):
        await ada.put("rules", "../escape.md", b"x")
    assert await managed.audit() == []


async def test_a_put_from_code_is_not_an_audited_act(managed: ReviewingStore) -> None:
    code = Provenance(origin="code")
    await managed.put(RULES, ChangeSet(created={"r.md": b"seeded"}), provenance=code)
    assert await managed.audit() == []


async def test_forget_user_acts_on_the_folder_store_role_checked(tmp_path: Path) -> None:
    from memfs.stores.folder import FolderStore

    store = FolderStore(tmp_path / "folder")
    loaded = await store.load(DANA_ME, "s1")
    await store.store(
        DANA_ME, ChangeSet(created={"p.md": b"p"}), cursor=loaded.cursor, provenance=Provenance()
    )
    with pytest.raises(memfs.PermissionDenied):
        await memfs.act_as(store, "m", "member", org="bank_17").forget_user("u_dana")
    assert await store.user_files("u_dana", "bank_17") == {"me": {"p.md": b"p"}}
    admin = memfs.act_as(store, "root", "admin", org="bank_17")
    forgot = await admin.forget_user("u_dana")
    assert (forgot.spaces, forgot.files) == ((DANA_ME,), 1)
    assert await store.user_files("u_dana", "bank_17") == {}
    # Everything else needs history, and says so.
    with pytest.raises(memfs.ConfigError, match="keeps no history"):
        await admin.files("rules")


def test_a_store_that_cannot_forget_people_is_refused_at_once() -> None:
    class AppStore:
        async def load(self, ref: SpaceRef, session: str) -> memfs.Loaded:
            return memfs.Loaded()

        async def store(self, *args: object, **kwargs: object) -> memfs.Stored:
            return memfs.Stored(status="saved")

        async def aclose(self) -> None:
            return None

    with pytest.raises(memfs.ConfigError, match="keeps no history"):
        memfs.act_as(AppStore(), "root", "admin")


# -- names: Acting checks them first, for every door ------------------------------

BAD_NAMES: list[tuple[str, Callable[[memfs.Acting], Awaitable[object]]]] = [
    ("put a .. path", lambda a: a.put("rules", "../escape.md", b"x")),
    ("put a path with a control character", lambda a: a.put("rules", "bad\x01name.md", b"x")),
    ("put into a bad space name", lambda a: a.put("Rules!", "r.md", b"x")),
    ("files of a .. space", lambda a: a.files("..")),
    ("one file at a .. path", lambda a: a.file("rules", "a/../r.md")),
    ("history of a .. path", lambda a: a.history("rules", "../r.md")),
    ("history of a bad user id", lambda a: a.history("me", "p.md", user="..")),
    ("restore a .. path", lambda a: a.restore("rules", "../r.md", "1")),
    ("forget a .. path", lambda a: a.forget("rules", "../r.md")),
    ("forget in a bad space name", lambda a: a.forget("Rules!", "r.md")),
    ("forget a file of a bad user id", lambda a: a.forget("me", "p.md", user="u/dana")),
    ("forget a user with a control character", lambda a: a.forget_user("u_dana\x01")),
    ("open a .. person", lambda a: a.open_person("..")),
    ("set review of a bad space name", lambda a: a.set_review("../rules", "none")),
    ("approve a .. path", lambda a: a.approve("any", paths=["../r.md"])),
    ("reject an absolute path", lambda a: a.reject("any", paths=["/r.md"])),
    ("edit a .. path", lambda a: a.edit("any", {"../r.md": b"x"})),
]


@pytest.mark.parametrize("role", ["admin", "viewer"])
@pytest.mark.parametrize("act", [act for _, act in BAD_NAMES], ids=[name for name, _ in BAD_NAMES])
async def test_a_bad_name_is_invalid_before_the_role_or_the_store_is_asked_and_changes_nothing(
    managed: ReviewingStore,
    act: Callable[[memfs.Acting], Awaitable[object]],
    role: Role,
) -> None:
    change = await waiting_change_in(managed)
    await managed.put(DANA_ME, ChangeSet(created={"p.md": b"pref"}), provenance=Provenance())
    before = (await managed.files(RULES), await managed.files(DANA_ME), await managed.audit())
    watched = FaultyStore(managed)
    with pytest.raises(memfs.InvalidName):
        await act(memfs.act_as(watched, "root", role, org="bank_17"))
    assert watched.calls == Counter()
    after = (await managed.files(RULES), await managed.files(DANA_ME), await managed.audit())
    assert after == before
    assert (await managed.get_change(change)).state == "waiting"


async def test_live_origins_read_the_actors_org_space_only_for_a_known_role(
    managed: ReviewingStore,
) -> None:
    await managed.put(RULES, ChangeSet(created={"r.md": b"rule"}), provenance=Provenance())
    theirs = RULES.model_copy(update={"org": "globex"})
    await managed.put(theirs, ChangeSet(created={"g.md": b"g"}), provenance=Provenance())
    viewer = memfs.act_as(managed, "vic", "viewer", org="bank_17")
    assert await viewer.live_origins("rules") == {"r.md": (4, "conversation")}
    assert await memfs.act_as(managed, "gina", "viewer", org="globex").live_origins("rules") == {
        "g.md": (1, "conversation")
    }
    guest = memfs.act_as(managed, "x", "guest", org="bank_17")  # type: ignore[arg-type]
    with pytest.raises(memfs.PermissionDenied):
        await guest.live_origins("rules")
    assert await managed.audit() == []
