"""The store conformance suite: every check of the store contract, by name.

``check_store(make_store)`` runs every check that applies to a backend, like
``trio.testing.check_one_way_stream``; each check gets a fresh store from
``make_store``, and ``run_check`` runs one by name (the conformance id a test
can be parametrized over). Stores that forget people (``PersonForgetting``:
the managed stores and the folder store), managed stores and reviewing stores
get their own checks on top of the common ones.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Literal

from memfs.core.audit import GENESIS, UNKNOWN_CURSOR, canonical, entry_hash
from memfs.core.errors import (
    BadRequest,
    ConfigError,
    Conflict,
    Forgotten,
    IllegalTransition,
    InvalidName,
    NotFound,
    SpaceFull,
    TooLarge,
)
from memfs.core.members import Member, looks_like_token, token_hash
from memfs.core.models import (
    MAX_TIME_NS,
    MIB,
    By,
    ChangeSet,
    FileMeta,
    Forgetting,
    Forgot,
    Limits,
    LiveOrigin,
    Provenance,
    SpaceRef,
    Stored,
    Trace,
    TraceFile,
    TraceMount,
    digest,
    now,
)
from memfs.stores.base import (
    ForgetLog,
    GroupCommitStore,
    ManagedStore,
    PersonForgetting,
    ReviewingStore,
    Store,
    StoreRequest,
)
from memfs.stores.managed import MAX_ROW_ID

MakeStore = Callable[[], Store | Awaitable[Store]]
Check = Callable[[Store], Awaitable[None]]

ORG = SpaceRef(layer="org", space="lending-rules", org="bank-1")
OTHER_ORG = SpaceRef(layer="org", space="lending-rules", org="bank-2")
DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
CAROL = SpaceRef(layer="user", space="me", org="bank-1", user="carol")
NOTES = SpaceRef(layer="dir", space="notes", org="bank-1")
ADA = By(id="ada", label="Ada", role="admin")
BINARY = bytes(range(256)) * 3
UNICODE_PATH = "notes/émoji-🙂/über straße.md"


def _prov(session: str = "s1", turn: str = "t1", prompt: str = "remember this") -> Provenance:
    return Provenance(
        session=session,
        turn=turn,
        prompt=prompt,
        by=By(id="dana", label="Dana", role="underwriter"),
    )


async def _save(store: Store, ref: SpaceRef, changes: ChangeSet, session: str = "s1") -> Stored:
    loaded = await store.load(ref, session)
    stored = await store.store(ref, changes, cursor=loaded.cursor, provenance=_prov(session))
    assert stored.status == "saved", f"expected saved, got {stored}"
    return stored


async def check_unknown_space_loads_empty(store: Store) -> None:
    loaded = await store.load(ORG, "s1")
    assert loaded.files == {}
    assert loaded.revisions == {}


async def check_created_files_load_back_byte_for_byte(store: Store) -> None:
    files = {"rules.md": b"# Rules\n", "bin/blob.dat": BINARY, UNICODE_PATH: "ça va\n".encode()}
    await _save(store, ORG, ChangeSet(created=files))
    loaded = await store.load(ORG, "s2")
    assert loaded.files == files
    assert set(loaded.revisions) == set(files)


async def check_update_and_delete_apply(store: Store) -> None:
    await _save(store, ORG, ChangeSet(created={"a.md": b"a1", "b.md": b"b1", "c/d.md": b"d1"}))
    await _save(store, ORG, ChangeSet(updated={"a.md": b"a2"}, deleted=("c/d.md",)))
    loaded = await store.load(ORG, "s1")
    assert loaded.files == {"a.md": b"a2", "b.md": b"b1"}


async def check_snapshot_names_the_revisions_stored(store: Store) -> None:
    stored = await _save(store, ORG, ChangeSet(created={"a.md": b"a1"}))
    loaded = await store.load(ORG, "s1")
    assert loaded.revisions["a.md"] == stored.revisions["a.md"]
    stored2 = await _save(store, ORG, ChangeSet(updated={"a.md": b"a2"}))
    loaded2 = await store.load(ORG, "s1")
    assert loaded2.revisions["a.md"] == stored2.revisions["a.md"] != stored.revisions["a.md"]


async def check_cursor_moves_on_after_a_store(store: Store) -> None:
    before = await store.load(ORG, "s1")
    await _save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    after = await store.load(ORG, "s1")
    assert before.cursor != after.cursor


async def check_stale_cursor_on_a_touched_file_conflicts_and_commits_nothing(store: Store) -> None:
    await _save(store, ORG, ChangeSet(created={"a.md": b"a1"}))
    first = await store.load(ORG, "s1")
    second = await store.load(ORG, "s2")
    ok = await store.store(
        ORG, ChangeSet(updated={"a.md": b"from s1"}), cursor=first.cursor, provenance=_prov("s1")
    )
    assert ok.status == "saved"
    late = await store.store(
        ORG,
        ChangeSet(updated={"a.md": b"from s2"}, created={"new.md": b"n"}),
        cursor=second.cursor,
        provenance=_prov("s2"),
    )
    assert late.status == "conflict"
    assert "a.md" in late.conflicts
    assert (await store.load(ORG, "s3")).files == {"a.md": b"from s1"}


async def check_concurrent_creates_of_one_path_conflict(store: Store) -> None:
    first = await store.load(ORG, "s1")
    second = await store.load(ORG, "s2")
    ok = await store.store(
        ORG, ChangeSet(created={"x.md": b"1"}), cursor=first.cursor, provenance=_prov("s1")
    )
    assert ok.status == "saved"
    late = await store.store(
        ORG, ChangeSet(created={"x.md": b"2"}), cursor=second.cursor, provenance=_prov("s2")
    )
    assert late.status == "conflict"
    assert late.conflicts == ("x.md",)
    assert (await store.load(ORG, "s3")).files == {"x.md": b"1"}


async def check_update_of_a_file_deleted_since_conflicts(store: Store) -> None:
    await _save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    first = await store.load(ORG, "s1")
    second = await store.load(ORG, "s2")
    ok = await store.store(
        ORG, ChangeSet(deleted=("a.md",)), cursor=first.cursor, provenance=_prov("s1")
    )
    assert ok.status == "saved"
    late = await store.store(
        ORG, ChangeSet(updated={"a.md": b"b"}), cursor=second.cursor, provenance=_prov("s2")
    )
    assert late.status == "conflict"
    assert late.conflicts == ("a.md",)
    assert (await store.load(ORG, "s3")).files == {}


async def check_spaces_are_isolated_by_layer_org_and_user(store: Store) -> None:
    refs = [
        ORG,
        OTHER_ORG,
        DANA,
        CAROL,
        SpaceRef(layer="user", space="me", org="bank-2", user="dana"),
        SpaceRef(layer="org", space="me", org="bank-1"),
    ]
    for ref in refs:
        await _save(store, ref, ChangeSet(created={"who.md": str(ref).encode()}))
    for ref in refs:
        assert (await store.load(ref, "s9")).files == {"who.md": str(ref).encode()}


# Managed stores only: per-file conflicts and history.


async def check_changes_to_other_files_do_not_block(store: Store) -> None:
    await _save(store, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    first = await store.load(ORG, "s1")
    second = await store.load(ORG, "s2")
    ok = await store.store(
        ORG, ChangeSet(updated={"a.md": b"a2"}), cursor=first.cursor, provenance=_prov("s1")
    )
    assert ok.status == "saved"
    other = await store.store(
        ORG,
        ChangeSet(updated={"b.md": b"b2"}, created={"c.md": b"c"}),
        cursor=second.cursor,
        provenance=_prov("s2"),
    )
    assert other.status == "saved", other
    assert (await store.load(ORG, "s3")).files == {"a.md": b"a2", "b.md": b"b2", "c.md": b"c"}


async def check_every_write_is_a_revision_with_provenance(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, ORG, ChangeSet(created={"a.md": b"1"}))
    await _save(store, ORG, ChangeSet(updated={"a.md": b"2"}), session="s2")
    await _save(store, ORG, ChangeSet(deleted=("a.md",)), session="s3")
    history = await store.history(ORG, "a.md")
    assert [r.deleted for r in history] == [False, False, True]
    assert [r.provenance.session for r in history] == ["s1", "s2", "s3"]
    first = history[0]
    assert first.provenance.origin == "conversation"
    assert first.provenance.turn == "t1"
    assert first.provenance.prompt == "remember this"
    assert first.provenance.by == By(id="dana", label="Dana", role="underwriter")
    assert first.size == 1
    assert len({r.id for r in history}) == 3


async def check_put_applies_a_persons_edit_at_once(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    stale = await store.load(ORG, "s1")
    edited = Provenance(origin="edited", by=By(id="admin", label="Ada"))
    await store.put(ORG, ChangeSet(created={"a.md": b"by hand"}), provenance=edited)
    assert await store.files(ORG) == {"a.md": b"by hand"}
    assert [r.provenance.origin for r in await store.history(ORG, "a.md")] == ["edited"]
    late = await store.store(
        ORG, ChangeSet(created={"a.md": b"agent"}), cursor=stale.cursor, provenance=_prov()
    )
    assert late.status == "conflict"
    assert ORG in await store.spaces()


async def _raises_not_found(call: Awaitable[object]) -> None:
    try:
        await call
    except NotFound:
        return
    raise AssertionError("expected NotFound")


async def _raises_forgotten(call: Awaitable[object]) -> None:
    try:
        await call
    except Forgotten:
        return
    raise AssertionError("expected Forgotten")


async def check_a_repeated_store_of_one_turn_is_stored_once(store: Store) -> None:
    """A turn end repeated after a crash sends the same change set with the same turn again."""
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"a.md": b"a1"}))
    await _save(store, ORG, ChangeSet(created={"a.md": b"a1"}))
    for ref in (DANA, ORG):
        loaded = await store.load(ref, "s9")
        changes = ChangeSet(updated={"a.md": b"a2"}, created={"b.md": b"b"})
        first = await store.store(ref, changes, cursor=loaded.cursor, provenance=_prov("s9", "t9"))
        again = await store.store(ref, changes, cursor=loaded.cursor, provenance=_prov("s9", "t9"))
        assert first.status == again.status == "saved"
        assert again.revisions == first.revisions
        assert [r.provenance.turn for r in await store.history(ref, "a.md")] == ["t1", "t9"]
        assert len(await store.history(ref, "b.md")) == 1
        # The same turn with other changes, or another turn, is a store of its own.
        other = await store.store(
            ref,
            ChangeSet(updated={"b.md": b"b2"}),
            cursor=loaded.cursor,
            provenance=_prov("s9", "t10"),
        )
        assert other.status == "conflict"  # b.md moved on since that load


async def check_a_trace_is_kept_once_per_turn(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    trace = _trace("s1", "t1", {"rules": ORG})
    await store.record_trace(trace)
    await store.record_trace(trace)
    assert await store.traces() == [trace]


async def check_a_load_after_forgetting_stores_again(store: Store) -> None:
    """Forgetting refuses turns that loaded before it, never those that load after."""
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    await store.forget_file(DANA, "a.md", by=None)
    await _save(store, DANA, ChangeSet(updated={"b.md": b"b2"}))
    await store.forget_user("dana", "bank-1", by=None)
    await _save(store, DANA, ChangeSet(created={"c.md": b"c"}))
    assert await store.files(DANA) == {"c.md": b"c"}
    # Org memory is never a person's: forgetting there stays a deletion.
    await _save(store, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    before = await store.load(ORG, "s1")
    await store.forget_file(ORG, "a.md", by=None)
    kept = await store.store(
        ORG, ChangeSet(created={"c.md": b"c"}), cursor=before.cursor, provenance=_prov(turn="x")
    )
    assert kept.status == "saved"


async def check_a_store_says_whether_a_person_was_forgotten_after_a_cursor(store: Store) -> None:
    """``forgotten_since``: what a daemon down during a forget asks at its restart."""
    assert isinstance(store, ManagedStore)
    if not isinstance(store, ForgetLog):
        return  # an optional capability; the store still refuses stale write-backs
    await _save(store, DANA, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    before = (await store.load(DANA, "s1")).cursor
    assert not await store.forgotten_since(DANA, before)
    await store.forget_file(DANA, "a.md", by=None)
    assert await store.forgotten_since(DANA, before)
    after = (await store.load(DANA, "s1")).cursor
    assert not await store.forgotten_since(DANA, after)
    await store.forget_user("dana", "bank-1", by=None)
    assert await store.forgotten_since(DANA, after)
    other = DANA.model_copy(update={"space": "notes"})
    assert await store.forgotten_since(other, after)  # the whole person, every space
    assert not await store.forgotten_since(ORG, before)  # org memory is nobody's
    assert not await store.forgotten_since(DANA, None)  # loaded nothing: nothing to drop


async def check_a_store_says_whether_a_whole_person_was_forgotten_after_a_cursor(
    store: Store,
) -> None:
    """``person_forgotten_since``: whether an open turn's words of someone go (their turn's too)."""
    assert isinstance(store, ManagedStore)
    if not isinstance(store, ForgetLog):
        return
    await _save(store, DANA, ChangeSet(created={"a.md": b"a"}))
    before = (await store.load(DANA, "s1")).cursor
    assert not await store.person_forgotten_since("bank-1", "dana", before)
    await store.forget_file(DANA, "a.md", by=None)  # a file of theirs is not the person
    assert not await store.person_forgotten_since("bank-1", "dana", before)
    middle = (await store.load(DANA, "s1")).cursor
    await store.forget_user("dana", "bank-1", by=None)
    assert await store.person_forgotten_since("bank-1", "dana", before)
    assert await store.person_forgotten_since("bank-1", "dana", middle)
    assert not await store.person_forgotten_since("bank-1", "carol", before)  # someone else
    assert not await store.person_forgotten_since("bank-2", "dana", before)  # another org
    assert not await store.person_forgotten_since("bank-1", "dana", None)  # loaded nothing
    after = (await store.load(DANA, "s1")).cursor
    assert not await store.person_forgotten_since("bank-1", "dana", after)


async def check_a_store_marks_each_forget_of_a_whole_person(store: Store) -> None:
    """``person_forgotten_at``: a mark that a new forget of the person changes, and no other."""
    assert isinstance(store, ManagedStore)
    if not isinstance(store, ForgetLog):
        return
    assert await store.person_forgotten_at("bank-1", "dana") is None  # never forgotten
    await _save(store, DANA, ChangeSet(created={"a.md": b"a"}))
    await store.forget_file(DANA, "a.md", by=None)  # a file of theirs is not the person
    assert await store.person_forgotten_at("bank-1", "dana") is None
    await store.forget_user("dana", "bank-1", by=None)
    first = await store.person_forgotten_at("bank-1", "dana")
    assert first is not None
    await _save(store, ORG, ChangeSet(created={"rule.md": b"r"}))  # others' writes: no new mark
    await store.forget_user("carol", "bank-1", by=None)
    assert await store.person_forgotten_at("bank-1", "dana") == first
    assert await store.person_forgotten_at("bank-2", "dana") is None  # another org
    await _save(store, DANA, ChangeSet(created={"b.md": b"b"}))  # back, and forgotten again
    await store.forget_user("dana", "bank-1", by=None)
    again = await store.person_forgotten_at("bank-1", "dana")
    assert again is not None and again != first


async def check_a_store_says_which_files_of_a_person_were_forgotten_after_a_cursor(
    store: Store,
) -> None:
    """``forgotten_files_since``: which file an open turn drops when nobody told its daemon."""
    assert isinstance(store, ManagedStore)
    if not isinstance(store, ForgetLog):
        return
    await _save(store, DANA, ChangeSet(created={"a.md": b"a", "b.md": b"b", "c.md": b"c"}))
    before = (await store.load(DANA, "s1")).cursor
    held = ["a.md", "b.md", "c.md", "never.md"]
    assert await store.forgotten_files_since(DANA, before, held) == Forgetting()
    await store.forget_file(DANA, "a.md", by=None)
    await store.forget_file(DANA, "c.md", by=None)
    assert await store.forgotten_files_since(DANA, before, held) == Forgetting(
        paths=("a.md", "c.md")
    )
    middle = (await store.load(DANA, "s1")).cursor
    assert await store.forgotten_files_since(DANA, middle, held) == Forgetting()
    other = CAROL.model_copy(update={"space": "me"})
    assert await store.forgotten_files_since(other, before, held) == Forgetting()
    assert await store.forgotten_files_since(DANA, None, held) == Forgetting()
    assert await store.forgotten_files_since(ORG, before, held) == Forgetting()
    await store.forget_user("dana", "bank-1", by=None)
    assert await store.forgotten_files_since(DANA, middle, []) == Forgetting(everything=True)


async def check_restore_brings_back_an_earlier_revision_as_an_edit(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    first = await _save(store, ORG, ChangeSet(created={"a.md": b"one"}))
    await _save(store, ORG, ChangeSet(updated={"a.md": b"two"}), session="s2")
    stale = await store.load(ORG, "s3")
    restored = await store.restore(ORG, "a.md", first.revisions["a.md"], by=ADA)
    assert restored.status == "saved"
    loaded = await store.load(ORG, "s3")
    assert loaded.files == {"a.md": b"one"}
    assert loaded.revisions["a.md"] == restored.revisions["a.md"]
    history = await store.history(ORG, "a.md")
    assert [r.size for r in history] == [3, 3, 3]
    assert len({r.id for r in history}) == 3
    assert history[-1].id == restored.revisions["a.md"]
    assert history[-1].sha256 == history[0].sha256
    assert history[-1].provenance.origin == "edited"
    assert history[-1].provenance.by == ADA
    assert (history[-1].provenance.session, history[-1].provenance.turn) == (None, None)
    assert history[-1].provenance.prompt is None
    # A restore is a change to the file: a turn that loaded before it conflicts.
    late = await store.store(
        ORG, ChangeSet(updated={"a.md": b"agent"}), cursor=stale.cursor, provenance=_prov("s3")
    )
    assert late.status == "conflict"
    assert late.conflicts == ("a.md",)


async def check_restore_of_a_deleted_file(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    first = await _save(store, ORG, ChangeSet(created={"a.md": b"one", "b.md": b"b"}))
    await _save(store, ORG, ChangeSet(deleted=("a.md",)), session="s2")
    await store.restore(ORG, "a.md", first.revisions["a.md"], by=ADA)
    assert await store.files(ORG) == {"a.md": b"one", "b.md": b"b"}
    history = await store.history(ORG, "a.md")
    assert [r.deleted for r in history] == [False, True, False]
    assert history[-1].provenance.origin == "edited"


async def check_restore_of_an_unknown_revision_is_not_found(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    a = await _save(store, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    other = await _save(store, OTHER_ORG, ChangeSet(created={"a.md": b"other org"}))
    deletion = await _save(store, ORG, ChangeSet(deleted=("a.md",)))
    before = await store.load(ORG, "s1")
    for path, revision in [
        ("a.md", deletion.revisions["a.md"]),  # a deletion has no content to bring back
        ("a.md", a.revisions["b.md"]),  # another file's revision
        ("a.md", other.revisions["a.md"]),  # the same path in another org's space
        ("a.md", "no-such-revision"),
        ("a.md", "999999999"),
        ("a.md", "0" + a.revisions["a.md"]),  # not the id as the store spelled it
        ("a.md", str(MAX_ROW_ID)),  # the largest id a store's rows hold: looked up, not there
        ("a.md", str(MAX_ROW_ID + 1)),  # one more: no store issued it, nor can bind it
        ("a.md", str(2**70)),
        ("never.md", a.revisions["a.md"]),
    ]:
        await _raises_not_found(store.restore(ORG, path, revision, by=ADA))
    await _raises_not_found(store.restore(DANA, "a.md", a.revisions["a.md"], by=ADA))
    assert await store.load(ORG, "s1") == before
    assert len(await store.history(ORG, "a.md")) == 2


async def check_forget_org_file_keeps_history_and_can_be_restored(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    for ref in (ORG, NOTES):  # an app-defined dir kept in a managed store forgets alike
        first = await _save(store, ref, ChangeSet(created={"a.md": b"one", "b.md": b"b"}))
        forgotten = await store.forget_file(ref, "a.md", by=ADA)
        assert forgotten.status == "saved"
        assert (await store.load(ref, "s2")).files == {"b.md": b"b"}
        history = await store.history(ref, "a.md")
        assert [r.deleted for r in history] == [False, True]
        assert history[-1].id == forgotten.revisions["a.md"]
        assert history[-1].provenance.origin == "edited"
        assert history[-1].provenance.by == ADA
        await _raises_not_found(store.forget_file(ref, "a.md", by=ADA))  # no longer live
        await _raises_not_found(store.forget_file(ref, "never.md", by=ADA))
        await store.restore(ref, "a.md", first.revisions["a.md"], by=ADA)
        assert (await store.load(ref, "s2")).files == {"a.md": b"one", "b.md": b"b"}
        assert len(await store.history(ref, "a.md")) == 3


async def check_forget_user_file_purges_its_history(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    first = await _save(store, DANA, ChangeSet(created={"secret.md": b"s1", "keep.md": b"k"}))
    await _save(store, DANA, ChangeSet(updated={"secret.md": b"s2"}))
    await _save(store, CAROL, ChangeSet(created={"secret.md": b"carol's"}))
    before = await store.load(DANA, "s1")
    forgotten = await store.forget_file(DANA, "secret.md", by=By(id="dana"))
    assert forgotten.status == "saved"
    assert forgotten.revisions == {}  # nothing is recorded of it, not even a deletion
    assert await store.history(DANA, "secret.md") == []
    assert (await store.load(DANA, "s2")).files == {"keep.md": b"k"}
    await _raises_not_found(store.restore(DANA, "secret.md", first.revisions["secret.md"], by=None))
    await _raises_not_found(store.forget_file(DANA, "secret.md", by=None))
    # Another person's file of the same name is untouched.
    assert await store.files(CAROL) == {"secret.md": b"carol's"}
    assert len(await store.history(CAROL, "secret.md")) == 1
    # A turn that loaded the file before it was forgotten cannot write it back,
    # not even as a copy under another name: nothing of that turn is stored there.
    for late in (
        ChangeSet(updated={"secret.md": b"s2 and more"}),
        ChangeSet(created={"copy.md": b"s2"}),
    ):
        await _raises_forgotten(
            store.store(DANA, late, cursor=before.cursor, provenance=_prov(turn="late"))
        )
    assert await store.history(DANA, "secret.md") == []
    assert await store.history(DANA, "copy.md") == []
    # A new file of that name starts a new history.
    await _save(store, DANA, ChangeSet(created={"secret.md": b"new"}))
    assert [r.deleted for r in await store.history(DANA, "secret.md")] == [False]


async def check_forget_user_file_purges_a_file_already_deleted(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"secret.md": b"s1", "keep.md": b"k"}))
    await _save(store, DANA, ChangeSet(deleted=("secret.md",)))
    await store.forget_file(DANA, "secret.md", by=None)
    assert await store.history(DANA, "secret.md") == []
    await store.forget_file(DANA, "keep.md", by=None)
    assert await store.files(DANA) == {}
    assert DANA not in await store.spaces()  # nothing of it is left to list


async def check_forget_user_removes_every_space_of_that_person_in_that_org(
    store: Store,
) -> None:
    assert isinstance(store, ManagedStore)
    drafts = DANA.model_copy(update={"space": "drafts"})
    first = await _save(store, DANA, ChangeSet(created={"prefs.md": b"p1", "keep.md": b"k"}))
    await _save(store, DANA, ChangeSet(updated={"prefs.md": b"p2"}))
    await _save(store, drafts, ChangeSet(created={"draft.md": b"d"}))
    await _save(store, drafts, ChangeSet(deleted=("draft.md",)))
    await _save(store, drafts, ChangeSet(created={"next.md": b"n"}))
    assert await store.user_files("dana", "bank-1") == {
        "drafts": {"next.md": b"n"},
        "me": {"keep.md": b"k", "prefs.md": b"p2"},
    }
    before = await store.load(DANA, "s1")

    purged = await store.forget_user("dana", "bank-1", by=By(id="dana"))

    assert purged.spaces == tuple(sorted([DANA, drafts], key=str))
    assert await store.user_files("dana", "bank-1") == {}
    for ref, path in [(DANA, "prefs.md"), (DANA, "keep.md"), (drafts, "draft.md")]:
        assert await store.history(ref, path) == []
    assert (await store.load(DANA, "s2")).files == {}
    assert (await store.load(drafts, "s2")).files == {}
    spaces = await store.spaces()
    assert DANA not in spaces and drafts not in spaces
    await _raises_not_found(store.restore(DANA, "prefs.md", first.revisions["prefs.md"], by=None))
    await _raises_not_found(store.forget_file(DANA, "prefs.md", by=None))
    # A turn that loaded before the person was forgotten cannot write it back,
    # under its own name or another.
    for late in (ChangeSet(updated={"prefs.md": b"p3"}), ChangeSet(created={"p.md": b"p2"})):
        await _raises_forgotten(
            store.store(DANA, late, cursor=before.cursor, provenance=_prov(turn="late"))
        )
    assert await store.history(DANA, "prefs.md") == []
    assert await store.history(DANA, "p.md") == []
    # Forgetting someone with nothing stored is not an error.
    assert await store.forget_user("dana", "bank-1", by=None) == Forgot()
    assert await store.forget_user("nobody", "bank-1", by=None) == Forgot()
    # What they save later starts anew.
    await _save(store, DANA, ChangeSet(created={"prefs.md": b"new"}))
    assert [r.deleted for r in await store.history(DANA, "prefs.md")] == [False]


async def check_forget_user_leaves_other_people_and_orgs(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    dana_elsewhere = DANA.model_copy(update={"org": "bank-2"})
    await _save(store, DANA, ChangeSet(created={"prefs.md": b"dana's"}))
    await _save(store, CAROL, ChangeSet(created={"prefs.md": b"carol's"}))
    await _save(store, dana_elsewhere, ChangeSet(created={"prefs.md": b"dana at bank-2"}))
    await _save(store, ORG, ChangeSet(created={"rules.md": b"org rules"}))
    await _save(store, NOTES, ChangeSet(created={"n.md": b"notes"}))

    assert await store.forget_user("dana", "bank-1", by=ADA) == Forgot(spaces=(DANA,), files=1)

    assert await store.files(CAROL) == {"prefs.md": b"carol's"}
    assert len(await store.history(CAROL, "prefs.md")) == 1
    assert await store.user_files("carol", "bank-1") == {"me": {"prefs.md": b"carol's"}}
    assert await store.files(dana_elsewhere) == {"prefs.md": b"dana at bank-2"}
    assert await store.user_files("dana", "bank-2") == {"me": {"prefs.md": b"dana at bank-2"}}
    # What the person wrote to shared memory belongs to the org, not to their memory.
    assert await store.files(ORG) == {"rules.md": b"org rules"}
    assert await store.files(NOTES) == {"n.md": b"notes"}
    assert set(await store.spaces()) == {CAROL, dana_elsewhere, ORG, NOTES}


# Traces: what each turn saw and did, kept by managed stores.


def _trace(session: str, turn: str, mounts: dict[str, SpaceRef]) -> Trace:
    """A trace mounting ``mounts``, each with one snapshot file the turn read."""
    return Trace(
        session=session,
        turn=turn,
        prompt=f"prompt of {turn}",
        mounts={
            name: TraceMount(
                ref=ref,
                read_only=False,
                from_last_known_copy=False,
                snapshot={f"{name}-file.md": f"rev-{name}"},
                status="saved",
                saved=(f"{name}-file.md",),
            )
            for name, ref in mounts.items()
        },
        files={
            f"{name}/{name}-file.md": TraceFile(read=f"rev-{name}", opened=True, wrote=True)
            for name in mounts
        },
    )


async def check_a_turn_that_loaded_before_its_author_was_forgotten_stores_no_words_of_theirs(
    store: Store,
) -> None:
    # Her turn over org memory loaded, then she was forgotten, then its store
    # and trace came (in flight at the forget): they keep nothing she said.
    assert isinstance(store, ManagedStore) and isinstance(store, ForgetLog)
    await _save(store, DANA, ChangeSet(created={"p.md": b"hers"}))
    loaded = await store.load(ORG, "s9")
    mark = await store.person_forgotten_at("bank-1", "dana") or "0"  # as the turn started
    await store.forget_user("dana", "bank-1", by=ADA)
    words = Provenance(
        session="s9",
        turn="t1",
        prompt="okapi words",
        by=By(id="dana", label="Dana Q."),
        words_since=mark,
    )
    stored = await store.store(
        ORG, ChangeSet(created={"r.md": b"a rule"}), cursor=loaded.cursor, provenance=words
    )
    assert stored.status == "saved"
    [revision] = await store.history(ORG, "r.md")
    assert revision.provenance.prompt is None
    assert revision.provenance.by == By(id="dana")
    trace = _trace("s9", "t1", {"rules": ORG}).model_copy(
        update={"author": "dana", "words_since": mark}
    )
    await store.record_trace(trace)
    [kept] = await store.traces(session="s9")
    assert kept.prompt is None and kept.author is None
    # A turn she started once back keeps her words, over org memory that
    # did not move since (its cursor older than the forget).
    again = await store.load(ORG, "s10")
    back_mark = await store.person_forgotten_at("bank-1", "dana")
    assert back_mark is not None and back_mark != mark
    later = words.model_copy(update={"session": "s10", "words_since": back_mark})
    await store.store(
        ORG, ChangeSet(created={"s.md": b"b rule"}), cursor=again.cursor, provenance=later
    )
    [back] = await store.history(ORG, "s.md")
    assert back.provenance.prompt == "okapi words" and back.provenance.words_since is None
    await store.record_trace(trace.model_copy(update={"session": "s10", "words_since": back_mark}))
    [traced] = await store.traces(session="s10")
    assert traced.prompt is not None and traced.author == "dana"
    assert traced.words_since is None


async def check_traces_are_kept_per_turn_oldest_first(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    assert await store.traces() == []
    first = _trace("s1", "t1", {"rules": ORG, "me": DANA})
    second = _trace("s2", "t1", {"me": CAROL})
    third = _trace("s1", "t2", {"rules": ORG})
    for trace in (first, second, third):
        await store.record_trace(trace)
    assert await store.traces() == [first, second, third]
    assert await store.traces(session="s1") == [first, third]
    assert await store.traces(session="nobody") == []


async def check_forget_user_removes_the_person_from_stored_traces(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    dana_elsewhere = DANA.model_copy(update={"org": "bank-2"})
    await _save(store, DANA, ChangeSet(created={"me-file.md": b"dana's"}))
    shared = _trace("s1", "t1", {"rules": ORG, "me": DANA, "carol": CAROL})
    only_dana = _trace("s1", "t2", {"me": DANA})
    elsewhere = _trace("s2", "t1", {"me": dana_elsewhere})
    for trace in (shared, only_dana, elsewhere):
        await store.record_trace(trace)

    await store.forget_user("dana", "bank-1", by=ADA)

    kept = await store.traces()
    assert [(t.session, t.turn) for t in kept] == [("s1", "t1"), ("s1", "t2"), ("s2", "t1")]
    # Other people's mounts and the org's stay, with everything the turn did to them.
    assert kept[0].mounts == {n: m for n, m in shared.mounts.items() if n != "me"}
    assert kept[0].files == {k: f for k, f in shared.files.items() if not k.startswith("me/")}
    assert (kept[1].mounts, kept[1].files) == ({}, {})
    # A turn that mounted the person's own memory was theirs: what they typed goes too.
    assert (kept[0].prompt, kept[1].prompt) == (None, None)
    # The same person in another org is someone else's record to keep.
    assert kept[2] == elsewhere


# As of a cursor: the files a turn carried, even after the space moved on.


async def _as_of_paths(store: ManagedStore, ref: SpaceRef, cursor: str | None) -> dict[str, str]:
    assert cursor is not None, "a managed store's load gives a cursor"
    found = await store.files_as_of(ref, cursor)
    assert list(found) == sorted(found), "files as of a cursor come in path order"
    return {path: file.revision for path, file in found.items()}


async def check_files_as_of_a_cursor_are_the_files_then_after_later_edits_and_deletes(
    store: Store,
) -> None:
    assert isinstance(store, ManagedStore)
    assert await store.files_as_of(ORG, "0") == {}  # a space that never held anything
    first = await _save(store, ORG, ChangeSet(created={"a.md": b"one", "b.md": b"bee"}))
    then = await store.load(ORG, "s1")
    files = await store.files_as_of(ORG, str(then.cursor))
    assert {p: (f.revision, f.sha256, f.size) for p, f in files.items()} == {
        "a.md": (first.revisions["a.md"], then.shas.get("a.md", digest(b"one")), 3),
        "b.md": (first.revisions["b.md"], then.shas.get("b.md", digest(b"bee")), 3),
    }
    second = await _save(
        store, ORG, ChangeSet(updated={"a.md": b"two!"}, deleted=("b.md",), created={"c.md": b"c"})
    )
    await store.forget_file(ORG, "c.md", by=ADA)  # the org layer keeps history: restorable
    # Another space's writes move nothing here (cursors of one sequence, revisions per space).
    await _save(store, OTHER_ORG, ChangeSet(created={"a.md": b"theirs"}))
    assert await _as_of_paths(store, ORG, then.cursor) == then.revisions
    mid = await store.load(ORG, "s1")
    assert await _as_of_paths(store, ORG, mid.cursor) == {"a.md": second.revisions["a.md"]}
    assert (await store.files_as_of(ORG, str(mid.cursor)))["a.md"].size == 4
    restored = await store.restore(ORG, "b.md", first.revisions["b.md"], by=ADA)
    now_ = await store.load(ORG, "s1")
    assert await _as_of_paths(store, ORG, now_.cursor) == now_.revisions
    assert now_.revisions["b.md"] == restored.revisions["b.md"]
    # The past did not move with the restore.
    assert await _as_of_paths(store, ORG, then.cursor) == then.revisions


async def check_files_as_of_a_cursor_lose_a_persons_forgotten_file_and_person(
    store: Store,
) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"secret.md": b"s", "keep.md": b"k"}))
    await _save(store, CAROL, ChangeSet(created={"secret.md": b"carol's"}))
    then = await store.load(DANA, "s1")
    carol = await store.load(CAROL, "s1")
    assert set(await _as_of_paths(store, DANA, then.cursor)) == {"keep.md", "secret.md"}
    await store.forget_file(DANA, "secret.md", by=ADA)
    # Forgotten is gone from the past too, for every cursor before the forget.
    assert await _as_of_paths(store, DANA, then.cursor) == {"keep.md": then.revisions["keep.md"]}
    await store.forget_user("dana", "bank-1", by=ADA)
    assert await _as_of_paths(store, DANA, then.cursor) == {}
    assert await _as_of_paths(store, CAROL, carol.cursor) == carol.revisions
    # The same person's space made again later shows only what came after.
    await _save(store, DANA, ChangeSet(created={"new.md": b"n"}))
    assert await _as_of_paths(store, DANA, then.cursor) == {}


async def check_files_as_of_a_cursor_the_store_did_not_issue_is_not_found(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, ORG, ChangeSet(created={"a.md": b"one"}))
    loaded = await store.load(ORG, "s1")
    assert loaded.cursor is not None
    past = str(int(loaded.cursor) + 1_000_000)
    foreign = (past, "-1", "abc", "", "1.5", " 1", digest(b"a folder store's cursor"))
    for cursor in foreign:
        await _raises_not_found(store.files_as_of(ORG, cursor))
        await _raises_not_found(store.open_files_as_of(DANA, cursor, by=ADA))
        await _raises_not_found(store.open_files_as_of(ORG, cursor, by=ADA))
    # A look at a person's memory is recorded even where the store cannot say
    # what it held then: the one who looked is shown what a turn's trace kept.
    entries = [(e.action, e.target, e.detail) for e in await store.audit()]
    assert entries == [("open", "dana", UNKNOWN_CURSOR)] * len(foreign)


async def check_opening_a_persons_files_as_of_a_cursor_is_audited(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"diary-entry.md": b"v1", "b.md": b"b"}))
    await _save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    dana = await store.load(DANA, "s1")
    org = await store.load(ORG, "s1")
    assert dana.cursor is not None and org.cursor is not None
    opened = await store.open_files_as_of(DANA, dana.cursor, by=ADA)
    assert opened == await store.files_as_of(DANA, dana.cursor)
    assert await store.open_files_as_of(ORG, org.cursor, by=ADA) == await store.files_as_of(
        ORG, org.cursor
    )
    [entry] = await store.audit()  # shared memory is not a look inside anyone
    assert (entry.action, entry.space, entry.target, entry.actor) == ("open", "me", "dana", ADA)
    assert entry.detail == "2 files"
    assert "diary-entry" not in entry.model_dump_json()


async def check_find_traces_filters_by_turn_space_and_time(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    start = now()
    first = _trace("s1", "t1", {"rules": ORG, "me": DANA})
    second = _trace("s2", "t1", {"rules": OTHER_ORG})
    third = _trace("s2", "t2", {"me": CAROL})
    # A space whose name holds another's: only the exact space matches.
    fourth = _trace("s3", "t9", {"x": ORG.model_copy(update={"space": "lending-rules-old"})})
    late = start + timedelta(days=2)
    fourth = fourth.model_copy(update={"at": late})
    for trace in (first, second, third, fourth):
        await store.record_trace(trace)
    assert await store.find_traces() == [first, second, third, fourth]
    assert await store.find_traces(turn="t1") == [first, second]
    assert await store.find_traces(space=ORG) == [first]
    assert await store.find_traces(space=OTHER_ORG, turn="t1") == [second]
    assert await store.find_traces(space=DANA) == [first]
    assert await store.find_traces(space=CAROL, turn="t1") == []
    assert await store.find_traces(since=start + timedelta(days=1)) == [fourth]
    assert await store.find_traces(turn="nobody") == []


# The audit log: every sensitive act of a managed store, with actor and time.


async def check_every_sensitive_act_is_audited_with_actor_and_time(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    start = now()
    first = await _save(store, ORG, ChangeSet(created={"a.md": b"one"}))
    await _save(store, ORG, ChangeSet(updated={"a.md": b"two"}))
    await _save(store, DANA, ChangeSet(created={"secret.md": b"zebra-secret"}))
    assert await store.audit() == []  # turns and saves are history, not audited acts
    await store.restore(ORG, "a.md", first.revisions["a.md"], by=ADA)
    await store.forget_file(ORG, "a.md", by=ADA)
    dana = By(id="dana", label="Dana", role="member")
    await store.forget_file(DANA, "secret.md", by=dana)
    await store.forget_user("carol", "bank-1", by=ADA)

    entries = await store.audit()

    assert [(e.action, e.org, e.space, e.target) for e in entries] == [
        ("restore", "bank-1", "lending-rules", "a.md"),
        ("forget", "bank-1", "lending-rules", "a.md"),
        ("forget", "bank-1", "me", "dana"),  # a person's file: whose, never its path
        ("forget-user", "bank-1", None, "carol"),  # recorded even when nothing was held
    ]
    assert (entries[2].detail, entries[3].detail) == ("1 file", "0 spaces")
    assert entries[0].detail == first.revisions["a.md"]
    assert [e.actor for e in entries] == [ADA, ADA, dana, ADA]
    assert all(start <= e.at <= now() for e in entries)
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    assert len({e.id for e in entries}) == len(entries)
    # A forgotten file of a person's memory leaves neither its content nor its name.
    assert all(b"zebra" not in e.model_dump_json().encode() for e in entries)
    assert all(b"secret.md" not in e.model_dump_json().encode() for e in entries)


async def check_a_failed_act_leaves_no_audit_entry(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _raises_not_found(store.forget_file(ORG, "never.md", by=ADA))
    await _raises_not_found(store.forget_file(DANA, "never.md", by=ADA))
    await _raises_not_found(store.restore(ORG, "never.md", "1", by=ADA))
    assert await store.audit() == []


async def check_opening_a_persons_memory_is_audited(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"prefs.md": b"tea"}))
    opened = await store.open_person("dana", "bank-1", by=ADA)
    assert opened == {"me": {"prefs.md": b"tea"}}
    assert await store.open_person("nobody", "bank-1", by=ADA) == {}
    entries = await store.audit()
    assert [(e.action, e.org, e.target, e.actor, e.detail) for e in entries] == [
        ("open", "bank-1", "dana", ADA, "1 file"),
        ("open", "bank-1", "nobody", ADA, "0 files"),  # looking, even at nothing, is recorded
    ]


async def check_reading_a_persons_history_for_someone_is_an_audited_open(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"diary-entry.md": b"v1"}))
    await _save(store, DANA, ChangeSet(updated={"diary-entry.md": b"v2"}))
    await _save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    revisions = await store.open_history(DANA, "diary-entry.md", by=ADA)
    assert revisions == await store.history(DANA, "diary-entry.md")
    assert [r.provenance.prompt for r in revisions] == ["remember this", "remember this"]
    assert await store.open_history(ORG, "a.md", by=ADA) == await store.history(ORG, "a.md")
    [entry] = await store.audit()  # shared memory's history is not a look inside anyone
    assert (entry.action, entry.space, entry.target, entry.actor) == ("open", "me", "dana", ADA)
    assert entry.detail == "2 revisions"
    assert "diary-entry" not in entry.model_dump_json()


async def check_forgetting_a_persons_file_removes_it_from_stored_traces(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, DANA, ChangeSet(created={"me-file.md": b"x", "kept.md": b"k"}))
    trace = _trace("s1", "t1", {"rules": ORG, "me": DANA})
    trace = trace.model_copy(
        update={"files": {**trace.files, "me/kept.md": TraceFile(renamed_from="me-file.md")}}
    )
    await store.record_trace(trace)
    await store.forget_file(DANA, "me-file.md", by=ADA)
    [kept] = await store.traces()
    assert "me-file.md" not in kept.model_dump_json()
    assert kept.mounts["rules"] == trace.mounts["rules"]
    assert set(kept.files) == {"rules/rules-file.md", "me/kept.md"}
    assert kept.prompt == trace.prompt  # the person is still here; one file is gone


async def check_the_audit_log_is_a_hash_chain_that_verifies(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    empty = await store.verify_audit()
    assert (empty.entries, empty.head) == (0, GENESIS)
    first = await _save(store, ORG, ChangeSet(created={"a.md": b"one"}))
    await store.restore(ORG, "a.md", first.revisions["a.md"], by=ADA)
    await store.open_person("dana", "bank-1", by=ADA)
    await store.open_person("dana", "bank-2", by=ADA)
    entries = await store.audit()
    assert entries[0].prev_hash == GENESIS
    for before, entry in itertools.pairwise(entries):
        assert entry.prev_hash == before.hash
    assert all(entry.hash == entry_hash(entry) for entry in entries)
    # One chain over every org: an org's own entries link across the others'.
    bank1 = await store.audit(org="bank-1")
    assert [e.id for e in bank1] == [entries[0].id, entries[1].id]
    checked = await store.verify_audit()
    assert (checked.entries, checked.head) == (3, entries[-1].hash)


async def check_put_obeys_the_limits_and_writes_nothing_past_them(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    limits = Limits(max_file_bytes=10, max_files=2, max_space_bytes=15)
    edit = Provenance(origin="edited")
    await store.put(ORG, ChangeSet(created={"a.md": b"x" * 10}), provenance=edit, limits=limits)
    refusals: list[tuple[ChangeSet, type[TooLarge]]] = [
        (ChangeSet(created={"big.md": b"x" * 11}), TooLarge),
        (ChangeSet(updated={"a.md": b"x" * 11}), TooLarge),
        (ChangeSet(created={"b.md": b"y" * 5, "c.md": b"z"}), SpaceFull),  # three files
        (ChangeSet(created={"b.md": b"y" * 6}), SpaceFull),  # 16 bytes
    ]
    for changes, error in refusals:
        try:
            await store.put(ORG, changes, provenance=edit, limits=limits)
        except error:
            pass
        else:
            raise AssertionError(f"a put of {changes.summary()} past {limits} was kept")
        assert await store.files(ORG) == {"a.md": b"x" * 10}
    # At every limit at once: two files, 15 bytes, none over 10.
    await store.put(ORG, ChangeSet(created={"b.md": b"y" * 5}), provenance=edit, limits=limits)
    assert await store.files(ORG) == {"a.md": b"x" * 10, "b.md": b"y" * 5}
    # Without limits given, the defaults hold: a person's put is never unbounded.
    try:
        await store.put(
            DANA,
            ChangeSet(created={"huge.md": b"h" * (Limits().max_file_bytes + 1)}),
            provenance=edit,
        )
    except TooLarge:
        pass
    else:
        raise AssertionError("a put past the default file limit was kept")
    assert await store.files(DANA) == {}


async def check_the_audit_log_filters_by_org_and_outlives_forgetting(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    elsewhere = DANA.model_copy(update={"org": "bank-2"})
    await _save(store, DANA, ChangeSet(created={"p.md": b"p"}))
    await _save(store, elsewhere, ChangeSet(created={"p.md": b"p"}))
    await store.open_person("dana", "bank-1", by=ADA)
    await store.open_person("dana", "bank-2", by=ADA)
    await store.forget_user("dana", "bank-1", by=ADA)
    bank1 = await store.audit(org="bank-1")
    assert [(e.action, e.target) for e in bank1] == [("open", "dana"), ("forget-user", "dana")]
    assert [(e.org, e.action) for e in await store.audit(org="bank-2")] == [("bank-2", "open")]
    assert len(await store.audit()) == 3


async def check_the_audit_log_reads_back_a_page_at_a_time_from_the_newest(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    for org in ("bank-1", "bank-2", "bank-1", "bank-1", "bank-2", "bank-1"):
        await store.open_person("dana", org, by=ADA)
    whole = await store.audit(org="bank-1")
    ids = [entry.id for entry in whole]
    assert len(ids) == 4
    assert await store.audit(org="bank-1", limit=10) == whole
    assert [e.id for e in await store.audit(org="bank-1", limit=3)] == ids[1:]
    assert [e.id for e in await store.audit(org="bank-1", before=ids[1], limit=3)] == ids[:1]
    assert [e.id for e in await store.audit(org="bank-1", before=ids[3])] == ids[:3]
    assert await store.audit(org="bank-1", before=ids[0]) == []
    # Pages walked back from the newest hold every entry once, in order.
    walked: list[str] = []
    before: str | None = None
    while page := await store.audit(org="bank-1", before=before, limit=1):
        walked[:0] = [entry.id for entry in page]
        before = page[0].id
    assert walked == ids
    everyone = await store.audit()
    assert [e.id for e in await store.audit(before=everyone[-1].id)] == [
        e.id for e in everyone[:-1]
    ]
    for before, limit in (("x", None), ("", None), (None, 0), (None, -1)):
        try:
            await store.audit(org="bank-1", before=before, limit=limit)
        except BadRequest:
            pass
        else:
            raise AssertionError(f"a page of the audit log before {before!r}, {limit} was read")


async def check_people_lists_user_spaces_with_their_live_size(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    drafts = DANA.model_copy(update={"space": "drafts"})
    await _save(store, DANA, ChangeSet(created={"a.md": b"12345", "b.md": b"123"}))
    await _save(store, DANA, ChangeSet(updated={"a.md": b"1"}))  # live size, not history
    await _save(store, drafts, ChangeSet(created={"d.md": b"d"}))
    await _save(store, drafts, ChangeSet(deleted=("d.md",)))  # nothing live: left out
    await _save(store, CAROL, ChangeSet(created={"c.md": b"cc"}))
    await _save(store, DANA.model_copy(update={"org": "bank-2"}), ChangeSet(created={"x": b"x"}))
    await _save(store, ORG, ChangeSet(created={"rules.md": b"org"}))
    assert await store.people("bank-1") == {DANA: 4, CAROL: 2}
    assert await store.people("bank-3") == {}
    assert await store.audit() == []  # sizes are not a look inside


async def check_live_origins_give_each_live_files_size_and_latest_origin(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    first = await _save(store, ORG, ChangeSet(created={"a.md": b"one", "gone.md": b"g"}))
    await _save(store, ORG, ChangeSet(updated={"a.md": b"two!"}, deleted=("gone.md",)), "s2")
    code = Provenance(origin="code")
    await store.put(ORG, ChangeSet(created={"seed.md": BINARY}), provenance=code)
    fix = Provenance(origin="fix", by=ADA)
    await store.put(ORG, ChangeSet(created={UNICODE_PATH: b"f"}), provenance=fix)
    await store.put(ORG, ChangeSet(created={"big.md": b"x" * 70_000}), provenance=code)
    await _save(store, ORG, ChangeSet(updated={"big.md": b"y" * 9}), "s3")
    await _save(store, OTHER_ORG, ChangeSet(created={"theirs.md": b"t"}))
    await _save(store, DANA, ChangeSet(created={"p.md": b"pref"}))
    origins = await store.live_origins(ORG)
    assert origins == {
        "a.md": (4, "conversation"),
        "big.md": (9, "conversation"),
        UNICODE_PATH: (1, "fix"),
        "seed.md": (len(BINARY), "code"),
    }
    assert list(origins) == sorted(origins)
    assert all(isinstance(o, LiveOrigin) for o in origins.values())
    await store.restore(ORG, "a.md", first.revisions["a.md"], by=ADA)
    restored = await store.live_origins(ORG)
    assert restored["a.md"] == LiveOrigin(size=3, origin="edited")
    assert await store.live_origins(DANA) == {"p.md": (4, "conversation")}
    assert await store.live_origins(OTHER_ORG) == {"theirs.md": (1, "conversation")}
    assert await store.live_origins(NOTES) == {}
    assert [e.action for e in await store.audit()] == ["restore"]  # the origins are no look


# Reviewing stores only: org changes wait for a person (memfs.core.review).

REVIEWER = By(id="ada", label="Ada", role="member")


async def _wait(
    store: ReviewingStore, changes: ChangeSet, session: str = "s1", prompt: str = "remember this"
) -> Stored:
    loaded = await store.load(ORG, session)
    stored = await store.store(
        ORG,
        changes,
        cursor=loaded.cursor,
        provenance=_prov(session, prompt=prompt),
        review="person",
    )
    assert stored.status == "waiting", stored
    assert stored.change is not None
    return stored


async def check_person_review_holds_the_change_for_its_own_conversation(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    stored = await _wait(store, ChangeSet(created={"rule.md": b"SA302s"}))
    theirs = await store.load(ORG, "s2")
    assert theirs.files == {} and theirs.own_change is None
    own = await store.load(ORG, "s1")
    assert own.files == {"rule.md": b"SA302s"}
    assert "rule.md" in own.revisions
    assert own.own_change == stored.change  # its view alone (``Loaded.own_change``)
    assert await store.files(ORG) == {}
    [change] = await store.list_changes()
    assert change.id == stored.change
    assert (change.state, change.session, change.ref) == ("waiting", "s1", ORG)
    assert change.provenance.prompt == "remember this"
    assert change.provenance.by == By(id="dana", label="Dana", role="underwriter")
    assert await store.list_changes(org="bank-2") == []


async def check_a_later_turn_replaces_the_same_file_in_the_waiting_change(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    first = await _wait(store, ChangeSet(created={"a.md": b"1", "b.md": b"b"}))
    second = await _wait(store, ChangeSet(updated={"a.md": b"2"}), prompt="no, two")
    assert second.change == first.change
    [change] = await store.list_changes()
    assert change.files["a.md"].content == b"2"
    assert change.files["b.md"].content == b"b"
    assert change.provenance.prompt == "no, two"


async def check_two_conversations_both_wait_and_the_later_is_stale(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    await _save(store, ORG, ChangeSet(created={"a.md": b"v1"}))
    one = await store.load(ORG, "s1")
    two = await store.load(ORG, "s2")
    for session, loaded in (("s1", one), ("s2", two)):
        stored = await store.store(
            ORG,
            ChangeSet(updated={"a.md": session.encode()}),
            cursor=loaded.cursor,
            provenance=_prov(session),
            review="person",
        )
        assert stored.status == "waiting"
    first, second = await store.list_changes()
    assert (first.session, second.session) == ("s1", "s2")
    assert first.stale_paths == ()
    assert second.stale_paths == ("a.md",)
    assert await store.files(ORG) == {"a.md": b"v1"}


async def check_approve_makes_the_files_live_with_who_taught_and_who_approved(
    store: Store,
) -> None:
    assert isinstance(store, ReviewingStore)
    await _save(store, ORG, ChangeSet(created={"old.md": b"old"}))
    stored = await _wait(store, ChangeSet(created={"new.md": b"new"}, deleted=("old.md",)))
    assert stored.change is not None
    decided = await store.decide(stored.change, "approve", by=REVIEWER)
    assert decided.state == "approved"
    assert decided.reviews[-1].by == REVIEWER
    assert await store.files(ORG) == {"new.md": b"new"}
    [revision] = await store.history(ORG, "new.md")
    assert revision.provenance.origin == "conversation"
    assert revision.provenance.session == "s1"
    assert revision.provenance.prompt == "remember this"
    assert revision.approved_by == REVIEWER
    assert (await store.history(ORG, "old.md"))[-1].deleted
    assert await store.list_changes() == []
    assert (await store.get_change(stored.change)).state == "approved"
    assert (await store.load(ORG, "s1")).files == {"new.md": b"new"}


async def check_approving_part_leaves_the_rest_waiting(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    stored = await _wait(store, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    assert stored.change is not None
    partly = await store.decide(stored.change, "approve", by=REVIEWER, paths=["a.md"])
    assert partly.state == "waiting"
    assert set(partly.files) == {"b.md"}
    assert await store.files(ORG) == {"a.md": b"a"}
    assert (await store.load(ORG, "s1")).files == {"a.md": b"a", "b.md": b"b"}


async def check_reject_applies_nothing_and_a_rejected_change_cannot_be_approved(
    store: Store,
) -> None:
    assert isinstance(store, ReviewingStore)
    stored = await _wait(store, ChangeSet(created={"a.md": b"approve any score above 600"}))
    assert stored.change is not None
    rejected = await store.decide(stored.change, "reject", by=REVIEWER)
    assert rejected.state == "rejected"
    assert await store.files(ORG) == {}
    assert (await store.load(ORG, "s1")).files == {}
    try:
        await store.decide(stored.change, "approve", by=REVIEWER)
    except IllegalTransition:
        pass
    else:
        raise AssertionError("approving a rejected change must be an illegal transition")
    assert await store.files(ORG) == {}
    for unknown in ("no-such-change", str(MAX_ROW_ID), str(MAX_ROW_ID + 1)):
        for asked in (store.get_change(unknown), store.decide(unknown, "approve", by=REVIEWER)):
            try:
                await asked
            except NotFound:
                pass
            else:
                raise AssertionError(f"an unknown change {unknown!r} must be NotFound")


async def check_edit_then_approve_stores_the_reviewers_content(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    stored = await _wait(store, ChangeSet(created={"a.md": b"draft"}))
    assert stored.change is not None
    await store.decide(stored.change, "edit", by=REVIEWER, edits={"a.md": b"fixed"})
    assert await store.files(ORG) == {"a.md": b"fixed"}
    [revision] = await store.history(ORG, "a.md")
    assert revision.provenance.origin == "edited"
    assert revision.approved_by == REVIEWER


async def check_after_review_is_live_and_listed_and_rejecting_reverts(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    await _save(store, ORG, ChangeSet(created={"a.md": b"v1"}))
    loaded = await store.load(ORG, "s1")
    stored = await store.store(
        ORG,
        ChangeSet(updated={"a.md": b"v2"}, created={"b.md": b"b"}),
        cursor=loaded.cursor,
        provenance=_prov(),
        review="after",
    )
    assert stored.status == "saved"
    assert stored.change is not None
    assert await store.files(ORG) == {"a.md": b"v2", "b.md": b"b"}
    [listed] = await store.list_changes()
    assert listed.state == "live"
    reverted = await store.decide(stored.change, "reject", by=REVIEWER)
    assert reverted.state == "rejected"
    assert await store.files(ORG) == {"a.md": b"v1"}


async def check_the_spaces_own_review_setting_wins(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    assert await store.review_mode(ORG) is None
    await store.set_review(ORG, "none", by=REVIEWER)
    assert await store.review_mode(ORG) == "none"
    loaded = await store.load(ORG, "s1")
    stored = await store.store(
        ORG,
        ChangeSet(created={"a.md": b"a"}),
        cursor=loaded.cursor,
        provenance=_prov(),
        review="person",
    )
    assert stored.status == "saved"
    assert await store.list_changes() == []


async def check_a_persons_own_memory_always_saves_at_once(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    loaded = await store.load(DANA, "s1")
    stored = await store.store(
        DANA,
        ChangeSet(created={"p.md": b"p"}),
        cursor=loaded.cursor,
        provenance=_prov(),
        review="person",
    )
    assert stored.status == "saved"
    assert await store.files(DANA) == {"p.md": b"p"}
    assert await store.list_changes() == []


async def check_review_decisions_and_settings_are_audited(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    first = await _wait(store, ChangeSet(created={"a.md": b"a", "b.md": b"b"}), session="s1")
    second = await _wait(store, ChangeSet(created={"c.md": b"c"}), session="s2")
    third = await _wait(store, ChangeSet(created={"d.md": b"d"}), session="s3")
    assert first.change and second.change and third.change
    await store.decide(first.change, "approve", by=REVIEWER, paths=["a.md"])
    await store.decide(second.change, "reject", by=REVIEWER)
    await store.decide(third.change, "edit", by=ADA, edits={"d.md": b"fixed"})
    await store.set_review(ORG, "after", by=ADA)
    with_illegal = await store.audit()
    try:
        await store.decide(second.change, "approve", by=REVIEWER)
    except IllegalTransition:
        pass
    else:
        raise AssertionError("approving a rejected change should be refused")
    entries = await store.audit(org=ORG.org)
    assert entries == with_illegal  # a refused move is not recorded
    assert [(e.action, e.space, e.target, e.detail, e.actor) for e in entries] == [
        ("approve", ORG.space, first.change, "a.md", REVIEWER),
        ("reject", ORG.space, second.change, "c.md", REVIEWER),
        ("edit", ORG.space, third.change, "d.md", ADA),
        ("set-review", ORG.space, None, "after", ADA),
    ]


async def check_approving_a_stale_file_needs_force_and_otherwise_changes_nothing(
    store: Store,
) -> None:
    assert isinstance(store, ReviewingStore)
    await _save(store, ORG, ChangeSet(created={"a.md": b"v1"}))
    one = await store.load(ORG, "s1")
    two = await store.load(ORG, "s2")
    ids = []
    for session, loaded in (("s1", one), ("s2", two)):
        stored = await store.store(
            ORG,
            ChangeSet(updated={"a.md": session.encode()}, created={f"{session}.md": b"n"}),
            cursor=loaded.cursor,
            provenance=_prov(session),
            review="person",
        )
        assert stored.change is not None
        ids.append(stored.change)
    await store.decide(ids[0], "approve", by=REVIEWER)
    before = (await store.files(ORG), await store.audit(), await store.get_change(ids[1]))
    assert before[2].stale_paths == ("a.md",)
    moves: tuple[tuple[Literal["approve", "edit"], dict[str, bytes | None] | None], ...] = (
        ("approve", None),
        ("edit", {"a.md": b"merged"}),
    )
    for action, edits in moves:
        try:
            await store.decide(ids[1], action, by=REVIEWER, paths=["a.md"], edits=edits)
        except Conflict as exc:
            assert exc.paths == ("a.md",)
            assert "a.md" in str(exc)
        else:
            raise AssertionError(f"{action} of a stale file went through without force")
        assert (await store.files(ORG), await store.audit(), await store.get_change(ids[1])) == (
            before
        )
    # A file that is not stale needs no force; rejecting never does.
    await store.decide(ids[1], "approve", by=REVIEWER, paths=["s2.md"])
    assert (await store.files(ORG))["s2.md"] == b"n"
    forced = await store.decide(ids[1], "approve", by=REVIEWER, force=True)
    assert forced.state == "approved"
    assert (await store.files(ORG))["a.md"] == b"s2"


async def check_a_forced_move_goes_only_over_the_live_file_its_reviewer_was_shown(
    store: Store,
) -> None:
    """``live_version`` pins the live files a reviewer saw beside a change: forcing a stale
    file over a live file that changed since (an approval, a write, a deletion) is a
    ``Conflict`` naming it, and changes nothing; a file whose live file did not move,
    or a move named with what is live now, goes through."""
    assert isinstance(store, ReviewingStore)
    await _save(store, ORG, ChangeSet(created={"a.md": b"v1", "b.md": b"b1"}))
    loaded = await store.load(ORG, "s1")
    stored = await store.store(
        ORG,
        ChangeSet(updated={"a.md": b"s1", "b.md": b"s1"}),
        cursor=loaded.cursor,
        provenance=_prov("s1"),
        review="person",
    )
    assert stored.change is not None
    id = stored.change
    await _save(store, ORG, ChangeSet(updated={"a.md": b"v2", "b.md": b"b2"}), "s2")
    shown = await store.get_change(id)  # a.md and b.md stale, over v2 and b2
    assert shown.stale_paths == ("a.md", "b.md")
    [listed] = await store.list_changes(org=ORG.org)
    assert listed.live_version == shown.live_version  # listed or read, one name
    moves: tuple[tuple[Literal["approve", "edit"], dict[str, bytes | None] | None], ...] = (
        ("approve", None),
        ("edit", {"a.md": b"merged"}),
    )
    for late in (ChangeSet(updated={"a.md": b"v3"}), ChangeSet(deleted=("a.md",))):
        await _save(store, ORG, late, "s3")  # live since the reviewer looked
        before = (await store.files(ORG), await store.audit(), await store.get_change(id))
        for action, edits in moves:
            try:
                await store.decide(
                    id,
                    action,
                    by=REVIEWER,
                    paths=["a.md"],
                    edits=edits,
                    force=True,
                    version=shown.version,
                    live_version=shown.live_version,
                )
            except Conflict as exc:
                assert exc.paths == ("a.md",)
            else:
                raise AssertionError(f"a forced {action} went over a live file not shown")
            after = (await store.files(ORG), await store.audit(), await store.get_change(id))
            assert after == before
    # b.md's live file is as shown: forcing it goes through.
    await store.decide(
        id,
        "approve",
        by=REVIEWER,
        paths=["b.md"],
        force=True,
        live_version=shown.live_version,
    )
    assert (await store.files(ORG))["b.md"] == b"s1"
    again = await store.get_change(id)  # a.md shown again, deleted since
    await store.decide(id, "approve", by=REVIEWER, force=True, live_version=again.live_version)
    assert (await store.files(ORG))["a.md"] == b"s1"


async def check_a_reviewers_edit_obeys_the_limits_and_changes_nothing_past_them(
    store: Store,
) -> None:
    assert isinstance(store, ReviewingStore)
    limits = Limits(max_file_bytes=10, max_files=2, max_space_bytes=15)
    stored = await _wait(store, ChangeSet(created={"a.md": b"a"}))
    assert stored.change is not None
    before = (await store.audit(), await store.get_change(stored.change))
    for edits, error in (
        ({"a.md": b"x" * 11}, TooLarge),
        ({"a.md": b"x" * 10}, None),  # at the file limit: fine
    ):
        try:
            decided = await store.decide(
                stored.change, "edit", by=REVIEWER, edits=dict(edits), limits=limits
            )
        except TooLarge as exc:
            assert error is not None and isinstance(exc, error), exc
            assert await store.files(ORG) == {}
            assert (await store.audit(), await store.get_change(stored.change)) == before
        else:
            assert error is None, f"an edit of {len(edits['a.md'])} bytes past {limits} was kept"
            assert decided.state == "approved"
    assert await store.files(ORG) == {"a.md": b"x" * 10}
    # Approving a change whose files would fill the space past its limit is refused too.
    late = await _wait(store, ChangeSet(created={"b.md": b"y" * 6}), session="s2")
    assert late.change is not None
    try:
        await store.decide(late.change, "approve", by=REVIEWER, limits=limits)
    except SpaceFull:
        pass
    else:
        raise AssertionError("an approval that fills the space past its limit was kept")
    assert await store.files(ORG) == {"a.md": b"x" * 10}
    # Without limits given, the defaults hold: a 5 MiB edit is never stored.
    huge = await _wait(store, ChangeSet(created={"h.md": b"h"}), session="s3")
    assert huge.change is not None
    try:
        await store.decide(huge.change, "edit", by=REVIEWER, edits={"h.md": b"h" * 5 * MIB})
    except TooLarge:
        pass
    else:
        raise AssertionError("a 5 MiB reviewer's edit was stored")
    assert "h.md" not in await store.files(ORG)


# -- what a filesystem keeps: modes, times, folders -----------------------

SCRIPT = b"#!/bin/sh\necho hi\n"
MTIME = 1_700_000_000_123_456_789  # nanoseconds: the sub-second part must survive too


async def check_modes_and_mtimes_load_back(store: Store) -> None:
    changes = ChangeSet(
        created={"run.sh": SCRIPT, "notes.md": b"n"},
        meta={"run.sh": FileMeta(mode=0o755, mtime_ns=MTIME)},
    )
    await _save(store, ORG, changes)
    loaded = await store.load(ORG, "s2")
    assert loaded.meta_of("run.sh").mode == 0o755
    assert loaded.meta_of("run.sh").mtime_ns == MTIME
    assert loaded.meta_of("notes.md").mode == 0o644


async def check_times_before_1970_and_up_to_2262_load_back(store: Store) -> None:
    # An old archive unpacked, and the last time memfs keeps (``MAX_TIME_NS``):
    # both are numbers every store must hold, or the turn storing them fails.
    old, far = -100 * 10**9 + 5, MAX_TIME_NS
    changes = ChangeSet(
        created={"old.md": b"o", "far.md": b"f"},
        meta={"old.md": FileMeta(mtime_ns=old), "far.md": FileMeta(mtime_ns=far)},
    )
    await _save(store, ORG, changes)
    loaded = await store.load(ORG, "s2")
    assert loaded.meta_of("old.md").mtime_ns == old
    assert loaded.meta_of("far.md").mtime_ns == far


async def check_a_mode_only_change_is_an_update(store: Store) -> None:
    await _save(store, ORG, ChangeSet(created={"run.sh": SCRIPT}))
    stored = await _save(
        store, ORG, ChangeSet(updated={"run.sh": SCRIPT}, meta={"run.sh": FileMeta(mode=0o755)})
    )
    assert "run.sh" in stored.revisions
    loaded = await store.load(ORG, "s1")
    assert loaded.files["run.sh"] == SCRIPT
    assert loaded.meta_of("run.sh").mode == 0o755


async def check_an_update_that_names_no_mode_keeps_the_mode(store: Store) -> None:
    await _save(
        store, ORG, ChangeSet(created={"run.sh": SCRIPT}, meta={"run.sh": FileMeta(mode=0o755)})
    )
    await _save(store, ORG, ChangeSet(updated={"run.sh": SCRIPT + b"# more\n"}))
    assert (await store.load(ORG, "s1")).meta_of("run.sh").mode == 0o755


async def check_empty_folders_are_kept_until_removed(store: Store) -> None:
    await _save(
        store,
        ORG,
        ChangeSet(created={"a/keep.md": b"k"}, folders_created=("empty", "a/b/c", "a/b")),
    )
    loaded = await store.load(ORG, "s2")
    assert {"empty", "a/b", "a/b/c"} <= set(loaded.folders)
    await _save(store, ORG, ChangeSet(folders_deleted=("a/b/c",)))
    after = await store.load(ORG, "s2")
    assert {"empty", "a/b"} <= set(after.folders)
    assert "a/b/c" not in after.folders
    assert after.files == {"a/keep.md": b"k"}


async def check_a_folder_outlives_its_last_file_when_stored(store: Store) -> None:
    await _save(store, ORG, ChangeSet(created={"d/only.md": b"x"}))
    await _save(store, ORG, ChangeSet(deleted=("d/only.md",), folders_created=("d",)))
    loaded = await store.load(ORG, "s1")
    assert loaded.files == {}
    assert "d" in loaded.folders


async def check_history_shows_each_revisions_mode(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await _save(store, ORG, ChangeSet(created={"run.sh": SCRIPT}))
    await _save(
        store,
        ORG,
        ChangeSet(
            updated={"run.sh": SCRIPT}, meta={"run.sh": FileMeta(mode=0o755, mtime_ns=MTIME)}
        ),
    )
    await _save(store, ORG, ChangeSet(deleted=("run.sh",)))
    history = await store.history(ORG, "run.sh")
    assert [r.mode for r in history] == [0o644, 0o755, None]
    assert history[1].mtime_ns == MTIME


async def check_ctimes_load_back(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    meta = FileMeta(mode=0o600, mtime_ns=MTIME, ctime_ns=MTIME + 5)
    await _save(store, ORG, ChangeSet(created={"k.md": b"k"}, meta={"k.md": meta}))
    assert (await store.load(ORG, "s2")).meta_of("k.md") == meta


async def check_restore_brings_back_the_revisions_mode(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    first = await _save(
        store, ORG, ChangeSet(created={"run.sh": SCRIPT}, meta={"run.sh": FileMeta(mode=0o755)})
    )
    await _save(
        store, ORG, ChangeSet(updated={"run.sh": b"x"}, meta={"run.sh": FileMeta(mode=0o644)})
    )
    await store.restore(ORG, "run.sh", first.revisions["run.sh"], by=ADA)
    loaded = await store.load(ORG, "s1")
    assert (loaded.files["run.sh"], loaded.meta_of("run.sh").mode) == (SCRIPT, 0o755)


async def check_a_waiting_change_carries_modes_and_folders_until_approved(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    await _save(store, ORG, ChangeSet(created={"run.sh": SCRIPT}))
    stored = await _wait(
        store,
        ChangeSet(
            updated={"run.sh": SCRIPT},
            meta={"run.sh": FileMeta(mode=0o755, mtime_ns=MTIME)},
            folders_created=(".git/refs/tags",),
        ),
    )
    own = await store.load(ORG, "s1")
    assert own.meta_of("run.sh").mode == 0o755
    assert ".git/refs/tags" in own.folders
    other = await store.load(ORG, "s2")
    assert other.meta_of("run.sh").mode == 0o644
    assert ".git/refs/tags" not in other.folders
    assert stored.change is not None
    await store.decide(stored.change, "approve", by=REVIEWER)
    live = await store.load(ORG, "s2")
    assert live.meta_of("run.sh").mode == 0o755
    assert live.meta_of("run.sh").mtime_ns == MTIME
    assert ".git/refs/tags" in live.folders
    assert await store.list_changes() == []


async def check_a_folder_only_change_waits_and_a_reviewer_can_reject_it(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    stored = await _wait(store, ChangeSet(folders_created=("drafts",)))
    assert stored.change is not None
    [change] = await store.list_changes()
    assert change.folders == {"drafts": True}
    await store.decide(stored.change, "reject", by=REVIEWER)
    assert "drafts" not in (await store.load(ORG, "s1")).folders


# -- one owner per review rule (memfs.core.review): every store says the same --


async def _raises(call: Awaitable[object], error: type[Exception], what: str) -> Exception:
    try:
        await call
    except error as exc:
        return exc
    except Exception as exc:
        raise AssertionError(f"{what}: expected {error.__name__}, got {exc!r}") from exc
    raise AssertionError(f"{what}: expected {error.__name__}, nothing was raised")


async def check_deleting_a_file_the_space_does_not_hold_is_refused_whole(store: Store) -> None:
    await _save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    loaded = await store.load(ORG, "s1")
    exc = await _raises(
        store.store(
            ORG,
            ChangeSet(created={"b.md": b"b"}, updated={"a.md": b"a2"}, deleted=("nope.md",)),
            cursor=loaded.cursor,
            provenance=_prov(turn="t2"),
        ),
        InvalidName,
        "deleting a file the space does not hold",
    )
    assert getattr(exc, "path", None) == "nope.md", exc
    assert (await store.load(ORG, "s2")).files == {"a.md": b"a"}


async def check_a_waiting_deletion_must_name_a_file_the_conversation_sees(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    await _save(store, ORG, ChangeSet(created={"live.md": b"l"}))
    await _wait(store, ChangeSet(created={"mine.md": b"m"}, deleted=("live.md",)))
    # Its own waiting file it may delete; what it already deleted, or never
    # existed, it may not: the refusal holds nothing of the turn.
    for path in ("live.md", "never.md"):
        loaded = await store.load(ORG, "s1")
        exc = await _raises(
            store.store(
                ORG,
                ChangeSet(created={"x.md": b"x"}, deleted=(path,)),
                cursor=loaded.cursor,
                provenance=_prov(turn=f"t-{path}"),
                review="person",
            ),
            InvalidName,
            f"a waiting deletion of {path}",
        )
        assert getattr(exc, "path", None) == path, exc
    [change] = await store.list_changes()
    assert set(change.files) == {"mine.md", "live.md"}
    await _wait(store, ChangeSet(deleted=("mine.md",)))
    assert (await store.load(ORG, "s1")).files == {}


async def check_a_space_switched_from_after_to_person_holds_the_next_edit_apart(
    store: Store,
) -> None:
    assert isinstance(store, ReviewingStore)
    await store.set_review(ORG, "after", by=ADA)
    loaded = await store.load(ORG, "s1")
    live = await store.store(
        ORG, ChangeSet(created={"a.md": b"a"}), cursor=loaded.cursor, provenance=_prov(turn="t1")
    )
    assert live.status == "saved" and live.change is not None
    await store.set_review(ORG, "person", by=ADA)
    loaded = await store.load(ORG, "s1")
    held = await store.store(
        ORG, ChangeSet(created={"b.md": b"b"}), cursor=loaded.cursor, provenance=_prov(turn="t2")
    )
    assert held.status == "waiting", held
    assert held.change is not None and held.change != live.change
    assert await store.files(ORG) == {"a.md": b"a"}
    assert (await store.load(ORG, "s1")).files == {"a.md": b"a", "b.md": b"b"}
    assert (await store.load(ORG, "s2")).files == {"a.md": b"a"}
    assert set((await store.get_change(live.change)).files) == {"a.md"}
    approved = await store.decide(held.change, "approve", by=REVIEWER)
    assert approved.state == "approved"
    assert await store.files(ORG) == {"a.md": b"a", "b.md": b"b"}
    [still] = await store.list_changes()
    assert (still.id, still.state, set(still.files)) == (live.change, "live", {"a.md"})


async def check_a_space_switched_from_person_to_after_keeps_the_waiting_change_apart(
    store: Store,
) -> None:
    assert isinstance(store, ReviewingStore)
    waiting = await _wait(store, ChangeSet(created={"w.md": b"w"}))
    await store.set_review(ORG, "after", by=ADA)
    loaded = await store.load(ORG, "s1")
    live = await store.store(
        ORG, ChangeSet(created={"l.md": b"l"}), cursor=loaded.cursor, provenance=_prov(turn="t2")
    )
    assert live.status == "saved" and live.change not in (None, waiting.change)
    assert await store.files(ORG) == {"l.md": b"l"}
    # The conversation still sees what waits, whichever change came last.
    assert (await store.load(ORG, "s1")).files == {"l.md": b"l", "w.md": b"w"}
    assert waiting.change is not None
    assert set((await store.get_change(waiting.change)).files) == {"w.md"}
    await store.decide(waiting.change, "approve", by=REVIEWER)
    assert await store.files(ORG) == {"l.md": b"l", "w.md": b"w"}


async def check_a_change_held_for_review_needs_a_conversation(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    nobody = Provenance(origin="code", prompt="no conversation")
    for mode in ("person", "after"):
        loaded = await store.load(ORG, "s1")
        await _raises(
            store.store(
                ORG,
                ChangeSet(created={f"{mode}.md": b"x"}),
                cursor=loaded.cursor,
                provenance=nobody,
                review=mode,
            ),
            NotFound,
            f"a change under review {mode} with no conversation",
        )
    # Refused before anything is written: nothing live, nothing listed.
    assert await store.files(ORG) == {}
    assert await store.list_changes() == []
    # Where nothing is listed, no conversation is needed.
    loaded = await store.load(ORG, "s1")
    stored = await store.store(
        ORG, ChangeSet(created={"n.md": b"n"}), cursor=loaded.cursor, provenance=nobody
    )
    assert stored.status == "saved"


async def check_an_unknown_review_mode_is_a_config_error_and_changes_nothing(
    store: Store,
) -> None:
    assert isinstance(store, ReviewingStore)
    await _raises(
        store.set_review(ORG, "sometimes", by=ADA),  # type: ignore[arg-type]
        ConfigError,
        "setting an unknown review mode",
    )
    assert await store.review_mode(ORG) is None
    assert await store.audit() == []
    loaded = await store.load(ORG, "s1")
    await _raises(
        store.store(
            ORG,
            ChangeSet(created={"a.md": b"a"}),
            cursor=loaded.cursor,
            provenance=_prov(),
            review="sometimes",  # type: ignore[arg-type]
        ),
        ConfigError,
        "storing under an unknown review mode",
    )
    assert await store.files(ORG) == {}
    assert await store.list_changes() == []


async def check_approval_records_each_file_with_the_turn_that_taught_it(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    for turn, prompt, changes in (
        ("t1", "prompt A", ChangeSet(created={"a.md": b"a", "c.md": b"c1"})),
        ("t2", "prompt B", ChangeSet(created={"b.md": b"b"}, updated={"c.md": b"c2"})),
    ):
        loaded = await store.load(ORG, "s1")
        stored = await store.store(
            ORG,
            changes,
            cursor=loaded.cursor,
            provenance=_prov(turn=turn, prompt=prompt),
            review="person",
        )
        assert stored.status == "waiting"
    assert stored.change is not None
    await store.decide(stored.change, "approve", by=REVIEWER)
    taught = {}
    for path in ("a.md", "b.md", "c.md"):
        last = (await store.history(ORG, path))[-1].provenance
        taught[path] = (last.turn, last.prompt)
    # A file rewritten by the later turn was taught by it.
    assert taught == {
        "a.md": ("t1", "prompt A"),
        "b.md": ("t2", "prompt B"),
        "c.md": ("t2", "prompt B"),
    }, taught
    [revision] = await store.history(ORG, "a.md")
    assert (revision.provenance.session, revision.approved_by) == ("s1", REVIEWER)


async def check_an_edited_approval_keeps_each_files_turn(store: Store) -> None:
    assert isinstance(store, ReviewingStore)
    first = await _wait(store, ChangeSet(created={"a.md": b"a"}), prompt="prompt A")
    await store.store(
        ORG,
        ChangeSet(created={"b.md": b"b"}),
        cursor=(await store.load(ORG, "s1")).cursor,
        provenance=_prov(turn="t2", prompt="prompt B"),
        review="person",
    )
    assert first.change is not None
    await store.decide(first.change, "edit", by=REVIEWER, edits={"a.md": b"fixed"})
    [a] = await store.history(ORG, "a.md")
    [b] = await store.history(ORG, "b.md")
    assert (a.provenance.origin, a.provenance.turn, a.provenance.prompt) == (
        "edited",
        "t1",
        "prompt A",
    )
    assert (b.provenance.origin, b.provenance.turn, b.provenance.prompt) == (
        "edited",
        "t2",
        "prompt B",
    )


# -- stores that forget a person (managed stores and the folder store) ----


async def check_forget_user_reports_the_spaces_and_files_it_removed(store: Store) -> None:
    assert isinstance(store, PersonForgetting)
    drafts = DANA.model_copy(update={"space": "drafts"})
    dana_elsewhere = DANA.model_copy(update={"org": "bank-2"})
    await _save(store, DANA, ChangeSet(created={"prefs.md": b"p", "keep.md": b"k"}))
    await _save(store, drafts, ChangeSet(created={"draft.md": b"d", "gone.md": b"g"}))
    await _save(store, drafts, ChangeSet(deleted=("gone.md",)))
    await _save(store, CAROL, ChangeSet(created={"prefs.md": b"carol's"}))
    await _save(store, dana_elsewhere, ChangeSet(created={"prefs.md": b"bank-2"}))
    await _save(store, ORG, ChangeSet(created={"rules.md": b"org"}))

    forgot = await store.forget_user("dana", "bank-1", by=ADA)

    assert forgot == Forgot(spaces=tuple(sorted([DANA, drafts], key=str)), files=3), forgot
    for ref in (DANA, drafts):
        assert (await store.load(ref, "s9")).files == {}
    assert (await store.load(CAROL, "s9")).files == {"prefs.md": b"carol's"}
    assert (await store.load(dana_elsewhere, "s9")).files == {"prefs.md": b"bank-2"}
    assert (await store.load(ORG, "s9")).files == {"rules.md": b"org"}
    # Nothing left to forget is not an error, and says so.
    assert await store.forget_user("dana", "bank-1", by=ADA) == Forgot()
    assert await store.forget_user("nobody", "bank-1", by=ADA) == Forgot()
    # What they save later starts anew.
    await _save(store, DANA, ChangeSet(created={"new.md": b"n"}))
    assert (await store.load(DANA, "s9")).files == {"new.md": b"n"}


async def check_forget_user_refuses_a_bad_identity_and_removes_nothing(store: Store) -> None:
    assert isinstance(store, PersonForgetting)
    await _save(store, DANA, ChangeSet(created={"prefs.md": b"p"}))
    for user, org in (("../dana", "bank-1"), ("dana", "../bank-1"), ("", "bank-1")):
        await _raises(
            store.forget_user(user, org, by=ADA), InvalidName, f"forget_user({user!r}, {org!r})"
        )
    assert (await store.load(DANA, "s9")).files == {"prefs.md": b"p"}


FORGET_CHECKS: dict[str, Check] = {
    "forget_user_reports_the_spaces_and_files_it_removed": (
        check_forget_user_reports_the_spaces_and_files_it_removed
    ),
    "forget_user_refuses_a_bad_identity_and_removes_nothing": (
        check_forget_user_refuses_a_bad_identity_and_removes_nothing
    ),
}


REVIEW_CHECKS: dict[str, Check] = {
    "approving_a_stale_file_needs_force_and_otherwise_changes_nothing": (
        check_approving_a_stale_file_needs_force_and_otherwise_changes_nothing
    ),
    "a_forced_move_goes_only_over_the_live_file_its_reviewer_was_shown": (
        check_a_forced_move_goes_only_over_the_live_file_its_reviewer_was_shown
    ),
    "a_reviewers_edit_obeys_the_limits_and_changes_nothing_past_them": (
        check_a_reviewers_edit_obeys_the_limits_and_changes_nothing_past_them
    ),
    "person_review_holds_the_change_for_its_own_conversation": (
        check_person_review_holds_the_change_for_its_own_conversation
    ),
    "a_later_turn_replaces_the_same_file_in_the_waiting_change": (
        check_a_later_turn_replaces_the_same_file_in_the_waiting_change
    ),
    "two_conversations_both_wait_and_the_later_is_stale": (
        check_two_conversations_both_wait_and_the_later_is_stale
    ),
    "approve_makes_the_files_live_with_who_taught_and_who_approved": (
        check_approve_makes_the_files_live_with_who_taught_and_who_approved
    ),
    "approving_part_leaves_the_rest_waiting": check_approving_part_leaves_the_rest_waiting,
    "reject_applies_nothing_and_a_rejected_change_cannot_be_approved": (
        check_reject_applies_nothing_and_a_rejected_change_cannot_be_approved
    ),
    "edit_then_approve_stores_the_reviewers_content": (
        check_edit_then_approve_stores_the_reviewers_content
    ),
    "after_review_is_live_and_listed_and_rejecting_reverts": (
        check_after_review_is_live_and_listed_and_rejecting_reverts
    ),
    "the_spaces_own_review_setting_wins": check_the_spaces_own_review_setting_wins,
    "a_persons_own_memory_always_saves_at_once": check_a_persons_own_memory_always_saves_at_once,
    "review_decisions_and_settings_are_audited": check_review_decisions_and_settings_are_audited,
    "a_waiting_change_carries_modes_and_folders_until_approved": (
        check_a_waiting_change_carries_modes_and_folders_until_approved
    ),
    "a_folder_only_change_waits_and_a_reviewer_can_reject_it": (
        check_a_folder_only_change_waits_and_a_reviewer_can_reject_it
    ),
    "a_waiting_deletion_must_name_a_file_the_conversation_sees": (
        check_a_waiting_deletion_must_name_a_file_the_conversation_sees
    ),
    "a_space_switched_from_after_to_person_holds_the_next_edit_apart": (
        check_a_space_switched_from_after_to_person_holds_the_next_edit_apart
    ),
    "a_space_switched_from_person_to_after_keeps_the_waiting_change_apart": (
        check_a_space_switched_from_person_to_after_keeps_the_waiting_change_apart
    ),
    "a_change_held_for_review_needs_a_conversation": (
        check_a_change_held_for_review_needs_a_conversation
    ),
    "an_unknown_review_mode_is_a_config_error_and_changes_nothing": (
        check_an_unknown_review_mode_is_a_config_error_and_changes_nothing
    ),
    "approval_records_each_file_with_the_turn_that_taught_it": (
        check_approval_records_each_file_with_the_turn_that_taught_it
    ),
    "an_edited_approval_keeps_each_files_turn": check_an_edited_approval_keeps_each_files_turn,
}


# -- members: the people who sign in, and their tokens (managed stores) ----

OPERATOR = By(id="operator:0", role="admin")
ADA_MEMBER = Member(id="ada", org="bank-1", role="admin", label="Ada")
BEN_MEMBER = Member(id="ben", org="bank-1", role="viewer")


async def _member_audit(store: ManagedStore) -> list[tuple[str, str | None, str | None]]:
    members_acts = {"add-member", "change-member", "remove-member", "create-token", "revoke-tokens"}
    return [
        (e.action, e.target, None if e.actor is None else e.actor.id)
        for e in await store.audit()
        if e.action in members_acts
    ]


async def check_members_are_added_listed_changed_and_removed(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    assert await store.members("bank-1") == []
    assert await store.add_member(BEN_MEMBER, by=OPERATOR) == BEN_MEMBER
    await store.add_member(ADA_MEMBER, by=OPERATOR)
    assert await store.members("bank-1") == [ADA_MEMBER, BEN_MEMBER]  # by id
    assert await store.member("ben", "bank-1") == BEN_MEMBER
    promoted = BEN_MEMBER.model_copy(update={"role": "member", "label": "Ben"})
    assert await store.add_member(promoted, by=OPERATOR) == promoted
    assert await store.member("ben", "bank-1") == promoted
    assert await store.remove_member("ben", "bank-1", by=OPERATOR) == promoted
    assert await store.members("bank-1") == [ADA_MEMBER]
    await _raises_not_found(store.member("ben", "bank-1"))
    await _raises_not_found(store.remove_member("ben", "bank-1", by=OPERATOR))


async def check_member_ids_are_per_org(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    other = Member(id="ada", org="bank-2", role="viewer", label="Another Ada")
    await store.add_member(ADA_MEMBER, by=OPERATOR)
    await store.add_member(other, by=OPERATOR)
    assert await store.members("bank-2") == [other]
    assert (await store.member("ada", "bank-1")).role == "admin"
    mine = await store.create_token("ada", "bank-1", by=OPERATOR)
    theirs = await store.create_token("ada", "bank-2", by=OPERATOR)
    assert await store.resolve_token(mine.token) == ADA_MEMBER
    assert await store.resolve_token(theirs.token) == other
    # Revoking or removing one is nothing to the other.
    assert await store.revoke_tokens("ada", "bank-2", by=OPERATOR) == 1
    assert await store.resolve_token(mine.token) == ADA_MEMBER
    await store.remove_member("ada", "bank-2", by=OPERATOR)
    assert await store.members("bank-1") == [ADA_MEMBER]
    await _raises_not_found(store.member("ada", "bank-2"))
    await _raises_not_found(store.create_token("ben", "bank-2", by=OPERATOR))
    assert {e.org for e in await store.audit(org="bank-2")} == {"bank-2"}


async def check_a_token_is_shown_once_and_resolves_to_the_member_as_stored_now(
    store: Store,
) -> None:
    assert isinstance(store, ManagedStore)
    await store.add_member(BEN_MEMBER, by=OPERATOR)
    issued = await store.create_token("ben", "bank-1", by=OPERATOR)
    assert issued.member == BEN_MEMBER
    assert issued.token.startswith("memfs_") and looks_like_token(issued.token)
    assert issued.token not in repr(issued) and issued.token not in str(issued)
    second = await store.create_token("ben", "bank-1", by=OPERATOR)
    assert second.token != issued.token  # a member may hold several, each its own
    assert await store.resolve_token(issued.token) == BEN_MEMBER
    assert await store.resolve_token(second.token) == BEN_MEMBER
    # The role comes from the store, at the time of asking.
    admin = BEN_MEMBER.model_copy(update={"role": "admin"})
    await store.add_member(admin, by=OPERATOR)
    assert await store.resolve_token(issued.token) == admin


async def check_unknown_malformed_and_revoked_tokens_resolve_to_nothing(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await store.add_member(BEN_MEMBER, by=OPERATOR)
    issued = await store.create_token("ben", "bank-1", by=OPERATOR)
    other = await store.create_token("ben", "bank-1", by=OPERATOR)
    flipped = issued.token[:-1] + ("A" if issued.token[-1] != "A" else "B")
    for bad in (
        "",
        "memfs_",
        flipped,
        issued.token + "x",
        issued.token[:-1],
        issued.token.upper(),
        " " + issued.token,
        token_hash(issued.token),  # what the store keeps is no token
        "memfs_" + "A" * 43,
        "x" * 100_000,
        "memfs_\x00" + "A" * 42,
    ):
        assert await store.resolve_token(bad) is None, bad[:60]
    assert await store.revoke_tokens("ben", "bank-1", by=OPERATOR) == 2
    assert await store.resolve_token(issued.token) is None
    assert await store.resolve_token(other.token) is None
    assert await store.revoke_tokens("ben", "bank-1", by=OPERATOR) == 0
    assert await store.member("ben", "bank-1") == BEN_MEMBER  # still a member
    fresh = await store.create_token("ben", "bank-1", by=OPERATOR)
    assert await store.resolve_token(fresh.token) == BEN_MEMBER


async def check_a_removed_members_tokens_resolve_to_nothing_even_if_added_again(
    store: Store,
) -> None:
    assert isinstance(store, ManagedStore)
    await store.add_member(BEN_MEMBER, by=OPERATOR)
    issued = await store.create_token("ben", "bank-1", by=OPERATOR)
    await store.remove_member("ben", "bank-1", by=OPERATOR)
    assert await store.resolve_token(issued.token) is None
    # The same id again is a new membership: the old token stays revoked.
    await store.add_member(BEN_MEMBER, by=OPERATOR)
    assert await store.resolve_token(issued.token) is None
    await _raises_not_found(store.revoke_tokens("carol", "bank-1", by=OPERATOR))


async def check_every_change_to_members_is_audited_and_never_a_token(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await store.add_member(BEN_MEMBER, by=OPERATOR)
    await store.add_member(BEN_MEMBER, by=OPERATOR)  # a change to nothing: no entry
    await store.add_member(BEN_MEMBER.model_copy(update={"role": "member"}), by=ADA)
    await store.add_member(
        BEN_MEMBER.model_copy(update={"role": "member", "label": "Benjamin Secret"}), by=ADA
    )
    first = await store.create_token("ben", "bank-1", by=OPERATOR)
    await store.revoke_tokens("ben", "bank-1", by=OPERATOR)
    second = await store.create_token("ben", "bank-1", by=OPERATOR)
    await store.remove_member("ben", "bank-1", by=OPERATOR)
    assert await _member_audit(store) == [
        ("add-member", "ben", "operator:0"),
        ("change-member", "ben", "ada"),
        ("change-member", "ben", "ada"),
        ("create-token", "ben", "operator:0"),
        ("revoke-tokens", "ben", "operator:0"),
        ("create-token", "ben", "operator:0"),
        ("remove-member", "ben", "operator:0"),
    ]
    entries = [e for e in await store.audit(org="bank-1")]
    details = [e.detail for e in entries]
    assert details == [
        "role viewer",
        "role viewer -> member",
        "label changed",
        None,
        "1 token",
        None,
        "1 token",
    ]
    for entry in entries:
        written = canonical(entry).decode() + entry.hash
        for secret in (first.token, second.token):
            assert secret not in written and token_hash(secret) not in written
        assert "Benjamin" not in written  # a label is the person's, not the log's
    await store.verify_audit()


async def check_sign_ins_are_audited_and_a_failed_one_belongs_to_no_org(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await store.add_member(ADA_MEMBER, by=OPERATOR)
    await store.record_signin(ADA_MEMBER, client="192.0.2.7")
    await store.record_signin(None, client="198.51.100.9\n" + "x" * 500)
    signed = [e for e in await store.audit() if e.action.startswith("sign-in")]
    assert [(e.action, e.org, e.actor) for e in signed] == [
        ("sign-in", "bank-1", By(id="ada", role="admin")),  # never the label
        ("sign-in-failed", "", None),
    ]
    assert signed[0].detail == "192.0.2.7"
    failed = signed[1].detail or ""
    assert failed.startswith("198.51.100.9") and "\n" not in failed and len(failed) <= 100
    assert [e.action for e in await store.audit(org="bank-1")][-1] == "sign-in"
    await store.verify_audit()


async def check_a_refused_members_act_changes_nothing_and_is_not_audited(store: Store) -> None:
    assert isinstance(store, ManagedStore)
    await store.add_member(BEN_MEMBER, by=OPERATOR)
    before = await store.audit()
    await _raises_not_found(store.create_token("carol", "bank-1", by=OPERATOR))
    await _raises_not_found(store.revoke_tokens("carol", "bank-1", by=OPERATOR))
    await _raises_not_found(store.remove_member("carol", "bank-1", by=OPERATOR))
    for bad_id in ("..", "a/b", "", "x\x00y", "tab\tbed", "é" * 200):
        for call in (
            store.member(bad_id, "bank-1"),
            store.create_token(bad_id, "bank-1", by=OPERATOR),
            store.remove_member("ben", bad_id, by=OPERATOR),
        ):
            try:
                await call
            except InvalidName:
                pass
            else:
                raise AssertionError(f"member id {bad_id!r} was not refused")
    assert await store.audit() == before
    assert await store.members("bank-1") == [BEN_MEMBER]


COMMON_CHECKS: dict[str, Check] = {
    "unknown_space_loads_empty": check_unknown_space_loads_empty,
    "created_files_load_back_byte_for_byte": check_created_files_load_back_byte_for_byte,
    "update_and_delete_apply": check_update_and_delete_apply,
    "snapshot_names_the_revisions_stored": check_snapshot_names_the_revisions_stored,
    "cursor_moves_on_after_a_store": check_cursor_moves_on_after_a_store,
    "stale_cursor_on_a_touched_file_conflicts_and_commits_nothing": (
        check_stale_cursor_on_a_touched_file_conflicts_and_commits_nothing
    ),
    "concurrent_creates_of_one_path_conflict": check_concurrent_creates_of_one_path_conflict,
    "update_of_a_file_deleted_since_conflicts": check_update_of_a_file_deleted_since_conflicts,
    "spaces_are_isolated_by_layer_org_and_user": check_spaces_are_isolated_by_layer_org_and_user,
    "modes_and_mtimes_load_back": check_modes_and_mtimes_load_back,
    "times_before_1970_and_up_to_2262_load_back": (
        check_times_before_1970_and_up_to_2262_load_back
    ),
    "a_mode_only_change_is_an_update": check_a_mode_only_change_is_an_update,
    "an_update_that_names_no_mode_keeps_the_mode": (
        check_an_update_that_names_no_mode_keeps_the_mode
    ),
    "empty_folders_are_kept_until_removed": check_empty_folders_are_kept_until_removed,
    "a_folder_outlives_its_last_file_when_stored": (
        check_a_folder_outlives_its_last_file_when_stored
    ),
    "deleting_a_file_the_space_does_not_hold_is_refused_whole": (
        check_deleting_a_file_the_space_does_not_hold_is_refused_whole
    ),
}
MANAGED_CHECKS: dict[str, Check] = {
    "a_turn_that_loaded_before_its_author_was_forgotten_stores_no_words_of_theirs": (
        check_a_turn_that_loaded_before_its_author_was_forgotten_stores_no_words_of_theirs
    ),
    "files_as_of_a_cursor_are_the_files_then_after_later_edits_and_deletes": (
        check_files_as_of_a_cursor_are_the_files_then_after_later_edits_and_deletes
    ),
    "files_as_of_a_cursor_lose_a_persons_forgotten_file_and_person": (
        check_files_as_of_a_cursor_lose_a_persons_forgotten_file_and_person
    ),
    "files_as_of_a_cursor_the_store_did_not_issue_is_not_found": (
        check_files_as_of_a_cursor_the_store_did_not_issue_is_not_found
    ),
    "opening_a_persons_files_as_of_a_cursor_is_audited": (
        check_opening_a_persons_files_as_of_a_cursor_is_audited
    ),
    "find_traces_filters_by_turn_space_and_time": check_find_traces_filters_by_turn_space_and_time,
    "changes_to_other_files_do_not_block": check_changes_to_other_files_do_not_block,
    "sign_ins_are_audited_and_a_failed_one_belongs_to_no_org": (
        check_sign_ins_are_audited_and_a_failed_one_belongs_to_no_org
    ),
    "every_write_is_a_revision_with_provenance": check_every_write_is_a_revision_with_provenance,
    "put_applies_a_persons_edit_at_once": check_put_applies_a_persons_edit_at_once,
    "restore_brings_back_an_earlier_revision_as_an_edit": (
        check_restore_brings_back_an_earlier_revision_as_an_edit
    ),
    "restore_of_a_deleted_file": check_restore_of_a_deleted_file,
    "restore_of_an_unknown_revision_is_not_found": (
        check_restore_of_an_unknown_revision_is_not_found
    ),
    "forget_org_file_keeps_history_and_can_be_restored": (
        check_forget_org_file_keeps_history_and_can_be_restored
    ),
    "forget_user_file_purges_its_history": check_forget_user_file_purges_its_history,
    "forget_user_file_purges_a_file_already_deleted": (
        check_forget_user_file_purges_a_file_already_deleted
    ),
    "forget_user_removes_every_space_of_that_person_in_that_org": (
        check_forget_user_removes_every_space_of_that_person_in_that_org
    ),
    "forget_user_leaves_other_people_and_orgs": check_forget_user_leaves_other_people_and_orgs,
    "a_repeated_store_of_one_turn_is_stored_once": (
        check_a_repeated_store_of_one_turn_is_stored_once
    ),
    "a_trace_is_kept_once_per_turn": check_a_trace_is_kept_once_per_turn,
    "a_load_after_forgetting_stores_again": check_a_load_after_forgetting_stores_again,
    "a_store_says_which_files_of_a_person_were_forgotten_after_a_cursor": (
        check_a_store_says_which_files_of_a_person_were_forgotten_after_a_cursor
    ),
    "a_store_says_whether_a_person_was_forgotten_after_a_cursor": (
        check_a_store_says_whether_a_person_was_forgotten_after_a_cursor
    ),
    "a_store_says_whether_a_whole_person_was_forgotten_after_a_cursor": (
        check_a_store_says_whether_a_whole_person_was_forgotten_after_a_cursor
    ),
    "a_store_marks_each_forget_of_a_whole_person": (
        check_a_store_marks_each_forget_of_a_whole_person
    ),
    "every_sensitive_act_is_audited_with_actor_and_time": (
        check_every_sensitive_act_is_audited_with_actor_and_time
    ),
    "a_failed_act_leaves_no_audit_entry": check_a_failed_act_leaves_no_audit_entry,
    "opening_a_persons_memory_is_audited": check_opening_a_persons_memory_is_audited,
    "reading_a_persons_history_for_someone_is_an_audited_open": (
        check_reading_a_persons_history_for_someone_is_an_audited_open
    ),
    "forgetting_a_persons_file_removes_it_from_stored_traces": (
        check_forgetting_a_persons_file_removes_it_from_stored_traces
    ),
    "the_audit_log_is_a_hash_chain_that_verifies": (
        check_the_audit_log_is_a_hash_chain_that_verifies
    ),
    "put_obeys_the_limits_and_writes_nothing_past_them": (
        check_put_obeys_the_limits_and_writes_nothing_past_them
    ),
    "the_audit_log_filters_by_org_and_outlives_forgetting": (
        check_the_audit_log_filters_by_org_and_outlives_forgetting
    ),
    "the_audit_log_reads_back_a_page_at_a_time_from_the_newest": (
        check_the_audit_log_reads_back_a_page_at_a_time_from_the_newest
    ),
    "people_lists_user_spaces_with_their_live_size": (
        check_people_lists_user_spaces_with_their_live_size
    ),
    "live_origins_give_each_live_files_size_and_latest_origin": (
        check_live_origins_give_each_live_files_size_and_latest_origin
    ),
    "traces_are_kept_per_turn_oldest_first": check_traces_are_kept_per_turn_oldest_first,
    "forget_user_removes_the_person_from_stored_traces": (
        check_forget_user_removes_the_person_from_stored_traces
    ),
    "history_shows_each_revisions_mode": check_history_shows_each_revisions_mode,
    "ctimes_load_back": check_ctimes_load_back,
    "restore_brings_back_the_revisions_mode": check_restore_brings_back_the_revisions_mode,
    "members_are_added_listed_changed_and_removed": (
        check_members_are_added_listed_changed_and_removed
    ),
    "member_ids_are_per_org": check_member_ids_are_per_org,
    "a_token_is_shown_once_and_resolves_to_the_member_as_stored_now": (
        check_a_token_is_shown_once_and_resolves_to_the_member_as_stored_now
    ),
    "unknown_malformed_and_revoked_tokens_resolve_to_nothing": (
        check_unknown_malformed_and_revoked_tokens_resolve_to_nothing
    ),
    "a_removed_members_tokens_resolve_to_nothing_even_if_added_again": (
        check_a_removed_members_tokens_resolve_to_nothing_even_if_added_again
    ),
    "every_change_to_members_is_audited_and_never_a_token": (
        check_every_change_to_members_is_audited_and_never_a_token
    ),
    "a_refused_members_act_changes_nothing_and_is_not_audited": (
        check_a_refused_members_act_changes_nothing_and_is_not_audited
    ),
}


# Group commit (GroupCommitStore): many turn ends' stores and traces in one transaction.


def _request(ref: SpaceRef, changes: ChangeSet, session: str, cursor: str | None) -> StoreRequest:
    return StoreRequest(ref=ref, changes=changes, cursor=cursor, provenance=_prov(session))


async def check_a_batch_answers_each_item_as_its_own_call_would(store: Store) -> None:
    assert isinstance(store, GroupCommitStore) and isinstance(store, ManagedStore)
    trace = _trace("s1", "t1", {"rules": ORG, "me": DANA})
    items: list[StoreRequest | Trace] = [
        _request(ORG, ChangeSet(created={"a.md": b"org"}), "s1", None),
        _request(DANA, ChangeSet(created={"me.md": b"dana's"}), "s1", None),
        trace,
    ]
    first = await store.store_batch(items)
    assert [type(answer) for answer in first] == [Stored, Stored, type(None)]
    assert all(isinstance(a, Stored) and a.status == "saved" for a in first[:2])
    assert await store.files(ORG) == {"a.md": b"org"}
    assert await store.files(DANA) == {"me.md": b"dana's"}
    assert await store.traces() == [trace]
    # The same batch again (a turn end repeated after a crash): stored and traced once.
    assert await store.store_batch(items) == first
    assert len(await store.history(ORG, "a.md")) == 1
    assert await store.traces() == [trace]


async def check_an_item_of_a_batch_that_fails_fails_alone(store: Store) -> None:
    assert isinstance(store, GroupCommitStore) and isinstance(store, ManagedStore)
    answers = await store.store_batch(
        [
            _request(ORG, ChangeSet(created={"a.md": b"a"}), "s1", None),
            # Deleting a file the space does not hold: refused, as store() refuses it.
            _request(CAROL, ChangeSet(created={"c.md": b"c"}, deleted=("nothing.md",)), "s2", None),
            _request(DANA, ChangeSet(created={"d.md": b"d"}), "s3", None),
        ]
    )
    assert isinstance(answers[0], Stored) and answers[0].status == "saved"
    assert isinstance(answers[1], InvalidName) and answers[1].path == "nothing.md"
    assert isinstance(answers[2], Stored) and answers[2].status == "saved"
    assert await store.files(ORG) == {"a.md": b"a"}
    assert await store.files(CAROL) == {}  # nothing of the refused item was written
    assert await store.files(DANA) == {"d.md": b"d"}
    # A conflict is an answer like any other, not a failure of the batch.
    stale = (await store.load(ORG, "s4")).cursor
    await _save(store, ORG, ChangeSet(updated={"a.md": b"newer"}))
    [conflict] = await store.store_batch(
        [_request(ORG, ChangeSet(updated={"a.md": b"stale"}), "s4", stale)]
    )
    assert isinstance(conflict, Stored) and conflict.status == "conflict"
    assert await store.files(ORG) == {"a.md": b"newer"}


async def check_a_store_with_its_trace_records_both_or_neither(store: Store) -> None:
    assert isinstance(store, GroupCommitStore) and isinstance(store, ManagedStore)
    trace = _trace("s1", "t1", {"rules": ORG})
    answered: list[Stored] = []

    def trace_of(stored: Stored) -> Trace:
        answered.append(stored)
        return trace

    [answer] = await store.store_batch(
        [StoreRequest(ORG, ChangeSet(created={"a.md": b"a"}), None, _prov("s1"), trace=trace_of)]
    )
    assert isinstance(answer, Stored) and answer.status == "saved" and answered == [answer]
    assert await store.traces() == [trace]
    # Sent again (a turn end repeated after a crash): the same answer, stored and traced once.
    [again] = await store.store_batch(
        [StoreRequest(ORG, ChangeSet(created={"a.md": b"a"}), None, _prov("s1"), trace=trace_of)]
    )
    assert again == answer
    assert len(await store.history(ORG, "a.md")) == 1 and await store.traces() == [trace]

    def broken(stored: Stored) -> Trace:
        raise ValueError("no trace")

    # A trace that cannot be made fails its item whole: nothing of it is stored.
    [failed] = await store.store_batch(
        [StoreRequest(ORG, ChangeSet(created={"b.md": b"b"}), None, _prov("s2"), trace=broken)]
    )
    assert isinstance(failed, Exception)
    assert await store.files(ORG) == {"a.md": b"a"}
    # A conflict stores nothing: its trace is not made.
    stale = (await store.load(ORG, "s3")).cursor
    await _save(store, ORG, ChangeSet(updated={"a.md": b"newer"}))
    [conflict] = await store.store_batch(
        [StoreRequest(ORG, ChangeSet(updated={"a.md": b"old"}), stale, _prov("s3"), trace=broken)]
    )
    assert isinstance(conflict, Stored) and conflict.status == "conflict"
    assert await store.traces() == [trace]


GROUP_COMMIT_CHECKS: dict[str, Check] = {
    "a_batch_answers_each_item_as_its_own_call_would": (
        check_a_batch_answers_each_item_as_its_own_call_would
    ),
    "an_item_of_a_batch_that_fails_fails_alone": check_an_item_of_a_batch_that_fails_fails_alone,
    "a_store_with_its_trace_records_both_or_neither": (
        check_a_store_with_its_trace_records_both_or_neither
    ),
}


def checks_for(store: Store) -> dict[str, Check]:
    """The checks that apply to ``store``: managed and reviewing stores get theirs too."""
    checks = dict(COMMON_CHECKS)
    if isinstance(store, PersonForgetting):
        checks.update(FORGET_CHECKS)
    if isinstance(store, ManagedStore):
        checks.update(MANAGED_CHECKS)
    if isinstance(store, ReviewingStore):
        checks.update(REVIEW_CHECKS)
    if isinstance(store, GroupCommitStore):
        checks.update(GROUP_COMMIT_CHECKS)
    return checks


async def _make(make_store: MakeStore) -> Store:
    made = make_store()
    if inspect.isawaitable(made):
        return await made
    return made


async def run_check(make_store: MakeStore, name: str) -> None:
    """Run one named check on a fresh store, and close the store after."""
    store = await _make(make_store)
    try:
        check = {
            **COMMON_CHECKS,
            **FORGET_CHECKS,
            **MANAGED_CHECKS,
            **REVIEW_CHECKS,
            **GROUP_COMMIT_CHECKS,
        }[name]
        if name in FORGET_CHECKS and not isinstance(store, PersonForgetting):
            raise AssertionError(f"{name} applies only to stores that forget people; {store!r}")
        if name in MANAGED_CHECKS and not isinstance(store, ManagedStore):
            raise AssertionError(f"{name} applies only to managed stores; {store!r} is not one")
        if name in REVIEW_CHECKS and not isinstance(store, ReviewingStore):
            raise AssertionError(f"{name} applies only to reviewing stores; {store!r} is not one")
        if name in GROUP_COMMIT_CHECKS and not isinstance(store, GroupCommitStore):
            raise AssertionError(f"{name} applies only to group-committing stores; {store!r}")
        await check(store)
    finally:
        await store.aclose()


async def check_store(make_store: MakeStore) -> None:
    """Run the whole store contract against fresh stores from ``make_store``."""
    probe = await _make(make_store)
    names = list(checks_for(probe))
    await probe.aclose()
    for name in names:
        try:
            await run_check(make_store, name)
        except AssertionError as exc:
            raise AssertionError(f"store check {name} failed: {exc}") from exc


__all__ = [
    "COMMON_CHECKS",
    "FORGET_CHECKS",
    "GROUP_COMMIT_CHECKS",
    "MANAGED_CHECKS",
    "REVIEW_CHECKS",
    "check_store",
    "checks_for",
    "run_check",
]
