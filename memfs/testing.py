"""Testing helpers: the store conformance suite and an in-memory memory for app tests.

``check_store(make_store)`` runs every check of the store contract against a
backend, like ``trio.testing.check_one_way_stream``; each check gets a fresh
store from ``make_store``. ``test_memory()`` gives an app's tests a store to
pass to ``memfs.Memory`` and sync helpers to look inside it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from memfs.core.errors import NotFound
from memfs.core.models import DEFAULT_ORG, By, ChangeSet, Provenance, SpaceRef, Stored
from memfs.stores.base import ManagedStore, Store
from memfs.stores.memory import MemoryStore

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
    # A turn that loaded the file before it was forgotten cannot write it back.
    late = await store.store(
        DANA,
        ChangeSet(updated={"secret.md": b"s2 and more"}),
        cursor=before.cursor,
        provenance=_prov(),
    )
    assert late.status == "conflict"
    assert late.conflicts == ("secret.md",)
    assert await store.history(DANA, "secret.md") == []
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
}
MANAGED_CHECKS: dict[str, Check] = {
    "changes_to_other_files_do_not_block": check_changes_to_other_files_do_not_block,
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
}


def checks_for(store: Store) -> dict[str, Check]:
    """The checks that apply to ``store``: managed stores get the managed ones too."""
    if isinstance(store, ManagedStore):
        return {**COMMON_CHECKS, **MANAGED_CHECKS}
    return dict(COMMON_CHECKS)


async def _make(make_store: MakeStore) -> Store:
    made = make_store()
    if inspect.isawaitable(made):
        return await made
    return made


async def run_check(make_store: MakeStore, name: str) -> None:
    """Run one named check on a fresh store, and close the store after."""
    store = await _make(make_store)
    try:
        check = {**COMMON_CHECKS, **MANAGED_CHECKS}[name]
        if name in MANAGED_CHECKS and not isinstance(store, ManagedStore):
            raise AssertionError(f"{name} applies only to managed stores; {store!r} is not one")
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


class TestMemory:
    """An in-memory store for an app's tests, with sync helpers to look inside it."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self) -> None:
        self.store = MemoryStore()

    @staticmethod
    def _ref(space: str, org: str, user: str | None) -> SpaceRef:
        return SpaceRef(layer="org" if user is None else "user", space=space, org=org, user=user)

    def files(
        self, space: str, *, org: str = DEFAULT_ORG, user: str | None = None
    ) -> dict[str, bytes]:
        """The live files of an org space, or of ``user``'s space when given."""
        return self.store.files_nowait(self._ref(space, org, user))

    def changes(self) -> list[dict[str, Any]]:
        """Every change set the store accepted, oldest first."""
        return [
            {
                "space": event.ref.space,
                "layer": event.ref.layer,
                "org": event.ref.org,
                "user": event.ref.user,
                "status": event.status,
                "created": dict(event.changes.created),
                "updated": dict(event.changes.updated),
                "deleted": list(event.changes.deleted),
                "session": event.provenance.session,
                "turn": event.provenance.turn,
                "prompt": event.provenance.prompt,
                "origin": event.provenance.origin,
                "by": None if event.provenance.by is None else event.provenance.by.model_dump(),
            }
            for event in self.store.events
        ]

    def put(
        self,
        space: str,
        files: Mapping[str, bytes | str | None],
        *,
        org: str = DEFAULT_ORG,
        user: str | None = None,
        by: Mapping[str, Any] | str | None = None,
    ) -> None:
        """A person's edit: write (or, with ``None``, delete) files at once, origin ``edited``."""
        ref = self._ref(space, org, user)
        live = self.store.files_nowait(ref)
        created: dict[str, bytes] = {}
        updated: dict[str, bytes] = {}
        deleted: list[str] = []
        for path, content in files.items():
            if content is None:
                deleted.append(path)
                continue
            data = content.encode() if isinstance(content, str) else content
            (updated if path in live else created)[path] = data
        self.store.put_nowait(
            ref,
            ChangeSet(created=created, updated=updated, deleted=tuple(deleted)),
            provenance=Provenance(origin="edited", by=By.coerce(by)),
        )


def test_memory() -> TestMemory:
    """A fresh in-memory store with helpers; pass ``.store`` to ``memfs.Memory``."""
    return TestMemory()


test_memory.__test__ = False  # type: ignore[attr-defined]


__all__ = [
    "COMMON_CHECKS",
    "MANAGED_CHECKS",
    "TestMemory",
    "check_store",
    "checks_for",
    "run_check",
    "test_memory",
]
