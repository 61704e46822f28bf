"""The folder store: each space is a plain folder of files on disk, saved at once.

This module owns the on-disk layout under the store's root and every read and
write of it::

    org/<org>/<space>/...             org-layer spaces
    people/<org>/<user>/<space>/...   a person's own spaces
    dirs/<org>/<space>/...            app-defined persistent dirs
    .locks/<same path>.lock           one lock file per space

People may edit these files by hand; the next load sees what is there. There
is no history and no review: a saved change set simply becomes the folder's
content. For the app-facing ``my_memory`` handler it lists a person's files
(``user_files``) and forgets one (``forget_file``: the file is deleted, and
with no history nothing of it stays).

What ``load`` sees is the regular files under the space folder with
UTF-8 names; symlinks, FIFOs, devices, sockets, names that are not UTF-8 and
this store's own temp files are skipped, never followed or opened. A write to
a path that passes through a symlink is refused; that check runs before
writing, so people who can write the root are trusted not to swap a folder
for a symlink in the middle of a store.

A file's mtime is the real file's (``utime``; its ctime is the disk's own,
no call can set it). Its mode is kept in the real file's owner bits only,
since the files are private to the store's user (below): a change set's mode
is written as its owner bits (at least read and write, so the store can read
and replace the file), and ``load`` gives group and others the owner's read
and execute bits. 0644 and 0755, what files and scripts have, come back
exactly; a mode whose group or other bits differ from that (0600, 0664) comes
back as its owner bits say. A managed store keeps every mode exactly.
Every folder under the space, empty ones included, is a folder of the space:
``load`` lists them all, ``folders_created`` makes them and ``folders_deleted``
removes them when empty; deleting a file leaves its folder where it is, as
on any disk.

Conflicts cover the whole space. The cursor is a hash of the space's content
(every path with the digest of its bytes), so a store whose cursor no longer
matches conflicts on every path it touches, even when only other files of the
space changed since the snapshot — including a file a person dropped in by
hand. Nothing of a conflicting change set is written.

The root is made by the first store if it does not exist when the store is
made. A root that existed (then, or since) and is gone is ``StoreUnavailable``
on every load and store, never an empty store that would make every turn's
store a conflict; a space folder that is missing is just an empty space.

Each store runs under an exclusive ``flock`` on the space's lock file, so
several processes (and threads) sharing one root never interleave a check
with another's apply. Every file is written to a temp file in its folder,
fsynced and renamed over the target, so a crash leaves the old or the new
content, never a torn file. All I/O runs in worker threads, off the trio loop.

``forget_user`` removes ``people/<org>/<user>/`` whole (each space under its
lock), and the person's lock files with it; it reports the spaces that held
any file or folder and how many files they held. There is no history to
purge. First it leaves a mark, ``.forgotten/<sha256 of org NUL user>``
holding a random token (never a name): a person's space's cursor is the
hash of its content, then ``~`` and their mark if they have one, so a turn
that loaded any of their spaces before the forget is refused whole with
``Forgotten`` if it stores into it, even one that found the space empty
and would find it empty again.

What the store creates is private to its user: folders 0700, files 0600
(a file a person gave other permissions by hand keeps them when replaced, and
folders and files made before this rule keep theirs: ``chmod -R go= ROOT``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import trio

from memfs.core.errors import (
    ConfigError,
    Forgotten,
    InvalidName,
    NotFound,
    StoreUnavailable,
    Unsupported,
)
from memfs.core.models import (
    FILE_MODE,
    MODE_BITS,
    By,
    ChangeSet,
    FileMeta,
    Forgot,
    Loaded,
    Provenance,
    SpaceRef,
    Stored,
    clamp_time_ns,
    digest,
)
from memfs.core.names import check_identity, check_path, check_space_name, decode_fs_name
from memfs.core.review import ReviewMode, require_deletable
from memfs.private import DIR_MODE as PRIVATE_DIR_MODE
from memfs.private import FILE_MODE as PRIVATE_FILE_MODE

TEMP_PREFIX = ".memfs-tmp-"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY
# Bumping this changes every cursor, so snapshots taken under another manifest
# encoding can never be mistaken for current ones.
_MANIFEST_HEADER = b"memfs-folder-manifest-v1\n"


def _marked(cursor: str, mark: str | None) -> str:
    """A space's cursor with its person's forget mark, if any (see the module's docstring)."""
    return cursor if mark is None else f"{cursor}~{mark}"


def _cursor(manifest: Mapping[str, str]) -> str:
    """The hash of a space's content: its sorted (path, content digest) pairs."""
    h = hashlib.sha256(_MANIFEST_HEADER)
    for path in sorted(manifest):
        # Paths never hold NUL (check_path), so the encoding is unambiguous.
        h.update(path.encode("utf-8") + b"\0" + manifest[path].encode("ascii") + b"\n")
    return h.hexdigest()


EMPTY_CURSOR = _cursor({})
# Where a forgotten person's mark is kept (see the module's docstring).
FORGOTTEN_DIR = ".forgotten"


@contextlib.contextmanager
def _unavailable(what: str, ref: SpaceRef) -> Iterator[None]:
    """Report a filesystem failure as the store being unavailable, cause attached."""
    try:
        yield
    except OSError as exc:
        raise StoreUnavailable(f"the folder store could not {what}: {exc}", path=str(ref)) from exc


def _fsync_dir(path: Path) -> None:
    # A rename, unlink or mkdir is durable only once its directory is fsynced.
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _ensure_dir(path: Path, dirty: set[Path]) -> None:
    """``mkdir -p`` that remembers which parents gained an entry and need an fsync."""
    missing: list[Path] = []
    probe = path
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another writer made it first
            os.mkdir(folder, PRIVATE_DIR_MODE)
            dirty.add(folder.parent)


def _read_regular(name: str, dir_fd: int) -> bytes | None:
    """A regular file's bytes, or None if it is gone or was swapped for something else."""
    found = _read_regular_stat(name, dir_fd)
    return None if found is None else found[0]


def _read_regular_stat(name: str, dir_fd: int) -> tuple[bytes, os.stat_result] | None:
    """A regular file's bytes and stat, or None if it is gone or was swapped for something else.

    O_NOFOLLOW and O_NONBLOCK keep a symlink or FIFO put there since the scan
    from being followed or from blocking the read.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO):
            return None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(), info
    finally:
        os.close(fd)


def _walk(
    dir_fd: int,
    prefix: str,
    files: dict[str, bytes],
    meta: dict[str, FileMeta] | None = None,
    folders: list[str] | None = None,
) -> None:
    # Directories are entered by descriptor with O_NOFOLLOW, so one swapped for
    # a symlink between the scan and the descent is refused, not followed.
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(TEMP_PREFIX):
                continue
            try:
                path = check_path(prefix + decode_fs_name(os.fsencode(name)))
            except InvalidName:
                continue  # not UTF-8 or over the length limits: no change set could name it
            if entry.is_dir(follow_symlinks=False):
                try:
                    sub = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                        continue  # gone or replaced since the scan
                    raise
                if folders is not None:
                    folders.append(path)
                try:
                    _walk(sub, path + "/", files, meta, folders)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                found = _read_regular_stat(name, dir_fd)
                if found is not None:
                    files[path] = found[0]
                    if meta is not None:
                        info = found[1]
                        meta[path] = FileMeta(
                            mode=_space_mode(stat.S_IMODE(info.st_mode)),
                            mtime_ns=clamp_time_ns(info.st_mtime_ns),
                            ctime_ns=clamp_time_ns(info.st_ctime_ns),
                        )


def _read_space(folder: Path) -> dict[str, bytes]:
    return _read_space_meta(folder)[0]


def _read_space_meta(folder: Path) -> tuple[dict[str, bytes], dict[str, FileMeta], list[str]]:
    """The space's files, each file's metadata, and every folder under it."""
    files: dict[str, bytes] = {}
    meta: dict[str, FileMeta] = {}
    folders: list[str] = []
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except FileNotFoundError:
        return files, meta, folders  # a space nobody has written to yet
    try:
        _walk(fd, "", files, meta, folders)
    finally:
        os.close(fd)
    return files, meta, folders


def _disk_mode(mode: int) -> int:
    """What a file of ``mode`` is on disk: its owner bits, readable and writable by the owner."""
    return (mode & 0o700) | PRIVATE_FILE_MODE


def _space_mode(disk_mode: int) -> int:
    """The mode a file on disk has in the space: group and others read and run as the owner may."""
    owner = disk_mode & 0o700
    return (owner | (owner >> 3 & 0o050) | (owner >> 6 & 0o005)) & MODE_BITS


def _set_meta(target: Path, meta: FileMeta | None, *, new: bool) -> None:
    """Give a file just written the mode and mtime its change set says (a new one: 0644)."""
    if meta is None:
        if new:
            os.chmod(target, _disk_mode(FILE_MODE), follow_symlinks=False)
        return
    os.chmod(target, _disk_mode(meta.mode), follow_symlinks=False)
    if meta.mtime_ns is not None:
        os.utime(target, ns=(time.time_ns(), meta.mtime_ns), follow_symlinks=False)


def _write_atomically(target: Path, content: bytes) -> None:
    temp = target.with_name(f"{TEMP_PREFIX}{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            with contextlib.suppress(FileNotFoundError):
                # Keep the permissions a person gave the file; replacing must not reset them.
                old = os.lstat(target)
                if stat.S_ISREG(old.st_mode):
                    os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


class FolderStore:
    """A store that keeps each space as a plain folder under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.abspath(root))
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError("the folder store's root is not a folder", path=str(self.root))
        # flock is per open file, but where it is emulated with fcntl locks (some
        # network filesystems) it is per process; this keeps our own threads apart.
        self._thread_lock = threading.Lock()
        # A root that exists (or that this store made) must go on existing: if it
        # is removed, the store is unavailable, not a fresh empty one that would
        # make every turn's store conflict with what it loaded.
        self._root_made = self.root.is_dir()

    def _require_root(self, ref: SpaceRef) -> bool:
        """Whether the root exists; ``StoreUnavailable`` if it did and is gone."""
        # Read before the look: another thread's first store may make the root
        # (and say so) just after it, which is no root gone missing.
        made = self._root_made
        if self.root.is_dir():
            self._root_made = True
            return True
        if made:
            raise StoreUnavailable(
                "the folder store's root is missing; memfs does not start an empty store in "
                f"place of one that existed: {self.root}",
                path=str(ref),
            )
        return False

    def __repr__(self) -> str:
        return f"FolderStore({str(self.root)!r})"

    def _parts(self, ref: SpaceRef) -> tuple[str, ...]:
        if ref.layer == "org":
            return ("org", ref.org, ref.space)
        if ref.layer == "user":
            assert ref.user is not None  # SpaceRef refuses a user layer without one
            return ("people", ref.org, ref.user, ref.space)
        return ("dirs", ref.org, ref.space)

    def folder(self, ref: SpaceRef) -> Path:
        """Where the space's files live."""
        return self.root.joinpath(*self._parts(ref))

    def _lock_path(self, ref: SpaceRef) -> Path:
        *parents, space = self._parts(ref)
        return self.root.joinpath(".locks", *parents, f"{space}.lock")

    async def load(self, ref: SpaceRef, session: str) -> Loaded:
        return await trio.to_thread.run_sync(self._load_sync, ref)

    def _load_sync(self, ref: SpaceRef) -> Loaded:
        with _unavailable("read the space", ref):
            if not self._require_root(ref):
                # Nothing was ever stored here.
                files, meta, folders = dict[str, bytes](), dict[str, FileMeta](), list[str]()
                mark = None
            else:
                with self._shared_lock(ref):
                    files, meta, folders = _read_space_meta(self.folder(ref))
                    mark = self._mark(ref)
        revisions = {path: digest(content) for path, content in files.items()}
        return Loaded(
            files=files,
            cursor=_marked(_cursor(revisions), mark),
            revisions=revisions,
            meta=meta,
            folders=tuple(sorted(folders)),
        )

    @contextlib.contextmanager
    def _shared_lock(self, ref: SpaceRef) -> Iterator[None]:
        # Waits out a store in progress so a load never sees half a change set.
        # No lock file means no store has run yet; loads never create files.
        try:
            fd = os.open(self._lock_path(ref), os.O_RDONLY)
        except FileNotFoundError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _exclusive_lock(self, ref: SpaceRef) -> Iterator[None]:
        lock = self._lock_path(ref)
        # Again just before the lock folders are made, which would make a lost root anew.
        self._require_root(ref)
        _ensure_dir(lock.parent, set())  # lock files need no durability
        with self._thread_lock:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing the last descriptor releases the flock

    async def store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        # Not cancellable once started: abandoning the thread mid-apply would
        # return before the lock is released and the writes are durable.
        return await trio.to_thread.run_sync(self._store_sync, ref, changes, cursor)

    def _store_sync(self, ref: SpaceRef, changes: ChangeSet, cursor: str | None) -> Stored:
        with _unavailable("save the space", ref):
            if not self._require_root(ref):
                _ensure_dir(self.root, set())  # the first store makes the root
                self._root_made = True
            with self._exclusive_lock(ref):
                mark = self._mark(ref)
                if cursor is not None:
                    cursor, _, loaded_mark = cursor.partition("~")
                    if (loaded_mark or None) != mark:
                        raise Forgotten(
                            "this person's memory was forgotten after the turn loaded it; "
                            "nothing of the turn is stored in it",
                            path=str(ref),
                        )
                space = self.folder(ref)
                manifest = {p: digest(c) for p, c in _read_space(space).items()}
                current = _cursor(manifest)
                if cursor is not None and cursor != current:
                    return Stored(
                        status="conflict", conflicts=changes.paths, cursor=_marked(current, mark)
                    )
                stored = self._apply(space, manifest, changes)
                return stored.model_copy(update={"cursor": _marked(stored.cursor or "", mark)})

    def _mark_path(self, org: str, user: str) -> Path:
        name = hashlib.sha256(f"{org}\0{user}".encode()).hexdigest()
        return self.root / FORGOTTEN_DIR / name

    def _mark(self, ref: SpaceRef) -> str | None:
        """The person's mark, if they were ever forgotten; None for shared memory."""
        if ref.layer != "user":
            return None
        try:
            return self._mark_path(ref.org, ref.user or "").read_text().strip() or None
        except FileNotFoundError:
            return None

    def _target(self, space: Path, path: str) -> Path:
        """The file ``path`` names, refused if it would leave the space or pass a symlink."""
        check_path(path)
        if any(segment.startswith(TEMP_PREFIX) for segment in path.split("/")):
            raise InvalidName(f"names starting {TEMP_PREFIX!r} are the store's own", path=path)
        target = space.joinpath(*path.split("/"))
        # Resolving the parent follows any symlink on the way; a path free of
        # them resolves to itself, so any difference means it leads elsewhere.
        try:
            leads_elsewhere = target.parent.resolve() != space.resolve().joinpath(
                *path.split("/")[:-1]
            )
        except RuntimeError:  # a symlink loop, on Pythons before 3.13
            leads_elsewhere = True
        if leads_elsewhere:
            raise Unsupported("the path passes through a symlink in the folder store", path=path)
        return target

    def _apply(self, space: Path, manifest: dict[str, str], changes: ChangeSet) -> Stored:
        writes = {**changes.created, **changes.updated}
        # Check everything before touching disk, so a refused change set writes nothing.
        targets = {path: self._target(space, path) for path in changes.paths}
        require_deletable(changes.deleted, manifest)
        made = {path: self._target(space, path) for path in changes.folders_created}
        removed = {path: self._target(space, path) for path in changes.folders_deleted}
        final = {p for p in manifest if p not in changes.deleted} | set(writes)
        for path in sorted(final | set(made)):
            parts = path.split("/")
            for i in range(1, len(parts)):
                if "/".join(parts[:i]) in final:
                    raise InvalidName("a path would be both a file and a folder", path=path)
        for path in made:
            if path in final:
                raise InvalidName("a path would be both a file and a folder", path=path)
        for path in writes:
            # A folder where a file goes must be empty, or emptied by this change set's
            # deletions; one holding files load skips (or a person's files) stays put.
            if (
                _is_real_dir(targets[path])
                and any(targets[path].iterdir())
                and not any(d.startswith(path + "/") for d in changes.deleted)
            ):
                raise InvalidName("a folder is in the way of this file", path=path)

        dirty: set[Path] = set()
        revisions: dict[str, str] = {}
        # Deletions first, so "delete a, create a/b.md" (and the reverse) find the way clear.
        # A file's folder stays: folders go only when the change set removes them.
        for path in sorted(changes.deleted):
            os.unlink(targets[path])
            dirty.add(targets[path].parent)
            del manifest[path]
            revisions[path] = "deleted"
        for path in sorted(removed, key=lambda p: p.count("/"), reverse=True):
            try:
                os.rmdir(removed[path])
            except OSError as exc:
                # Gone already, or still holding what a person put there: left as it is.
                if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise
            else:
                dirty.discard(removed[path])
                dirty.add(removed[path].parent)
        for path in sorted(made):
            _ensure_dir(made[path], dirty)
        for path, content in sorted(writes.items()):
            _ensure_dir(targets[path].parent, dirty)
            if _is_real_dir(targets[path]):
                os.rmdir(targets[path])  # empty by now; a folder holds no content here
                dirty.discard(targets[path])
            new = not targets[path].exists()
            _write_atomically(targets[path], content)
            _set_meta(targets[path], changes.meta.get(path), new=new)
            dirty.add(targets[path].parent)
            manifest[path] = revisions[path] = digest(content)
        for folder in sorted(dirty, key=lambda p: len(p.parts), reverse=True):
            _fsync_dir(folder)
        # From what we wrote, not a fresh scan: a file someone drops in meanwhile
        # must still make the caller's next store conflict.
        return Stored(status="saved", revisions=revisions, cursor=_cursor(manifest))

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        """The files of ``user``'s own memory in ``org``: space name -> path -> content.

        Each folder under ``people/<org>/<user>/`` whose name is a space name
        is a space; spaces without files are left out.
        """
        return await trio.to_thread.run_sync(self._user_files_sync, user, org)

    def _user_files_sync(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        found: dict[str, dict[str, bytes]] = {}
        person = self.root / "people" / org / user
        probe = SpaceRef(layer="user", org=org, user=user, space="me")
        with _unavailable("read the person's memory", probe):
            if not self._require_root(probe) or not _is_real_dir(person):
                return found
            for entry in sorted(os.scandir(person), key=lambda e: e.name):
                try:
                    space = check_space_name(entry.name)
                except InvalidName:
                    continue  # not a space this store could have written
                if not entry.is_dir(follow_symlinks=False):
                    continue
                ref = probe.model_copy(update={"space": space})
                with self._shared_lock(ref):
                    files = _read_space(self.folder(ref))
                if files:
                    found[space] = dict(sorted(files.items()))
        return found

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        """Delete ``path`` from the space's folder; ``NotFound`` if the folder holds no such file.

        The folder keeps no history, so for every layer this erases the file:
        nothing of it is left to read back or restore. ``by`` is not recorded;
        this store keeps no audit log.
        """
        check_path(path)
        return await trio.to_thread.run_sync(self._forget_file_sync, ref, path)

    def _forget_file_sync(self, ref: SpaceRef, path: str) -> Stored:
        with _unavailable("forget the file", ref):
            if not self._require_root(ref):
                raise NotFound("the space holds no such file", path=path)
            with self._exclusive_lock(ref):
                space = self.folder(ref)
                manifest = {p: digest(c) for p, c in _read_space(space).items()}
                if path not in manifest:
                    raise NotFound("the space holds no such file", path=path)
                return self._apply(space, manifest, ChangeSet(deleted=(path,)))

    async def forget_user(self, user: str, org: str, *, by: By | None) -> Forgot:
        """Remove ``people/<org>/<user>/`` whole: every space of that person in that org.

        ``by`` is accepted for the protocol; this store keeps no audit log.
        """
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(self._forget_user_sync, user, org)

    def _forget_user_sync(self, user: str, org: str) -> Forgot:
        person = self.root / "people" / org / user
        where = f"user:{org}/{user}"
        try:
            if not self._require_root(SpaceRef(layer="user", org=org, user=user, space="me")):
                return Forgot()
            # Before anything goes: a store from a turn that loaded before now is refused.
            mark = self._mark_path(org, user)
            _ensure_dir(mark.parent, set())
            _write_atomically(mark, secrets.token_hex(16).encode())
            _fsync_dir(mark.parent)
            if not _is_real_dir(person):
                return Forgot()
            spaces: list[SpaceRef] = []
            files = 0
            with os.scandir(person) as listing:
                entries = sorted(listing, key=lambda e: e.name)
            for entry in entries:
                try:
                    ref = SpaceRef(layer="user", org=org, user=user, space=entry.name)
                except InvalidName:
                    continue  # no space has this name; the folder goes below all the same
                if not entry.is_dir(follow_symlinks=False):
                    continue
                # Under the space's lock, so no store is half-way through it.
                with self._exclusive_lock(ref):
                    held, _, folders = _read_space_meta(self.folder(ref))
                    if held or folders:
                        spaces.append(ref)
                        files += len(held)
                    shutil.rmtree(self.folder(ref))
            # What is left (names no space could have, files a person dropped in) goes too,
            # and with the lock files nothing under the root names the person any more.
            shutil.rmtree(person)
            _fsync_dir(person.parent)
            locks = self.root / ".locks" / "people" / org / user
            if _is_real_dir(locks):
                shutil.rmtree(locks)
        except OSError as exc:
            raise StoreUnavailable(
                f"the folder store could not forget the person: {exc}", path=where
            ) from exc
        return Forgot(spaces=tuple(sorted(spaces, key=str)), files=files)

    async def aclose(self) -> None:
        """Nothing to release: every call opens and closes what it uses."""


__all__ = ["EMPTY_CURSOR", "TEMP_PREFIX", "FolderStore"]
