"""What turns carried and did, through ``Acting``: story, carried, Life, usage and inbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

import memfs
from memfs.core.errors import BadRequest, InvalidName, NotFound, PermissionDenied
from memfs.core.models import ChangeSet, Limits, Provenance, SpaceRef
from memfs.core.story import MAX_USAGE_DAYS, STORY_PAGE
from memfs.stores.base import ReviewingStore
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore
from tests.story_world import ORG, RULES, long_session, story_world


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ReviewingStore]:
    made: ReviewingStore = (
        MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "memfs.db")
    )
    yield made
    await made.aclose()


def who(store: ReviewingStore, role: str, org: str = ORG) -> memfs.Acting:
    return memfs.act_as(store, f"u_{role}", role, org=org)  # type: ignore[arg-type]


async def opens(store: ReviewingStore) -> list[tuple[str, str | None, str | None]]:
    """The looks inside people the audit log records."""
    return [
        (e.action, e.target, e.detail) for e in await store.audit(org=ORG) if e.action == "open"
    ]


async def test_the_session_story_tells_each_turn_what_it_carried_opened_and_left_waiting(
    store: ReviewingStore,
) -> None:
    world = await story_world(store)
    story = await who(store, "viewer").session_story("s1")
    first, second = story.turns
    assert (first.turn, first.prompt, second.turn) == ("t1", "keep it short", "t2")
    rules, me = first.mounts
    assert (rules.name, rules.carried, rules.opened, rules.status) == (
        "rules",
        3,
        ("a.md",),
        "saved",
    )
    assert rules.cursor is not None
    # A person's mount: counts only, and whose it is hidden from a viewer.
    assert (me.layer, me.user, me.closed, me.opened, me.saved) == ("user", None, True, (), ())
    assert (me.saved_count, me.carried) == (1, 1)
    [waiting] = second.mounts
    assert (waiting.status, waiting.change, waiting.saved) == ("waiting", world.change, ("new.md",))
    assert (waiting.opened, waiting.carried) == (("a.md", "b.md"), 3)
    # Admins see whose the memory is, still no file of it; no look, so nothing is audited.
    admin = await who(store, "admin").session_story("s1")
    assert admin.turns[0].mounts[1].user == "u_dana"
    assert admin.turns[0].mounts[1].opened == ()
    assert await opens(store) == []


@pytest.mark.parametrize("session", ["x1", "nobody"])
async def test_another_orgs_session_reads_as_missing(store: ReviewingStore, session: str) -> None:
    await story_world(store)
    with pytest.raises(NotFound) as caught:
        await who(store, "admin").session_story(session)
    assert str(caught.value).startswith("no such session")


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "", "x\0", "a" * 300])
async def test_a_session_id_that_breaks_the_name_rules_is_refused(
    store: ReviewingStore, bad: str
) -> None:
    with pytest.raises(InvalidName):
        await who(store, "viewer").session_story(bad)


async def test_carried_is_exactly_the_space_as_of_the_turn_even_after_it_changed(
    store: ReviewingStore,
) -> None:
    world = await story_world(store)
    carried = await who(store, "viewer").carried("t1", session="s1")
    rules, me = carried.mounts
    assert rules.known and not rules.closed
    assert {f.path: f.revision for f in rules.files} == world.carried_t1
    assert [f.path for f in rules.files if f.opened] == ["a.md"]
    assert {f.path: f.size for f in rules.files} == {"a.md": 6, "b.md": 4, "c.md": 4}
    assert (await store.files(RULES)).keys() == {"a.md", "c.md"}  # edited and deleted since
    # Dana's memory: closed, a count only, for a viewer and for an admin who did not open it.
    assert (me.closed, me.files, me.count, me.user) == (True, (), 1, None)
    assert (await who(store, "admin").carried("t1", session="s1")).mounts[1].files == ()
    assert await opens(store) == []


async def test_an_admin_opens_a_persons_carried_files_and_the_look_is_audited(
    store: ReviewingStore,
) -> None:
    world = await story_world(store)
    for role in ("viewer", "member"):
        with pytest.raises(PermissionDenied):
            await who(store, role).carried("t1", session="s1", open=True)
    carried = await who(store, "admin").carried("t1", session="s1", open=True)
    me = carried.mounts[1]
    assert (me.closed, me.user) == (False, "u_dana")
    assert {f.path: f.revision for f in me.files} == world.carried_me_t1
    assert [(f.path, f.saved) for f in me.files] == [("q.md", False)]
    assert await opens(store) == [("open", "u_dana", "1 file")]


async def test_a_persons_forgotten_files_are_gone_from_what_turns_carried(
    store: ReviewingStore,
) -> None:
    await story_world(store)
    admin = who(store, "admin")
    await admin.forget("me", "q.md", user="u_dana")
    me = (await admin.carried("t1", session="s1", open=True)).mounts[1]
    assert (me.count, me.files) == (0, ())
    await admin.forget_user("u_dana")
    carried = await admin.carried("t1", session="s1", open=True)
    assert [m.name for m in carried.mounts] == ["rules"]
    assert carried.prompt is None  # the person's turn: what they typed went with them
    story = await admin.session_story("s1")
    assert [m.name for m in story.turns[0].mounts] == ["rules"]


async def test_a_turn_id_used_by_two_sessions_needs_its_session(store: ReviewingStore) -> None:
    await story_world(store)
    viewer = who(store, "viewer")
    with pytest.raises(BadRequest):
        await viewer.carried("t1")  # s1 and s2 of this org (x1 is another org's: not counted)
    assert (await viewer.carried("t2")).session == "s1"
    assert (await viewer.carried("t1", session="s2")).mounts[0].files
    with pytest.raises(NotFound):
        await viewer.carried("t1", session="x1")  # another org's
    with pytest.raises(NotFound):
        await viewer.carried("t9")
    with pytest.raises(InvalidName):
        await viewer.carried("../t1")
    # Another org's admin sees only their own turn under the same id.
    [theirs] = (await who(store, "admin", org="bank_99").carried("t1")).mounts
    assert [f.path for f in theirs.files] == ["x.md"]


async def test_carried_by_a_cursor_the_store_did_not_issue_is_marked_unknown(
    store: ReviewingStore,
) -> None:
    await story_world(store)
    trace = (await store.traces(session="s2"))[0]
    forged = trace.model_copy(
        update={
            "session": "s3",
            "turn": "t7",
            "mounts": {"rules": trace.mounts["rules"].model_copy(update={"cursor": "999999"})},
        }
    )
    await store.record_trace(forged)
    [rules] = (await who(store, "viewer").carried("t7")).mounts
    assert not rules.known
    assert [f.path for f in rules.files] == ["c.md"]  # what the trace itself names
    [line] = (await who(store, "viewer").session_story("s3")).turns[0].mounts
    assert line.carried is None


async def test_life_counts_turns_that_carried_and_opened_a_file_per_day_with_its_timeline(
    store: ReviewingStore,
) -> None:
    world = await story_world(store)
    life = await who(store, "viewer").life("rules", "a.md")
    assert (life.carried_turns, life.opened_turns) == (3, 2)
    assert [(d.day, d.carried, d.opened) for d in life.days] == [
        ((world.at - timedelta(days=2)).date(), 1, 1),
        (world.at.date(), 2, 1),
    ]
    assert (life.last_session, life.last_turn) == ("s1", "t2")
    kinds = [(e.kind, e.origin, e.turn) for e in life.timeline]
    assert kinds == [
        ("revision", "code", None),  # three days ago
        ("opened", None, "t1"),
        ("opened", None, "t2"),
        ("revision", "edited", None),
    ]
    # b.md was carried and opened, then deleted: its Life still tells it.
    b = await who(store, "viewer").life("rules", "b.md")
    assert (b.carried_turns, b.opened_turns) == (3, 1)
    assert [e.deleted for e in b.timeline if e.kind == "revision"] == [False, True]
    with pytest.raises(NotFound):
        await who(store, "viewer").life("rules", "nothing.md")
    with pytest.raises(NotFound):  # another org's file of that name is not theirs to see
        await who(store, "viewer").life("rules", "x.md")


async def test_life_of_an_approved_file_names_who_taught_and_who_approved(
    store: ReviewingStore,
) -> None:
    world = await story_world(store)
    await who(store, "member").approve(world.change)
    life = await who(store, "viewer").life("rules", "new.md")
    [taught] = [e for e in life.timeline if e.kind == "revision"]
    assert (taught.origin, taught.turn, taught.prompt) == (
        "conversation",
        "t2",
        "remember the cut-off",
    )
    assert taught.approved_by is not None and taught.approved_by.id == "u_member"
    assert (life.carried_turns, life.opened_turns) == (0, 0)  # it was waiting, never carried


async def test_life_of_a_persons_file_is_for_admins_and_audited(store: ReviewingStore) -> None:
    await story_world(store)
    with pytest.raises(PermissionDenied):
        await who(store, "member").life("me", "p.md", user="u_dana")
    life = await who(store, "admin").life("me", "p.md", user="u_dana")
    assert [e.kind for e in life.timeline] == ["revision"]
    assert await opens(store) == [("open", "u_dana", "1 revision")]


async def test_usage_counts_opens_of_the_last_thirty_days_and_marks_never_opened(
    store: ReviewingStore,
) -> None:
    await story_world(store)
    usage = await who(store, "viewer").usage("rules")
    assert usage.days == 30
    assert [(f.path, f.opens, f.never_opened) for f in usage.files] == [
        ("a.md", 2, False),
        ("c.md", 1, False),
    ]
    await store.put(RULES, ChangeSet(created={"d.md": b"d"}), provenance=Provenance())
    recent = await who(store, "viewer").usage("rules", days=1)
    assert [(f.path, f.opens, f.never_opened) for f in recent.files] == [
        ("a.md", 1, False),  # t1's open was two days ago
        ("c.md", 1, False),
        ("d.md", 0, True),
    ]
    with pytest.raises(NotFound):
        await who(store, "viewer", org="bank_00").usage("rules")


async def test_usage_over_max_usage_days_is_counted_and_one_day_more_is_bad_request(
    store: ReviewingStore,
) -> None:
    # An app calling Acting.usage directly (not through the web API's 400) got
    # an OverflowError for a wide window, and a window of 0 or fewer days.
    await story_world(store)
    viewer = who(store, "viewer")
    widest = await viewer.usage("rules", days=MAX_USAGE_DAYS)
    assert widest.days == MAX_USAGE_DAYS
    assert [(f.path, f.opens) for f in widest.files] == [("a.md", 2), ("c.md", 1)]
    assert (await viewer.usage("rules", days=1)).days == 1
    before = await store.audit()
    for days in (MAX_USAGE_DAYS + 1, 10**9, 0, -1):
        with pytest.raises(BadRequest, match=f"at most {MAX_USAGE_DAYS}"):
            await viewer.usage("rules", days=days)
    assert await store.audit() == before


async def test_the_inbox_holds_waiting_changes_and_spaces_with_no_room_in_the_note(
    store: ReviewingStore,
) -> None:
    world = await story_world(store)
    big = SpaceRef(layer="org", space="big", org=ORG)
    many = {f"f{i:04}.md": b"x" for i in range(400)}
    await store.put(big, ChangeSet(created=many), provenance=Provenance())
    inbox = await who(store, "viewer").inbox()
    assert [c.id for c in inbox.changes] == [world.change]
    [crowded] = inbox.no_room
    assert (crowded.space, crowded.files, crowded.budget) == ("big", 400, 8_000)
    assert crowded.bytes > 8_000 and 0 < crowded.left_out < 400
    # At a budget one byte short of a list, that space has no room either.
    tight = memfs.act_as(store, "v", "viewer", org=ORG, limits=Limits(note_file_list_bytes=20))
    assert {s.space for s in (await tight.inbox()).no_room} == {"big", "rules"}
    assert (await who(store, "viewer", org="bank_99").inbox()).no_room == ()


async def test_a_long_session_story_is_read_a_page_of_its_latest_turns_at_a_time(
    store: ReviewingStore,
) -> None:
    await story_world(store)
    ids = await long_session(store, "long", STORY_PAGE + 3)
    viewer = who(store, "viewer")
    latest = await viewer.session_story("long")
    assert [t.turn for t in latest.turns] == ids[-STORY_PAGE:]
    assert latest.earlier == ids[-STORY_PAGE]
    first = await viewer.session_story("long", before=latest.earlier)
    assert ([t.turn for t in first.turns], first.earlier) == (ids[:3], None)
    walked: list[str] = []
    before = None
    while True:
        page = await viewer.session_story("long", before=before, limit=4)
        walked[:0] = [t.turn for t in page.turns]
        if (before := page.earlier) is None:
            break
    assert walked == ids


async def test_a_story_page_before_a_turn_the_session_never_had_or_of_no_turns_is_refused(
    store: ReviewingStore,
) -> None:
    await story_world(store)
    viewer = who(store, "viewer")
    for before, limit in (("t9", 1), ("t1", 0)):
        with pytest.raises(BadRequest):
            await viewer.session_story("s1", before=before, limit=limit)
    assert (await viewer.session_story("s1", before="t1")).turns == ()
