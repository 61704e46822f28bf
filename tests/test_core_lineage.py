"""Lineage: which paths moved between versions of one manifest line, exactly or not at all."""

from __future__ import annotations

from memfs.core.lineage import MAX_LINEAGE_PATHS, Lineage


def test_a_line_names_the_paths_moved_after_a_version_and_none_before_it() -> None:
    line = Lineage.start(3).then(5, frozenset({"a"})).then(9, frozenset({"b", "c"}))
    assert line.moved_since(line.line, 3) == frozenset({"a", "b", "c"})
    assert line.moved_since(line.line, 5) == frozenset({"b", "c"})
    assert line.moved_since(line.line, 7) is None  # between steps: maybe another branch's
    assert line.moved_since(line.line, 9) == frozenset()


def test_another_line_a_later_version_or_one_before_the_line_says_nothing() -> None:
    line = Lineage.start(3).then(5, frozenset({"a"}))
    assert line.moved_since(Lineage.start(3).line, 3) is None  # read whole again: a new line
    assert line.moved_since(None, 3) is None
    assert line.moved_since(line.line, None) is None
    assert line.moved_since(line.line, 2) is None
    assert line.moved_since(line.line, 6) is None


def test_a_line_holds_max_lineage_paths_and_past_them_forgets_its_oldest_steps() -> None:
    half = MAX_LINEAGE_PATHS // 2
    first = frozenset(f"a{i}" for i in range(half))
    second = frozenset(f"b{i}" for i in range(MAX_LINEAGE_PATHS - half))
    at = Lineage.start(1).then(2, first).then(3, second)  # exactly at the bound: all kept
    assert at.since == 1 and at.moved_since(at.line, 1) == first | second
    past = at.then(4, frozenset({"c"}))  # one past it: the oldest step goes
    assert past.since == 2
    assert past.moved_since(past.line, 1) is None
    assert past.moved_since(past.line, 2) == second | {"c"}


def test_one_step_larger_than_the_bound_leaves_only_the_version_it_reached() -> None:
    huge = frozenset(f"p{i}" for i in range(MAX_LINEAGE_PATHS + 1))
    line = Lineage.start(1).then(2, huge)
    assert line.since == 2 and line.steps == ()
    assert line.moved_since(line.line, 1) is None
    assert line.moved_since(line.line, 2) == frozenset()


def test_a_version_no_later_than_the_last_starts_a_new_line() -> None:
    # A backup put back in place sends versions back; the steps of the old
    # line would no longer be in order, and an answer from them would miss paths.
    line = Lineage.start(3).then(5, frozenset({"a"}))
    back = line.then(4, frozenset({"b"}))
    assert back.line != line.line and back.since == 4 and back.steps == ()
    assert back.moved_since(line.line, 3) is None
    assert line.then(5, frozenset({"c"})).line != line.line


def test_a_branch_answers_only_for_versions_it_passed_through() -> None:
    # Two threads refresh one held manifest: one to 3 (q made), the other to
    # 2 and then 5 (x made, q made and removed). A base taken at 3 from the
    # first is not a version the second passed through: it says nothing.
    held = Lineage.start(1)
    first = held.then(3, frozenset({"q.md"}))
    second = held.then(2, frozenset({"x.md"})).then(5, frozenset({"q.md", "y.md"}))
    assert second.moved_since(first.line, 3) is None
    assert second.moved_since(first.line, 2) == frozenset({"q.md", "y.md"})
    assert second.moved_since(first.line, 1) == frozenset({"x.md", "q.md", "y.md"})
