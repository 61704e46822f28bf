"""Seeds: what a change to the seed folder proposes, against what is live."""

from __future__ import annotations

from memfs.core.models import ChangeSet
from memfs.core.seeds import code_change, manifest

V1 = {"income.md": b"two years\n", "scores.md": b"min 600\n", "old.md": b"old\n"}


def test_an_unchanged_seed_proposes_nothing_even_where_people_edited_since() -> None:
    live = {**V1, "scores.md": b"min 620 (approved edit)\n"}
    assert code_change(manifest(V1), V1, live).is_empty()


def test_a_file_changed_in_code_is_proposed_against_the_live_files() -> None:
    seed = {**V1, "income.md": b"three years\n", "new.md": b"new\n"}
    seed.pop("old.md")
    live = {**V1, "scores.md": b"min 620 (approved edit)\n"}
    assert code_change(manifest(V1), seed, live) == ChangeSet(
        created={"new.md": b"new\n"}, updated={"income.md": b"three years\n"}, deleted=("old.md",)
    )


def test_a_change_the_live_files_already_have_is_not_proposed() -> None:
    seed = {**V1, "income.md": b"three years\n"}
    live = {**V1, "income.md": b"three years\n"}
    assert code_change(manifest(V1), seed, live).is_empty()


def test_a_file_dropped_from_the_seed_and_already_forgotten_is_not_proposed() -> None:
    seed = {k: v for k, v in V1.items() if k != "old.md"}
    live = {k: v for k, v in V1.items() if k != "old.md"}
    assert code_change(manifest(V1), seed, live).is_empty()
