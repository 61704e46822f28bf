"""Whose words org memory keeps: the prompt and label of whoever taught it, sealed under their key.

Org memory is the org's and stays when a person is forgotten; the words
that taught it (``Provenance.author``: the turn's person, else ``by``) are
the person's, and go with them: in revisions and in changes waiting for review.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.core.models import By, ChangeSet, Provenance, SpaceRef, Trace
from memfs.stores.memory import MemoryStore
from memfs.stores.sql.store import SqlStore
from tests.postgres_fixtures import open_sql

RULES = SpaceRef(layer="org", space="rules", org="bank-1")
DANA = By(id="dana", label="Dana Quokka", role="underwriter")

Opener = Callable[[], MemoryStore | SqlStore]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def sql_opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Every managed store: the memory store keeps no key, but forgets the same words."""
    if request.param == "memory":
        store = MemoryStore()
        return lambda: store
    return open_sql(request.param, request, tmp_path)


def said(session: str, *, person: str | None = None) -> Provenance:
    return Provenance(
        session=session, turn="t1", prompt=f"words of {session}", by=DANA, person=person
    )


async def test_forgetting_the_author_leaves_org_memory_without_their_words(
    sql_opener: Opener,
) -> None:
    store = sql_opener()
    try:
        loaded = await store.load(RULES, "s1")
        await store.store(
            RULES, ChangeSet(created={"a.md": b"org"}), cursor=loaded.cursor, provenance=said("s1")
        )
        [before] = await store.history(RULES, "a.md")
        assert before.provenance.prompt == "words of s1" and before.provenance.by == DANA

        await store.forget_user("dana", "bank-1", by=None)

        assert await store.files(RULES) == {"a.md": b"org"}  # the org's memory stays
        [after] = await store.history(RULES, "a.md")
        assert after.provenance.prompt is None
        assert after.provenance.by == By(id="dana", label=None, role="underwriter")
        assert after.id == before.id
    finally:
        await store.aclose()


async def test_a_waiting_change_keeps_its_authors_words_until_they_are_forgotten(
    sql_opener: Opener,
) -> None:
    store = sql_opener()
    try:
        await store.set_review(RULES, "person", by=None)
        loaded = await store.load(RULES, "s1")
        held = await store.store(
            RULES,
            ChangeSet(created={"a.md": b"proposal"}),
            cursor=loaded.cursor,
            provenance=said("s1", person="dana"),
            review="person",
        )
        assert held.status == "waiting" and held.change is not None
        change = await store.get_change(held.change)
        assert change.provenance.prompt == "words of s1"
        assert change.provenance.by == DANA

        await store.forget_user("dana", "bank-1", by=None)

        [waiting] = await store.list_changes()
        assert waiting.files["a.md"].content == b"proposal"  # the org's to decide on
        assert waiting.provenance.prompt is None and waiting.provenance.by is not None
        assert waiting.provenance.by.label is None
        approved = await store.decide(held.change, "approve", by=By(id="ada", role="admin"))
        assert approved.state == "approved"
        [revision] = await store.history(RULES, "a.md")
        assert revision.provenance.prompt is None
    finally:
        await store.aclose()


async def test_words_of_nobody_in_particular_stay_in_the_clear(sql_opener: Opener) -> None:
    # Code's seed and an unnamed edit have no author: nothing to seal them under.
    store = sql_opener()
    try:
        await store.put(
            RULES,
            ChangeSet(created={"a.md": b"seed"}),
            provenance=Provenance(origin="code", prompt="Version 1, from code"),
        )
        [revision] = await store.history(RULES, "a.md")
        assert revision.provenance.prompt == "Version 1, from code"
    finally:
        await store.aclose()


async def test_an_author_forgotten_and_back_leaves_what_they_taught_readable_without_words(
    sql_opener: Opener,
) -> None:
    # Back after the forget, they get a new key; the words sealed under the
    # old one must read as gone, not as a seal that does not open.
    store = sql_opener()
    me = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
    try:
        loaded = await store.load(RULES, "s1")
        await store.store(
            RULES, ChangeSet(created={"a.md": b"org"}), cursor=loaded.cursor, provenance=said("s1")
        )
        await store.set_review(RULES, "person", by=None)
        loaded = await store.load(RULES, "s2")
        waiting = await store.store(
            RULES,
            ChangeSet(created={"b.md": b"proposal"}),
            cursor=loaded.cursor,
            provenance=said("s2", person="dana"),
            review="person",
        )
        await store.forget_user("dana", "bank-1", by=None)
        await store.put(me, ChangeSet(created={"again.md": b"x"}), provenance=said("s3"))

        [revision] = await store.history(RULES, "a.md")
        assert revision.provenance.prompt is None and revision.provenance.by is not None
        assert revision.provenance.by.label is None
        [change] = await store.list_changes()
        assert change.id == waiting.change and change.provenance.prompt is None
    finally:
        await store.aclose()


async def test_a_turn_she_starts_after_her_forget_keeps_her_words_over_org_memory_unchanged_since(
    sql_opener: Opener,
) -> None:
    # The rules last changed before Dana was forgotten; she is back, and a
    # new turn of hers loads them after the forget and teaches them a rule.
    # Her words were typed after the forget: the store and the trace keep them.
    from memfs.core.models import Trace, TraceMount

    store = sql_opener()
    try:
        loaded = await store.load(RULES, "s1")
        await store.store(
            RULES,
            ChangeSet(created={"a.md": b"org"}),
            cursor=loaded.cursor,
            provenance=Provenance(session="s1", turn="t1"),
        )
        await store.forget_user("dana", "bank-1", by=None)

        again = await store.load(RULES, "s2")  # after the forget
        stored = await store.store(
            RULES, ChangeSet(created={"b.md": b"new"}), cursor=again.cursor, provenance=said("s2")
        )
        assert stored.status == "saved"
        [revision] = await store.history(RULES, "b.md")
        assert revision.provenance.prompt == "words of s2"
        assert revision.provenance.by == DANA

        mount = TraceMount(
            ref=RULES,
            read_only=False,
            from_last_known_copy=False,
            snapshot={},
            status="saved",
            cursor=again.cursor,
        )
        await store.record_trace(
            Trace(
                session="s3",
                turn="t1",
                prompt="words of s3",
                mounts={"rules": mount},
                files={},
                author="dana",
            )
        )
        [trace] = await store.traces(session="s3")
        assert trace.prompt == "words of s3" and trace.author == "dana"
    finally:
        await store.aclose()


def test_a_provenances_and_a_traces_words_since_are_never_in_their_dumps() -> None:
    # The mark is a request's, for the store to judge by: a revision's
    # history (memfs history prints it) or a held change set on disk never
    # shows it.
    provenance = Provenance(session="s1", turn="t1", words_since="5")
    assert provenance.words_since == "5"
    assert "words_since" not in provenance.model_dump()
    assert "words_since" not in provenance.model_dump_json()
    trace = Trace(session="s1", turn="t1", prompt=None, mounts={}, files={}, words_since="5")
    assert "words_since" not in trace.model_dump_json()
