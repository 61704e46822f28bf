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


class Disk:
    """One turn over ``rules/dir/rules.md`` in a state dir a power cut can hit (``cut``)."""

    def __init__(self, root: Path, power: PowerCut | None) -> None:
        self.state = root / "state"
        self.blobs = BlobCache(root / "blobs")
        [self.sha] = self.blobs.put_many([b"rule 1\n"])
        self.power = power
        self.overlay = self._turn(replay=False)
        self.ops = MemfsOperations(self.overlay)

    def _turn(self, *, replay: bool) -> Overlay:
        overlay = Overlay(self.state, self.blobs, Limits())
        overlay.open_session("s1")
        overlay.attach_turn(
            "s1",
            "t1",
            {"rules": (False, {"dir/rules.md": SnapshotFile(self.sha, 7, "rev-1")})},
            replay=replay,
        )
        return overlay

    async def folder(self) -> int:
        inode = ROOT_INODE
        for name in ("s1", "rules", "dir"):
            inode = (await self.ops.lookup(inode, name.encode(), CTX)).st_ino
        return inode

    async def create(self, name: bytes, content: bytes, *, sync: bool = False) -> int:
        """Create ``name`` in the folder holding ``content``; its inode."""
        info, attr = await self.ops.create(
            await self.folder(), name, 0o100644, os.O_WRONLY | os.O_CREAT, CTX
        )
        await self.ops.write(info.fh, 0, content)
        if sync:
            await self.ops.fsync(info.fh, False)
        await self.ops.release(info.fh)
        return attr.st_ino

    def cut(self) -> dict[str, bytes | None]:
        """The power goes, the daemon starts again: what each path of the folder holds."""
        assert self.power is not None
        os.close(turn_of(self.overlay).journal)
        self.power.cut()
        again = self._turn(replay=True)
        mount = turn_of(again).mounts["rules"]
        found = {}
        for name in ("rules.md", "rules.md.tmp", "notes.md", "synced.md", "unsynced.md"):
            source = again.source(mount, f"dir/{name}")
            found[name] = None if source is None else source.read_bytes()
        return found


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Disk:
    return Disk(tmp_path, PowerCut(monkeypatch, tmp_path / "state"))


async def test_a_rename_made_durable_by_fsyncing_its_folder_survives_a_power_cut(
    disk: Disk,
) -> None:
    # The textbook durable replace (what editors, git and SQLite do): write a
    # temporary file, fsync it, rename it over the file, fsync the folder.
    await disk.create(b"rules.md.tmp", b"rule 2\n", sync=True)
    folder = await disk.folder()
    await disk.ops.rename(folder, b"rules.md.tmp", folder, b"rules.md", 0, CTX)
    dir_fh = await disk.ops.opendir(folder, CTX)
    await disk.ops.fsyncdir(dir_fh, False)  # the agent's fsync of the folder returned: durable
    await disk.ops.releasedir(dir_fh)

    after = disk.cut()
    assert (after["rules.md.tmp"], after["rules.md"]) == (None, b"rule 2\n")


async def test_a_file_synced_through_a_read_only_descriptor_survives_a_power_cut(
    disk: Disk,
) -> None:
    # `echo x > notes.md; sync notes.md`: coreutils' sync opens the file
    # O_RDONLY and fsyncs it, which POSIX says makes the file's data durable.
    inode = await disk.create(b"notes.md", b"remember this\n")
    reader = await disk.ops.open(inode, os.O_RDONLY, CTX)
    await disk.ops.fsync(reader.fh, False)  # returned: notes.md is on disk
    await disk.ops.release(reader.fh)

    assert disk.cut()["notes.md"] == b"remember this\n"


async def test_a_file_synced_through_its_writing_descriptor_survives_a_power_cut(
    disk: Disk,
) -> None:
    # The harness's own check: what was synced comes back, what was not does not.
    await disk.create(b"synced.md", b"kept\n", sync=True)
    await disk.create(b"unsynced.md", b"lost\n")

    after = disk.cut()
    assert (after["synced.md"], after["unsynced.md"]) == (b"kept\n", None)


async def test_fsync_of_a_folder_held_open_past_its_turns_end_succeeds_and_syncs_nothing(
    tmp_path: Path,
) -> None:
    disk = Disk(tmp_path, None)
    dir_fh = await disk.ops.opendir(await disk.folder(), CTX)
    disk.overlay.detach_turn("s1")  # the turn ended; the agent's shell still holds the folder
    await disk.ops.fsyncdir(dir_fh, False)  # its journal is closed: nothing of it to sync
    await disk.ops.releasedir(dir_fh)
