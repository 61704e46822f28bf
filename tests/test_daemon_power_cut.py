"""What an agent's ``fsync`` returned for survives a power cut (the journal and data files).

A power cut is simulated on the daemon's own files: each journal and data
file goes back to what it held at its last ``fsync`` (a data file never
synced comes back empty, as delayed allocation leaves it). POSIX says an
``fsync`` of a file makes its data durable through any descriptor (``sync
FILE`` opens it read-only), and an ``fsync`` of a folder makes the names in
it durable (the write, fsync, rename, fsync-the-folder replace of editors,
git and SQLite).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memfs.core.models import Limits
from memfsd.blobs import BlobCache
from memfsd.fs import MemfsOperations
from memfsd.nodes import ROOT_INODE, SnapshotFile
from memfsd.overlay import Overlay
from tests.overlay_helpers import Ctx, turn_of

CTX = Ctx(uid=1000, gid=1000)


class PowerCut:
    """Every ``os.fsync`` the daemon makes, and what each synced file held then.

    ``cut()`` is a power cut: each journal and data file of the state dir goes
    back to what it held at its last fsync (a data file never synced is
    empty: what delayed allocation leaves of an unsynced file).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
        self.state = state
        self.synced: dict[Path, bytes] = {}
        real = os.fsync

        def fsync(fd: int) -> None:
            real(fd)
            try:
                path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                return
            if path.is_file():
                self.synced[path] = path.read_bytes()

        monkeypatch.setattr(os, "fsync", fsync)

    def cut(self) -> None:
        for path in self.state.rglob("*"):
            if path.is_file() and (path.name == "journal" or path.parent.name == "data"):
                path.write_bytes(self.synced.get(path, b""))


def overlay_with_rules(state: Path, blobs: BlobCache, sha: str, *, replay: bool = False) -> Overlay:
    overlay = Overlay(state, blobs, Limits())
    overlay.open_session("s1")
    overlay.attach_turn(
        "s1",
        "t1",
        {"rules": (False, {"dir/rules.md": SnapshotFile(sha, 7, "rev-1")})},
        replay=replay,
    )
    return overlay


async def inode_of(ops: MemfsOperations, *names: str) -> int:
    inode = ROOT_INODE
    for name in names:
        inode = (await ops.lookup(inode, name.encode(), CTX)).st_ino
    return inode


async def test_a_rename_made_durable_by_fsyncing_its_folder_survives_a_power_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The textbook durable replace (what editors, git and SQLite do): write a
    # temporary file, fsync it, rename it over the file, fsync the folder.
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"rule 1\n"])
    power = PowerCut(monkeypatch, tmp_path / "state")
    overlay = overlay_with_rules(tmp_path / "state", blobs, sha)
    ops = MemfsOperations(overlay)
    folder = await inode_of(ops, "s1", "rules", "dir")
    info, _ = await ops.create(folder, b"rules.md.tmp", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"rule 2\n")
    await ops.fsync(info.fh, False)
    await ops.release(info.fh)
    await ops.rename(folder, b"rules.md.tmp", folder, b"rules.md", 0, CTX)
    dir_fh = await ops.opendir(folder, CTX)
    await ops.fsyncdir(dir_fh, False)  # the agent's fsync of the folder returned: durable
    await ops.releasedir(dir_fh)
    os.close(turn_of(overlay).journal)

    power.cut()
    again = overlay_with_rules(tmp_path / "state", blobs, sha, replay=True)
    mount = turn_of(again).mounts["rules"]
    assert again.source(mount, "dir/rules.md.tmp") is None
    source = again.source(mount, "dir/rules.md")
    assert source is not None and source.read_bytes() == b"rule 2\n"


async def test_a_file_synced_through_a_read_only_descriptor_survives_a_power_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `echo x > notes.md; sync notes.md`: coreutils' sync opens the file
    # O_RDONLY and fsyncs it, which POSIX says makes the file's data durable.
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"rule 1\n"])
    power = PowerCut(monkeypatch, tmp_path / "state")
    overlay = overlay_with_rules(tmp_path / "state", blobs, sha)
    ops = MemfsOperations(overlay)
    folder = await inode_of(ops, "s1", "rules", "dir")
    info, attr = await ops.create(folder, b"notes.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"remember this\n")
    await ops.release(info.fh)
    reader = await ops.open(attr.st_ino, os.O_RDONLY, CTX)
    await ops.fsync(reader.fh, False)  # returned: notes.md is on disk
    await ops.release(reader.fh)
    os.close(turn_of(overlay).journal)

    power.cut()
    again = overlay_with_rules(tmp_path / "state", blobs, sha, replay=True)
    source = again.source(turn_of(again).mounts["rules"], "dir/notes.md")
    assert source is not None and source.read_bytes() == b"remember this\n"


async def test_a_file_synced_through_its_writing_descriptor_survives_a_power_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness's own check: what was synced comes back, what was not does not.
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"rule 1\n"])
    power = PowerCut(monkeypatch, tmp_path / "state")
    overlay = overlay_with_rules(tmp_path / "state", blobs, sha)
    ops = MemfsOperations(overlay)
    folder = await inode_of(ops, "s1", "rules", "dir")
    info, _ = await ops.create(folder, b"synced.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"kept\n")
    await ops.fsync(info.fh, False)
    await ops.release(info.fh)
    info, _ = await ops.create(folder, b"unsynced.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"lost\n")
    await ops.release(info.fh)
    os.close(turn_of(overlay).journal)

    power.cut()
    again = overlay_with_rules(tmp_path / "state", blobs, sha, replay=True)
    mount = turn_of(again).mounts["rules"]
    source = again.source(mount, "dir/synced.md")
    assert source is not None and source.read_bytes() == b"kept\n"
    assert again.source(mount, "dir/unsynced.md") is None


async def test_fsync_of_a_folder_held_open_past_its_turns_end_succeeds_and_syncs_nothing(
    tmp_path: Path,
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"rule 1\n"])
    overlay = overlay_with_rules(tmp_path / "state", blobs, sha)
    ops = MemfsOperations(overlay)
    dir_fh = await ops.opendir(await inode_of(ops, "s1", "rules", "dir"), CTX)
    overlay.detach_turn("s1")  # the turn ended; the agent's shell still holds the folder
    await ops.fsyncdir(dir_fh, False)  # its journal is closed: nothing of it to sync
    await ops.releasedir(dir_fh)
