"""The pyfuse3 ``Operations`` adapter: FUSE requests in, overlay calls out, errnos back.

Nothing here decides policy; :mod:`memfsd.overlay` does. This module turns
inode numbers and byte names into overlay calls and overlay nodes into
``EntryAttributes``, and translates errors once, in :func:`fuse_errors`: a
``MemfsError`` becomes its errno, an ``OSError`` its own errno, and anything
unexpected is logged with its traceback and becomes EIO, because an exception
other than ``FUSEError`` escaping a handler would end ``pyfuse3.main()`` and
leave a dead mount.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import stat
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pyfuse3

from memfs.core.errors import InvalidName, MemfsError, NameTooLong, NotFound, Unsupported
from memfs.core.names import MAX_SEGMENT_BYTES, decode_fs_name
from memfsd.nodes import Node
from memfsd.overlay import Overlay

log = logging.getLogger("memfsd.fs")

P = ParamSpec("P")
T = TypeVar("T")

BLOCK = 4096
# The kernel may cache names and attributes this long; the daemon invalidates
# what it changes behind the kernel's back (turns attached, detached, closed).
CACHE_SECONDS = 300.0


def fuse_errors(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Every handler's one error boundary.

    Typed on coroutines, not awaitables: ``pyfuse3.Operations`` declares its
    handlers ``async def``, and a wrapped handler must still override them.
    """

    name = method.__name__

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        ops = args[0] if args and isinstance(args[0], MemfsOperations) else None
        if ops is not None:
            ops.requests[name] += 1
        try:
            return await method(*args, **kwargs)
        except pyfuse3.FUSEError:
            raise
        except MemfsError as exc:
            raise pyfuse3.FUSEError(exc.errno) from None
        except OSError as exc:
            log.warning("%s: %s", method.__name__, exc)
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        except Exception:
            log.exception("unexpected error in FUSE handler %s", method.__name__)
            raise pyfuse3.FUSEError(errno.EIO) from None
        finally:
            # Between requests, where every change is whole: a journal past its
            # bound is rewritten here, never in the middle of one.
            if ops is not None and ops.overlay.due:
                ops.overlay.compact_due()

    return wrapper


def _check_length(raw: bytes) -> None:
    """ENAMETOOLONG comes before any other answer about a name, as on any disk."""
    if len(raw) > MAX_SEGMENT_BYTES:
        raise NameTooLong(
            f"the name is {len(raw)} bytes; at most {MAX_SEGMENT_BYTES} are allowed",
            path=raw[:64].decode("utf-8", "backslashreplace") + "...",
        )


def _name(raw: bytes) -> str:
    _check_length(raw)
    return decode_fs_name(raw)


def caller_groups(ctx: pyfuse3.RequestContext) -> frozenset[int]:
    """The groups the calling process is in: its own and its supplementary ones.

    FUSE passes only the caller's uid, gid and pid, so the supplementary
    groups are read from ``/proc/<pid>/status``; if the process is gone by
    then, only its own group counts.
    """
    groups = {ctx.gid}
    try:
        with open(f"/proc/{ctx.pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"Groups:"):
                    groups.update(int(group) for group in line.split()[1:])
                    break
    except OSError:
        pass
    return frozenset(groups)


class MemfsOperations(pyfuse3.Operations):
    """The FUSE face of an :class:`Overlay`."""

    enable_writeback_cache = False
    enable_acl = False

    def __init__(
        self,
        overlay: Overlay,
        *,
        cache_seconds: float = CACHE_SECONDS,
        requests: Counter[str] | None = None,
        mount_root: Path | None = None,
    ) -> None:
        super().__init__()
        self.overlay = overlay
        # Resolved now: resolving it later would ask this very mount.
        self.mount_root = None if mount_root is None else os.path.realpath(mount_root)
        self.requests: Counter[str] = Counter() if requests is None else requests
        self.cache_seconds = cache_seconds
        self._dirs: dict[int, tuple[Node, list[Node]]] = {}  # fh -> (folder, its listing)
        self._next_dir = 1

    def attributes(self, node: Node) -> pyfuse3.EntryAttributes:
        # Built for every entry of every listing: plain locals, no property.
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = node.inode
        attr.generation = 0
        attr.entry_timeout = attr.attr_timeout = self.cache_seconds
        if node.kind == "dir":
            attr.st_mode = stat.S_IFDIR | node.mode
            attr.st_nlink = 2 + self.overlay.subdirs(node)  # counted, not planted
            attr.st_size = BLOCK
            attr.st_blocks = (BLOCK + 511) // 512
        else:
            size = node.size
            attr.st_mode = stat.S_IFREG | node.mode
            attr.st_nlink = 1 if node.attached else 0
            attr.st_size = size
            attr.st_blocks = (size + 511) // 512
        attr.st_uid = node.uid
        attr.st_gid = node.gid
        attr.st_blksize = BLOCK
        attr.st_atime_ns = node.atime_ns
        attr.st_mtime_ns = node.mtime_ns
        attr.st_ctime_ns = node.ctime_ns
        return attr

    def _entry(self, node: Node) -> pyfuse3.EntryAttributes:
        self.overlay.remember(node)
        return self.attributes(node)

    # -- names -----------------------------------------------------------------

    @fuse_errors
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        _check_length(name)
        try:
            decoded = decode_fs_name(name)
        except InvalidName:
            raise NotFound("no such file", path=repr(name)) from None
        return self._entry(self.overlay.find(parent_inode, decoded))

    @fuse_errors
    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            self.overlay.forget(inode, count)

    @fuse_errors
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self.attributes(self.overlay.node(inode))

    @fuse_errors
    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        node = self.overlay.setattr(
            inode,
            size=attr.st_size if fields.update_size else None,
            mode=attr.st_mode if fields.update_mode else None,
            uid=attr.st_uid if fields.update_uid else None,
            gid=attr.st_gid if fields.update_gid else None,
            atime_ns=attr.st_atime_ns if fields.update_atime else None,
            mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
            caller_uid=ctx.uid,
            caller_groups=caller_groups(ctx) if fields.update_gid and ctx.uid != 0 else (),
        )
        return self.attributes(node)

    @fuse_errors
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        decoded = _name(name)
        if not stat.S_ISREG(mode):
            raise Unsupported("device nodes, FIFOs and sockets are not kept", path=decoded)
        node = self.overlay.create(parent_inode, decoded, mode, ctx.uid, ctx.gid)
        return self._entry(node)

    @fuse_errors
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        node = self.overlay.mkdir(parent_inode, _name(name), mode, ctx.uid, ctx.gid)
        return self._entry(node)

    @fuse_errors
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self.overlay.unlink(parent_inode, _name(name))

    @fuse_errors
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self.overlay.rmdir(parent_inode, _name(name))

    @fuse_errors
    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        raise Unsupported("symlinks are not kept in memory spaces", path=_name(name))

    @fuse_errors
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        raise InvalidName("not a symlink", path=str(inode))

    @fuse_errors
    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        raise Unsupported("hard links are not kept in memory spaces", path=_name(new_name))

    @fuse_errors
    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        old, new = _name(name_old), _name(name_new)
        if flags & ~(pyfuse3.RENAME_EXCHANGE | pyfuse3.RENAME_NOREPLACE):
            # RENAME_WHITEOUT is overlayfs's, and a whiteout is a device node.
            raise InvalidName("unknown rename flags", path=new)
        if flags & pyfuse3.RENAME_EXCHANGE:
            self.overlay.exchange(parent_inode_old, old, parent_inode_new, new)
            return
        self.overlay.rename(
            parent_inode_old,
            old,
            parent_inode_new,
            new,
            replace=not flags & pyfuse3.RENAME_NOREPLACE,
        )

    # -- files -----------------------------------------------------------------

    @fuse_errors
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        fh, _ = self.overlay.open(inode, flags)
        # Contents change only through this mount, so what the kernel cached
        # for this inode is still right: keep it.
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    @fuse_errors
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: pyfuse3.RequestContext
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        node, fh = self.overlay.create_open(
            parent_inode, _name(name), mode, ctx.uid, ctx.gid, flags
        )
        return pyfuse3.FileInfo(fh=fh, keep_cache=True), self._entry(node)

    @fuse_errors
    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.overlay.read(fh, off, size)

    @fuse_errors
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return self.overlay.write(fh, off, buf)

    @fuse_errors
    async def flush(self, fh: int) -> None:
        if not self.overlay.sync_on_close:
            # ENOSYS tells the kernel never to send FLUSH again on this mount:
            # one Python round trip less for every close. Writes already went
            # through to state_dir, so a daemon crash loses nothing closed.
            raise pyfuse3.FUSEError(errno.ENOSYS)
        self.overlay.close(fh)

    @fuse_errors
    async def fsync(self, fh: int, datasync: bool) -> None:
        self.overlay.fsync(fh)

    @fuse_errors
    async def release(self, fh: int) -> None:
        self.overlay.release(fh)

    # -- folders ---------------------------------------------------------------

    @fuse_errors
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        # A listing is a snapshot taken at opendir, so offsets stay stable
        # while the folder changes under a reader.
        entries = self.overlay.children(inode)
        fh = self._next_dir
        self._next_dir += 1
        self._dirs[fh] = (self.overlay.node(inode), entries)
        return fh

    @fuse_errors
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        listing = self._dirs.get(fh)
        if listing is None:
            raise NotFound("no such open folder", path=str(fh))
        folder, entries = listing
        reply, attributes, remember = pyfuse3.readdir_reply, self.attributes, self.overlay.remember
        for index in range(start_id, len(entries)):
            node = entries[index]
            # Gone from the folder since opendir (removed, moved, or forgotten,
            # whose names must not come back): left out, as POSIX allows.
            if not node.attached or node.parent is not folder:
                continue
            if not reply(token, node.name.encode(), attributes(node), index + 1):
                return
            remember(node)

    @fuse_errors
    async def releasedir(self, fh: int) -> None:
        self._dirs.pop(fh, None)

    @fuse_errors
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        listing = self._dirs.get(fh)
        if listing is None:
            raise NotFound("no such open folder", path=str(fh))
        self.overlay.fsync_folder(listing[0])

    @fuse_errors
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        limits = self.overlay.limits
        used_bytes, used_files = self.overlay.space_use(self._caller_cwd(ctx), ctx.uid)
        data = pyfuse3.StatvfsData()
        data.f_bsize = BLOCK
        data.f_frsize = BLOCK
        data.f_blocks = limits.max_space_bytes // BLOCK
        # Free is what a write may still add: a block partly used is not free.
        free_bytes = max(0, limits.max_space_bytes - used_bytes)
        data.f_bfree = data.f_bavail = free_bytes // BLOCK
        data.f_files = limits.max_files
        data.f_ffree = data.f_favail = max(0, limits.max_files - used_files)
        data.f_namemax = MAX_SEGMENT_BYTES
        return data

    def _caller_cwd(self, ctx: pyfuse3.RequestContext) -> int | None:
        """The inode of the caller's working folder, if it is on this mount.

        pyfuse3 does not pass ``statfs`` the inode it was asked about, so
        the caller's working folder stands in for it: ``df .`` inside a space
        reports that space. Reading the link asks nothing of this mount.
        """
        if self.mount_root is None:
            return None
        try:
            cwd = os.readlink(f"/proc/{ctx.pid}/cwd")
        except OSError:
            return None
        if cwd == self.mount_root:
            return self.overlay.root.inode
        if not cwd.startswith(self.mount_root + "/"):
            return None
        node = self.overlay.path_node(cwd[len(self.mount_root) + 1 :].split("/"))
        return None if node is None else node.inode

    @fuse_errors
    async def access(self, inode: int, mode: int, ctx: pyfuse3.RequestContext) -> bool:
        self.overlay.node(inode)
        return True

    # -- what memfs does not keep ---------------------------------------------
    # ENOSYS, not ENOTSUP: the kernel then answers EOPNOTSUPP itself from now
    # on, and stops asking for ``security.capability`` before every write.

    @fuse_errors
    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    @fuse_errors
    async def setxattr(
        self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext
    ) -> None:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    @fuse_errors
    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> Sequence[bytes]:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    @fuse_errors
    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        raise pyfuse3.FUSEError(errno.ENOSYS)


def invalidate_names(names: Sequence[tuple[int, str]]) -> None:
    """Make the kernel drop cached names, waiting until it has.

    Blocks: call it from a worker thread, never from a FUSE request handler
    (the kernel would wait for the handler that waits for the kernel).
    """
    failed: dict[int, OSError] = {}
    for parent_inode, name in names:
        try:
            pyfuse3.invalidate_entry(parent_inode, name.encode())
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                failed[parent_inode] = exc
    # The names are people's file names: a log outlives any forget, so it gets none.
    for parent_inode, error in failed.items():
        log.warning("could not invalidate names in folder inode %d: %s", parent_inode, error)


def invalidate_inodes(inodes: Sequence[int]) -> None:
    """Make the kernel drop what it cached of these files (attributes and pages).

    Blocks, as :func:`invalidate_names` does: call it from a worker thread.
    """
    for inode in inodes:
        try:
            pyfuse3.invalidate_inode(inode, attr_only=False)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("could not invalidate inode %d: %s", inode, exc)


__all__ = [
    "CACHE_SECONDS",
    "MemfsOperations",
    "fuse_errors",
    "invalidate_inodes",
    "invalidate_names",
]
