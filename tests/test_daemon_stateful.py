"""fsx-style: random operations on the mount and on a native directory, side by side.

A hypothesis state machine opens, writes at offsets, truncates, renames,
exchanges (``renameat2(RENAME_EXCHANGE)``), unlinks, makes and removes
folders, changes modes and mtimes, and changes files through descriptors
whose name was unlinked or renamed over, on a real mount (the daemon runs as
its own process, with caching on exactly as in production) and on a native
directory. Every read, mode and error, what ``fstat`` says through a
descriptor, and whether an unlink or rmdir moved the folder's mtime must
match; at the end the trees (files, folders, modes) must match and the
turn's change set must be exactly the difference from the snapshot, modes
and folders included. Then the next turn must bring back the same tree,
each file with its mode and the mtime it had when it last changed, and end
with no change at all. Fixed seed, bounded steps.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memfs.client import Client
from memfs.core.diff import diff
from memfs.core.errors import DaemonUnavailable
from memfs.core.models import FileMeta, Loaded, SpaceRef
from memfs.stores.sqlite import SqliteStore
from tests.daemon_harness import require_fuse
from tests.machines import fixed_seed

LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_EXCHANGE = 2
OLD_NS = 1_000_000_000  # a folder's mtime is set back to this before an unlink or rmdir

FILES = ["a", "b", "d/c", "d/e/f", "e"]
DIRS = ["d", "d/e", "g"]
PATHS = FILES + DIRS
BODY = {"userId": "u1", "name": "U"}

CONFIG = """
mount_root = "{root}/mnt"
state_dir = "{root}/state"
web_listen = ""

[[memory]]
layer = "user"
space = "me"
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    require_fuse()
    root = tmp_path_factory.mktemp("stateful")
    (root / "memfs.toml").write_text(CONFIG.format(root=root))
    log = open(root / "daemon.log", "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs.cli", "daemon", "--config", str(root / "memfs.toml")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with Client(root / "state" / "memfs.sock") as client:
                    client.status()
                break
            except DaemonUnavailable:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield root
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def outcome(action: object) -> object:
    """What an operation gave: its result, or the errno it failed with."""
    try:
        return ("ok", action())  # type: ignore[operator]
    except OSError as exc:
        return ("error", errno.errorcode.get(exc.errno or 0, exc.errno))


def exchange(one: Path, other: Path) -> None:
    """``renameat2(one, other, RENAME_EXCHANGE)``, which os has no call for."""
    if LIBC.renameat2(AT_FDCWD, os.fsencode(one), AT_FDCWD, os.fsencode(other), RENAME_EXCHANGE):
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def removed(root: Path, path: str, remove: object) -> bool:
    """Remove ``path``; say whether that moved its folder's mtime (set back first)."""
    parent = (root / path).parent
    os.utime(parent, ns=(OLD_NS, OLD_NS))
    remove(root / path)  # type: ignore[operator]
    return os.stat(parent).st_mtime_ns != OLD_NS


def through_a_gone_name(
    root: Path, path: str, over: str | None, offset: int, data: bytes, size: int, mode: int
) -> tuple[object, ...]:
    """Unlink ``path`` (or rename ``over`` onto it) while it is open, then use the descriptor."""
    fd = os.open(root / path, os.O_RDWR)
    try:
        if over is None:
            os.unlink(root / path)
        else:
            os.rename(root / over, root / path)
        written = os.pwrite(fd, data, offset)
        os.ftruncate(fd, size)
        os.fchmod(fd, mode)
        os.fchown(fd, 42000, 42001)
        os.utime(fd, ns=(OLD_NS, OLD_NS + size))
        info = os.fstat(fd)
        return (
            written,
            info.st_size,
            info.st_nlink,
            stat.S_IMODE(info.st_mode),
            (info.st_uid, info.st_gid),
            info.st_mtime_ns,
            os.pread(fd, 200, 0),
        )
    finally:
        os.close(fd)


def tree(root: Path) -> tuple[dict[str, bytes], set[str]]:
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for dirpath, dirnames, names in os.walk(root):
        for name in dirnames:
            dirs.add(str((Path(dirpath) / name).relative_to(root)))
        for name in names:
            full = Path(dirpath) / name
            files[str(full.relative_to(root))] = full.read_bytes()
    return files, dirs


def stored(daemon: Path) -> Loaded:
    """The space the machine's turns mount, straight from the store."""

    async def read() -> Loaded:
        store = SqliteStore(daemon / "state" / "memfs.db")
        try:
            ref = SpaceRef(layer="user", space="me", org="default", user="u1")
            return await store.load(ref, "a reader")
        finally:
            await store.aclose()

    return trio.run(read)


def stats(root: Path, files: dict[str, bytes]) -> dict[str, tuple[int, int]]:
    """Each file's (permission bits, mtime in ns)."""
    found = {}
    for path in files:
        info = os.stat(root / path)
        found[path] = (stat.S_IMODE(info.st_mode), info.st_mtime_ns)
    return found


MODES = [0o600, 0o644, 0o700, 0o755]
MTIMES = [1_500_000_000_000_000_000, 1_600_000_000_123_456_789]


def test_random_operations_match_a_native_directory(daemon: Path, tmp_path: Path) -> None:
    counter = iter(range(10_000))

    class SideBySide(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            n = next(counter)
            self.session = f"fsx-{n}"
            self.native = tmp_path / f"native-{n}"
            self.native.mkdir()
            self.client = Client(daemon / "state" / "memfs.sock")
            started = self.client.start_turn(self.session, BODY)
            self.mount = Path(started.mounts["me"].path)
            # Begin from what the store holds (earlier examples saved into it),
            # read from the store, not the mount: folders nobody has looked
            # into yet must behave the same (the mount plants them lazily).
            loaded = stored(daemon)
            self.base = loaded.files
            self.base_folders = loaded.folders
            for path in loaded.folders:
                (self.native / path).mkdir(parents=True, exist_ok=True)
            for path, content in self.base.items():
                (self.native / path).parent.mkdir(parents=True, exist_ok=True)
                (self.native / path).write_bytes(content)
                (self.native / path).chmod(loaded.meta_of(path).mode)
            # What the turn starts with, as the mount shows it.
            self.start_stats = stats(self.mount, self.base)
            assert {p: m for p, (m, _) in self.start_stats.items()} == {
                p: loaded.meta_of(p).mode for p in self.base
            }

        def both(self, op: object) -> None:
            native = outcome(lambda: op(self.native))  # type: ignore[operator]
            mounted = outcome(lambda: op(self.mount))  # type: ignore[operator]
            assert mounted == native

        @rule(path=st.sampled_from(FILES), offset=st.integers(0, 64), data=st.binary(max_size=24))
        def write(self, path: str, offset: int, data: bytes) -> None:
            def op(root: Path) -> int:
                fd = os.open(root / path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    return os.pwrite(fd, data, offset)
                finally:
                    os.close(fd)

            self.both(op)

        @rule(path=st.sampled_from(FILES), data=st.binary(max_size=16))
        def append(self, path: str, data: bytes) -> None:
            def op(root: Path) -> int:
                fd = os.open(root / path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    return os.write(fd, data)
                finally:
                    os.close(fd)

            self.both(op)

        @rule(path=st.sampled_from(FILES), data=st.binary(max_size=16))
        def replace_whole(self, path: str, data: bytes) -> None:
            self.both(lambda root: (root / path).write_bytes(data))

        @rule(path=st.sampled_from(FILES), size=st.integers(0, 80))
        def truncate(self, path: str, size: int) -> None:
            self.both(lambda root: os.truncate(root / path, size))

        @rule(path=st.sampled_from(PATHS))
        def read(self, path: str) -> None:
            self.both(lambda root: (root / path).read_bytes())

        @rule(src=st.sampled_from(PATHS), dst=st.sampled_from(PATHS))
        def rename(self, src: str, dst: str) -> None:
            self.both(lambda root: os.rename(root / src, root / dst))

        def pick(self, index: int, *, folders: bool = True) -> str | None:
            """A file (or folder) there is now, so a rule can use one that exists.

            Picked by an index drawn up front: what exists depends on what
            earlier examples stored, and draws must not.
            """
            files, dirs = tree(self.native)
            present = sorted(files) + (sorted(dirs) if folders else [])
            return present[index % len(present)] if present else None

        @rule(src=st.sampled_from(PATHS), dst=st.sampled_from(PATHS))
        def exchange(self, src: str, dst: str) -> None:
            self.both(lambda root: exchange(root / src, root / dst))

        @rule(one=st.integers(0, 15), other=st.integers(0, 15))
        def exchange_present(self, one: int, other: int) -> None:
            src, dst = self.pick(one), self.pick(other)
            if src is not None and dst is not None:
                self.both(lambda root: exchange(root / src, root / dst))

        @rule(
            which=st.integers(0, 15),
            over=st.none() | st.integers(0, 15),
            offset=st.integers(0, 64),
            body=st.binary(max_size=16),
            size=st.integers(0, 80),
            mode=st.sampled_from([0o600, 0o640, 0o444]),
        )
        def write_through_a_gone_name(
            self, which: int, over: int | None, offset: int, body: bytes, size: int, mode: int
        ) -> None:
            path = self.pick(which, folders=False)
            source = None if over is None else self.pick(over, folders=False)
            if path is not None:
                self.both(
                    lambda root: through_a_gone_name(root, path, source, offset, body, size, mode)
                )

        @rule(path=st.sampled_from(PATHS))
        def unlink(self, path: str) -> None:
            self.both(lambda root: removed(root, path, os.unlink))

        @rule(path=st.sampled_from(DIRS + FILES))
        def mkdir(self, path: str) -> None:
            self.both(lambda root: os.mkdir(root / path))

        @rule(path=st.sampled_from(DIRS + FILES))
        def rmdir(self, path: str) -> None:
            self.both(lambda root: removed(root, path, os.rmdir))

        @rule(path=st.sampled_from(PATHS))
        def stat_size(self, path: str) -> None:
            def op(root: Path) -> tuple[int, bool, int, int]:
                info = os.stat(root / path)
                # A folder's link count is 2 + its subfolders, on ext4 as on the mount.
                mode = stat.S_IMODE(info.st_mode)
                return info.st_size, stat.S_ISDIR(info.st_mode), info.st_nlink, mode

            self.both(op)

        @rule(path=st.sampled_from(FILES), mode=st.sampled_from(MODES))
        def chmod(self, path: str, mode: int) -> None:
            self.both(lambda root: os.chmod(root / path, mode))

        @rule(path=st.sampled_from(FILES), mtime=st.sampled_from(MTIMES))
        def set_mtime(self, path: str, mtime: int) -> None:
            def op(root: Path) -> int:
                os.utime(root / path, ns=(mtime, mtime))
                return os.stat(root / path).st_mtime_ns

            self.both(op)

        @invariant()
        @precondition(lambda self: hasattr(self, "mount"))
        def listings_match(self) -> None:
            self.both(lambda root: sorted(os.listdir(root)))

        def teardown(self) -> None:
            if not hasattr(self, "mount"):
                return
            after, native_dirs = tree(self.native)
            mounted, mounted_dirs = tree(self.mount)
            native_stats = stats(self.native, after)
            end_stats = stats(self.mount, mounted)
            ended = self.client.end_turn(self.session)
            try:
                assert mounted == after
                assert mounted_dirs == native_dirs
                assert {p: m for p, (m, _) in end_stats.items()} == {
                    p: m for p, (m, _) in native_stats.items()
                }
                start = {p: FileMeta(mode=m) for p, (m, _) in self.start_stats.items()}
                expected = diff(
                    self.base,
                    after,
                    base_meta=start,
                    meta={p: FileMeta(mode=m) for p, (m, _) in native_stats.items()},
                    base_folders=self.base_folders,
                    folders=native_dirs,
                )
                me = ended.spaces["me"]
                assert me.status == "saved"
                assert (me.created, me.updated, me.deleted) == (
                    sorted(expected.created),
                    sorted(expected.updated),
                    sorted(expected.deleted),
                )
                assert (me.folders_created, me.folders_deleted) == (
                    sorted(expected.folders_created),
                    sorted(expected.folders_deleted),
                )
                # Across the turn boundary: the same tree, modes, and the mtime
                # each file had when it last changed (a time alone is no change).
                again = self.client.start_turn(self.session, BODY)
                self.second = True
                mount = Path(again.mounts["me"].path)
                files, dirs = tree(mount)
                assert (files, dirs) == (after, native_dirs)
                changed = {*expected.created, *expected.updated}
                assert stats(mount, files) == {
                    p: end_stats[p] if p in changed else self.start_stats[p] for p in files
                }
                quiet = self.client.end_turn(self.session).spaces["me"]
                self.second = False
                assert (quiet.created, quiet.updated, quiet.deleted) == ([], [], [])
                assert (quiet.folders_created, quiet.folders_deleted) == ([], [])
            finally:
                if getattr(self, "second", False):
                    self.client.end_turn(self.session)
                self.client.close_session(self.session)
                self.client.close()
                shutil.rmtree(self.native)

    run_state_machine_as_test(
        SideBySide,
        settings=fixed_seed(25, 30),
    )
