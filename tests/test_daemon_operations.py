"""The FUSE adapter and the overlay, called directly with a stand-in request context (no mount)."""

from __future__ import annotations

import ast
import errno
import inspect
import os
from pathlib import Path

import pyfuse3
import pytest

import memfsd.fs
from memfs.core.models import FileMeta, Limits
from memfsd.blobs import BlobCache
from memfsd.fs import MemfsOperations, fuse_errors
from memfsd.main import FUSE_TASKS
from memfsd.nodes import READS_HELD, ROOT_INODE, SnapshotFile
from memfsd.overlay import Overlay
from tests.overlay_helpers import Ctx, node_of, source_of, turn_of

CTX = Ctx(uid=1000, gid=1000)


def make(
    tmp_path: Path, *, read_only: bool = False, limits: Limits | None = None
) -> tuple[Overlay, MemfsOperations]:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"rule 1\n"])
    overlay = Overlay(tmp_path, blobs, limits or Limits())
    overlay.open_session("s1")
    overlay.attach_turn(
        "s1", "t1", {"rules": (read_only, {"dir/rules.md": SnapshotFile(sha, 7, "rev-1")})}
    )
    return overlay, MemfsOperations(overlay)


async def inode_of(ops: MemfsOperations, *names: str) -> int:
    inode = ROOT_INODE
    for name in names:
        inode = (await ops.lookup(inode, name.encode(), CTX)).st_ino
    return inode


async def test_lookup_walks_root_session_mount_and_snapshot_files(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    attr = await ops.getattr(inode, CTX)
    assert attr.st_size == 7
    assert overlay.node(inode).revision == "rev-1"
    with pytest.raises(pyfuse3.FUSEError) as info:
        await ops.lookup(ROOT_INODE, b"nobody", CTX)
    assert info.value.errno == errno.ENOENT


async def test_write_copies_up_and_reads_back_through_handles(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    info = await ops.open(inode, os.O_RDWR, CTX)
    assert info.keep_cache
    assert await ops.write(info.fh, 7, b"rule 2\n") == 7
    assert await ops.read(info.fh, 0, 100) == b"rule 1\nrule 2\n"
    await ops.release(info.fh)
    node = overlay.node(inode)
    assert node.blob is None and node.data is not None
    assert (await ops.getattr(inode, CTX)).st_size == 14
    # the snapshot blob is untouched: other sessions still read it
    assert (
        overlay.blobs.get(
            SnapshotFile(*turn_of(overlay).mounts["rules"].snapshot["dir/rules.md"]).sha
        )
        == b"rule 1\n"
    )


async def test_create_rename_over_and_unlink_record_the_touched_paths(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    info, _attr = await ops.create(folder, b"tmp", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"new rules\n")
    await ops.release(info.fh)
    await ops.rename(folder, b"tmp", folder, b"rules.md", 0, CTX)
    mount = turn_of(overlay).mounts["rules"]
    assert mount.touched == {"dir/tmp", "dir/rules.md"}
    assert source_of(overlay, mount, "dir/rules.md").read_bytes() == b"new rules\n"
    assert overlay.source(mount, "dir/tmp") is None
    log = turn_of(overlay).access_log()
    assert log["rules/dir/rules.md"].wrote and not log["rules/dir/rules.md"].deleted
    assert log["rules/dir/rules.md"].renamed_from == "rules/dir/tmp"  # NAME/ like the keys
    assert log["rules/dir/tmp"].created and log["rules/dir/tmp"].deleted


async def test_rename_noreplace_onto_an_existing_name_is_eexist(tmp_path: Path) -> None:
    _, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    info, _ = await ops.create(folder, b"other.md", 0o100644, os.O_WRONLY, CTX)
    await ops.release(info.fh)
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.rename(folder, b"other.md", folder, b"rules.md", pyfuse3.RENAME_NOREPLACE, CTX)
    assert raised.value.errno == errno.EEXIST


async def test_read_only_mount_refuses_each_change_with_erofs(tmp_path: Path) -> None:
    _, ops = make(tmp_path, read_only=True)
    folder = await inode_of(ops, "s1", "rules", "dir")
    file = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    attempts = [
        ops.open(file, os.O_WRONLY, CTX),
        ops.open(file, os.O_RDONLY | os.O_TRUNC, CTX),
        ops.create(folder, b"n.md", 0o100644, os.O_WRONLY, CTX),
        ops.mkdir(folder, b"d", 0o40755, CTX),
        ops.unlink(folder, b"rules.md", CTX),
        ops.rename(folder, b"rules.md", folder, b"x.md", 0, CTX),
    ]
    for attempt in attempts:
        with pytest.raises(pyfuse3.FUSEError) as raised:
            await attempt
        assert raised.value.errno == errno.EROFS
    info = await ops.open(file, os.O_RDONLY, CTX)
    assert await ops.read(info.fh, 0, 10) == b"rule 1\n"


async def test_nothing_can_be_made_outside_a_mounted_space(tmp_path: Path) -> None:
    _, ops = make(tmp_path)
    session = await inode_of(ops, "s1")
    for parent in (ROOT_INODE, session):
        with pytest.raises(pyfuse3.FUSEError) as raised:
            await ops.mkdir(parent, b"x", 0o40755, CTX)
        assert raised.value.errno == errno.EPERM
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.rmdir(session, b"rules", CTX)
    assert raised.value.errno == errno.EPERM


async def test_file_size_limit_is_efbig_at_one_byte_past(tmp_path: Path) -> None:
    _, ops = make(tmp_path, limits=Limits(max_file_bytes=10))
    folder = await inode_of(ops, "s1", "rules", "dir")
    info, _ = await ops.create(folder, b"f", 0o100644, os.O_WRONLY, CTX)
    assert await ops.write(info.fh, 0, b"x" * 10) == 10
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.write(info.fh, 10, b"x")
    assert raised.value.errno == errno.EFBIG


@pytest.mark.error_log(r"memfsd\.fs: unexpected error in FUSE handler handler")
async def test_error_boundary_turns_unexpected_exceptions_into_eio(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @fuse_errors
    async def handler() -> None:
        raise KeyError("boom")

    with pytest.raises(pyfuse3.FUSEError) as raised:
        await handler()
    assert raised.value.errno == errno.EIO
    assert "boom" in caplog.text


async def test_forgotten_detached_nodes_leave_the_inode_table(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    folder = await inode_of(ops, "s1", "rules", "dir")
    await ops.unlink(folder, b"rules.md", CTX)
    assert inode in overlay.nodes  # the kernel still holds it
    await ops.forget([(inode, 1)])
    assert inode not in overlay.nodes


async def test_journal_replay_rebuilds_the_turn_after_a_crash(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    file = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    info = await ops.open(file, os.O_WRONLY | os.O_APPEND, CTX)
    # An append comes at the end: the kernel sends the file's size as its offset.
    await ops.write(info.fh, (await ops.getattr(file, CTX)).st_size, b"rule 2\n")
    created, _ = await ops.create(folder, b"new.md", 0o100644, os.O_WRONLY, CTX)
    await ops.write(created.fh, 0, b"fresh\n")
    await ops.mkdir(folder, b"sub", 0o40755, CTX)
    await ops.rename(
        folder, b"new.md", await inode_of(ops, "s1", "rules", "dir", "sub"), b"moved.md", 0, CTX
    )
    # A new process: same state dir, nothing in memory.
    blobs = BlobCache(tmp_path / "blobs")
    sha = SnapshotFile(*turn_of(overlay).mounts["rules"].snapshot["dir/rules.md"]).sha
    again = Overlay(tmp_path, blobs, Limits())
    again.open_session("s1")
    state = again.attach_turn(
        "s1", "t1", {"rules": (False, {"dir/rules.md": SnapshotFile(sha, 7, "rev-1")})}, replay=True
    )
    mount = state.mounts["rules"]
    assert mount.touched == {"dir/rules.md", "dir/new.md", "dir/sub/moved.md"}
    assert source_of(again, mount, "dir/rules.md").read_bytes() == b"rule 1\nrule 2\n"
    assert source_of(again, mount, "dir/sub/moved.md").read_bytes() == b"fresh\n"
    assert again.source(mount, "dir/new.md") is None
    assert mount.files == 2
    assert state.next_data > max(n.data or 0 for n in again.nodes.values())


async def test_flush_answers_enosys_so_the_kernel_stops_sending_it(tmp_path: Path) -> None:
    _, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    info = await ops.open(inode, os.O_RDONLY, CTX)
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await ops.flush(info.fh)
    assert raised.value.errno == errno.ENOSYS


async def test_sync_on_close_syncs_the_data_file_and_journal_when_a_writer_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    overlay = Overlay(tmp_path, blobs, Limits(), sync_on_close=True)
    overlay.open_session("s1")
    state = overlay.attach_turn("s1", "t1", {"rules": (False, {})})
    ops = MemfsOperations(overlay)
    synced: list[int] = []
    monkeypatch.setattr("memfsd.overlay.os.fsync", synced.append)
    folder = await inode_of(ops, "s1", "rules")
    writer, _ = await ops.create(folder, b"a.md", 0o100644, os.O_WRONLY, CTX)
    await ops.write(writer.fh, 0, b"x\n")
    await ops.flush(writer.fh)
    assert state.journal in synced and len(synced) == 2  # the data file, then the journal
    synced.clear()
    await ops.unlink(folder, b"a.md", CTX)
    assert synced == [state.journal]


async def test_extended_attribute_requests_answer_enosys_so_the_kernel_stops_asking(
    tmp_path: Path,
) -> None:
    _, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    calls = [
        ops.getxattr(inode, b"security.capability", CTX),
        ops.setxattr(inode, b"user.a", b"1", CTX),
        ops.listxattr(inode, CTX),
        ops.removexattr(inode, b"user.a", CTX),
    ]
    for call in calls:
        with pytest.raises(pyfuse3.FUSEError) as raised:
            await call
        assert raised.value.errno == errno.ENOSYS


async def test_a_reader_sees_what_another_handle_wrote_after_the_copy_up(tmp_path: Path) -> None:
    _, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    reader = await ops.open(inode, os.O_RDONLY, CTX)
    assert await ops.read(reader.fh, 0, 100) == b"rule 1\n"
    writer = await ops.open(inode, os.O_WRONLY | os.O_APPEND, CTX)
    await ops.write(writer.fh, (await ops.getattr(inode, CTX)).st_size, b"rule 2\n")
    assert await ops.read(reader.fh, 0, 100) == b"rule 1\nrule 2\n"
    await ops.release(writer.fh)
    await ops.release(reader.fh)


async def test_only_the_first_open_for_reading_of_a_path_is_journaled(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    journal = turn_of(overlay).dir / "journal"
    for _ in range(3):
        info = await ops.open(inode, os.O_RDONLY, CTX)
        await ops.release(info.fh)
    overlay.write_held()
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 and '"o":"r"' in lines[0]
    assert turn_of(overlay).access_log()["rules/dir/rules.md"].read == "rev-1"


def test_blob_cache_trusts_known_shas_and_remembers_what_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"x"], ["f" * 64])
    assert sha == "f" * 64 and blobs.get(sha) == b"x"
    stats: list[Path] = []
    real_exists = Path.exists

    def exists(path: Path) -> bool:
        stats.append(path)
        return real_exists(path)

    monkeypatch.setattr(Path, "exists", exists)
    blobs.put_many([b"x"], ["f" * 64])
    assert stats == []  # known present: no stat at all


def test_released_blobs_are_discarded_only_when_no_holder_is_left(tmp_path: Path) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"private"], hold=True)
    blobs.put_many([b"private"], hold=True)
    blobs.release([sha], discard=True)
    assert sha in blobs
    blobs.release([sha], discard=True)
    assert sha not in blobs
    [kept] = blobs.put_many([b"shared"], hold=True)
    blobs.release([kept], discard=False)
    assert kept in blobs


def test_a_blob_shared_memory_has_stays_when_a_persons_turn_lets_go(tmp_path: Path) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"same words"], hold=True)  # a person's turn
    assert blobs.present([sha], hold=False) == [True]
    blobs.share([sha])  # an org space holds the same bytes
    blobs.release([sha], discard=True)
    assert sha in blobs
    assert blobs.present([sha, "0" * 64], hold=True) == [True, False]


async def test_reads_reach_the_journal_ahead_of_the_next_change(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    journal = turn_of(overlay).dir / "journal"
    info = await ops.open(inode, os.O_RDONLY, CTX)
    await ops.release(info.fh)
    assert journal.read_text() == ""  # held: no write per file read
    await ops.mkdir(folder, b"sub", 0o40755, CTX)
    ops_in_order = [line.split('"o":"')[1][0] for line in journal.read_text().splitlines()]
    assert ops_in_order == ["r", "D", "a"]  # the folder, then its mode


async def test_reads_short_of_reads_held_are_held_back_and_the_one_that_reaches_it_writes_them_all(
    tmp_path: Path,
) -> None:
    overlay, ops = _big(tmp_path, [f"n{i:04}.md" for i in range(READS_HELD + 1)])
    journal = turn_of(overlay).dir / "journal"

    async def read(i: int) -> None:
        info = await ops.open(await inode_of(ops, "s1", "big", f"n{i:04}.md"), os.O_RDONLY, CTX)
        await ops.release(info.fh)

    for i in range(READS_HELD - 1):
        await read(i)
    assert journal.read_text() == ""  # held: memory for READS_HELD - 1 records at most
    assert len(turn_of(overlay).held_reads) == READS_HELD - 1
    await read(READS_HELD - 1)
    assert journal.read_text().count('"o":"r"') == READS_HELD
    assert turn_of(overlay).held_reads == []
    await read(READS_HELD)  # held again, one
    assert journal.read_text().count('"o":"r"') == READS_HELD


async def test_held_reads_are_written_when_the_daemon_stops(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    info = await ops.open(inode, os.O_RDONLY, CTX)
    await ops.release(info.fh)
    overlay.write_held()
    journal = turn_of(overlay).dir / "journal"
    assert '"o":"r"' in journal.read_text()


def _big(tmp_path: Path, paths: list[str]) -> tuple[Overlay, MemfsOperations]:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"x\n"])
    overlay = Overlay(tmp_path, blobs, Limits())
    overlay.open_session("s1")
    snapshot = {path: SnapshotFile(sha, 2, f"r{i}") for i, path in enumerate(paths)}
    overlay.attach_turn("s1", "t1", {"big": (False, snapshot)})
    return overlay, MemfsOperations(overlay)


async def test_a_turn_start_makes_nodes_only_for_the_folders_looked_into(tmp_path: Path) -> None:
    paths = [f"f{d:02}/sub/n{i:04}.md" for d in range(20) for i in range(100)] + ["top.md"]
    overlay, ops = _big(tmp_path, paths)
    before = len(overlay.nodes)
    mount = turn_of(overlay).mounts["big"]
    assert mount.files == 2001 and mount.bytes == 4002
    folder = await inode_of(ops, "s1", "big", "f07", "sub")
    # A lookup makes the one entry it names: f07, then f07/sub. Their link
    # counts (which count subfolders) come from the snapshot, planting nothing.
    assert len(overlay.nodes) - before == 2
    f07 = overlay.node(folder).parent
    assert f07 is not None and f07.name == "f07"
    assert (await ops.getattr(mount.root.inode, CTX)).st_nlink == 2 + 20
    assert (await ops.getattr(f07.inode, CTX)).st_nlink == 2 + 1
    assert (await ops.getattr(folder, CTX)).st_nlink == 2
    assert len(overlay.nodes) - before == 2
    # Listing a folder makes its entries, and only its own.
    names = [node.name for node in overlay.children(folder)]
    assert len(names) == 100 and names[0] == "n0000.md"
    assert len(overlay.nodes) - before == 2 + 100
    # The mount root, listed, makes the other 20 entries and keeps f07 as it was.
    assert [n.name for n in overlay.children(mount.root.inode)][:2] == ["f00", "f01"]
    assert mount.root.kids["f07"] is f07 and len(mount.root.kids) == 21
    assert len(overlay.nodes) - before == 2 + 100 + 19 + 1
    assert (await ops.getattr(mount.root.inode, CTX)).st_nlink == 2 + 20


async def test_a_renamed_folder_nobody_looked_into_keeps_its_snapshot_entries(
    tmp_path: Path,
) -> None:
    overlay, ops = _big(tmp_path, ["a/b/c.md", "a/d.md", "ab.md", "a-b.md"])
    mount = await inode_of(ops, "s1", "big")
    await ops.rename(mount, b"a", mount, b"z", 0, CTX)
    inside = await inode_of(ops, "s1", "big", "z", "b", "c.md")
    assert overlay.node(inside).revision == "r0"
    assert sorted(n.name for n in overlay.children(mount)) == ["a-b.md", "ab.md", "z"]
    state = turn_of(overlay).mounts["big"]
    assert state.touched == {"a/b/c.md", "a/d.md", "z/b/c.md", "z/d.md"}


async def test_a_snapshot_path_under_a_file_is_left_out_not_fatal(tmp_path: Path) -> None:
    overlay, ops = _big(tmp_path, ["a", "a/b.md", "c.md"])
    mount = await inode_of(ops, "s1", "big")
    assert sorted(n.name for n in overlay.children(mount)) == ["a", "c.md"]
    assert not overlay.node(await inode_of(ops, "s1", "big", "a")).is_dir


async def test_a_looked_up_entry_is_the_node_its_folder_keeps_once_listed(
    tmp_path: Path,
) -> None:
    overlay, ops = _big(tmp_path, ["a", "a/b.md", "a-b.md", "d/e.md", "d.md", "g/h/i.md"])
    mount = await inode_of(ops, "s1", "big")
    # Looked up before the folder is listed: a file wins over a folder of
    # the same name (it sorts first), as planting the folder makes it.
    a = await inode_of(ops, "s1", "big", "a")
    d = await inode_of(ops, "s1", "big", "d")
    g = await inode_of(ops, "s1", "big", "g")
    assert not overlay.node(a).is_dir and overlay.node(d).is_dir and overlay.node(g).is_dir
    with pytest.raises(pyfuse3.FUSEError) as missing:
        await ops.lookup(mount, b"b.md", CTX)
    assert missing.value.errno == errno.ENOENT
    assert (await ops.getattr(mount, CTX)).st_nlink == 2 + 2  # d and g
    # Listed: the same nodes, each once, and the rest planted beside them.
    listed = overlay.children(mount)
    assert [n.name for n in listed] == ["a", "a-b.md", "d", "d.md", "g"]
    assert {n.name: n.inode for n in listed if n.name in "adg"} == {"a": a, "d": d, "g": g}
    assert (await ops.getattr(mount, CTX)).st_nlink == 2 + 2


async def test_creating_a_file_plants_only_its_own_name_and_the_folder_lists_whole_after(
    tmp_path: Path,
) -> None:
    paths = [f"dir/n{i:03}.md" for i in range(200)] + ["dir/sub/deep.md"]
    overlay, ops = _big(tmp_path, paths)
    folder = await inode_of(ops, "s1", "big", "dir")
    before = len(overlay.nodes)
    info, _ = await ops.create(folder, b"new.md", 0o100644, os.O_WRONLY, CTX)
    await ops.release(info.fh)
    # The new file and the one lookup of its name: not the folder's 201 entries.
    assert len(overlay.nodes) - before == 1
    with pytest.raises(pyfuse3.FUSEError) as taken:
        await ops.create(folder, b"n007.md", 0o100644, os.O_WRONLY, CTX)  # in the snapshot
    assert taken.value.errno == errno.EEXIST
    assert (await ops.getattr(folder, CTX)).st_nlink == 2 + 1  # sub, counted unplanted
    made = await ops.mkdir(folder, b"made", 0o40755, CTX)
    assert made.st_ino and (await ops.getattr(folder, CTX)).st_nlink == 2 + 2
    names = [n.name for n in overlay.children(folder)]
    assert names == sorted([*(p.split("/")[1] for p in paths[:200]), "made", "new.md", "sub"])
    # At the turn's end, finding what a path holds plants nothing beside it.
    mount = turn_of(overlay).mounts["big"]
    assert overlay.source(mount, "dir/sub/deep.md") is not None
    assert overlay.node(await inode_of(ops, "s1", "big")).unplanted == ""  # the mount's root
    assert overlay.node(await inode_of(ops, "s1", "big", "dir", "sub")).unplanted is not None


async def test_a_file_looked_up_then_removed_stays_removed_when_its_folder_is_listed(
    tmp_path: Path,
) -> None:
    overlay, ops = _big(tmp_path, ["dir/a.md", "dir/b.md", "dir/sub/c.md"])
    folder = await inode_of(ops, "s1", "big", "dir")
    await inode_of(ops, "s1", "big", "dir", "a.md")
    await ops.unlink(folder, b"a.md", CTX)
    sub = await inode_of(ops, "s1", "big", "dir", "sub")
    assert [n.name for n in overlay.children(folder)] == ["b.md", "sub"]
    assert overlay.node(sub).is_dir
    with pytest.raises(pyfuse3.FUSEError) as gone:
        await ops.lookup(folder, b"a.md", CTX)
    assert gone.value.errno == errno.ENOENT
    assert turn_of(overlay).mounts["big"].touched == {"dir/a.md"}


async def test_a_folders_link_count_follows_subfolders_made_moved_and_removed(
    tmp_path: Path,
) -> None:
    _, ops = make(tmp_path)
    top = await inode_of(ops, "s1", "rules")
    folder = await inode_of(ops, "s1", "rules", "dir")

    async def links(inode: int) -> int:
        return (await ops.getattr(inode, CTX)).st_nlink

    assert (await links(top), await links(folder)) == (3, 2)
    await ops.mkdir(folder, b"a", 0o40755, CTX)
    await ops.mkdir(folder, b"b", 0o40755, CTX)
    assert await links(folder) == 4
    await ops.rename(folder, b"a", top, b"a", 0, CTX)
    assert (await links(top), await links(folder)) == (4, 3)
    await ops.rmdir(folder, b"b", CTX)
    assert await links(folder) == 2


async def test_a_rename_reaches_the_journal_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay, ops = _big(tmp_path, ["d/a.md", "d/b.md", "d/c/e.md"])
    mount = await inode_of(ops, "s1", "big")
    journal = turn_of(overlay).journal
    writes: list[int] = []
    real_write = os.write

    def counting(fd: int, data: bytes) -> int:
        if fd == journal:
            writes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr("memfsd.overlay.os.write", counting)
    await ops.rename(mount, b"d", mount, b"z", 0, CTX)
    assert len(writes) == 1
    lines = (turn_of(overlay).dir / "journal").read_text().splitlines()
    assert sum(1 for line in lines if '"o":"n"' in line) == 3  # every moved file, in that write


def with_meta(tmp_path: Path, overlay: Overlay | None = None, *, replay: bool = False) -> Overlay:
    """A turn over a snapshot with an executable file, times, and stored folders."""
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"#!/bin/sh\n"])
    overlay = overlay or Overlay(tmp_path, blobs, Limits())
    overlay.open_session("s1")
    overlay.attach_turn(
        "s1",
        "t1",
        {"rules": (False, {"bin/run.sh": SnapshotFile(sha, 10, "rev-1")})},
        meta={"rules": {"bin/run.sh": FileMeta(mode=0o755, mtime_ns=MTIME, ctime_ns=MTIME + 1)}},
        folders={"rules": ("empty", "empty/inner", "bin")},
        replay=replay,
    )
    return overlay


MTIME = 1_600_000_000_123_456_789


async def test_planting_gives_files_their_stored_mode_and_times_and_plants_empty_folders(
    tmp_path: Path,
) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    attr = await ops.getattr(await inode_of(ops, "s1", "rules", "bin", "run.sh"), CTX)
    assert attr.st_mode & 0o7777 == 0o755
    assert (attr.st_mtime_ns, attr.st_ctime_ns) == (MTIME, MTIME + 1)
    mount = await inode_of(ops, "s1", "rules")
    assert [n.name for n in overlay.children(mount)] == ["bin", "empty"]
    inner = overlay.children(await inode_of(ops, "s1", "rules", "empty"))
    assert [(n.name, n.is_dir) for n in inner] == [("inner", True)]
    assert overlay.children(inner[0].inode) == []


async def test_a_file_has_the_same_inode_in_the_next_turn(tmp_path: Path) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    planted = await inode_of(ops, "s1", "rules", "bin", "run.sh")
    folder = await inode_of(ops, "s1", "rules", "bin")
    handle, created = await ops.create(folder, b"new.md", 0o100644, os.O_WRONLY, CTX)
    made = created.st_ino
    await ops.release(handle.fh)
    overlay.detach_turn("s1")
    await ops.forget([(planted, 1), (made, 1), (folder, 1)])
    [sha] = overlay.blobs.put_many([b"#!/bin/sh\n"])
    overlay.attach_turn(
        "s1", "t2", {"rules": (False, {"bin/run.sh": SnapshotFile(sha, 10, "rev-1"),
                                       "bin/new.md": SnapshotFile(sha, 10, "rev-2")})}
    )  # fmt: skip
    assert await inode_of(ops, "s1", "rules", "bin", "run.sh") == planted
    assert await inode_of(ops, "s1", "rules", "bin", "new.md") == made


async def test_an_inode_the_kernel_still_holds_is_not_given_to_another_node(
    tmp_path: Path,
) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    held = await inode_of(ops, "s1", "rules", "bin", "run.sh")
    overlay.detach_turn("s1")  # the kernel never forgets it
    with_meta(tmp_path, overlay)
    fresh = await inode_of(ops, "s1", "rules", "bin", "run.sh")
    assert fresh != held and held in overlay.nodes


async def test_chmod_and_utime_are_journaled_and_replayed_after_a_crash(tmp_path: Path) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    script = await inode_of(ops, "s1", "rules", "bin", "run.sh")
    overlay.setattr(script, mode=0o100700)
    folder = await inode_of(ops, "s1", "rules", "bin")
    _, created = await ops.create(folder, b"new.sh", 0o100750, os.O_WRONLY, CTX)
    overlay.setattr(created.st_ino, mtime_ns=5)
    mount = turn_of(overlay).mounts["rules"]
    assert "bin/run.sh" in mount.touched  # a mode change alone is a change to look at
    again = with_meta(
        tmp_path, Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits()), replay=True
    )
    state = turn_of(again).mounts["rules"]
    assert node_of(again, state, "bin/run.sh").mode == 0o700
    new = node_of(again, state, "bin/new.sh")
    assert (new.mode, new.mtime_ns) == (0o750, 5)
    assert again.meta_at_end(state)["bin/run.sh"] == FileMeta(
        mode=0o700, mtime_ns=MTIME, ctime_ns=node_of(again, state, "bin/run.sh").ctime_ns
    )


async def test_a_file_renamed_or_exchanged_after_a_chmod_keeps_its_mode_after_a_crash(
    tmp_path: Path,
) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    bin_inode = await inode_of(ops, "s1", "rules", "bin")
    overlay.setattr(await inode_of(ops, "s1", "rules", "bin", "run.sh"), mode=0o100700)
    await ops.rename(bin_inode, b"run.sh", bin_inode, b"go.sh", 0, CTX)
    await ops.create(bin_inode, b"other.sh", 0o100640, os.O_WRONLY, CTX)
    await ops.rename(bin_inode, b"go.sh", bin_inode, b"other.sh", pyfuse3.RENAME_EXCHANGE, CTX)
    again = with_meta(
        tmp_path, Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits()), replay=True
    )
    state = turn_of(again).mounts["rules"]
    assert node_of(again, state, "bin/other.sh").mode == 0o700
    assert node_of(again, state, "bin/go.sh").mode == 0o640


async def test_a_compacted_journal_keeps_file_and_folder_modes_and_the_snapshots_folders(
    tmp_path: Path,
) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    overlay.setattr(await inode_of(ops, "s1", "rules", "bin", "run.sh"), mode=0o100700)
    await ops.rmdir(await inode_of(ops, "s1", "rules", "empty"), b"inner", CTX)
    await ops.mkdir(await inode_of(ops, "s1", "rules"), b"private", 0o40700, CTX)
    turn = turn_of(overlay)
    overlay.compact(turn)
    assert b'"o":"a"' in (turn.dir / "journal").read_bytes()
    again = with_meta(
        tmp_path, Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits()), replay=True
    )
    state = turn_of(again).mounts["rules"]
    assert node_of(again, state, "bin/run.sh").mode == 0o700
    assert again.node_at(state, "empty") is not None
    assert again.node_at(state, "empty/inner") is None
    assert node_of(again, state, "private").mode == 0o700


async def test_folders_at_end_sees_made_removed_and_emptied_folders(tmp_path: Path) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    mount_inode = await inode_of(ops, "s1", "rules")
    await ops.mkdir(mount_inode, b"made", 0o40755, CTX)
    await ops.rmdir(await inode_of(ops, "s1", "rules", "empty"), b"inner", CTX)
    await ops.unlink(await inode_of(ops, "s1", "rules", "bin"), b"run.sh", CTX)
    mount = turn_of(overlay).mounts["rules"]
    assert overlay.folders_at_end(mount) == {
        "made": False,
        "empty": False,
        "empty/inner": None,
        "bin": False,
    }


async def test_a_renamed_or_exchanged_file_or_folder_keeps_its_mode_and_times_after_a_crash(
    tmp_path: Path,
) -> None:
    # A rename was journaled as "gone here, arrives there with its bytes": the
    # mode and times did not travel, so a replay planted the arrival at the
    # defaults (a chmod'ed file came back 0644, a stored 0755 script too, and
    # that mode change was then stored).
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    bin_ = await inode_of(ops, "s1", "rules", "bin")
    overlay.rename(bin_, "run.sh", bin_, "go.sh")  # from the snapshot, never copied up
    _, made = await ops.create(bin_, b"a.sh", 0o100644, os.O_WRONLY, CTX)
    overlay.setattr(made.st_ino, mode=0o100700, mtime_ns=5)
    _, other = await ops.create(bin_, b"b.md", 0o100644, os.O_WRONLY, CTX)
    overlay.setattr(other.st_ino, mode=0o100640, mtime_ns=7)
    overlay.exchange(bin_, "a.sh", bin_, "b.md")
    mount_inode = await inode_of(ops, "s1", "rules")
    await ops.mkdir(mount_inode, b"private", 0o40755, CTX)
    private = await inode_of(ops, "s1", "rules", "private")
    overlay.setattr(private, mode=0o40700)
    overlay.rename(mount_inode, "private", mount_inode, "secret")
    live = turn_of(overlay).mounts["rules"]
    before = {
        path: (node_of(overlay, live, path).mode, node_of(overlay, live, path).mtime_ns)
        for path in ("bin/go.sh", "bin/a.sh", "bin/b.md", "secret")
    }
    assert before["bin/go.sh"] == (0o755, MTIME)
    assert before["bin/b.md"] == (0o700, 5) and before["bin/a.sh"] == (0o640, 7)
    again = with_meta(
        tmp_path, Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits()), replay=True
    )
    state = turn_of(again).mounts["rules"]
    after = {
        path: (node_of(again, state, path).mode, node_of(again, state, path).mtime_ns)
        for path in before
    }
    assert after == before
    assert again.meta_at_end(state)["bin/go.sh"].mode == 0o755


async def test_a_folder_keeps_the_mode_mkdir_gave_it_after_a_crash(tmp_path: Path) -> None:
    # mkdir journaled only "a folder is here": after kill -9 a folder made 0700
    # (umask 077) or mode 0 came back 0755.
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    mount_inode = await inode_of(ops, "s1", "rules")
    await ops.mkdir(mount_inode, b"private", 0o40700, CTX)
    await ops.mkdir(mount_inode, b"closed", 0o40000, CTX)
    live = turn_of(overlay).mounts["rules"]
    made = {path: node_of(overlay, live, path).mode for path in ("private", "closed")}
    assert made == {"private": 0o700, "closed": 0}
    again = with_meta(
        tmp_path, Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits()), replay=True
    )
    state = turn_of(again).mounts["rules"]
    assert {path: node_of(again, state, path).mode for path in made} == made


def deep(tmp_path: Path, overlay: Overlay | None = None, *, replay: bool = False) -> Overlay:
    """A turn over one file two folders down: ``a/b/x.md``."""
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"x\n"])
    overlay = overlay or Overlay(tmp_path, blobs, Limits())
    overlay.open_session("s1")
    overlay.attach_turn(
        "s1", "t1", {"rules": (False, {"a/b/x.md": SnapshotFile(sha, 2, "rev-1")})}, replay=replay
    )
    return overlay


async def test_a_folder_made_below_folders_only_looked_up_survives_a_compacted_journal(
    tmp_path: Path,
) -> None:
    overlay = deep(tmp_path)
    ops = MemfsOperations(overlay)
    # Lookups plant one entry each: "a" is never listed, so it stays unplanted.
    await ops.mkdir(await inode_of(ops, "s1", "rules", "a", "b"), b"new", 0o40700, CTX)
    overlay.compact(turn_of(overlay))
    again = deep(tmp_path, Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits()), replay=True)
    state = turn_of(again).mounts["rules"]
    made = again.node_at(state, "a/b/new")
    assert made is not None and made.is_dir and made.mode & 0o777 == 0o700


async def test_a_file_made_in_a_stored_empty_folder_only_looked_up_keeps_the_folder(
    tmp_path: Path,
) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    _, fh = overlay.create_open(
        await inode_of(ops, "s1", "rules", "empty", "inner"), "new.md", 0o100644, 0, 0, os.O_WRONLY
    )
    overlay.release(fh)
    mount = turn_of(overlay).mounts["rules"]
    ends = overlay.folders_at_end(mount)
    assert ends["empty/inner"] is True and ends["empty"] is True


async def test_a_folder_removed_below_folders_only_looked_up_stays_removed_after_compaction(
    tmp_path: Path,
) -> None:
    overlay = with_meta(tmp_path)
    ops = MemfsOperations(overlay)
    # Only looked up: the mount's top folder is never listed, so it stays unplanted.
    await ops.rmdir(await inode_of(ops, "s1", "rules", "empty"), b"inner", CTX)
    overlay.compact(turn_of(overlay))
    again = with_meta(
        tmp_path, Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits()), replay=True
    )
    state = turn_of(again).mounts["rules"]
    assert again.node_at(state, "empty") is not None
    assert again.node_at(state, "empty/inner") is None


@pytest.mark.parametrize(
    ("beside", "top_holds"), [({"top/sub.md"}, True), (set(), False)], ids=["file-beside", "alone"]
)
async def test_a_folder_emptied_below_folders_only_looked_up_is_seen_empty_at_the_end(
    tmp_path: Path, beside: set[str], top_holds: bool
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"x\n"])
    overlay = Overlay(tmp_path, blobs, Limits())
    overlay.open_session("s1")
    files = {path: SnapshotFile(sha, 2, "rev-1") for path in {"top/sub/f.md", *beside}}
    overlay.attach_turn("s1", "t1", {"rules": (False, files)})
    ops = MemfsOperations(overlay)
    await ops.unlink(await inode_of(ops, "s1", "rules", "top", "sub"), b"f.md", CTX)
    ends = overlay.folders_at_end(turn_of(overlay).mounts["rules"])
    assert ends == {"top": top_holds, "top/sub": False}


def test_no_fuse_handler_awaits_so_one_task_reads_every_request() -> None:
    # The daemon reads FUSE requests with FUSE_TASKS = 1: a handler that
    # awaited would hold every other request of every mount until it resumed.
    tree = ast.parse(inspect.getsource(memfsd.fs))
    [ops] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "MemfsOperations"]
    handlers = [n for n in ops.body if isinstance(n, ast.AsyncFunctionDef)]
    assert len(handlers) > 20 and FUSE_TASKS == 1
    for handler in handlers:
        suspends = [
            type(node).__name__
            for node in ast.walk(handler)
            if isinstance(node, ast.Await | ast.AsyncFor | ast.AsyncWith)
        ]
        assert suspends == [], f"{handler.name} suspends: {suspends}"


async def test_only_a_file_open_read_write_may_hold_pages_mapped_for_writing(
    tmp_path: Path,
) -> None:
    # A turn's end has the kernel write back the dirty pages of such files
    # first; a file opened write-only (printf > f, whose release often comes
    # after the end has begun) cannot be mapped for writing and costs nothing.
    overlay, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    write_only = await ops.open(inode, os.O_WRONLY, CTX)
    assert overlay.mapped_for_writing("s1") == []
    read_write = await ops.open(inode, os.O_RDWR, CTX)
    assert overlay.mapped_for_writing("s1") == [inode]
    await ops.release(read_write.fh)
    assert overlay.mapped_for_writing("s1") == []
    await ops.release(write_only.fh)
