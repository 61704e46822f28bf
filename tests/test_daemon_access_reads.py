"""Access recording sees every first read, however cheap a second open is made."""

from __future__ import annotations

import os
from pathlib import Path

import pyfuse3
import pytest

from memfs.core.models import Limits
from memfsd.blobs import BlobCache
from memfsd.fs import MemfsOperations
from memfsd.nodes import Node, SnapshotFile
from memfsd.overlay import Overlay
from tests.overlay_helpers import turn_of
from tests.test_daemon_operations import CTX, inode_of


def make(tmp_path: Path) -> tuple[Overlay, MemfsOperations]:
    blobs = BlobCache(tmp_path / "blobs")
    [one, two] = blobs.put_many([b"one\n", b"two\n"])
    overlay = Overlay(tmp_path, blobs, Limits())
    overlay.open_session("s1")
    snapshot = {
        "dir/a.md": SnapshotFile(one, 4, "rev-a"),
        "dir/b.md": SnapshotFile(two, 4, "rev-b"),
    }
    overlay.attach_turn("s1", "t1", {"rules": (False, snapshot)})
    return overlay, MemfsOperations(overlay)


async def read_once(ops: MemfsOperations, inode: int) -> None:
    info = await ops.open(inode, os.O_RDONLY, CTX)
    await ops.read(info.fh, 0, 100)
    await ops.release(info.fh)


def opened(overlay: Overlay) -> set[str]:
    log = turn_of(overlay).access_log()
    return {path for path, entry in log.items() if entry.opened}


async def test_a_second_open_for_reading_walks_no_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay, ops = make(tmp_path)
    inode = await inode_of(ops, "s1", "rules", "dir", "a.md")
    await read_once(ops, inode)
    walks: list[str] = []
    real = Node.path

    def counted(node: Node) -> str:
        walks.append(node.name)
        return real(node)

    monkeypatch.setattr(Node, "path", counted)
    for _ in range(3):
        await read_once(ops, inode)
    assert walks == []
    assert opened(overlay) == {"rules/dir/a.md"}


async def test_after_a_rename_the_first_read_of_each_new_path_is_recorded(tmp_path: Path) -> None:
    overlay, ops = make(tmp_path)
    dir_inode = await inode_of(ops, "s1", "rules", "dir")
    mount_inode = await inode_of(ops, "s1", "rules")
    a = await inode_of(ops, "s1", "rules", "dir", "a.md")
    b = await inode_of(ops, "s1", "rules", "dir", "b.md")
    await read_once(ops, a)
    await read_once(ops, b)
    # The file itself moves: its new path was never opened.
    await ops.rename(dir_inode, b"a.md", dir_inode, b"c.md", 0, CTX)
    await read_once(ops, a)
    assert "rules/dir/c.md" in opened(overlay)
    # Its folder moves: every path under it is new, the file's too.
    await ops.rename(mount_inode, b"dir", mount_inode, b"moved", 0, CTX)
    await read_once(ops, a)
    await read_once(ops, b)
    assert {"rules/moved/c.md", "rules/moved/b.md"} <= opened(overlay)
    # Two names swap what they hold: each file is at a path not yet opened there.
    moved = await inode_of(ops, "s1", "rules", "moved")
    await ops.create(moved, b"d.md", 0o100644, os.O_WRONLY, CTX)
    await ops.rename(moved, b"b.md", moved, b"d.md", pyfuse3.RENAME_EXCHANGE, CTX)
    await read_once(ops, b)
    assert "rules/moved/d.md" in opened(overlay)
    overlay.write_held()
    journal = (turn_of(overlay).dir / "journal").read_text()
    for path in ("dir/a.md", "dir/b.md", "dir/c.md", "moved/c.md", "moved/b.md", "moved/d.md"):
        assert f'"p":"{path}"' in journal


async def test_a_file_made_again_at_a_read_path_is_a_new_node_and_its_read_is_seen(
    tmp_path: Path,
) -> None:
    overlay, ops = make(tmp_path)
    dir_inode = await inode_of(ops, "s1", "rules", "dir")
    a = await inode_of(ops, "s1", "rules", "dir", "a.md")
    await read_once(ops, a)
    await ops.unlink(dir_inode, b"a.md", CTX)
    info, attr = await ops.create(dir_inode, b"a.md", 0o100644, os.O_WRONLY, CTX)
    await ops.release(info.fh)
    assert attr.st_ino != a
    await read_once(ops, attr.st_ino)
    assert overlay.node(attr.st_ino).read_checked == overlay.moves
    assert "rules/dir/a.md" in opened(overlay)


async def test_opens_that_can_read_are_recorded_frozen_too_and_write_only_opens_are_not(
    tmp_path: Path,
) -> None:
    overlay, ops = make(tmp_path)
    a = await inode_of(ops, "s1", "rules", "dir", "a.md")
    b = await inode_of(ops, "s1", "rules", "dir", "b.md")
    info = await ops.open(b, os.O_WRONLY, CTX)
    await ops.release(info.fh)
    assert opened(overlay) == set()
    info = await ops.open(b, os.O_RDWR, CTX)
    await ops.release(info.fh)
    assert opened(overlay) == {"rules/dir/b.md"}
    log = turn_of(overlay).access_log()
    assert log["rules/dir/b.md"].read is None  # copied up by the write-only open: this turn's
    overlay.freeze("s1")
    # Ending, or kept by a failed store: what the turn reads now is its reading too.
    await read_once(ops, a)
    assert opened(overlay) == {"rules/dir/b.md", "rules/dir/a.md"}
