"""POSIX semantics of the working copy, through the FUSE adapter called directly (no mount).

Name length before every other check, folder moves that would break the path
limit, owners and groups, mode 0, folder times on unlink and rmdir,
descriptors whose name is gone, RENAME_EXCHANGE and its journal, statfs.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyfuse3
import pytest

from memfs.core.errors import PermissionDenied, ReadOnly
from memfs.core.models import Limits
from memfsd.blobs import BlobCache
from memfsd.fs import MemfsOperations, caller_groups
from memfsd.nodes import ROOT_INODE, MountTree, Node, SnapshotFile
from memfsd.overlay import Overlay
from tests.daemon_harness import require_root
from tests.overlay_helpers import Ctx

CTX = Ctx(uid=42000, gid=42000)
ROOT = Ctx(uid=0, gid=0)


@dataclass
class Fields:
    """A stand-in for ``pyfuse3.SetattrFields`` (whose fields only pyfuse3 sets)."""

    update_atime: bool = False
    update_mtime: bool = False
    update_ctime: bool = False
    update_mode: bool = False
    update_uid: bool = False
    update_gid: bool = False
    update_size: bool = False


class Clock:
    """A clock that moves one tick per reading, so every change has its own time."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


def make(
    tmp_path: Path,
    snapshot: dict[str, bytes] | None = None,
    *,
    read_only: bool = False,
    limits: Limits | None = None,
    replay: bool = False,
) -> tuple[Overlay, MemfsOperations]:
    files = {"dir/rules.md": b"rule 1\n"} if snapshot is None else snapshot
    blobs = BlobCache(tmp_path / "blobs")
    shas = blobs.put_many(list(files.values()))
    overlay = Overlay(tmp_path, blobs, limits or Limits(), clock=Clock())
    overlay.open_session("s1", uid=CTX.uid, gid=CTX.gid)
    overlay.attach_turn(
        "s1",
        "t1",
        {
            "rules": (
                read_only,
                {
                    path: SnapshotFile(sha, len(body), f"rev-{path}")
                    for (path, body), sha in zip(files.items(), shas, strict=True)
                },
            )
        },
        replay=replay,
    )
    return overlay, MemfsOperations(overlay)


def mount_of(overlay: Overlay) -> MountTree:
    turn = overlay.sessions["s1"].turn
    assert turn is not None
    return turn.mounts["rules"]


async def inode_of(ops: MemfsOperations, *names: str) -> int:
    inode = ROOT_INODE
    for name in names:
        inode = (await ops.lookup(inode, name.encode(), CTX)).st_ino
    return inode


def contents(overlay: Overlay) -> tuple[dict[str, bytes], set[str]]:
    """What the mount holds: every file's bytes and every folder, by path."""
    mount = mount_of(overlay)
    files: dict[str, bytes] = {}
    folders: set[str] = set()

    def walk(node: Node) -> Iterator[Node]:
        for child in node.children.values():
            yield child
            if child.is_dir:
                yield from walk(child)

    for node in walk(mount.root):
        if node.is_dir:
            folders.add(node.path())
        else:
            source = overlay.source(mount, node.path())
            assert source is not None
            files[node.path()] = source.read_bytes()
    return files, folders


async def errno_of(call: Awaitable[object]) -> int:
    with pytest.raises(pyfuse3.FUSEError) as raised:
        await call
    return raised.value.errno


async def new_file(ops: MemfsOperations, folder: int, name: str, body: bytes) -> int:
    info, attr = await ops.create(folder, name.encode(), 0o100644, os.O_RDWR, CTX)
    await ops.write(info.fh, 0, body)
    await ops.release(info.fh)
    return attr.st_ino


# -- a folder move past the path limit ---------------------------------------------


def deep_snapshot(depth: int, segment: int) -> dict[str, bytes]:
    """One file ``a…/a…/…/f`` nested ``depth`` folders deep, each name ``segment`` bytes."""
    names = [chr(ord("a") + level) * segment for level in range(depth)]
    return {"/".join([*names, "f"]): b"deep\n"}


async def test_a_folder_rename_that_would_push_a_descendant_past_1024_bytes_is_enametoolong(
    tmp_path: Path,
) -> None:
    # top/ + 4 x 200-byte folders + "f": the file's path is 3 + 4 * 201 + 2 = 809 bytes.
    overlay, ops = make(tmp_path, {"top/" + next(iter(deep_snapshot(4, 200))): b"deep\n"})
    mount = mount_of(overlay)
    space = await inode_of(ops, "s1", "rules")
    journal = mount.turn.dir / "journal"
    before = (contents(overlay), journal.read_bytes(), set(mount.touched))
    # Renamed to 218 bytes, the file's path is 218 + 806 = 1024: at the limit.
    # To 219 bytes it would be 1025: refused, and nothing changed, not even the journal.
    code = await errno_of(ops.rename(space, b"top", space, b"x" * 219, 0, CTX))
    assert code == errno.ENAMETOOLONG
    assert (contents(overlay), journal.read_bytes(), set(mount.touched)) == before
    await ops.rename(space, b"top", space, b"x" * 218, 0, CTX)
    files, _ = contents(overlay)
    [path] = files
    assert len(path.encode()) == 1024 and path.startswith("x" * 218 + "/")


async def test_a_folder_nobody_looked_into_is_measured_from_the_snapshot_before_it_moves(
    tmp_path: Path,
) -> None:
    overlay, ops = make(tmp_path, {"top/" + next(iter(deep_snapshot(4, 200))): b"deep\n"})
    space = await inode_of(ops, "s1", "rules")
    sub = await ops.mkdir(space, b"s" * 220, 0o40755, CTX)  # 220 + 1 + 809 > 1024
    # "top" is still unplanted: its depth is known only from the snapshot's paths.
    assert overlay.node(space).children["top"].unplanted is not None
    code = await errno_of(ops.rename(space, b"top", sub.st_ino, b"top", 0, CTX))
    assert code == errno.ENAMETOOLONG
    assert "top" in overlay.node(space).children


async def test_exchange_that_would_push_a_path_past_the_limit_is_enametoolong(
    tmp_path: Path,
) -> None:
    overlay, ops = make(tmp_path, {"top/" + next(iter(deep_snapshot(4, 200))): b"deep\n"})
    space = await inode_of(ops, "s1", "rules")
    long_name = "y" * 250
    await new_file(ops, space, long_name, b"y")
    before = contents(overlay)
    flags = pyfuse3.RENAME_EXCHANGE
    code = await errno_of(ops.rename(space, b"top", space, long_name.encode(), flags, CTX))
    assert code == errno.ENAMETOOLONG
    assert contents(overlay) == before


# -- ENAMETOOLONG before any other answer ---------------------------------------


async def test_a_256_byte_name_is_enametoolong_for_every_request_that_takes_a_name(
    tmp_path: Path,
) -> None:
    _, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    file = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    long = b"n" * 256
    not_utf8 = b"\xff" * 256  # too long is said before not UTF-8
    attempts = {
        "lookup": ops.lookup(folder, long, CTX),
        "lookup not utf-8": ops.lookup(folder, not_utf8, CTX),
        "create": ops.create(folder, long, 0o100644, os.O_WRONLY, CTX),
        "create not utf-8": ops.create(folder, not_utf8, 0o100644, os.O_WRONLY, CTX),
        "mkdir": ops.mkdir(folder, long, 0o40755, CTX),
        "mknod fifo": ops.mknod(folder, long, stat.S_IFIFO | 0o644, 0, CTX),
        "mknod device": ops.mknod(folder, long, stat.S_IFCHR | 0o644, os.makedev(1, 3), CTX),
        "mknod socket": ops.mknod(folder, long, stat.S_IFSOCK | 0o644, 0, CTX),
        "symlink": ops.symlink(folder, long, b"rules.md", CTX),
        "link": ops.link(file, folder, long, CTX),
        "unlink": ops.unlink(folder, long, CTX),
        "rmdir": ops.rmdir(folder, long, CTX),
        "rename from": ops.rename(folder, long, folder, b"x", 0, CTX),
        "rename to": ops.rename(folder, b"rules.md", folder, long, 0, CTX),
        "exchange": ops.rename(folder, b"rules.md", folder, long, pyfuse3.RENAME_EXCHANGE, CTX),
    }
    codes = {what: await errno_of(call) for what, call in attempts.items()}
    assert codes == dict.fromkeys(attempts, errno.ENAMETOOLONG)


async def test_a_255_byte_name_gets_the_ordinary_answers(tmp_path: Path) -> None:
    _, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    name = b"n" * 255
    assert await errno_of(ops.lookup(folder, name, CTX)) == errno.ENOENT
    assert await errno_of(ops.mknod(folder, name, stat.S_IFIFO | 0o644, 0, CTX)) == errno.EPERM
    assert await errno_of(ops.symlink(folder, name, b"x", CTX)) == errno.EPERM
    await ops.mkdir(folder, name, 0o40755, CTX)


async def test_a_long_name_on_a_read_only_mount_is_enametoolong_not_erofs(tmp_path: Path) -> None:
    _, ops = make(tmp_path, read_only=True)
    folder = await inode_of(ops, "s1", "rules", "dir")
    code = await errno_of(ops.create(folder, b"n" * 256, 0o100644, os.O_WRONLY, CTX))
    assert code == errno.ENAMETOOLONG
    assert await errno_of(ops.create(folder, b"n", 0o100644, os.O_WRONLY, CTX)) == errno.EROFS


# -- owners and groups -----------------------------------------------------------


async def test_the_owner_may_give_a_file_to_a_group_it_is_in_and_no_other(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    inode = await new_file(ops, folder, "mine.md", b"x")
    groups = {42000, 42001}
    node = overlay.setattr(inode, gid=42001, caller_uid=42000, caller_groups=groups)
    assert node.gid == 42001
    # Naming the group it already has, or its own uid, changes nothing and is allowed.
    overlay.setattr(inode, uid=42000, gid=42001, caller_uid=42000, caller_groups={42000})
    refused = [
        {"gid": 42002, "caller_uid": 42000, "caller_groups": groups},  # not the owner's group
        {"gid": 42000, "caller_uid": 42050, "caller_groups": {42000}},  # not the owner
        {"gid": 42001, "caller_uid": 42050, "caller_groups": {42001}},  # not the owner, same gid
        {"uid": 42050, "caller_uid": 42000, "caller_groups": groups},  # giving it away
        {"uid": 42000, "caller_uid": 42050, "caller_groups": groups},  # taking it
    ]
    for change in refused:
        with pytest.raises(PermissionDenied):
            overlay.setattr(inode, **change)  # type: ignore[arg-type]
        assert (overlay.node(inode).uid, overlay.node(inode).gid) == (42000, 42001)
    overlay.setattr(inode, uid=42077, gid=42078, caller_uid=0)
    assert (overlay.node(inode).uid, overlay.node(inode).gid) == (42077, 42078)


async def test_chown_of_a_file_clears_setuid_and_group_executable_setgid(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    inode = await new_file(ops, folder, "tool", b"#!/bin/sh\n")
    overlay.setattr(inode, mode=0o6755, caller_uid=42000)
    overlay.setattr(inode, gid=42001, caller_uid=42000, caller_groups={42001})
    assert overlay.node(inode).mode == 0o755
    overlay.setattr(inode, mode=0o6744, caller_uid=42000)  # setgid without group execute
    overlay.setattr(inode, uid=0, caller_uid=0)
    assert overlay.node(inode).mode == 0o2744


async def test_setattr_reads_the_callers_supplementary_groups(tmp_path: Path) -> None:
    require_root("to start a process in other groups")
    _overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    inode = await new_file(ops, folder, "mine.md", b"x")
    caller = subprocess.Popen(
        ["setpriv", "--reuid=42000", "--regid=42000", "--groups=42001,42002", "sleep", "30"]
    )
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{caller.pid}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        ctx = Ctx(uid=42000, gid=42000, pid=caller.pid)
        assert caller_groups(ctx) == frozenset({42000, 42001, 42002})
        attr = pyfuse3.EntryAttributes()
        attr.st_gid = 42002
        done = await ops.setattr(inode, attr, Fields(update_gid=True), None, ctx)  # type: ignore[arg-type]
        assert done.st_gid == 42002
        attr.st_gid = 42003
        code = await errno_of(ops.setattr(inode, attr, Fields(update_gid=True), None, ctx))  # type: ignore[arg-type]
        assert code == errno.EPERM
    finally:
        caller.kill()
        caller.wait()
    # The caller is gone: only the group the request names counts.
    assert caller_groups(Ctx(uid=42000, gid=42000, pid=caller.pid)) == frozenset({42000})


# -- mode 0 -----------------------------------------------------------------------


async def test_mode_zero_at_create_and_mkdir_is_kept(tmp_path: Path) -> None:
    _, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    info, attr = await ops.create(folder, b"zero", stat.S_IFREG, os.O_WRONLY, CTX)
    await ops.release(info.fh)
    assert stat.S_IMODE(attr.st_mode) == 0 and stat.S_ISREG(attr.st_mode)
    made = await ops.mkdir(folder, b"zero-dir", stat.S_IFDIR, CTX)
    assert stat.S_IMODE(made.st_mode) == 0 and stat.S_ISDIR(made.st_mode)
    node = await ops.mknod(folder, b"zero-node", stat.S_IFREG, 0, CTX)
    assert stat.S_IMODE(node.st_mode) == 0


# -- folder times -----------------------------------------------------------------


async def test_unlink_and_rmdir_update_the_folders_mtime_and_ctime(tmp_path: Path) -> None:
    _overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    await ops.mkdir(folder, b"sub", 0o40755, CTX)
    for remove in (
        ops.unlink(folder, b"rules.md", CTX),
        ops.rmdir(folder, b"sub", CTX),
    ):
        before = await ops.getattr(folder, CTX)
        await remove
        after = await ops.getattr(folder, CTX)
        assert after.st_mtime_ns > before.st_mtime_ns
        assert after.st_ctime_ns > before.st_ctime_ns


# -- descriptors whose name is gone -------------------------------------------------


async def test_a_descriptor_whose_name_was_unlinked_takes_ftruncate_fchmod_fchown_futimens(
    tmp_path: Path,
) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    file = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    info = await ops.open(file, os.O_RDWR, CTX)
    await ops.unlink(folder, b"rules.md", CTX)
    await ops.write(info.fh, 7, b"rule 2\n")
    attr = pyfuse3.EntryAttributes()
    attr.st_size, attr.st_mode, attr.st_gid, attr.st_mtime_ns = 3, 0o100600, 42001, 5_000
    done = await ops.setattr(file, attr, Fields(update_size=True), info.fh, CTX)  # type: ignore[arg-type]
    assert done.st_size == 3 and done.st_nlink == 0
    assert await ops.read(info.fh, 0, 100) == b"rul"
    for fields in (Fields(update_mode=True), Fields(update_mtime=True)):
        await ops.setattr(file, attr, fields, None, CTX)  # type: ignore[arg-type]
    await ops.setattr(file, attr, Fields(update_gid=True), None, ROOT)  # type: ignore[arg-type]
    done = await ops.getattr(file, CTX)
    assert (stat.S_IMODE(done.st_mode), done.st_gid, done.st_mtime_ns) == (0o600, 42001, 5_000)
    await ops.release(info.fh)
    # The file is gone from the space: none of this is a change of the turn's files.
    mount = mount_of(overlay)
    assert overlay.source(mount, "dir/rules.md") is None
    assert mount.bytes == 0 and mount.files == 0


async def test_a_descriptor_of_a_file_renamed_over_takes_changes_and_the_new_file_keeps_its_own(
    tmp_path: Path,
) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    file = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    info = await ops.open(file, os.O_RDWR, CTX)
    await new_file(ops, folder, "new.md", b"new rules\n")
    await ops.rename(folder, b"new.md", folder, b"rules.md", 0, CTX)
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 0
    fields = Fields(update_size=True)
    assert (await ops.setattr(file, attr, fields, info.fh, CTX)).st_size == 0  # type: ignore[arg-type]
    await ops.release(info.fh)
    files, _ = contents(overlay)
    assert files == {"dir/rules.md": b"new rules\n"}
    assert mount_of(overlay).bytes == len(b"new rules\n")


async def test_a_file_of_an_ended_turn_takes_no_more_changes(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    file = await inode_of(ops, "s1", "rules", "dir", "rules.md")
    await ops.unlink(folder, b"rules.md", CTX)
    overlay.freeze("s1")
    with pytest.raises(ReadOnly):
        overlay.setattr(file, mode=0o600, caller_uid=42000)
    overlay.detach_turn("s1")
    with pytest.raises(ReadOnly):
        overlay.setattr(file, mode=0o600, caller_uid=42000)


# -- RENAME_EXCHANGE ----------------------------------------------------------------


def replayed(tmp_path: Path, overlay: Overlay, snapshot: dict[str, bytes]) -> Overlay:
    """The turn rebuilt by a new daemon from its manifest and journal alone."""
    again = Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits())
    again.open_session("s1")
    mount = mount_of(overlay)
    again.attach_turn("s1", "t1", {"rules": (False, dict(mount.snapshot))}, replay=True)
    return again


async def test_exchange_swaps_two_files_and_a_replay_gives_the_same_tree(tmp_path: Path) -> None:
    snapshot = {"a.md": b"A\n", "dir/b.md": b"B\n"}
    overlay, ops = make(tmp_path, snapshot)
    space = await inode_of(ops, "s1", "rules")
    folder = await inode_of(ops, "s1", "rules", "dir")
    a = await inode_of(ops, "s1", "rules", "a.md")
    await ops.rename(space, b"a.md", folder, b"b.md", pyfuse3.RENAME_EXCHANGE, CTX)
    expected = {"a.md": b"B\n", "dir/b.md": b"A\n"}
    assert contents(overlay)[0] == expected
    assert overlay.node(a).path() == "dir/b.md"  # the inode moved with its content
    mount = mount_of(overlay)
    assert mount.touched == {"a.md", "dir/b.md"}
    assert (mount.files, mount.bytes) == (2, 4)
    log = mount.turn.access_log()
    assert log["rules/a.md"].renamed_from == "rules/dir/b.md" and not log["rules/a.md"].deleted
    again = replayed(tmp_path, overlay, snapshot)
    assert contents(again)[0] == expected
    assert (mount_of(again).files, mount_of(again).bytes) == (2, 4)


async def test_exchange_swaps_a_folder_and_a_file_and_a_replay_gives_the_same_tree(
    tmp_path: Path,
) -> None:
    snapshot = {"notes/x.md": b"X\n", "notes/deep/y.md": b"Y\n", "plain": b"P\n"}
    overlay, ops = make(tmp_path, snapshot)
    space = await inode_of(ops, "s1", "rules")
    notes = await inode_of(ops, "s1", "rules", "notes")
    await new_file(ops, notes, "new.md", b"N\n")
    await ops.rename(space, b"notes", space, b"plain", pyfuse3.RENAME_EXCHANGE, CTX)
    expected = (
        {"notes": b"P\n", "plain/x.md": b"X\n", "plain/deep/y.md": b"Y\n", "plain/new.md": b"N\n"},
        {"plain", "plain/deep"},
    )
    assert contents(overlay) == expected
    assert (await ops.getattr(space, CTX)).st_nlink == 3  # still one subfolder
    again = replayed(tmp_path, overlay, snapshot)
    assert contents(again) == expected
    assert mount_of(again).files == 4


async def test_exchange_refuses_a_missing_name_an_ancestor_and_another_space(
    tmp_path: Path,
) -> None:
    overlay, ops = make(tmp_path, {"d/e/f.md": b"F\n"})
    space = await inode_of(ops, "s1", "rules")
    d = await inode_of(ops, "s1", "rules", "d")
    e = await inode_of(ops, "s1", "rules", "d", "e")
    flags = pyfuse3.RENAME_EXCHANGE
    assert await errno_of(ops.rename(space, b"d", space, b"none", flags, CTX)) == errno.ENOENT
    assert await errno_of(ops.rename(space, b"d", d, b"e", flags, CTX)) == errno.EINVAL
    assert await errno_of(ops.rename(d, b"e", space, b"d", flags, CTX)) == errno.EINVAL
    assert await errno_of(ops.rename(e, b"f.md", space, b"d", flags, CTX)) == errno.EINVAL
    assert contents(overlay)[0] == {"d/e/f.md": b"F\n"}
    # Another session's space: files move only within one.
    overlay.open_session("s2")
    overlay.attach_turn("s2", "t1", {"other": (False, {})})
    other = await inode_of(ops, "s2", "other")
    await new_file(ops, other, "o.md", b"O")
    assert await errno_of(ops.rename(space, b"d", other, b"o.md", flags, CTX)) == errno.EPERM


async def test_exchange_on_a_read_only_mount_is_erofs(tmp_path: Path) -> None:
    _, ops = make(tmp_path, {"a": b"a", "b": b"b"}, read_only=True)
    space = await inode_of(ops, "s1", "rules")
    code = await errno_of(ops.rename(space, b"a", space, b"b", pyfuse3.RENAME_EXCHANGE, CTX))
    assert code == errno.EROFS


# -- statfs ---------------------------------------------------------------------------


async def test_statfs_reports_the_mounts_use_against_its_limits(tmp_path: Path) -> None:
    limits = Limits(max_space_bytes=64 * 4096, max_files=10)
    overlay, ops = make(tmp_path, {"a": b"x" * 4096, "b": b"y" * 100}, limits=limits)
    space = await inode_of(ops, "s1", "rules")
    assert overlay.space_use(space, 42000) == (4196, 2)
    await new_file(ops, space, "c", b"z" * 8192)
    assert overlay.space_use(space, 42000) == (12388, 3)
    # Without knowing the folder asked about (no mount root given), the
    # fullest mount the caller may see stands in.
    data = await ops.statfs(CTX)
    assert (data.f_blocks, data.f_frsize) == (64, 4096)
    assert data.f_bavail == data.f_bfree == (64 * 4096 - 12388) // 4096
    assert (data.f_files, data.f_ffree, data.f_favail) == (10, 7, 7)
    assert data.f_namemax == 255
    # Another user's session is not theirs to measure.
    assert overlay.space_use(None, 42099) == (0, 0)
    assert overlay.space_use(None, 0) == (12388, 3)


async def test_statfs_of_a_full_space_reports_no_room(tmp_path: Path) -> None:
    limits = Limits(max_space_bytes=8192, max_files=2, max_file_bytes=8192)
    _overlay, ops = make(tmp_path, {"a": b"x" * 8192, "b": b""}, limits=limits)
    data = await ops.statfs(CTX)
    assert (data.f_bfree, data.f_bavail, data.f_ffree) == (0, 0, 0)


# -- replaying a folder move -----------------------------------------------------


async def test_a_replayed_folder_rename_leaves_no_empty_folder_behind(tmp_path: Path) -> None:
    snapshot = {"a/x.md": b"X", "a/b/y.md": b"Y"}
    overlay, ops = make(tmp_path, snapshot)
    space = await inode_of(ops, "s1", "rules")
    await ops.rename(space, b"a", space, b"z", 0, CTX)
    expected = ({"z/x.md": b"X", "z/b/y.md": b"Y"}, {"z", "z/b"})
    assert contents(overlay) == expected
    assert contents(replayed(tmp_path, overlay, snapshot)) == expected


async def test_a_rename_with_the_whiteout_flag_is_einval(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    folder = await inode_of(ops, "s1", "rules", "dir")
    rename_whiteout = 4
    code = await errno_of(ops.rename(folder, b"rules.md", folder, b"x.md", rename_whiteout, CTX))
    assert code == errno.EINVAL
    assert contents(overlay)[0] == {"dir/rules.md": b"rule 1\n"}
