"""Size limits: each one at and past its value; the rest of the change set survives."""

from __future__ import annotations

import errno

from memfs.core.errors import SpaceFull, TooLarge
from memfs.core.limits import apply_limits
from memfs.core.models import MIB, ChangeSet, Limits


def test_defaults_are_one_mib_ten_thousand_files_sixty_four_mib() -> None:
    limits = Limits()
    assert (limits.max_file_bytes, limits.max_files, limits.max_space_bytes) == (
        MIB,
        10_000,
        64 * MIB,
    )
    assert limits.note_file_list_bytes == 8_000


def test_file_at_the_size_limit_passes_and_one_byte_more_is_too_large() -> None:
    limits = Limits(max_file_bytes=4)
    ok, refused = apply_limits(
        ChangeSet(created={"at": b"1234", "past": b"12345"}, updated={"u": b"12345"}),
        {"u": 1},
        limits,
    )
    assert ok == ChangeSet(created={"at": b"1234"})
    assert set(refused) == {"past", "u"}
    assert isinstance(refused["past"], TooLarge)
    assert refused["past"].errno == errno.EFBIG


def test_file_count_at_the_limit_passes_and_past_it_is_space_full() -> None:
    limits = Limits(max_files=3)
    ok, refused = apply_limits(ChangeSet(created={"b": b"", "c": b"", "d": b""}), {"a": 0}, limits)
    assert ok.created.keys() == {"b", "c"}
    assert isinstance(refused["d"], SpaceFull)
    assert refused["d"].errno == errno.ENOSPC


def test_deletions_make_room_for_creates() -> None:
    ok, refused = apply_limits(
        ChangeSet(created={"b": b""}, deleted=("a",)), {"a": 0}, Limits(max_files=1)
    )
    assert refused == {}
    assert ok.created == {"b": b""}


def test_space_bytes_at_the_limit_pass_and_past_it_are_space_full() -> None:
    limits = Limits(max_space_bytes=10)
    ok, refused = apply_limits(
        ChangeSet(created={"b": b"xxxx", "c": b"x"}, updated={"a": b"xxxxxx"}), {"a": 2}, limits
    )
    # a grows to 6, b brings 4: exactly 10; c would make 11.
    assert ok.updated == {"a": b"xxxxxx"}
    assert ok.created == {"b": b"xxxx"}
    assert set(refused) == {"c"}


def test_shrinking_an_update_frees_room() -> None:
    ok, refused = apply_limits(
        ChangeSet(created={"b": b"xxxx"}, updated={"a": b"x"}), {"a": 9}, Limits(max_space_bytes=5)
    )
    assert refused == {}
    assert ok.created == {"b": b"xxxx"}


def test_folders_are_stored_up_to_max_folders_and_the_rest_refused() -> None:
    limits = Limits(max_folders=3)
    at = ChangeSet(folders_created=("a", "a/b"))
    kept, refused = apply_limits(at, {}, limits, base_folders=1)
    assert (kept, refused) == (at, {})
    past = ChangeSet(created={"f.md": b"f"}, folders_created=("a", "a/b", "c"))
    kept, refused = apply_limits(past, {}, limits, base_folders=1)
    assert kept == ChangeSet(created={"f.md": b"f"}, folders_created=("a", "a/b"))
    assert list(refused) == ["c"] and isinstance(refused["c"], SpaceFull)


def test_removed_folders_make_room_for_new_ones() -> None:
    changes = ChangeSet(folders_created=("new",), folders_deleted=("old",))
    assert apply_limits(changes, {}, Limits(max_folders=1), base_folders=1) == (changes, {})
