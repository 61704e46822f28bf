"""The folder store: plain files on disk, whole-space conflicts, atomic writes, safe reads.

The store contract itself runs in ``test_store_conformance.py``; these pin
what is particular to keeping memory as folders people can also edit by hand.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

import pytest
import trio

from memfs.core.errors import (
    ConfigError,
    Forgotten,
    InvalidName,
    StoreUnavailable,
    Unsupported,
)
from memfs.core.models import ChangeSet, FileMeta, Provenance, SpaceRef, digest
from memfs.stores.base import ManagedStore, Store
from memfs.stores.folder import EMPTY_CURSOR, TEMP_PREFIX, FolderStore
from memfs.stores.open import open_store

ORG = SpaceRef(layer="org", space="lending-rules", org="bank-1")
DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
DIR = SpaceRef(layer="dir", space="scratch")
PROV = Provenance(session="s1", turn="t1")


async def save(store: FolderStore, ref: SpaceRef, changes: ChangeSet) -> None:
    loaded = await store.load(ref, "s1")
    stored = await store.store(ref, changes, cursor=loaded.cursor, provenance=PROV)
    assert stored.status == "saved", stored


def temp_files(root: Path) -> list[str]:
    return [
        os.path.join(folder, name)
        for folder, dirs, files in os.walk(root)
        for name in [*dirs, *files]
        if name.startswith(TEMP_PREFIX)
    ]


def test_folder_store_is_a_store_but_not_a_managed_one(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    assert isinstance(store, Store)
    assert not isinstance(store, ManagedStore)


def test_folder_store_opens_from_its_url(tmp_path: Path) -> None:
    store = open_store(f"folder://{tmp_path}/root")
    assert isinstance(store, FolderStore)
    assert store.root == tmp_path / "root"


async def test_folder_store_lays_out_org_and_people_folders(tmp_path: Path) -> None:
    root = tmp_path / "not-yet" / "root"
    store = FolderStore(root)
    assert (await store.load(ORG, "s1")).files == {}
    assert not root.exists()  # loading never creates anything

    await save(store, ORG, ChangeSet(created={"rules.md": b"org"}))
    await save(store, DANA, ChangeSet(created={"notes/a.md": b"dana"}))
    await save(store, DIR, ChangeSet(created={"x.txt": b"dir"}))

    assert (root / "org" / "bank-1" / "lending-rules" / "rules.md").read_bytes() == b"org"
    assert (root / "people" / "bank-1" / "dana" / "me" / "notes" / "a.md").read_bytes() == b"dana"
    assert (root / "dirs" / "default" / "scratch" / "x.txt").read_bytes() == b"dir"
    assert sorted(p.name for p in root.iterdir()) == [".locks", "dirs", "org", "people"]


async def test_folder_store_revisions_are_content_digests_and_cursor_hashes_content(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    assert (await store.load(ORG, "s1")).cursor == EMPTY_CURSOR
    loaded = await store.load(ORG, "s1")
    stored = await store.store(
        ORG, ChangeSet(created={"a.md": b"a"}), cursor=loaded.cursor, provenance=PROV
    )
    assert stored.revisions == {"a.md": digest(b"a")}
    after = await store.load(ORG, "s1")
    assert after.revisions == {"a.md": digest(b"a")}
    assert stored.cursor == after.cursor != EMPTY_CURSOR

    await save(store, ORG, ChangeSet(deleted=("a.md",)))
    assert (await store.load(ORG, "s1")).cursor == EMPTY_CURSOR  # same content, same cursor


async def test_folder_store_any_change_to_the_space_conflicts_whole_space(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"a", "b.md": b"b"}))
    first = await store.load(ORG, "s1")
    second = await store.load(ORG, "s2")
    ok = await store.store(
        ORG, ChangeSet(updated={"a.md": b"a2"}), cursor=first.cursor, provenance=PROV
    )
    assert ok.status == "saved"

    # s2 touches only files s1 left alone, yet the space as a whole moved on.
    late = await store.store(
        ORG,
        ChangeSet(updated={"b.md": b"b2"}, created={"c.md": b"c"}),
        cursor=second.cursor,
        provenance=PROV,
    )
    assert late.status == "conflict"
    assert late.conflicts == ("b.md", "c.md")
    now = await store.load(ORG, "s3")
    assert late.cursor == now.cursor
    assert now.files == {"a.md": b"a2", "b.md": b"b"}


async def test_folder_store_without_a_cursor_saves_at_once(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    stored = await store.store(ORG, ChangeSet(updated={"a.md": b"b"}), cursor=None, provenance=PROV)
    assert stored.status == "saved"
    assert (await store.load(ORG, "s1")).files == {"a.md": b"b"}


async def test_folder_store_replaces_files_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"old"}))
    target = store.folder(ORG) / "a.md"
    seen: list[bytes] = []

    def crash(src: str | Path, dst: str | Path) -> None:
        seen.append(Path(src).read_bytes())  # the new content is complete before the rename
        raise OSError(errno.EIO, "disk on fire")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreUnavailable) as caught:
        await store.store(ORG, ChangeSet(updated={"a.md": b"new"}), cursor=None, provenance=PROV)
    monkeypatch.undo()

    assert isinstance(caught.value.__cause__, OSError)
    assert seen == [b"new"]
    assert target.read_bytes() == b"old"
    assert temp_files(tmp_path) == []


async def test_folder_store_keeps_permissions_of_replaced_files(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"old"}))
    target = store.folder(ORG) / "a.md"
    target.chmod(0o640)
    await save(store, ORG, ChangeSet(updated={"a.md": b"new"}))
    assert target.stat().st_mode & 0o777 == 0o640


async def test_folder_store_keeps_emptied_folders_until_a_change_set_removes_them(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    await save(
        store,
        ORG,
        ChangeSet(created={"a/b/c.md": b"c", "a/d.md": b"d", "x/y/z.md": b"z"}),
    )
    await save(store, ORG, ChangeSet(deleted=("a/b/c.md", "x/y/z.md")))
    space = store.folder(ORG)
    # As on any disk, deleting a file leaves its folder.
    assert (space / "a" / "b").is_dir() and (space / "x" / "y").is_dir()
    assert (space / "a" / "d.md").read_bytes() == b"d"
    assert {"a", "a/b", "x", "x/y"} == set((await store.load(ORG, "s1")).folders)

    await save(store, ORG, ChangeSet(deleted=("a/d.md",), folders_deleted=("a", "a/b", "x/y", "x")))
    assert space.is_dir()  # the space folder itself stays
    assert list(space.iterdir()) == []


async def test_folder_store_keeps_a_mode_in_the_private_files_owner_bits_and_mtimes_exactly(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    mtime = 1_600_000_000_123_456_789
    await save(
        store,
        ORG,
        ChangeSet(
            created={"run.sh": b"#!/bin/sh\n", "notes.md": b"n"},
            meta={"run.sh": FileMeta(mode=0o755, mtime_ns=mtime)},
        ),
    )
    target = store.folder(ORG) / "run.sh"
    info = target.stat()
    # On disk the files are the store user's alone; the execute bit is kept.
    assert (stat.S_IMODE(info.st_mode), info.st_mtime_ns) == (0o700, mtime)
    assert stat.S_IMODE((store.folder(ORG) / "notes.md").stat().st_mode) == 0o600
    loaded = await store.load(ORG, "s1")
    assert (loaded.meta_of("run.sh").mode, loaded.meta_of("notes.md").mode) == (0o755, 0o644)
    target.chmod(0o4711)  # a person's chmod by hand: setuid is not memfs's to keep
    assert (await store.load(ORG, "s1")).meta_of("run.sh").mode == 0o755


async def test_folder_store_leaves_a_removed_folder_that_still_holds_a_persons_file(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(folders_created=("drafts",)))
    (store.folder(ORG) / "drafts" / "by-hand.md").write_bytes(b"mine")
    await save(store, ORG, ChangeSet(folders_deleted=("drafts",)))
    assert (store.folder(ORG) / "drafts" / "by-hand.md").read_bytes() == b"mine"


async def test_folder_store_deleting_a_file_it_does_not_hold_is_invalid_name(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    with pytest.raises(InvalidName):
        await store.store(
            ORG,
            ChangeSet(created={"b.md": b"b"}, deleted=("gone.md",)),
            cursor=None,
            provenance=PROV,
        )
    assert (await store.load(ORG, "s1")).files == {"a.md": b"a"}  # nothing of it written


async def test_folder_store_swaps_a_file_for_a_folder_in_one_change_set(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a": b"file"}))
    await save(store, ORG, ChangeSet(created={"a/b.md": b"inside"}, deleted=("a",)))
    assert (await store.load(ORG, "s1")).files == {"a/b.md": b"inside"}
    await save(store, ORG, ChangeSet(created={"a": b"file again"}, deleted=("a/b.md",)))
    assert (await store.load(ORG, "s1")).files == {"a": b"file again"}


async def test_folder_store_refuses_a_path_that_is_both_file_and_folder(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a": b"file"}))
    with pytest.raises(InvalidName):
        await store.store(
            ORG, ChangeSet(created={"a/b.md": b"x", "c.md": b"c"}), cursor=None, provenance=PROV
        )
    assert (await store.load(ORG, "s1")).files == {"a": b"file"}


async def test_folder_store_ignores_symlinks_and_fifos_on_load(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_bytes(b"secret")
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"real.md": b"real", "sub/in.md": b"in"}))
    space = store.folder(ORG)
    (space / "file-link.md").symlink_to(outside / "secret.md")
    (space / "inner-link.md").symlink_to(space / "real.md")
    (space / "dir-link").symlink_to(outside, target_is_directory=True)
    (space / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(space / "sub" / "pipe")

    with trio.fail_after(5):  # opening the FIFO would hang the load
        loaded = await store.load(ORG, "s1")
    assert loaded.files == {"real.md": b"real", "sub/in.md": b"in"}


async def test_folder_store_refuses_writes_through_a_symlinked_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"real.md": b"real"}))
    (store.folder(ORG) / "dir-link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Unsupported):
        await store.store(
            ORG, ChangeSet(created={"dir-link/x.md": b"escape"}), cursor=None, provenance=PROV
        )
    assert list(outside.iterdir()) == []


async def test_folder_store_skips_non_utf8_names_on_load(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"ok.md": b"ok"}))
    space = os.fsencode(store.folder(ORG))
    try:
        with open(space + b"/bad-\xff.md", "wb") as f:
            f.write(b"bad")
        os.mkdir(space + b"/dir-\xfe")
    except OSError as exc:  # some filesystems refuse such names outright
        pytest.skip(f"this filesystem rejects non-UTF-8 names: {exc}")
    with open(space + b"/dir-\xfe/inner.md", "wb") as f:
        f.write(b"inner")
    loaded = await store.load(ORG, "s1")
    assert loaded.files == {"ok.md": b"ok"}


async def test_folder_store_skips_its_own_temp_files(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    (store.folder(ORG) / f"{TEMP_PREFIX}left-by-a-crash").write_bytes(b"half")
    assert (await store.load(ORG, "s1")).files == {"a.md": b"a"}
    with pytest.raises(InvalidName):
        await store.store(
            ORG, ChangeSet(created={f"{TEMP_PREFIX}x": b"x"}), cursor=None, provenance=PROV
        )


def test_folder_store_root_that_is_a_file_is_config_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.write_bytes(b"not a folder")
    with pytest.raises(ConfigError):
        FolderStore(root)


async def test_folder_store_filesystem_failure_is_store_unavailable(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    space = store.folder(ORG)
    space.parent.mkdir(parents=True)
    space.write_bytes(b"a file where the space folder should be")
    with pytest.raises(StoreUnavailable) as caught:
        await store.load(ORG, "s1")
    assert isinstance(caught.value.__cause__, OSError)
    with pytest.raises(StoreUnavailable):
        await store.store(ORG, ChangeSet(created={"a.md": b"a"}), cursor=None, provenance=PROV)


async def test_folder_store_reads_files_put_there_by_hand(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    before = await store.load(ORG, "s1")

    (store.folder(ORG) / "notes").mkdir()
    (store.folder(ORG) / "notes" / "by-hand.md").write_bytes(b"dropped in")

    after = await store.load(ORG, "s1")
    assert after.files == {"a.md": b"a", "notes/by-hand.md": b"dropped in"}
    assert after.cursor != before.cursor
    # The turn that loaded before the person's edit cannot save over it unseen.
    late = await store.store(
        ORG, ChangeSet(updated={"a.md": b"a2"}), cursor=before.cursor, provenance=PROV
    )
    assert late.status == "conflict"


async def test_folder_store_concurrent_stores_on_one_snapshot_save_once(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "root")
    loaded = await store.load(ORG, "s1")
    statuses: list[str] = []

    async def write(content: bytes) -> None:
        stored = await store.store(
            ORG, ChangeSet(created={"x.md": content}), cursor=loaded.cursor, provenance=PROV
        )
        statuses.append(stored.status)

    async with trio.open_nursery() as nursery:
        for i in range(8):
            nursery.start_soon(write, str(i).encode())
    assert sorted(statuses) == ["conflict"] * 7 + ["saved"]


async def test_folder_store_waits_for_another_process_holding_the_space_lock(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    lock = tmp_path / "root" / ".locks" / "org" / "bank-1" / "lending-rules.lock"
    assert lock.is_file()
    done = trio.Event()

    async def write() -> None:
        await store.store(ORG, ChangeSet(updated={"a.md": b"b"}), cursor=None, provenance=PROV)
        done.set()

    # flock locks belong to the open file, so a second open stands in for another process.
    with open(lock, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            with trio.move_on_after(0.3):
                await done.wait()
            assert not done.is_set()
            assert (store.folder(ORG) / "a.md").read_bytes() == b"a"
            fcntl.flock(held, fcntl.LOCK_UN)
            with trio.fail_after(5):
                await done.wait()
    assert (store.folder(ORG) / "a.md").read_bytes() == b"b"


async def test_folder_store_refuses_a_file_where_a_folder_holds_other_things(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    await save(store, ORG, ChangeSet(created={"keep.md": b"k"}))
    space = store.folder(ORG)
    (space / "empty").mkdir()
    (space / "full").mkdir()
    (space / "full" / "link").symlink_to(space / "keep.md")  # load skips it, yet it is there
    with pytest.raises(InvalidName):
        await store.store(ORG, ChangeSet(created={"full": b"x"}), cursor=None, provenance=PROV)
    assert (space / "full" / "link").is_symlink()
    # An empty folder holds no content, so a file may take its place.
    await save(store, ORG, ChangeSet(created={"empty": b"now a file"}))
    assert (space / "empty").read_bytes() == b"now a file"


async def test_folder_store_forget_user_removes_the_persons_folder_and_lock_files_whole(
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "root")
    drafts = DANA.model_copy(update={"space": "drafts"})
    await save(store, DANA, ChangeSet(created={"prefs.md": b"p", "sub/n.md": b"n"}))
    await save(store, drafts, ChangeSet(folders_created=("empty",)))
    person = tmp_path / "root" / "people" / "bank-1" / "dana"
    # What a person may have dropped in by hand: a stray file, a name no space
    # could have, a symlink to something outside that must not be followed.
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"not dana's")
    (person / "stray.txt").write_bytes(b"s")
    (person / "Not A Space").mkdir()
    (person / "Not A Space" / "x.md").write_bytes(b"x")
    (person / "me" / "link.md").symlink_to(outside)
    (person / "elsewhere").symlink_to(tmp_path)
    locks = tmp_path / "root" / ".locks" / "people" / "bank-1" / "dana"
    assert locks.is_dir()

    forgot = await store.forget_user("dana", "bank-1", by=None)

    # A folder-only space held something; the odd names are gone but never counted.
    assert forgot.spaces == (drafts, DANA) and forgot.files == 2
    assert not person.exists() and not locks.exists()
    assert outside.read_bytes() == b"not dana's"
    assert (tmp_path / "root" / "people" / "bank-1").is_dir()
    assert (await store.load(DANA, "s1")).files == {}


async def test_folder_store_forget_user_of_nobody_and_of_a_lost_root(tmp_path: Path) -> None:
    never = FolderStore(tmp_path / "never-made")
    assert (await never.forget_user("dana", "bank-1", by=None)).spaces == ()
    assert not (tmp_path / "never-made").exists()  # forgetting makes nothing
    store = FolderStore(tmp_path / "root")
    await save(store, DANA, ChangeSet(created={"prefs.md": b"p"}))
    os.rename(tmp_path / "root", tmp_path / "moved")
    with pytest.raises(StoreUnavailable):
        await store.forget_user("dana", "bank-1", by=None)
    assert (tmp_path / "moved" / "people" / "bank-1" / "dana" / "me" / "prefs.md").is_file()


def test_a_root_another_thread_makes_during_the_look_is_not_called_missing(
    tmp_path: Path,
) -> None:
    # Eight first stores at once: one makes the root (and says so) between
    # another's look at the root and its look at whether one was ever made.
    store = FolderStore(tmp_path / "root")

    class MadeJustAfterTheLook(type(store.root)):  # type: ignore[misc]
        def is_dir(self) -> bool:
            seen = bool(super().is_dir())
            if not seen:
                os.mkdir(self)
                store._root_made = True
            return seen

    store.root = MadeJustAfterTheLook(store.root)
    assert store._require_root(ORG) is False  # not there when it looked: make it


async def test_a_turn_that_loaded_a_persons_empty_space_before_they_were_forgotten_stores_nothing(
    tmp_path: Path,
) -> None:
    # Her space was empty when the turn loaded it, and is empty after the
    # forget: the content hash alone could not tell them apart, and the
    # turn's files went into the store of a person just forgotten.
    store = FolderStore(tmp_path / "root")
    await store.store(ORG, ChangeSet(created={"r.md": b"rule"}), cursor=None, provenance=PROV)
    before = await store.load(DANA, "s1")
    await store.forget_user("dana", "bank-1", by=None)
    with pytest.raises(Forgotten):
        await store.store(
            DANA, ChangeSet(created={"diagnosis.md": b"x"}), cursor=before.cursor, provenance=PROV
        )
    assert (await store.load(DANA, "s2")).files == {}
    after = await store.load(DANA, "s2")  # once back, she is stored again
    saved = await store.store(
        DANA, ChangeSet(created={"tea.md": b"green"}), cursor=after.cursor, provenance=PROV
    )
    assert saved.status == "saved" and (await store.load(DANA, "s3")).cursor == saved.cursor
    marks = list((tmp_path / "root" / ".forgotten").iterdir())
    assert len(marks) == 1 and b"dana" not in marks[0].read_bytes()
    assert "dana" not in marks[0].name
    # Shared memory carries no mark: its cursors are as before.
    shared = (await store.load(ORG, "s1")).cursor
    assert shared is not None and "~" not in shared
