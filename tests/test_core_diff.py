"""The change set of a turn against its snapshot."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from memfs.core.diff import diff, diff_folders, diff_touched, implied_folders, unified
from memfs.core.errors import InvalidName
from memfs.core.models import ChangeSet, FileMeta


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


X = FileMeta(mode=0o755, mtime_ns=5)


def test_a_mode_only_change_is_an_update_carrying_the_new_mode() -> None:
    changes = diff({"a": b"x"}, {"a": b"x"}, base_meta={"a": FileMeta()}, meta={"a": X})
    assert changes == ChangeSet(updated={"a": b"x"}, meta={"a": X})


def test_a_rewrite_that_moves_only_the_times_is_no_change() -> None:
    later = FileMeta(mode=0o755, mtime_ns=99, ctime_ns=100)
    assert diff({"a": b"x"}, {"a": b"x"}, base_meta={"a": X}, meta={"a": later}).is_empty()


def test_changed_bytes_carry_their_times_and_a_path_without_meta_keeps_its_mode() -> None:
    changes = diff(
        {"a": b"x", "b": b"y"}, {"a": b"z", "b": b"y"}, base_meta={"b": X}, meta={"a": X}
    )
    assert changes == ChangeSet(updated={"a": b"z"}, meta={"a": X})


def test_diff_folders_stores_made_folders_and_removes_gone_ones() -> None:
    at_end = {"made": False, "made/full": True, "gone": None, "kept": False, "never": None}
    created, deleted = diff_folders(at_end, stored={"gone", "kept"}, implied_before=set())
    assert (created, deleted) == (("made", "made/full"), ("gone",))


def test_a_folder_implied_by_files_before_and_after_needs_no_entry() -> None:
    assert diff_folders({"notes": True}, stored=set(), implied_before={"notes"}) == ((), ())


def test_a_folder_that_outlived_its_last_file_is_stored() -> None:
    assert diff_folders({"notes": False}, stored=set(), implied_before={"notes"}) == (
        ("notes",),
        (),
    )


def test_whole_tree_diff_of_folders() -> None:
    changes = diff(
        {"d/a.md": b"a"},
        {"e/b.md": b"b"},
        base_folders=("old",),
        folders=("d", "e", "empty"),
    )
    # "d" lost its file but stays, so it is stored now; "e" is new.
    assert changes.folders_created == ("d", "e", "empty")
    assert changes.folders_deleted == ("old",)


def test_implied_folders_are_every_folder_on_the_way() -> None:
    assert implied_folders(["a/b/c.md", "a/d.md", "e.md"]) == {"a", "a/b"}


@given(
    st.dictionaries(st.sampled_from(["a", "b", "d/c"]), st.sampled_from([0o644, 0o755])),
    st.dictionaries(st.sampled_from(["a", "b", "d/c"]), st.sampled_from([0o644, 0o755])),
)
def test_a_path_is_updated_exactly_when_its_mode_changed(
    before: dict[str, int], after: dict[str, int]
) -> None:
    base = dict.fromkeys(before, b"same")
    now = dict.fromkeys(after, b"same")
    changes = diff(
        base,
        now,
        base_meta={p: FileMeta(mode=m) for p, m in before.items()},
        meta={p: FileMeta(mode=m) for p, m in after.items()},
    )
    assert set(changes.updated) == {p for p in after if p in before and before[p] != after[p]}


def test_a_change_set_refuses_meta_for_a_file_it_does_not_write() -> None:
    with pytest.raises(InvalidName):
        ChangeSet(deleted=("a",), meta={"a": FileMeta()})


def test_a_change_set_refuses_a_made_folder_that_is_also_a_written_file() -> None:
    with pytest.raises(InvalidName):
        ChangeSet(created={"a": b"x"}, folders_created=("a",))
    # A removed folder may give way to a file of its name.
    assert ChangeSet(created={"a": b"x"}, folders_deleted=("a",)).folders == ("a",)


def test_file_meta_keeps_permission_bits_only() -> None:
    with pytest.raises(ValidationError):
        ChangeSet(created={"a": b"x"}, meta={"a": FileMeta(mode=0o4755)})


def test_without_and_only_carry_meta_and_folders() -> None:
    changes = ChangeSet(
        created={"a": b"a", "b": b"b"},
        meta={"a": X},
        folders_created=("d",),
        folders_deleted=("e",),
    )
    assert changes.without(["a", "d"]) == ChangeSet(created={"b": b"b"}, folders_deleted=("e",))
    assert changes.only(["a", "d"]) == ChangeSet(
        created={"a": b"a"}, meta={"a": X}, folders_created=("d",)
    )


# -- unified: one file of a change against the live file, for people ---------


def test_unified_shows_changed_lines_with_git_headers_and_context() -> None:
    live = b"one\ntwo\nthree\nfour\nfive\nsix\nseven\n"
    new = b"one\ntwo\nthree\n4\nfive\nsix\nseven\n"
    assert unified("rules/a.md", live, new) == (
        "--- a/rules/a.md\n"
        "+++ b/rules/a.md\n"
        "@@ -1,7 +1,7 @@\n"
        " one\n two\n three\n-four\n+4\n five\n six\n seven\n"
    )
    assert unified("rules/a.md", live, new, context=0) == (
        "--- a/rules/a.md\n+++ b/rules/a.md\n@@ -4 +4 @@\n-four\n+4\n"
    )


def test_unified_of_a_new_and_a_deleted_file_names_dev_null() -> None:
    new = "--- /dev/null\n+++ b/a.md\n@@ -0,0 +1,2 @@\n+x\n+y\n"
    assert unified("a.md", None, b"x\ny\n") == new
    assert unified("a.md", b"x\n", None) == "--- a/a.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"


def test_unified_marks_a_last_line_without_newline_as_git_does() -> None:
    assert unified("a.md", b"x\n", b"x\ny") == (
        "--- a/a.md\n+++ b/a.md\n@@ -1 +1,2 @@\n x\n+y\n\\ No newline at end of file\n"
    )


def test_unified_of_the_same_content_is_empty() -> None:
    assert unified("a.md", b"same\n", b"same\n") == ""


@pytest.mark.parametrize(
    ("live", "new", "shown"),
    [
        (None, b"\xff\xfe", "binary, 2 bytes\n"),
        (b"text\n", b"a\0b", "binary, 3 bytes (was 5 bytes)\n"),
        (b"\xff", b"text\n", "binary, 5 bytes (was 1 byte)\n"),
        (b"\x00", None, "binary, 1 byte, deleted\n"),
    ],
)
def test_unified_says_binary_and_the_size_instead_of_lines(
    live: bytes | None, new: bytes | None, shown: str
) -> None:
    assert unified("scan.bin", live, new) == shown


def test_change_sets_that_differ_only_in_a_folder_or_a_mode_have_different_fingerprints() -> None:
    # A store tells a repeated turn end by the fingerprint: a change set with
    # a folder or a mode more, mistaken for the first, got its result and was
    # never stored.
    files = ChangeSet(created={"a.md": b"x"})
    folder = ChangeSet(created={"a.md": b"x"}, folders_created=("projects",))
    removed = ChangeSet(created={"a.md": b"x"}, folders_deleted=("projects",))
    mode = ChangeSet(created={"a.md": b"x"}, meta={"a.md": FileMeta(mode=0o600)})
    prints = [c.fingerprint() for c in (files, folder, removed, mode)]
    assert len(set(prints)) == 4


def test_a_fingerprint_of_files_alone_is_what_earlier_stores_kept() -> None:
    # A turn end repeated across an upgrade must still be told a repeat: the
    # default mode and the file times (the store's own when absent) add nothing.
    changes = ChangeSet(
        created={"a.md": b"x"},
        updated={"b.md": b"y"},
        deleted=("c.md",),
        meta={"a.md": FileMeta(mtime_ns=1_700_000_000_000_000_000)},
    )
    assert changes.fingerprint() == (
        "b0257f07b374af10d5f640b2e4af2c5044cc18e9ea13c30e8e64d7f1b678b144"
    )
