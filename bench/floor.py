"""The pyfuse3 floor: the cheapest read-only pyfuse3 filesystem, as a baseline for memfs.

It serves a folder's files with the same kernel caching memfs asks for
(300 s entry and attribute timeouts, ``keep_cache``, FLUSH and xattr requests
answered ENOSYS so the kernel stops sending them) and does nothing else: no
overlay, no journal, no access log. The tree and sizes are held in memory
(memfs holds its manifest so too); contents are read from the folder's files,
as memfs reads its blobs: ``open`` opens the file, ``read`` is one ``pread``
on the trio thread, ``release`` closes it. So a first pass after the caches
are dropped reads the disk in both, and what it costs per request is what any
Python daemon on pyfuse3 and trio costs on this kernel: the distance from
memfs to it is memfs's own overhead, and the distance from it to
fuse-overlayfs is the price of answering FUSE in Python rather than C.

    python bench/floor.py SOURCE MOUNTPOINT     # unmount with fusermount3 -u
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyfuse3
import trio

CACHE_SECONDS = 300.0


@dataclass
class Entry:
    inode: int
    source: Path | None  # None: a folder
    size: int = 0
    children: dict[bytes, int] = field(default_factory=dict)


class Floor(pyfuse3.Operations):
    def __init__(self, source: Path) -> None:
        super().__init__()
        self.entries: dict[int, Entry] = {pyfuse3.ROOT_INODE: Entry(pyfuse3.ROOT_INODE, None)}
        self._load(source, self.entries[pyfuse3.ROOT_INODE])

    def _load(self, folder: Path, into: Entry) -> None:
        for item in sorted(folder.iterdir()):
            if item.is_dir():
                entry = Entry(len(self.entries) + 1, None)
            else:
                entry = Entry(len(self.entries) + 1, item, item.stat().st_size)
            self.entries[entry.inode] = entry
            into.children[os.fsencode(item.name)] = entry.inode
            if item.is_dir():
                self._load(item, entry)

    def _attr(self, inode: int) -> pyfuse3.EntryAttributes:
        entry = self.entries[inode]
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = inode
        attr.entry_timeout = attr.attr_timeout = CACHE_SECONDS
        if entry.source is None:
            attr.st_mode, attr.st_nlink, attr.st_size = stat.S_IFDIR | 0o755, 2, 4096
        else:
            attr.st_mode, attr.st_nlink = stat.S_IFREG | 0o644, 1
            attr.st_size = entry.size
        attr.st_blksize = 4096
        attr.st_blocks = (attr.st_size + 511) // 512
        return attr

    def _entry(self, inode: int) -> Entry:
        try:
            return self.entries[inode]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        inode = self._entry(parent_inode).children.get(name)
        if inode is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attr(inode)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self._entry(inode)
        return self._attr(inode)

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        return inode

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        names = list(self._entry(fh).children.items())
        for index in range(start_id, len(names)):
            name, inode = names[index]
            if not pyfuse3.readdir_reply(token, name, self._attr(inode), index + 1):
                return

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        source = self._entry(inode).source
        if source is None:
            raise pyfuse3.FUSEError(errno.EISDIR)
        # The descriptor is the handle: one open file per open, as memfs keeps.
        return pyfuse3.FileInfo(fh=os.open(source, os.O_RDONLY), keep_cache=True)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return os.pread(fh, size, off)

    async def flush(self, fh: int) -> None:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def release(self, fh: int) -> None:
        os.close(fh)

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> Sequence[bytes]:
        raise pyfuse3.FUSEError(errno.ENOSYS)


async def serve(source: Path, mountpoint: Path) -> None:
    options = set(pyfuse3.default_options) | {"fsname=memfs-floor", "ro", "noatime"}
    pyfuse3.init(Floor(source), str(mountpoint), options)
    try:
        await pyfuse3.main()
    finally:
        pyfuse3.close(unmount=False)


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    trio.run(serve, Path(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
