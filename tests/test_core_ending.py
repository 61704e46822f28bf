"""What ending says about one space: status, reason and not_saved, decided in the core."""

from __future__ import annotations

from memfs.core import ending
from memfs.core.errors import InvalidName, StoreUnavailable, TooLarge
from memfs.core.models import ChangeSet, Stored

CHANGES = ChangeSet(created={"new.md": b"n"}, updated={"old.md": b"o"}, deleted=("gone.md",))
REFUSED = {"big.bin": TooLarge("over the file limit", path="big.bin")}
SNAPSHOT = {"old.md": "3", "gone.md": "2"}


def test_read_only_discards_every_change_and_names_it() -> None:
    result = ending.skipped(CHANGES, REFUSED)
    assert result.status == "skipped"
    assert result.not_saved == ("big.bin", "gone.md", "new.md", "old.md")
    assert result.error == "read-only this turn; changes were discarded"


def test_nothing_changed_is_saved_unless_a_path_was_refused() -> None:
    assert ending.unchanged({}).status == "saved"
    refused = ending.unchanged(REFUSED)
    assert (refused.status, refused.reason, refused.not_saved) == (
        "not_saved",
        "refused",
        ("big.bin",),
    )


def test_a_held_manual_space_names_only_its_refused_paths() -> None:
    result = ending.held(CHANGES, REFUSED)
    assert (result.status, result.not_saved, result.changes) == ("manual", ("big.bin",), CHANGES)


def test_a_space_from_the_last_known_copy_is_not_saved_whole_and_never_kept() -> None:
    result = ending.refused_stale(CHANGES, {})
    assert (result.status, result.reason, result.kept) == ("not_saved", "last known copy", False)
    assert result.not_saved == ("gone.md", "new.md", "old.md")
    assert result.error == ending.stale_message(CHANGES, {})


def test_a_failed_store_and_a_conflict_keep_the_space_with_its_bases() -> None:
    failed = ending.store_failed(CHANGES, CHANGES, {}, StoreUnavailable("down"), SNAPSHOT)
    assert (failed.reason, failed.kept) == ("store failed", True)
    assert failed.bases == {"new.md": None, "old.md": "3", "gone.md": "2"}
    moved = ending.conflicted(CHANGES, CHANGES, {}, ("old.md",), SNAPSHOT)
    assert (moved.reason, moved.kept, moved.conflicts) == ("conflict", True, ("old.md",))


def test_forgotten_keeps_nothing_and_a_space_stored_before_the_forget_names_nothing() -> None:
    result = ending.forgotten(CHANGES, {}, "forgotten since it loaded")
    assert (result.reason, result.kept) == ("forgotten", False)
    stored = ending.stored(CHANGES, {}, Stored(status="saved", change="c1"))
    after = ending.forgotten_in_turn(stored)
    assert (after.status, after.change, after.changes) == ("saved", "c1", ChangeSet())
    assert ending.forgotten_in_turn(None).reason == "forgotten"


def test_stored_names_what_the_store_refused() -> None:
    refused = {"x": InvalidName("bad", path="x")}
    result = ending.stored(CHANGES, refused, Stored(status="waiting"))
    assert (result.status, result.reason, result.not_saved) == ("waiting", "refused", ("x",))
    assert ending.first_error({**refused, **REFUSED}) == "2 files were not saved; see errors"


def test_a_discarded_space_is_not_saved_or_skipped_when_nothing_changed() -> None:
    assert ending.discarded(CHANGES, ()).status == "not_saved"
    assert ending.discarded(ChangeSet(), ()).status == "skipped"


def test_a_turn_with_a_kept_or_settled_space_was_ending_one_only_forgotten_was_not() -> None:
    saved = ending.stored(CHANGES, {}, Stored(status="saved"))
    gone = ending.forgotten_in_turn(None)
    kept = ending.store_failed(CHANGES, CHANGES, {}, StoreUnavailable("down"), SNAPSHOT)
    assert not ending.was_ending({}, {})
    assert not ending.was_ending({}, {"me": gone})
    assert ending.was_ending({"rules": kept}, {})
    assert ending.was_ending({}, {"rules": saved, "me": gone})
    assert ending.was_ending({}, {"rules": ending.discarded(CHANGES, ())})
