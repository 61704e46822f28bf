"""Review ``person`` and ``after`` through whole turns: nothing goes live but as a reviewer saw it.

Each test pins a promise of docs/people.md and memfs/core/review.py that a
hostile review found broken (over the memory and SQLite stores, through
whole copy-mode turns and ``memfs.act_as``, the doors the CLI and the Memory
tab share).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import memfs
from memfs.stores.base import ReviewingStore
from tests.test_acting import managed

__all__ = ["managed"]  # the fixture, shared with test_acting

BANK = {"bankId": "bank_17"}


def rules(store: memfs.Store, tmp_path: Path, **spec: object) -> memfs.Memory:
    return memfs.Memory(
        store,
        [memfs.org_memory(space="rules", org="bankId", **spec)],  # type: ignore[arg-type]
        workdir=tmp_path / "work",
    )


async def write_turn(
    memory: memfs.Memory, session: str, text: str, *, sees: str | None = None
) -> memfs.CommitResult:
    turn = await memory.start_turn(session, BANK, prompt=f"write {text!r}")
    if sees is not None:
        assert (turn.root / "rules/f.md").read_text() == sees
    (turn.root / "rules/f.md").write_text(text)
    return await turn.end()


async def test_a_manual_turn_committed_after_a_later_turn_never_replaces_its_edit(
    managed: ReviewingStore, tmp_path: Path
) -> None:
    # Turn 1 (commit manual) is built on v0; turn 2 of the same conversation,
    # which never saw turn 1's file (it waited for its commit), is committed
    # first. Turn 1's commit then replaced turn 2's file in the waiting change
    # unmarked, and an unforced approval made it live: turn 2's write, which
    # its agent saw succeed, was gone unseen. Now it is a conflict, as over a
    # space without review, and turn 2's file waits as it was.
    ada = memfs.act_as(managed, "ada", "member", org="bank_17")
    await ada.put("rules", "f.md", b"v0\n")
    memory = rules(managed, tmp_path, commit="manual")
    first = await write_turn(memory, "s1", "turn 1\n", sees="v0\n")
    second = await write_turn(memory, "s1", "turn 2\n", sees="v0\n")
    await second.commit_manual()
    late = await first.commit_manual()
    assert late.spaces["rules"].status != "waiting"
    assert late.spaces["rules"].conflicts == ("f.md",)
    [change] = await ada.waiting()
    assert change.files["f.md"].content == b"turn 2\n"
    await ada.approve(change.id)
    assert await ada.files("rules") == {"f.md": b"turn 2\n"}


async def test_a_manual_turn_committed_after_a_later_turn_over_a_newer_live_file_conflicts(
    managed: ReviewingStore, tmp_path: Path
) -> None:
    # As above, with bob's v1 live in between: turn 1 (built on v0) neither
    # replaces turn 2's file (built on v1) nor goes live over bob's v1.
    ada = memfs.act_as(managed, "ada", "member", org="bank_17")
    await ada.put("rules", "f.md", b"v0\n")
    memory = rules(managed, tmp_path, commit="manual")
    first = await write_turn(memory, "s1", "built on v0\n", sees="v0\n")
    await memfs.act_as(managed, "bob", "member", org="bank_17").put("rules", "f.md", b"v1\n")
    second = await write_turn(memory, "s1", "built on v1\n", sees="v1\n")
    await second.commit_manual()
    late = await first.commit_manual()
    assert late.spaces["rules"].conflicts == ("f.md",)
    [change] = await ada.waiting()
    assert change.files["f.md"].content == b"built on v1\n"
    assert change.stale_paths == ()
    assert await ada.files("rules") == {"f.md": b"v1\n"}


async def test_rejecting_a_review_after_change_never_undoes_a_later_approved_write(
    managed: ReviewingStore, tmp_path: Path
) -> None:
    # Under review `after`, conversation a writes A over v0, then b writes B
    # over A (both live). Rejecting a's change puts back v0 (its base) over
    # b's B, without force though the file is stale; approving b's change
    # then leaves v0 live: the reviewer approved B and B is not what is live.
    admin = memfs.act_as(managed, "root", "admin", org="bank_17")
    await admin.put("rules", "f.md", b"v0\n")
    await admin.set_review("rules", "after")
    memory = rules(managed, tmp_path)
    await write_turn(memory, "a", "A\n", sees="v0\n")
    await write_turn(memory, "b", "B\n", sees="A\n")
    first, second = await admin.waiting()
    with contextlib.suppress(memfs.Conflict):  # refusing the stale reject would hold too
        await admin.reject(first.id)
    await admin.approve(second.id)
    assert await admin.files("rules") == {"f.md": b"B\n"}


async def test_a_review_after_change_is_not_stale_over_its_own_live_write(
    managed: ReviewingStore, tmp_path: Path
) -> None:
    # The SQLite store loads an `after` change at its own write; the memory
    # store kept the turn's cursor, so the change's own revision marked it
    # stale and a reviewer's edit needed force there only.
    admin = memfs.act_as(managed, "root", "admin", org="bank_17")
    await admin.set_review("rules", "after")
    await write_turn(rules(managed, tmp_path), "a", "A\n")
    [change] = await admin.waiting()
    assert change.stale_paths == ()
    await admin.edit(change.id, {"f.md": b"A, edited\n"})
    assert await admin.files("rules") == {"f.md": b"A, edited\n"}


async def test_a_code_change_the_repository_took_back_is_no_longer_proposed(
    managed: ReviewingStore, tmp_path: Path
) -> None:
    # The seed says v1 (version 1), then v2 ("Changed in code" waits), then v1
    # again. The code now proposes nothing, yet the waiting change still
    # offers v2, and approving "Changed in code" makes live what neither the
    # code nor any person says.
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "f.md").write_text("v1\n")
    memory = memfs.Memory(
        managed,
        [memfs.org_memory(space="rules", org="bankId", seed=seed)],
        workdir=tmp_path / "work",
        seed_record=tmp_path / "seeds.json",
    )
    await memory.start_turn("s1", BANK)
    await memory.end_turn("s1")
    ada = memfs.act_as(managed, "ada", "member", org="bank_17")
    assert await ada.files("rules") == {"f.md": b"v1\n"}
    (seed / "f.md").write_text("v2\n")
    await memory.refresh_seeds()
    [proposed] = await ada.waiting()
    assert proposed.files["f.md"].content == b"v2\n"
    (seed / "f.md").write_text("v1\n")
    await memory.refresh_seeds()
    for change in await ada.waiting():
        await ada.approve(change.id)
    assert await ada.files("rules") == {"f.md": b"v1\n"}


async def test_a_decision_naming_the_version_shown_never_applies_what_was_not_shown(
    managed: ReviewingStore, tmp_path: Path
) -> None:
    # A reviewer reads the change (GET /api/v1/review/{id}, `memfs review show`,
    # the Review page), the conversation's next turn rewrites the file in it,
    # then the reviewer decides: naming the version they were shown, the move
    # is a Conflict and nothing changes; the page always names it.
    memory = rules(managed, tmp_path)
    ada = memfs.act_as(managed, "ada", "member", org="bank_17")
    await write_turn(memory, "s1", "what ada reads\n")
    [shown] = await ada.waiting()
    await write_turn(memory, "s1", "never shown to ada\n", sees="what ada reads\n")
    decisions: list[Callable[[], Awaitable[object]]] = [
        lambda: ada.approve(shown.id, version=shown.version),
        lambda: ada.reject(shown.id, version=shown.version),
        lambda: ada.edit(shown.id, {"f.md": b"mine\n"}, version=shown.version),
    ]
    for decide in decisions:
        with pytest.raises(memfs.Conflict):
            await decide()
    assert await ada.files("rules") == {}
    [now] = await ada.waiting()
    assert now.state == "waiting" and now.version != shown.version
    await ada.approve(now.id, version=now.version)
    assert await ada.files("rules") == {"f.md": b"never shown to ada\n"}
