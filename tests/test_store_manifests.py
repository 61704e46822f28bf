"""Lean loads reuse the manifest read at a space's version, and never serve a stale one.

The cache itself (``memfs.stores.manifests``) is pinned first; then the
SQLite store: every way the live files or folders of a space can change,
made through another store on the same file (another process, as far as the
cache knows), shows in the next lean load, which must equal a fresh store's.
"""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from memfs.core.lineage import Lineage
from memfs.core.models import By, ChangeSet, FileMeta, Loaded, Provenance, SpaceRef, digest
from memfs.stores.base import ReviewingStore
from memfs.stores.manifests import HELD_VERSIONS, Manifest, ManifestCache
from memfs.stores.sqlite import SqliteStore

ORG = SpaceRef(layer="org", space="rules", org="bank")
DANA = SpaceRef(layer="user", space="me", org="bank", user="dana")
ADA = By(id="ada", label="Ada", role="admin")


def manifest(version: int, files: int) -> Manifest:
    paths = [f"f{i}.md" for i in range(files)]
    return Manifest(
        version=version,
        revisions={p: str(i) for i, p in enumerate(paths)},
        shas={p: "0" * 64 for p in paths},
        sizes={p: 1 for p in paths},
        meta={p: FileMeta(0o644, None, None) for p in paths},
        folders=frozenset(),
    )


def test_a_manifest_is_served_only_at_the_version_it_was_read() -> None:
    cache = ManifestCache(100)
    cache.put(1, manifest(7, 3))
    assert cache.get(1, 7) is not None
    assert cache.get(1, 8) is None
    assert cache.held(1, 8) is cache.get(1, 7)  # the base a load at 8 refreshes from
    assert cache.held(1, 6) is None  # nothing read at or before 6


@pytest.mark.parametrize("versions", [HELD_VERSIONS, HELD_VERSIONS + 1])
def test_a_space_keeps_its_last_held_versions_and_the_older_ones_go(versions: int) -> None:
    cache = ManifestCache(100)
    for version in range(1, versions + 1):
        cache.put(1, manifest(version, 3))
    kept = [v for v in range(1, versions + 1) if cache.get(1, v) is not None]
    assert kept == list(range(versions - HELD_VERSIONS + 1, versions + 1))  # at and past it
    assert cache.files == 3 * HELD_VERSIONS


def read_at(version: int, newest: int, files: int = 3) -> Manifest:
    """A manifest read whole at ``version``, whose space's newest revision row was ``newest``."""
    return dataclasses.replace(
        manifest(version, files),
        changes=version,
        top=newest,
        newest=(newest, ("f0.md", "0" * 64)),
        lineage=Lineage.start(version),
    )


def test_a_thread_asking_for_an_older_version_leaves_the_newer_manifest_held() -> None:
    # Loads run at once on a pool of connections, each from its own snapshot:
    # an older one must not throw away what a newer one read.
    cache = ManifestCache(100)
    cache.put(1, read_at(9, 90))
    assert cache.get(1, 8) is None
    assert cache.get(1, 9) is not None


def test_a_manifest_older_than_the_one_held_is_held_beside_it_for_loads_as_far_behind() -> None:
    cache = ManifestCache(100)
    newer, older = read_at(9, 90), read_at(8, 80)
    cache.put(1, newer)
    assert cache.put(1, older) is older
    assert cache.held(1) is newer  # the newest stays the base of what comes next
    assert cache.get(1, 8) is older and cache.held(1, 8) is older


def test_every_load_that_read_a_held_version_again_gets_the_held_one_and_its_line() -> None:
    # Ten sessions start at once over a space no thread held yet: each reads
    # it whole. Were each to keep its own line, a reader holding the first
    # one's (the daemon's shared base) would never find the cache's, and
    # would compare every file at every turn start.
    cache = ManifestCache(100)
    first, again = read_at(9, 90), read_at(9, 90)
    assert first.lineage is not None and again.lineage is not None
    assert first.lineage.line != again.lineage.line
    assert cache.put(1, first) is first
    assert cache.put(1, again) is first


def test_a_version_handed_out_again_after_a_restore_replaces_the_one_held() -> None:
    # The same version number, another newest row: not the same read.
    cache = ManifestCache(100)
    before, restored = read_at(9, 90), read_at(9, 91)
    cache.put(1, before)
    assert cache.put(1, restored) is restored
    assert cache.held(1) is restored
    # A manifest whose newest row is not known is never taken for the same read.
    unknown = dataclasses.replace(restored, newest=None)
    assert cache.put(1, unknown) is unknown


def test_the_cache_holds_files_up_to_its_bound_and_drops_the_least_recently_used() -> None:
    cache = ManifestCache(10)
    cache.put(1, manifest(1, 4))
    cache.put(2, manifest(1, 6))
    assert cache.files == 10  # at the bound: both held
    assert cache.get(1, 1) is not None  # 1 is now the most recently used
    cache.put(3, manifest(1, 1))  # past the bound: 2 goes
    assert cache.files == 5
    assert cache.get(2, 1) is None
    assert cache.get(1, 1) is not None and cache.get(3, 1) is not None


def test_a_manifest_larger_than_the_whole_bound_is_not_held() -> None:
    cache = ManifestCache(10)
    cache.put(1, manifest(1, 2))
    cache.put(2, manifest(1, 11))
    assert cache.get(2, 1) is None
    assert cache.get(1, 1) is not None and cache.files == 2


def test_a_bound_of_zero_holds_nothing_and_a_negative_bound_is_refused() -> None:
    cache = ManifestCache(0)
    cache.put(1, manifest(1, 0))  # even an empty manifest: nothing past the bound
    cache.put(2, manifest(1, 1))
    assert cache.get(2, 1) is None and cache.files == 0
    with pytest.raises(ValueError, match="max_files"):
        ManifestCache(-1)


PROV = Provenance(session="other", turn="t", prompt="p", by=By(id="carol", role="member"))


async def save(store: ReviewingStore, ref: SpaceRef, changes: ChangeSet) -> None:
    loaded = await store.load(ref, "other")
    stored = await store.store(ref, changes, cursor=loaded.cursor, provenance=PROV)
    assert stored.status == "saved", stored


def comparable(loaded: Loaded) -> tuple[object, ...]:
    return (
        loaded.paths(),
        loaded.revisions,
        loaded.shas,
        loaded.sizes,
        loaded.meta,
        loaded.folders,
        loaded.cursor,
    )


# Any managed store that holds review: the same writes run on SQLite and PostgreSQL.
Write = Callable[[ReviewingStore], Awaitable[object]]


async def _restore_a(store: ReviewingStore) -> object:
    [first, *_] = await store.history(ORG, "a.md")
    return await store.restore(ORG, "a.md", first.id, by=ADA)


async def _approve(store: ReviewingStore) -> object:
    loaded = await store.load(ORG, "other")
    stored = await store.store(
        ORG, ChangeSet(created={"c.md": b"c"}), cursor=loaded.cursor, provenance=PROV,
        review="person",
    )  # fmt: skip
    assert stored.status == "waiting"
    [change] = await store.list_changes(org="bank")
    return await store.decide(change.id, "approve", by=ADA)


WRITES: dict[str, Write] = {
    "a turn's store": lambda s: save(s, ORG, ChangeSet(updated={"a.md": b"a2"})),
    "a mode-only change": lambda s: save(
        s, ORG, ChangeSet(updated={"a.md": b"a1"}, meta={"a.md": FileMeta(0o755, None, None)})
    ),
    "a deletion": lambda s: save(s, ORG, ChangeSet(deleted=("b.md",))),
    "a folder-only change": lambda s: save(s, ORG, ChangeSet(folders_created=("empty",))),
    "a person's put": lambda s: s.put(
        ORG, ChangeSet(created={"p.md": b"p"}), provenance=Provenance(origin="edited", by=ADA)
    ),
    "a restore": _restore_a,
    "forgetting an org file": lambda s: s.forget_file(ORG, "a.md", by=ADA),
    "an approval": _approve,
}


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
async def test_a_write_through_another_store_on_the_file_shows_in_the_next_lean_load(
    tmp_path: Path, write: str
) -> None:
    path = tmp_path / "memfs.db"
    ours, theirs = SqliteStore(path), SqliteStore(path)
    try:
        await save(ours, ORG, ChangeSet(created={"a.md": b"a1", "b.md": b"b1"}))
        await save(ours, ORG, ChangeSet(updated={"a.md": b"a1 again"}))
        before = await ours.load_lean(ORG, "s1", set())
        assert await ours.load_lean(ORG, "s1", set()) == before  # read twice: one from cache

        await WRITES[write](theirs)

        after = await ours.load_lean(ORG, "s1", set())
        fresh = SqliteStore(path, manifest_cache_files=0)
        try:
            truth = await fresh.load_lean(ORG, "s1", set())
        finally:
            await fresh.aclose()
        assert comparable(after) == comparable(truth)
        assert comparable(after) != comparable(before)
        assert after.files == truth.files
    finally:
        await ours.aclose()
        await theirs.aclose()


@pytest.mark.parametrize(
    "edits",
    [(), ({"new.md": b"n2"},)],
    ids=["written once", "written and edited: its count of writes lines up"],
)
async def test_a_person_forgotten_and_written_again_is_never_served_the_old_manifest(
    tmp_path: Path, edits: tuple[dict[str, bytes], ...]
) -> None:
    # The space row is deleted and made again, maybe under the same id: its
    # version comes from the store's one counter, so it cannot match. Its
    # count of writes starts again, so a write and an edit of it count one
    # more than the old manifest's one, and its one row names a newer
    # revision: only the count of live rows tells the old file is gone.
    path = tmp_path / "memfs.db"
    ours, theirs = SqliteStore(path), SqliteStore(path)
    try:
        await save(ours, DANA, ChangeSet(created={"secret.md": b"s"}))
        assert (await ours.load_lean(DANA, "s1", set())).paths() == ["secret.md"]
        await theirs.forget_user("dana", "bank", by=ADA)
        await save(theirs, DANA, ChangeSet(created={"new.md": b"n"}))
        for edit in edits:
            await save(theirs, DANA, ChangeSet(updated=edit))
        with sqlite3.connect(path) as conn:  # the same id, the count of writes begun again
            assert conn.execute("SELECT id, live_changes FROM spaces").fetchall() == [
                (1, 1 + len(edits))
            ]
        again = await ours.load_lean(DANA, "s1", set())
        assert again.paths() == ["new.md"]
        assert again.files == {"new.md": edits[-1]["new.md"] if edits else b"n"}
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_a_restored_backup_is_read_afresh_even_where_versions_repeat(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"old"}))
        await store.aclose()
        shutil.copy(path, tmp_path / "backup.db")

        store = SqliteStore(path)
        await save(store, ORG, ChangeSet(updated={"a.md": b"newer"}))
        assert (await store.load_lean(ORG, "s1", set())).files == {"a.md": b"newer"}
        # The backup goes back in place, and a different write gives it the
        # same version number the cached manifest was read at.
        (tmp_path / "backup.db").replace(path)
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        with pytest.raises(Exception, match="replaced"):
            await store.load_lean(ORG, "s1", set())
        await save(store, ORG, ChangeSet(updated={"a.md": b"other"}))
        after = await store.load_lean(ORG, "s1", set())
        assert after.files == {"a.md": b"other"}
        assert after.shas == {"a.md": digest(b"other")} and after.sizes == {"a.md": 5}
    finally:
        await store.aclose()


async def test_an_unchanged_space_is_loaded_lean_without_reading_its_manifest_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={f"n{i}.md": b"x" for i in range(50)}))
        first = await store.load_lean(ORG, "s1", {digest(b"x")})
        # Damage the rows a manifest is read from: a load that read them
        # again would show it; one served at an unchanged version does not.
        # (Triggers off for this raw edit, or it would move the version.)
        with sqlite3.connect(path, isolation_level=None) as conn:
            conn.execute("PRAGMA recursive_triggers = OFF")
            conn.execute("DROP TRIGGER revisions_update_moves_version")
            conn.execute("UPDATE revisions SET size = 999")
        second = await store.load_lean(ORG, "s1", {digest(b"x")})
        assert second.sizes == first.sizes and set(second.sizes.values()) == {1}
        uncached = SqliteStore(path, manifest_cache_files=0)
        try:
            assert set((await uncached.load_lean(ORG, "s1", set())).sizes.values()) == {999}
        finally:
            await uncached.aclose()
    finally:
        await store.aclose()


async def test_a_space_that_moved_reads_only_the_rows_of_the_files_that_changed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={f"n{i}.md": b"x" for i in range(50)}))
        await store.load_lean(ORG, "s1", {digest(b"x")})
        # Damage the rows of every file (triggers off, so the version stays):
        # a refresh that read an unchanged file's row again would show it.
        with sqlite3.connect(path, isolation_level=None) as conn:
            conn.execute("DROP TRIGGER revisions_update_moves_version")
            conn.execute("UPDATE revisions SET size = 999")
        await save(
            store,
            ORG,
            ChangeSet(updated={"n1.md": b"yy"}, created={"new.md": b"zzz"}, deleted=("n2.md",)),
        )
        after = await store.load_lean(ORG, "s1", set())
        assert after.sizes["n1.md"] == 2 and after.sizes["new.md"] == 3
        assert after.shas["n1.md"] == digest(b"yy") and "n2.md" not in after.sizes
        assert {after.sizes[p] for p in after.sizes if p not in ("n1.md", "new.md")} == {1}
        assert set(after.paths()) == {f"n{i}.md" for i in range(50)} - {"n2.md"} | {"new.md"}
        assert set(after.shas) == set(after.sizes) == set(after.revisions) == set(after.meta)
    finally:
        await store.aclose()


def _without_live_triggers(path: Path, edit: str) -> None:
    """Run ``edit`` on the file with the live rows' triggers off: a write nobody counts."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        triggers = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'live'"
        ).fetchall()
        assert triggers
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(edit)
        for _, sql in triggers:
            conn.execute(sql)


async def test_a_space_moved_by_writes_alone_reads_no_live_row_of_an_unchanged_file(
    tmp_path: Path,
) -> None:
    # A turn that writes ten files into a space of 10,000 costs ten rows and
    # a count, not a row per file: every write is counted, and the rows
    # naming revisions newer than any the manifest held account for them all.
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={f"n{i}.md": b"x" for i in range(50)}))
        before = await store.load_lean(ORG, "s1", {digest(b"x")})
        # Point an unchanged file's live row elsewhere, uncounted: a refresh
        # that read every live row again would show it.
        _without_live_triggers(
            path,
            "UPDATE live SET revision_id = (SELECT revision_id FROM live WHERE path = 'n4.md')"
            " WHERE path = 'n3.md'",
        )
        await save(store, ORG, ChangeSet(updated={"n1.md": b"yy"}, created={"new.md": b"zzz"}))
        after = await store.load_lean(ORG, "s1", set())
        assert after.revisions["n3.md"] == before.revisions["n3.md"]
        assert after.sizes["n1.md"] == 2 and after.sizes["new.md"] == 3
        assert after.shas["new.md"] == digest(b"zzz") and after.files["new.md"] == b"zzz"
        assert set(after.paths()) == {f"n{i}.md" for i in range(50)} | {"new.md"}
        assert set(after.shas) == set(after.sizes) == set(after.revisions) == set(after.meta)
    finally:
        await store.aclose()


async def test_a_write_the_moved_rows_do_not_show_sends_the_refresh_to_every_live_row(
    tmp_path: Path,
) -> None:
    # A deletion, or a row put back to an older revision, leaves no row
    # naming a newer one: the count of writes says something else moved.
    path = tmp_path / "memfs.db"
    ours, theirs = SqliteStore(path), SqliteStore(path)
    try:
        await save(ours, ORG, ChangeSet(created={"a.md": b"a1", "b.md": b"b1"}))
        await save(ours, ORG, ChangeSet(updated={"a.md": b"a2"}))
        await ours.load_lean(ORG, "s1", set())
        await save(theirs, ORG, ChangeSet(created={"c.md": b"c"}, deleted=("b.md",)))
        await _restore_a(theirs)  # a.md back to its first revision: an older id
        after = await ours.load_lean(ORG, "s1", set())
        assert list(after.revisions) == ["a.md", "c.md"]
        assert after.files == {"a.md": b"a1", "c.md": b"c"}
    finally:
        await ours.aclose()
        await theirs.aclose()


async def read_fresh(path: Path) -> Loaded:
    """The space as a store with no manifest held reads it."""
    fresh = SqliteStore(path, manifest_cache_files=0)
    try:
        return await fresh.load_lean(ORG, "s1", set())
    finally:
        await fresh.aclose()


def put_back(backup: Path, path: Path) -> None:
    """SQLite's backup API (the shell's .restore): the older copy into the same file."""
    with sqlite3.connect(backup) as copy, sqlite3.connect(path) as live:
        copy.backup(live)


def take(path: Path, backup: Path) -> None:
    with sqlite3.connect(path) as live, sqlite3.connect(backup) as copy:
        live.backup(copy)


async def test_a_backup_put_back_in_place_is_never_refreshed_from_the_rows_that_moved(
    tmp_path: Path,
) -> None:
    # SQLite's backup API (the shell's .restore) puts an older copy into the
    # same file: no new inode to notice, and its counts and ids go back, so
    # writes after it can line up with the held manifest's. The newest
    # revision that manifest holds is not in the copy: it is read whole.
    path, backup = tmp_path / "memfs.db", tmp_path / "backup.db"
    other = SpaceRef(layer="org", space="other", org="bank")
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"old"}))
        take(path, backup)
        await save(store, other, ChangeSet(created={"x.md": b"x", "y.md": b"y", "z.md": b"z"}))
        await save(store, ORG, ChangeSet(updated={"a.md": b"newer"}, created={"b.md": b"b"}))
        held = await store.load_lean(ORG, "s1", set())
        assert held.files == {"a.md": b"newer", "b.md": b"b"}
        put_back(backup, path)
        await save(store, ORG, ChangeSet(updated={"a.md": b"other"}, created={"b.md": b"b2"}))
        after = await store.load_lean(ORG, "s1", set())
        truth = await read_fresh(path)
        assert truth.files == {"a.md": b"other", "b.md": b"b2"}
        assert comparable(after) == comparable(truth) and after.files == truth.files
    finally:
        await store.aclose()


async def test_a_backup_put_back_in_place_is_never_refreshed_by_revision_ids_handed_out_again(
    tmp_path: Path,
) -> None:
    # After the copy, the next write gets the id the held manifest has for
    # a.md, with other bytes; a second write moves the space past the held
    # version, and its counts do not line up, so the rows that moved cannot
    # say. Comparing each path's revision id would take a.md as unchanged.
    path, backup = tmp_path / "memfs.db", tmp_path / "backup.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"old"}))
        take(path, backup)
        await save(store, ORG, ChangeSet(updated={"a.md": b"newer"}))
        held = await store.load_lean(ORG, "s1", set())
        put_back(backup, path)
        await save(store, ORG, ChangeSet(updated={"a.md": b"other"}))
        await save(store, ORG, ChangeSet(created={"c.md": b"c"}))
        after = await store.load_lean(ORG, "s1", set())
        assert after.revisions["a.md"] == held.revisions["a.md"]  # the id, handed out again
        assert after.files == {"a.md": b"other", "c.md": b"c"}
        assert after.shas["a.md"] == digest(b"other")
    finally:
        await store.aclose()


async def test_a_backup_put_back_in_place_never_serves_a_manifest_at_a_version_handed_out_again(
    tmp_path: Path,
) -> None:
    # One write after the copy takes the space to the version number the
    # held manifest has, and a.md to its revision id, with other bytes.
    path, backup = tmp_path / "memfs.db", tmp_path / "backup.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"old"}))
        take(path, backup)
        await save(store, ORG, ChangeSet(updated={"a.md": b"newer"}))
        held = await store.load_lean(ORG, "s1", set())
        put_back(backup, path)
        await save(store, ORG, ChangeSet(updated={"a.md": b"other"}))
        after = await store.load_lean(ORG, "s1", {digest(b"newer")})
        assert (after.cursor, after.revisions) == (held.cursor, held.revisions)  # handed out again
        assert after.shas == {"a.md": digest(b"other")} and after.files == {"a.md": b"other"}
    finally:
        await store.aclose()


async def test_a_backup_put_back_in_place_never_serves_a_manifest_whose_newest_write_was_a_deletion(
    tmp_path: Path,
) -> None:
    # The manifest's newest live revision is older than the copy, so it is
    # still there as it was; the deletion it followed is not.
    path, backup = tmp_path / "memfs.db", tmp_path / "backup.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
        take(path, backup)
        await save(store, ORG, ChangeSet(deleted=("b.md",)))
        assert list((await store.load_lean(ORG, "s1", set())).revisions) == ["a.md"]
        put_back(backup, path)
        await save(store, ORG, ChangeSet(created={"c.md": b"c"}))
        after = await store.load_lean(ORG, "s1", set())
        assert comparable(after) == comparable(await read_fresh(path))
        assert sorted(after.revisions) == ["a.md", "b.md", "c.md"]
    finally:
        await store.aclose()


async def test_a_backup_put_back_in_place_is_never_refreshed_when_only_counts_line_up(
    tmp_path: Path,
) -> None:
    path, backup = tmp_path / "memfs.db", tmp_path / "backup.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
        await save(store, ORG, ChangeSet(created={"e.md": b"e"}))
        take(path, backup)
        await save(store, ORG, ChangeSet(deleted=("b.md",)))
        await store.load_lean(ORG, "s1", set())
        put_back(backup, path)
        await save(store, ORG, ChangeSet(deleted=("e.md",)))
        await save(store, ORG, ChangeSet(created={"c.md": b"c"}))
        after = await store.load_lean(ORG, "s1", set())
        assert comparable(after) == comparable(await read_fresh(path))
        assert sorted(after.revisions) == ["a.md", "b.md", "c.md"]
    finally:
        await store.aclose()


async def test_a_refresh_keeps_every_path_in_place_and_puts_new_ones_after_them(
    tmp_path: Path,
) -> None:
    # Sorting the whole space again at every turn start that follows a new
    # file cost more than every other step of the refresh: order is the
    # store's, and only a manifest read whole is in path order.
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={"b.md": b"b", "d.md": b"d"}))
        await store.load_lean(ORG, "s1", set())
        await save(store, ORG, ChangeSet(created={"c.md": b"c", "a.md": b"a"}))
        after = await store.load_lean(ORG, "s1", set())
        assert list(after.revisions) == ["b.md", "d.md", "a.md", "c.md"]
        assert after.files == {"a.md": b"a", "b.md": b"b", "c.md": b"c", "d.md": b"d"}
        fresh = SqliteStore(path)  # reads it whole: path order, the same maps
        try:
            whole = await fresh.load_lean(ORG, "s1", set())
            assert list(whole.revisions) == ["a.md", "b.md", "c.md", "d.md"]
            assert (whole.revisions, whole.shas, whole.sizes, whole.meta) == (
                after.revisions, after.shas, after.sizes, after.meta,
            )  # fmt: skip
        finally:
            await fresh.aclose()
    finally:
        await store.aclose()


async def test_a_lean_load_tells_which_paths_moved_since_each_earlier_version_it_saw(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store, other = SqliteStore(path), SqliteStore(path)
    try:
        await save(store, ORG, ChangeSet(created={f"n{i}.md": b"x" for i in range(20)}))
        first = (await store.load_lean(ORG, "s1", set())).lineage
        assert first is not None and first.steps == ()
        # Writes alone (the rows that moved), then a deletion (every live row read).
        await save(other, ORG, ChangeSet(updated={"n1.md": b"y"}, created={"new.md": b"z"}))
        second = (await store.load_lean(ORG, "s1", set())).lineage
        await save(other, ORG, ChangeSet(deleted=("n2.md",), updated={"n3.md": b"w"}))
        third = (await store.load_lean(ORG, "s1", set())).lineage
        assert second is not None and third is not None
        assert third.line == second.line == first.line
        assert third.moved_since(first.line, first.version) == frozenset(
            {"n1.md", "new.md", "n2.md", "n3.md"}
        )
        assert third.moved_since(second.line, second.version) == frozenset({"n2.md", "n3.md"})
        assert third.moved_since(third.line, third.version) == frozenset()
        # Another store process reads it whole: a line of its own.
        theirs = (await other.load_lean(ORG, "s1", set())).lineage
        assert theirs is not None and theirs.moved_since(first.line, first.version) is None
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_load_with_its_own_waiting_change_laid_over_tells_no_lineage(
    tmp_path: Path,
) -> None:
    # Its maps are no longer the store's manifest: what moved in the store
    # says nothing of the paths the waiting change wrote.
    store = SqliteStore(tmp_path / "memfs.db")
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
        assert (await store.load_lean(ORG, "s1", set())).lineage is not None
        held = await store.store(
            ORG,
            ChangeSet(created={"mine.md": b"m"}),
            cursor=None,
            provenance=Provenance(origin="conversation", session="s1", turn="t1"),
            review="person",
        )
        assert held.status == "waiting"
        own = await store.load_lean(ORG, "s1", set())
        assert own.files["mine.md"] == b"m" and own.lineage is None
        assert (await store.load_lean(ORG, "s2", set())).lineage is not None
    finally:
        await store.aclose()


def test_a_copy_of_a_load_that_replaced_a_map_tells_no_lineage() -> None:
    from memfs.core.lineage import Lineage

    loaded = Loaded(revisions={"a.md": "1"}, shas={"a.md": "s"}, sizes={"a.md": 1}).with_lineage(
        Lineage.start(1)
    )
    assert loaded.lineage is not None
    assert loaded.model_copy(update={"files": {}, "cursor": "2"}).lineage is not None
    for name in ("revisions", "shas", "sizes", "meta"):
        replaced = loaded.model_copy(update={name: dict(getattr(loaded, name))})
        assert replaced.lineage is None, name
    assert loaded == Loaded(revisions={"a.md": "1"}, shas={"a.md": "s"}, sizes={"a.md": 1})
