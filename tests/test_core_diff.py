"""The change set of a turn against its snapshot."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memfs.core.diff import diff, diff_touched
from memfs.core.models import ChangeSet


def test_identical_bytes_are_not_an_update() -> None:
    assert diff({"a": b"x"}, {"a": b"x"}).is_empty()


def test_changed_bytes_are_an_update() -> None:
    assert diff({"a": b"x"}, {"a": b"y"}) == ChangeSet(updated={"a": b"y"})


def test_rename_is_delete_plus_create() -> None:
    changes = diff({"old": b"x"}, {"new": b"x"})
    assert changes == ChangeSet(created={"new": b"x"}, deleted=("old",))


def test_touched_path_absent_before_and_after_is_no_change() -> None:
    assert diff_touched({}, {"tmp": None}).is_empty()


def test_untouched_paths_are_not_looked_at() -> None:
    changes = diff_touched({"a": b"1", "b": b"2"}, {"b": None})
    assert changes == ChangeSet(deleted=("b",))


def test_binary_and_non_ascii_names_round_trip() -> None:
    blob = bytes(range(256))
    changes = diff({}, {"ü/🙂.bin": blob})
    assert changes.created["ü/🙂.bin"] == blob


paths = st.sampled_from(["a", "b", "c/d", "é"])
trees = st.dictionaries(paths, st.binary(max_size=4))


@given(trees, trees)
def test_applying_the_diff_to_the_base_gives_the_after_tree(
    base: dict[str, bytes], after: dict[str, bytes]
) -> None:
    changes = diff(base, after)
    rebuilt = {p: c for p, c in base.items() if p not in changes.deleted}
    rebuilt.update(changes.created)
    rebuilt.update(changes.updated)
    assert rebuilt == after
    assert set(changes.created).isdisjoint(base)
    assert set(changes.updated) <= set(base)
