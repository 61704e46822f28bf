"""The pure rules of what turns carried and did (memfs.core.story), without a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memfs.core.errors import NotFound
from memfs.core.models import AsOfFile, Provenance, Revision, SpaceRef, Trace, TraceFile, TraceMount
from memfs.core.story import (
    as_of_cursor,
    carried_count,
    carried_mount,
    file_life,
    live_at,
    no_room,
    space_usage,
    trace_matches,
)

RULES = SpaceRef(layer="org", space="rules", org="o1")
AT = datetime(2026, 11, 30, 12, tzinfo=UTC)


def rev(id: str, *, deleted: bool = False) -> Revision:
    return Revision(
        id=id,
        path="a.md",
        sha256=None if deleted else "0" * 64,
        size=0 if deleted else 1,
        deleted=deleted,
        provenance=Provenance(at=AT),
    )


def trace(
    turn: str, cursor: str | None, *, at: datetime = AT, files: dict[str, TraceFile] | None = None
) -> Trace:
    mount = TraceMount(
        ref=RULES,
        read_only=False,
        from_last_known_copy=False,
        snapshot={},
        status="saved",
        cursor=cursor,
    )
    return Trace(
        session="s1",
        turn=turn,
        prompt=None,
        at=at,
        mounts={"rules": mount},
        files={f"rules/{p}": f for p, f in (files or {}).items()},
    )


@pytest.mark.parametrize("cursor", ["x", "-1", "11", "", "1.0", "01", " 1"])
def test_a_cursor_the_store_cannot_have_issued_is_not_found(cursor: str) -> None:
    with pytest.raises(NotFound):
        as_of_cursor(cursor, 10)


def test_a_cursor_up_to_the_clock_is_its_number() -> None:
    assert [as_of_cursor(c, 10) for c in ("0", "7", "10")] == [0, 7, 10]


def test_live_at_is_the_latest_revision_at_or_below_the_cursor_unless_a_deletion() -> None:
    history = [rev("3"), rev("7", deleted=True), rev("9")]
    assert live_at(history, 2) is None
    assert [live_at(history, n).id for n in (3, 6, 9, 50)] == ["3", "3", "9", "9"]  # type: ignore[union-attr]
    assert live_at(history, 7) is None and live_at(history, 8) is None


def test_a_trace_matches_by_turn_space_and_time_and_belongs_to_one_org() -> None:
    t = trace("t1", "3")
    assert trace_matches(t, turn="t1", space=RULES, since=AT)
    assert not trace_matches(t, turn="t2")
    assert not trace_matches(t, space=RULES.model_copy(update={"org": "o2"}))
    assert not trace_matches(t, since=AT + timedelta(seconds=1))
    assert t.org() == "o1"
    assert t.model_copy(update={"mounts": {}}).org() is None


def test_a_persistent_dir_gives_a_trace_no_org_and_takes_none_from_it() -> None:
    # A dir's ref holds the default org, not the turn's: read as an org it made
    # every org's dir-only turn the org "default"'s, and a turn of o1 that also
    # mounted a dir nobody's (two orgs), its author's words sealed for nobody.
    t = trace("t1", "3").model_copy(update={"author": "u_ann"})
    notes = t.mounts["rules"].model_copy(update={"ref": SpaceRef(layer="dir", space="notes")})
    with_notes = t.model_copy(update={"mounts": {**t.mounts, "notes": notes}})
    only_notes = t.model_copy(update={"mounts": {"notes": notes}})
    assert with_notes.org() == "o1" and with_notes.holders() == [("o1", "u_ann")]
    assert only_notes.org() is None and only_notes.holders() == []


def test_carried_lays_the_turns_own_waiting_files_over_the_space_as_of_its_cursor() -> None:
    t = trace("t1", "5", files={"new.md": TraceFile(opened=True)})
    mount = t.mounts["rules"].model_copy(
        update={"snapshot": {"new.md": "c1.6"}, "saved": ("a.md",)}
    )
    t = t.model_copy(update={"mounts": {"rules": mount}})
    carried = carried_mount(
        t, "rules", {"a.md": AsOfFile("3", "0" * 64, 1)}, closed=False, show_user=True
    )
    assert [(f.path, f.revision, f.waiting, f.opened, f.saved) for f in carried.files] == [
        ("a.md", "3", False, False, True),
        ("new.md", "c1.6", True, True, False),
    ]
    closed = carried_mount(
        t, "rules", {"a.md": AsOfFile("3", "0" * 64, 1)}, closed=True, show_user=False
    )
    assert (closed.count, closed.files) == (2, ())
    assert carried_count(mount, {"a.md": AsOfFile("3", "0" * 64, 1)}) == 2
    unknown = carried_mount(t, "rules", None, closed=False, show_user=False)
    assert (unknown.known, [f.path for f in unknown.files]) == (False, ["new.md"])


def test_life_counts_a_turn_once_per_day_and_an_open_needs_opened_or_read() -> None:
    history = [rev("3"), rev("8", deleted=True)]
    traces = [
        trace("t1", "4", files={"a.md": TraceFile(read="3")}),
        trace("t2", "5", files={"a.md": TraceFile(wrote=True)}),  # carried, wrote without reading
        trace("t3", "9", at=AT + timedelta(days=1)),  # after the deletion: not carried
        trace("t4", None, at=AT + timedelta(days=1)),  # no cursor: the store cannot say
    ]
    life = file_life(RULES, "a.md", history, traces)
    assert (life.carried_turns, life.opened_turns, life.last_turn) == (2, 1, "t1")
    assert [(d.day.day, d.carried, d.opened) for d in life.days] == [(30, 2, 1)]


def test_usage_counts_opens_inside_the_window_and_marks_files_nobody_opened() -> None:
    old = trace("t1", "4", at=AT - timedelta(days=40), files={"a.md": TraceFile(opened=True)})
    new = trace("t2", "4", files={"a.md": TraceFile(opened=True), "b.md": TraceFile(opened=True)})
    usage = space_usage(RULES, ["c.md", "a.md", "b.md"], [old, new], at=AT)
    assert [(f.path, f.opens, f.never_opened) for f in usage.files] == [
        ("a.md", 1, False),
        ("b.md", 1, False),
        ("c.md", 0, True),
    ]
    assert usage.files[0].last_opened == AT


def test_no_room_when_the_file_list_leaves_a_file_out_and_not_at_the_budget() -> None:
    sizes = {"a.md": 1, "b.md": 1}
    line = len(b"- rules/a.md (1 B)\n")
    fits = no_room("rules", sizes, 2 * line)
    assert fits is None
    full = no_room("rules", sizes, 2 * line - 1)
    assert full is not None and (full.left_out, full.bytes, full.files) == (1, 2 * line, 2)
