"""The review workflow: its transition table, updates, stale files and partial decisions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memfs.core.errors import (
    BadRequest,
    ConfigError,
    Conflict,
    IllegalTransition,
    InvalidName,
    NotFound,
    SpaceFull,
    TooLarge,
)
from memfs.core.models import By, ChangeSet, FileMeta, Limits, Loaded, Provenance, SpaceRef
from memfs.core.review import (
    MAX_LIVE_VERSION_DIGITS,
    TRANSITIONS,
    Effect,
    FileChange,
    WaitingChange,
    applied_provenance,
    check_mode,
    conversation_of,
    decide,
    decided_folders,
    effective_mode,
    is_listed,
    joins,
    lay_over,
    mark_stale,
    mark_stale_all,
    open_change,
    open_state,
    own_revision,
    require_deletable,
    saves_at_once,
    status_after_store,
    taught,
    unseen_edits,
    update,
)

RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")
DANA = By(id="u_dana", label="Dana", role="underwriter")
ADA = By(id="ada", label="Ada", role="member")
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def turn(n: int, prompt: str = "p") -> Provenance:
    return Provenance(session="s1", turn=f"t{n}", prompt=prompt, by=DANA)


def waiting(mode: str = "person") -> WaitingChange:
    return open_change(
        "c1",
        RULES,
        mode=mode,  # type: ignore[arg-type]
        changes=ChangeSet(
            created={"new.md": b"new"}, updated={"rules.md": b"v2"}, deleted=("old.md",)
        ),
        snapshot={"rules.md": "r1", "old.md": "r2"},
        loaded=10,
        edited=12,
        provenance=turn(1),
    )


def test_person_review_waits_after_and_none_are_live_and_people_save_at_once() -> None:
    assert not saves_at_once("org", "person")
    assert saves_at_once("org", "after") and saves_at_once("org", "none")
    assert saves_at_once("user", "person")
    assert is_listed("org", "person") and is_listed("org", "after")
    assert not is_listed("org", "none") and not is_listed("user", "person")
    assert status_after_store("org", "person") == "waiting"
    assert status_after_store("user", "person") == "saved"


def test_a_new_change_records_each_files_base_revision() -> None:
    change = waiting()
    assert change.state == "waiting"
    assert change.files["rules.md"].base == "r1"
    assert change.files["new.md"].base is None
    assert change.files["old.md"].content is None
    assert waiting("after").state == "live"


def test_a_later_turns_edit_replaces_the_same_file_and_keeps_its_first_base() -> None:
    later = update(
        waiting(),
        ChangeSet(updated={"rules.md": b"v3"}, created={"more.md": b"m"}),
        snapshot={"rules.md": "w1"},  # the later turn loaded the waiting content
        loaded=13,
        edited=14,
        provenance=turn(2, "also this"),
    )
    assert later.files["rules.md"].content == b"v3"
    assert later.files["rules.md"].base == "r1"
    assert later.files["rules.md"].loaded == 10
    assert later.files["rules.md"].edited == 14
    assert later.files["more.md"].loaded == 13
    assert later.files["rules.md"].turn == "t2"
    assert later.files["new.md"].content == b"new"
    assert set(later.files) == {"rules.md", "new.md", "old.md", "more.md"}
    assert later.provenance.prompt == "also this"


def test_a_file_whose_live_version_moved_on_since_the_turn_loaded_it_is_stale() -> None:
    change = mark_stale(waiting(), {"rules.md": 11, "old.md": 3}, [])
    assert change.stale_paths == ("rules.md",)
    assert not mark_stale(waiting(), {"rules.md": 10}, []).stale_paths


def _naive_stale(
    change: WaitingChange, live: dict[str, int], others: list[WaitingChange]
) -> tuple[str, ...]:
    """The staleness rule as first written: every rival scanned for every file."""
    rivals = [o for o in others if o.id != change.id and o.state in ("waiting", "live")]
    return tuple(
        sorted(
            path
            for path, file in change.files.items()
            if live.get(path, 0) > file.loaded
            or any(
                path in o.files and file.loaded < o.files[path].edited < file.edited for o in rivals
            )
        )
    )


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["waiting", "live", "approved", "rejected"]),
            st.dictionaries(
                st.sampled_from(["a.md", "b.md", "c.md"]),
                st.tuples(st.integers(0, 20), st.integers(0, 20)),
                min_size=1,
            ),
        ),
        max_size=8,
    ),
    st.dictionaries(st.sampled_from(["a.md", "b.md", "c.md"]), st.integers(0, 25)),
)
def test_marking_many_changes_at_once_marks_exactly_what_the_rule_says(
    made: list[tuple[str, dict[str, tuple[int, int]]]], live: dict[str, int]
) -> None:
    changes = []
    for n, (state, files) in enumerate(made):
        change = waiting()
        change = change.model_copy(
            update={
                "id": f"c{n}",
                "state": state,
                "files": {
                    path: FileChange(content=b"x", base=None, loaded=loaded, edited=loaded + gap)
                    for path, (loaded, gap) in files.items()
                },
            }
        )
        changes.append(change)
    marked = mark_stale_all(changes, live, changes)
    assert [c.stale_paths for c in marked] == [_naive_stale(c, live, changes) for c in changes]
    assert [mark_stale(c, live, changes).stale_paths for c in changes] == [
        c.stale_paths for c in marked
    ]


def test_of_two_conversations_editing_one_file_from_one_snapshot_the_later_is_stale() -> None:
    def conversation(id: str, session: str, edited: int) -> WaitingChange:
        return open_change(
            id,
            RULES,
            mode="person",
            changes=ChangeSet(updated={"rules.md": session.encode()}),
            snapshot={"rules.md": "r1"},
            loaded=10,
            edited=edited,
            provenance=Provenance(session=session, turn="t", by=DANA),
        )

    first, second = conversation("c1", "s1", 11), conversation("c2", "s2", 12)
    assert not mark_stale(first, {}, [first, second]).stale_paths
    assert mark_stale(second, {}, [first, second]).stale_paths == ("rules.md",)
    rejected = first.model_copy(update={"state": "rejected"})
    assert not mark_stale(second, {}, [rejected]).stale_paths


def test_approve_applies_every_file_and_records_who_and_when() -> None:
    after, effect, files = decide(waiting(), "approve", by=ADA, at=AT)
    assert after.state == "approved"
    assert effect is Effect.APPLY
    assert files == {"new.md": b"new", "rules.md": b"v2", "old.md": None}
    [review] = after.reviews
    assert (review.action, review.by, review.at) == ("approve", ADA, AT)


def test_approving_part_applies_those_files_and_the_rest_keeps_waiting() -> None:
    after, effect, files = decide(waiting(), "approve", by=ADA, paths=["rules.md"])
    assert after.state == "waiting"
    assert effect is Effect.APPLY
    assert files == {"rules.md": b"v2"}
    assert set(after.files) == {"new.md", "old.md"}
    done, _, rest = decide(after, "reject", by=ADA)
    assert done.state == "rejected"
    assert set(rest) == {"new.md", "old.md"}


def test_edit_then_approve_applies_the_reviewers_content() -> None:
    after, effect, files = decide(
        waiting(), "edit", by=ADA, paths=["rules.md"], edits={"rules.md": b"v2, fixed"}
    )
    assert effect is Effect.APPLY
    assert files == {"rules.md": b"v2, fixed"}
    assert after.reviews[0].action == "edit"


def test_reject_applies_nothing_and_rejecting_a_live_change_reverts_it() -> None:
    after, effect, _ = decide(waiting(), "reject", by=ADA)
    assert (after.state, effect) == ("rejected", Effect.NONE)
    after, effect, files = decide(waiting("after"), "reject", by=ADA)
    assert (after.state, effect) == ("rejected", Effect.REVERT)
    assert files == {"new.md": None, "rules.md": None, "old.md": None}


def test_approving_a_live_change_only_marks_it_reviewed() -> None:
    after, effect, _ = decide(waiting("after"), "approve", by=ADA)
    assert (after.state, effect) == ("approved", Effect.NONE)


@pytest.mark.parametrize("state", ["approved", "rejected"])
@pytest.mark.parametrize("action", ["approve", "edit", "reject"])
def test_a_decided_change_cannot_be_decided_again(state: str, action: str) -> None:
    decided = waiting().model_copy(update={"state": state})
    with pytest.raises(IllegalTransition):
        decide(decided, action, by=ADA)  # type: ignore[arg-type]
    with pytest.raises(IllegalTransition):
        update(
            decided,
            ChangeSet(created={"x": b""}),
            snapshot={},
            loaded=20,
            edited=21,
            provenance=turn(2),
        )


def test_every_move_out_of_the_table_is_illegal() -> None:
    states = ("waiting", "live", "approved", "rejected")
    actions = ("update", "approve", "edit", "reject")
    legal = {(s, a) for s in states for a in actions if (s, a) in TRANSITIONS}
    assert legal == {(s, a) for s in ("waiting", "live") for a in actions}


def test_deciding_unknown_files_or_editing_outside_them_is_refused() -> None:
    with pytest.raises(NotFound):
        decide(waiting(), "approve", by=ADA, paths=["nope.md"])
    with pytest.raises(NotFound):
        decide(waiting(), "edit", by=ADA, paths=["rules.md"], edits={"new.md": b"x"})
    with pytest.raises(IllegalTransition):
        decide(waiting(), "approve", by=ADA, edits={"rules.md": b"x"})


def test_change_set_against_live_files() -> None:
    changes = waiting().change_set(live={"rules.md", "old.md"})
    assert changes == ChangeSet(
        created={"new.md": b"new"}, updated={"rules.md": b"v2"}, deleted=("old.md",)
    )


def test_a_live_file_written_again_by_its_conversation_is_not_stale() -> None:
    first = waiting("after")
    again = update(
        first,
        ChangeSet(updated={"rules.md": b"v3"}),
        snapshot={"rules.md": "r12"},
        loaded=12,
        edited=13,
        provenance=turn(2),
    )
    assert again.files["rules.md"].base == "r1"  # a reject still puts back what it replaced
    assert again.files["rules.md"].loaded == 12
    assert not mark_stale(again, {"rules.md": 12}, []).stale_paths


def test_applying_a_stale_file_is_a_conflict_naming_it_unless_forced() -> None:
    change = mark_stale(waiting(), {"rules.md": 11}, [])  # the live file moved on at 11
    assert change.stale_paths == ("rules.md",)
    for action in ("approve", "edit"):
        edits = {"rules.md": b"merged"} if action == "edit" else None
        with pytest.raises(Conflict, match=r"rules\.md") as caught:
            decide(change, action, by=ADA, paths=["rules.md"], edits=edits)
        assert caught.value.paths == ("rules.md",)
    # Files that are not stale, a reject, or force: no conflict.
    decide(change, "approve", by=ADA, paths=["new.md"])
    decide(change, "reject", by=ADA)
    after, effect, files = decide(change, "approve", by=ADA, force=True)
    assert (after.state, effect, files["rules.md"]) == ("approved", Effect.APPLY, b"v2")
    # A live change (review after) approved changes nothing, so staleness does not matter.
    live = mark_stale(waiting("after"), {"rules.md": 13}, [])
    assert live.stale_paths == ("rules.md",)
    assert decide(live, "approve", by=ADA)[1] is Effect.NONE


def test_applied_files_obey_the_limits_against_the_live_sizes() -> None:
    change = waiting()
    live = {"rules.md": 2, "old.md": 3}
    tight = Limits(max_file_bytes=5, max_files=2, max_space_bytes=10)
    decide(change, "approve", by=ADA, live_sizes=live, limits=tight)  # new.md 3 + rules.md 2
    with pytest.raises(TooLarge):
        decide(
            change,
            "edit",
            by=ADA,
            paths=["new.md"],
            edits={"new.md": b"123456"},
            live_sizes=live,
            limits=tight,
        )
    with pytest.raises(SpaceFull):
        decide(
            change, "approve", by=ADA, paths=["new.md"], live_sizes=live, limits=Limits(max_files=2)
        )
    with pytest.raises(SpaceFull):
        decide(change, "approve", by=ADA, live_sizes=live, limits=Limits(max_space_bytes=4))
    # Without live sizes (a pure caller), no limits are checked.
    decide(change, "edit", by=ADA, paths=["new.md"], edits={"new.md": b"123456"}, limits=tight)


def test_a_change_carries_modes_and_folders_and_a_later_turn_replaces_them() -> None:
    meta = FileMeta(mode=0o755)
    change = open_change(
        "c1",
        RULES,
        mode="person",
        changes=ChangeSet(
            created={"run.sh": b"x"}, meta={"run.sh": meta}, folders_created=("a", "b")
        ),
        snapshot={},
        loaded=1,
        edited=2,
        provenance=turn(1),
    )
    assert change.files["run.sh"].meta == meta
    later = update(
        change,
        ChangeSet(folders_deleted=("a",)),
        snapshot={},
        loaded=2,
        edited=3,
        provenance=turn(2),
    )
    assert later.folders == {"a": False, "b": True}
    again = later.change_set(live=())
    assert again.meta == {"run.sh": meta}
    assert (again.folders_created, again.folders_deleted) == (("b",), ("a",))


def test_approving_a_folder_by_its_path_leaves_the_rest_waiting() -> None:
    change = open_change(
        "c1",
        RULES,
        mode="person",
        changes=ChangeSet(created={"a.md": b"a"}, folders_created=("empty",)),
        snapshot={},
        loaded=1,
        edited=2,
        provenance=turn(1),
    )
    after, effect, files = decide(change, "approve", by=ADA, paths=["empty"])
    assert (effect, files) == (Effect.APPLY, {})
    assert decided_folders(change, effect, ["empty"]) == {"empty": True}
    assert after.state == "waiting" and after.folders == {} and set(after.files) == {"a.md"}
    done, _, _ = decide(after, "approve", by=ADA)
    assert done.state == "approved"


def test_rejecting_a_live_change_undoes_its_folders() -> None:
    change = open_change(
        "c1",
        RULES,
        mode="after",
        changes=ChangeSet(folders_created=("made",), folders_deleted=("gone",)),
        snapshot={},
        loaded=1,
        edited=2,
        provenance=turn(1),
    )
    _, effect, _ = decide(change, "reject", by=ADA)
    assert decided_folders(change, effect) == {"made": False, "gone": True}


# -- one owner per rule: joining, laying over, deletions, conversations, modes --


def test_a_waiting_and_a_live_change_of_one_conversation_never_join() -> None:
    person = waiting("person")
    after = waiting("after").model_copy(update={"id": "c2"})
    other = person.model_copy(update={"id": "c3", "session": "s2"})
    elsewhere = person.model_copy(update={"id": "c4", "ref": RULES.model_copy(update={"org": "b"})})
    decided = person.model_copy(update={"id": "c5", "state": "approved"})
    changes = [decided, person, after, other, elsewhere]
    assert joins(changes, RULES, "s1", "person") is person
    assert joins(changes, RULES, "s1", "after") is after
    assert joins(changes, RULES, "s1", "none") is after  # none is live too, if listed at all
    assert joins([decided, after], RULES, "s1", "person") is None
    assert joins(changes, RULES, "s9", "person") is None
    assert open_state("person") == "waiting" and open_state("after") == "live"


def test_a_conversations_load_sees_its_waiting_change_with_one_made_up_revision_name() -> None:
    live = Loaded(
        files={"rules.md": b"v1", "old.md": b"o", "keep.md": b"k"},
        cursor="10",
        revisions={"rules.md": "r1", "old.md": "r2", "keep.md": "r3"},
        shas={"rules.md": "sha-r1", "old.md": "sha-r2", "keep.md": "sha-r3"},
        meta={"rules.md": FileMeta(mode=0o755, mtime_ns=1)},
        folders=("kept",),
    )
    change = waiting().model_copy(update={"folders": {"made": True, "kept": False}})
    seen = lay_over(live, change)
    assert seen.files == {"rules.md": b"v2", "new.md": b"new", "keep.md": b"k"}
    assert seen.revisions == {
        "rules.md": own_revision(change, "rules.md"),
        "new.md": own_revision(change, "new.md"),
        "keep.md": "r3",
    }
    assert own_revision(change, "rules.md") == "cc1.12"
    assert seen.shas == {"keep.md": "sha-r3"}  # the laid-over bytes are not the live ones
    assert seen.meta["rules.md"].mode == 0o755  # the turn named no mode: the live one stays
    assert seen.meta["new.md"].mtime_ns == int(change.provenance.at.timestamp() * 1e9)
    assert seen.folders == ("made",)
    assert seen.cursor == "10"
    # No waiting change, or one that is live already: the live files as they are.
    assert lay_over(live, None) is live
    assert lay_over(live, waiting("after")) is live


def test_a_lean_load_keeps_a_size_for_every_path_laid_over() -> None:
    lean = Loaded(
        files={},
        revisions={"rules.md": "r1", "old.md": "r2"},
        shas={"rules.md": "sha-r1", "old.md": "sha-r2"},
        sizes={"rules.md": 2, "old.md": 1},
    )
    seen = lay_over(lean, waiting())
    assert seen.sizes == {"rules.md": 2, "new.md": 3}
    assert seen.files == {"rules.md": b"v2", "new.md": b"new"}
    assert sorted(seen.paths()) == ["new.md", "rules.md"]


def test_a_deletion_must_name_a_file_the_conversation_sees() -> None:
    require_deletable(["a.md"], {"a.md", "b.md"})
    require_deletable([], set())
    with pytest.raises(InvalidName) as refused:
        require_deletable(["a.md", "nope.md", "also-not.md"], {"a.md"})
    assert refused.value.path == "nope.md"
    own = waiting()  # writes new.md and rules.md, deletes old.md
    require_deletable(["new.md", "rules.md"], set(), own)
    with pytest.raises(InvalidName) as again:
        require_deletable(["old.md"], {"old.md"}, own)
    assert again.value.path == "old.md"
    # A live (review after) change is already in the live files: they alone decide.
    require_deletable(["old.md"], {"old.md"}, waiting("after"))


def test_a_listed_change_needs_a_conversation_and_an_unlisted_one_does_not() -> None:
    nobody = Provenance(origin="code")
    for mode in ("person", "after"):
        with pytest.raises(NotFound, match="conversation"):
            conversation_of("org", mode, nobody)
        with pytest.raises(NotFound):
            conversation_of("org", mode, nobody.model_copy(update={"session": ""}))
        assert conversation_of("org", mode, turn(1)) == "s1"
    assert conversation_of("org", "none", nobody) is None
    assert conversation_of("user", "person", nobody) is None
    with pytest.raises(NotFound):
        open_change(
            "c1",
            RULES,
            mode="person",
            changes=ChangeSet(created={"a.md": b"a"}),
            snapshot={},
            loaded=0,
            edited=1,
            provenance=nobody,
        )


def test_an_unknown_review_mode_is_a_config_error_wherever_it_is_named() -> None:
    assert [check_mode(mode) for mode in ("person", "after", "none")] == ["person", "after", "none"]
    for bad in ("Person", "sometimes", ""):
        with pytest.raises(ConfigError):
            check_mode(bad)
        with pytest.raises(ConfigError):
            effective_mode("none", bad)  # checked even where the space's setting wins
    assert effective_mode(None, "after") == "after"
    assert effective_mode("person", "none") == "person"


def test_each_file_of_a_change_keeps_the_turn_that_taught_it() -> None:
    first = open_change(
        "c1",
        RULES,
        mode="person",
        changes=ChangeSet(created={"a.md": b"a", "c.md": b"c1", "gone.md": b"g"}),
        snapshot={},
        loaded=1,
        edited=2,
        provenance=turn(1, "prompt A"),
    )
    second = update(
        first,
        ChangeSet(created={"b.md": b"b"}, updated={"c.md": b"c2"}),
        snapshot={},
        loaded=2,
        edited=3,
        provenance=turn(2, "prompt B"),
    )
    assert {path: taught(second, path).prompt for path in second.files} == {
        "a.md": "prompt A",
        "gone.md": "prompt A",
        "b.md": "prompt B",
        "c.md": "prompt B",
    }
    assert second.provenance.prompt == "prompt B"  # the change's latest turn, as before
    approved = applied_provenance(second, "a.md", "approve")
    assert (approved.turn, approved.prompt, approved.origin) == ("t1", "prompt A", "conversation")
    edited = applied_provenance(second, "b.md", "edit")
    assert (edited.turn, edited.prompt, edited.origin) == ("t2", "prompt B", "edited")
    # A turn no file comes from any more is not kept.
    third = update(
        second,
        ChangeSet(updated={"a.md": b"a3", "gone.md": b"g3"}),
        snapshot={},
        loaded=3,
        edited=4,
        provenance=turn(3, "prompt C"),
    )
    assert set(third.turns) == {"t2", "t3"}
    # A change kept before turns were recorded answers its latest turn's provenance.
    old = second.model_copy(update={"turns": {}})
    assert taught(old, "a.md") == second.provenance
    assert WaitingChange.model_validate_json(second.model_dump_json()) == second


def test_words_have_an_author_only_where_there_are_words_a_prompt_or_a_label() -> None:
    dana = By(id="dana", label="Dana", role="member")
    assert Provenance(prompt="remember this", person="dana").words_author == "dana"
    assert Provenance(by=dana).words_author == "dana"  # the label is hers
    assert Provenance(person="dana").words_author is None  # nothing typed, no label
    assert Provenance(by=dana.model_copy(update={"label": None})).words_author is None
    assert Provenance(prompt="no one's").words_author is None  # typed by no one named


def test_a_changes_version_names_what_a_reviewer_is_shown_and_moves_with_it() -> None:
    change = waiting()
    assert waiting().version == change.version  # the same files, the same name
    marked = mark_stale(change, {"rules.md": 11}, [])
    assert marked.stale_paths == ("rules.md",) and marked.version == change.version
    later = update(
        change,
        ChangeSet(updated={"rules.md": b"v3"}),
        snapshot={"rules.md": "w1"},
        loaded=13,
        edited=14,
        provenance=turn(2),
    )
    assert later.version != change.version
    moded = change.model_copy(
        update={
            "files": {
                **change.files,
                "new.md": change.files["new.md"].model_copy(update={"meta": FileMeta(mode=0o600)}),
            }
        }
    )
    assert moded.version != change.version
    folder = change.model_copy(update={"folders": {"docs": True}})
    assert folder.version != change.version


def test_a_decision_on_a_version_not_shown_is_a_conflict_and_changes_nothing() -> None:
    change = waiting()
    later = update(
        change,
        ChangeSet(updated={"rules.md": b"v3"}),
        snapshot={"rules.md": "w1"},
        loaded=13,
        edited=14,
        provenance=turn(2),
    )
    for action in ("approve", "reject", "edit"):
        with pytest.raises(Conflict, match="changed since it was shown"):
            decide(later, action, by=ADA, version=change.version)
    after, effect, _ = decide(later, "approve", by=ADA, version=later.version)
    assert (after.state, effect) == ("approved", Effect.APPLY)


def test_a_forced_move_over_a_live_file_changed_since_it_was_shown_is_a_conflict() -> None:
    shown = mark_stale(waiting(), {"rules.md": 11, "old.md": 3}, [])  # rules.md stale, at 11
    assert shown.live_version == "11"
    later = mark_stale(shown, {"rules.md": 20, "old.md": 3}, [])  # written again, unseen
    assert later.version == shown.version and later.live_version == "20"
    for action, edits in (("approve", None), ("edit", {"rules.md": b"mine"})):
        with pytest.raises(Conflict, match="changed live since") as refused:
            decide(
                later,
                action,  # type: ignore[arg-type]
                by=ADA,
                paths=["rules.md"],
                edits=edits,
                force=True,
                live_version=shown.live_version,
            )
        assert refused.value.paths == ("rules.md",)
    # Files whose live file did not move since go through; so does a look again.
    _, effect, files = decide(
        later, "approve", by=ADA, paths=["new.md", "old.md"], live_version="11"
    )
    assert effect is Effect.APPLY and files == {"new.md": b"new", "old.md": None}
    _, _, files = decide(later, "approve", by=ADA, force=True, live_version=later.live_version)
    assert files["rules.md"] == b"v2"
    # Rejecting applies nothing: no live file to go over.
    decide(later, "reject", by=ADA, live_version=shown.live_version)
    # As many digits as the limit allows: read, and nothing moved since that point.
    _, effect, _ = decide(
        later, "approve", by=ADA, force=True, live_version="9" * MAX_LIVE_VERSION_DIGITS
    )
    assert effect is Effect.APPLY
    for bad in ("", "-1", "+1", "1_0", "\u0661", "9" * (MAX_LIVE_VERSION_DIGITS + 1), "latest"):
        with pytest.raises(BadRequest):
            decide(later, "reject", by=ADA, paths=["new.md"], live_version=bad)


def test_rejecting_a_live_change_puts_back_no_file_written_since() -> None:
    live = waiting("after")
    marked = mark_stale(live, {"rules.md": 20}, [])  # someone wrote rules.md after it
    after, effect, files = decide(marked, "reject", by=ADA)
    assert (after.state, effect) == ("rejected", Effect.REVERT)
    assert files == {"new.md": None, "old.md": None}


def test_a_turn_that_never_saw_its_conversations_edit_of_a_file_would_replace_it_unseen() -> None:
    change = waiting()  # rules.md edited at 12, over a snapshot at 10
    later = ChangeSet(updated={"rules.md": b"v3"}, created={"more.md": b"m"})
    assert unseen_edits(change, later, loaded=11) == ("rules.md",)  # held, committed late
    assert unseen_edits(change, later, loaded=12) == ()  # loaded the change: saw it
    assert unseen_edits(None, later, loaded=0) == ()
    assert unseen_edits(waiting("after"), later, loaded=11) == ()  # live: nothing to replace
