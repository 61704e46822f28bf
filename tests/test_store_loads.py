"""What a managed store's load carries besides the files: the space's own review setting.

A turn start needs an org space's files and its review setting (the note
tells the agent whether its change waits for review). The SQL stores read
both in one transaction, so a turn start asks the store once, not twice.
"""

from __future__ import annotations

from pathlib import Path

import memfs
from memfs.core.models import ChangeSet, Provenance, ReviewSetting, SpaceRef
from memfs.core.review import ReviewMode
from memfs.stores.sqlite import SqliteStore
from tests.postgres_fixtures import SqlOpener

RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")
DANA_SPACE = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17"}

Opener = SqlOpener


async def test_a_load_of_an_org_space_carries_its_own_review_setting_or_none(
    sql_opener: Opener,
) -> None:
    store = sql_opener()
    try:
        # No row for the space yet, then files but no setting, then a setting.
        assert (await store.load(RULES, "s1")).review == ReviewSetting(mode=None)
        await store.put(RULES, ChangeSet(created={"a.md": b"a"}), provenance=Provenance())
        assert (await store.load_lean(RULES, "s1", set())).review == ReviewSetting(mode=None)
        await store.set_review(RULES, "after", by=None)
        assert (await store.load(RULES, "s1")).review == ReviewSetting(mode="after")
        assert (await store.load_lean(RULES, "s1", set())).review == ReviewSetting(mode="after")
        # A person's memory has no review: nothing is read for it.
        await store.put(DANA_SPACE, ChangeSet(created={"p.md": b"p"}), provenance=Provenance())
        assert (await store.load(DANA_SPACE, "s1")).review is None
    finally:
        await store.aclose()


class CountingStore(SqliteStore):
    """Counts the review-setting reads a turn makes on their own."""

    asked = 0

    async def review_mode(self, ref: SpaceRef) -> ReviewMode | None:
        self.asked += 1
        return await super().review_mode(ref)


async def test_a_turn_start_takes_the_review_setting_from_its_load_not_a_second_call(
    tmp_path: Path,
) -> None:
    store = CountingStore(tmp_path / "memfs.db")
    try:
        await store.set_review(RULES, "after", by=None)  # a person's choice wins over the spec's
        memory = memfs.Memory(
            store,
            [memfs.org_memory(space="lending-rules", org="bankId", review="person")],
            workdir=tmp_path / "w",
        )
        turn = await memory.start_turn("s1", DANA)
        try:
            assert turn.mounts["lending-rules"].review == "after"
        finally:
            await turn.end()
        assert store.asked == 0
    finally:
        await store.aclose()
