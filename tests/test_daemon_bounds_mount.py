"""Bounded resources on real mounts and real daemon processes, driven by real commands.

One agent filling the disk, holding a thousand files open, churning the
journal or writing past the file limit must not cost another agent its
acknowledged writes, and must not get a cut-off file stored.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

import memfs
from memfs.stores.sqlite import SqliteStore
from tests.daemon_harness import require_fuse, running_daemon, sh
from tests.test_daemon_mount import CAROL, DANA, SPECS, files_of, start
from tests.test_daemon_process import CONFIG
from tests.test_daemon_process import memfs as memfs_cli

MIB = 1024 * 1024

HOG = 43001  # the hostile agent's uid and gid
OTHER = 43002


def as_user(uid: int, *command: str) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command]


def shell_as(uid: int, script: str) -> str:
    """``script`` for :func:`sh`, run by an unprivileged user."""
    return " ".join(as_user(uid, "sh", "-c", shlex.quote(script)))


def du(path: Path) -> int:
    """Bytes the files under ``path`` take on disk."""
    return sum(
        os.lstat(Path(folder) / name).st_blocks * 512
        for folder, _, names in os.walk(path)
        for name in names
    )


# -- files cut off by a refused write ---------------------------------------------------


async def test_a_write_past_the_file_limit_leaves_the_file_not_saved_too_large(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        done = await sh("head -c 2M /dev/zero > me/big.md", root, check=False)
        assert done.returncode != 0 and b"File too large" in done.stderr
        await sh("echo fine > me/ok.md", root)
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert me.not_saved == ["big.md"]
        assert me.errors["big.md"].startswith("too large")
        assert me.created == ["ok.md"]
        assert "big.md" not in await files_of(daemon)


async def test_a_mkdir_past_max_folders_gets_enospc_and_every_folder_made_is_stored(
    tmp_path: Path,
) -> None:
    # A folder the store would refuse at the turn's end must not seem made:
    # mkdir says ENOSPC, and what it did make is all stored.
    limits = memfs.Limits(max_folders=3)
    async with running_daemon(tmp_path, SPECS, limits=limits) as daemon:
        root = await start(daemon, "s1")
        await sh("mkdir me/d1 me/d2 me/d3", root)
        done = await sh("mkdir me/d4", root, check=False)
        assert done.returncode != 0 and b"No space left on device" in done.stderr
        await sh("rmdir me/d3 && mkdir me/d5", root)  # a folder removed gives its room back
        assert (await sh("mkdir me/d6", root, check=False)).returncode != 0
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert (me.status, me.not_saved) == ("saved", [])
        assert sorted(me.folders_created) == ["d1", "d2", "d5"]


async def test_a_cut_file_truncated_or_rewritten_within_the_limit_is_saved(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        script = (
            "head -c 2M /dev/zero > me/a.md; truncate -s 10 me/a.md; "
            "head -c 2M /dev/zero > me/b.md; echo rewritten > me/b.md; "
            "head -c 2M /dev/zero > me/c.tmp; echo moved > me/c.new; mv me/c.new me/c.tmp"
        )
        await sh(script, root, check=False)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].not_saved == []
        assert ended.spaces["me"].created == ["a.md", "b.md", "c.tmp"]
        seen = await files_of(daemon)
        assert seen["me/a.md"] == b"\0" * 10
        assert seen["me/b.md"] == b"rewritten\n"
        assert seen["me/c.tmp"] == b"moved\n"


async def test_a_tar_that_fails_past_the_file_limit_stores_no_archive(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "noise.bin").write_bytes(os.urandom(3 * MIB // 2))  # does not compress
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        done = await sh(f"tar czf me/backup.tgz -C {source} .", root, check=False)
        assert done.returncode != 0
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].not_saved == ["backup.tgz"]
        assert "backup.tgz" not in str(await files_of(daemon))


# -- removed files and unlinked open ones ------------------------------------------------


async def test_fifty_mv_of_a_temp_over_one_file_keep_one_files_data_in_state_dir(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        await sh(
            "for i in $(seq 50); do head -c 1M /dev/urandom > me/t.tmp && mv me/t.tmp me/f.bin;"
            " done",
            root,
        )
        sessions = daemon.settings.state_dir / "sessions"
        assert du(sessions) < 2 * MIB
        # Held open and removed: its data stays while the descriptor does, then goes.
        held = await sh(
            f"exec 3<me/f.bin; rm me/f.bin; du -sb {sessions} | cut -f1; cat <&3 | wc -c", root
        )
        during, read = (int(n) for n in held.stdout.split())
        assert during > MIB and read == MIB
        # The kernel sends RELEASE after close returns: wait for the daemon to have it.
        for _ in range(200):
            if du(sessions) < MIB:
                break
            await trio.sleep(0.05)
        assert du(sessions) < MIB
        await daemon.service.end_turn("s1")


async def test_a_file_unlinked_while_open_on_a_mount_still_gets_efbig_and_enospc(
    tmp_path: Path,
) -> None:
    limits = memfs.Limits(max_file_bytes=MIB, max_space_bytes=MIB + MIB // 2)
    async with running_daemon(tmp_path, SPECS, limits=limits) as daemon:
        root = await start(daemon, "s1")
        visible = root / "me" / "visible"

        def attempt() -> tuple[int, int]:
            past_file = past_space = 0
            with open(root / "me" / "hidden", "wb", buffering=0) as hidden:
                os.unlink(root / "me" / "hidden")
                hidden.write(b"x" * MIB)
                try:
                    hidden.write(b"x")
                except OSError as exc:
                    past_file = exc.errno or 0
                try:
                    visible.write_bytes(b"y" * (MIB // 2 + 1))
                except OSError as exc:
                    past_space = exc.errno or 0
            return past_file, past_space

        assert await trio.to_thread.run_sync(attempt) == (errno.EFBIG, errno.ENOSPC)
        # Once the kernel's RELEASE of the hidden file arrives (after close returns),
        # its bytes no longer count.
        session = daemon.service.workspace.overlay.sessions["s1"]
        for _ in range(200):
            if session.open_files == 0:
                break
            await trio.sleep(0.05)
        await trio.to_thread.run_sync(visible.write_bytes, b"y" * (MIB // 2 + 1))
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].created == ["visible"]


# -- the disk reserve --------------------------------------------------------------------


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A folder others can pass through, whose ``state`` is a 48 MiB tmpfs (unmounted after)."""
    require_fuse()
    base = Path(tempfile.mkdtemp(prefix="memfs-disk-", dir="/tmp"))
    base.chmod(0o755)
    state = base / "state"
    state.mkdir()
    tmpfs = ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(state)]
    subprocess.run(tmpfs, check=True)
    try:
        yield base
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)
        shutil.rmtree(base, ignore_errors=True)


async def test_one_agent_filling_the_disk_gets_enospc_and_anothers_edit_is_still_stored(
    small_disk: Path,
) -> None:
    limits = memfs.Limits(
        max_file_bytes=256 * MIB, max_space_bytes=256 * MIB, disk_reserve_bytes=16 * MIB
    )
    async with running_daemon(small_disk, SPECS, limits=limits) as daemon:
        carol = await start(daemon, "carol", CAROL, uid=OTHER, gid=OTHER)
        mine = await sh(shell_as(OTHER, "echo 'Carol prefers email' > me/prefs.md"), carol)
        assert mine.returncode == 0  # acknowledged
        dana = await start(daemon, "dana", DANA, uid=HOG, gid=HOG)
        done = await sh(shell_as(HOG, "head -c 100M /dev/zero > me/fill.bin"), dana, check=False)
        assert b"No space left on device" in done.stderr
        free = os.statvfs(small_disk / "state")
        assert free.f_bavail * free.f_frsize >= 15 * MIB  # the reserve held
        # What is left above the reserve is less than one more write request.
        again = await sh(shell_as(HOG, "head -c 1M /dev/zero > me/more.bin"), dana, check=False)
        assert b"No space left on device" in again.stderr
        ended = await daemon.service.end_turn("carol")
        assert ended.spaces["me"].status == "saved"
        assert ended.spaces["me"].created == ["prefs.md"]
        theirs = await daemon.service.end_turn("dana")
        assert "fill.bin" in theirs.spaces["me"].not_saved  # cut off: never stored
        check = await start(daemon, "check", CAROL)
        assert await trio.to_thread.run_sync((check / "me" / "prefs.md").read_bytes) == (
            b"Carol prefers email\n"
        )
        await daemon.service.end_turn("check")


# -- daemon processes: descriptors and journal compaction across kill -9 ----------------


class Daemon:
    """``memfs daemon`` as a child process, with its own config and descriptor limits."""

    def __init__(
        self, root: Path, *, limits: str = "", preexec: Callable[[], None] | None = None
    ) -> None:
        self.root = root
        config = root / "memfs.toml"
        text = CONFIG.format(root=root)
        if limits:
            # [limits] must come before the first [[memory]] table.
            head, _, rest = text.partition("[[memory]]")
            text = f"{head}[limits]\n{limits}\n\n[[memory]]{rest}"
        config.write_text(text)
        self.log = open(root / "daemon.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", "daemon", "--config", str(config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,
            env={**os.environ, "MEMFS_WEB_LISTEN": ""},  # no Memory tab: no fixed port
        )
        deadline = time.monotonic() + 30
        while memfs_cli("status", root=root, check=False).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise AssertionError((root / "daemon.log").read_text())
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        self.log.close()
        return code


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder other users can pass through (pytest's tmp dirs are root's alone)."""
    require_fuse()
    base = Path(tempfile.mkdtemp(prefix="memfs-bounds-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(base / "mnt")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def start_as(root: Path, session: str, body: dict[str, str], uid: int) -> Path:
    identity = ["--extra-body", json.dumps(body), "--uid", str(uid), "--gid", str(uid)]
    started = memfs_cli("turn", "start", session, *identity, root=root)
    return Path(started["root"])


def nofile(soft: int, hard: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_daemon_raises_its_soft_descriptor_limit_to_the_hard_limit(root: Path) -> None:
    daemon = Daemon(root, preexec=nofile(200, 4096))
    try:
        limits = Path(f"/proc/{daemon.proc.pid}/limits").read_text()
        [line] = [line for line in limits.splitlines() if line.startswith("Max open files")]
        assert line.split()[3:5] == ["4096", "4096"]
    finally:
        assert daemon.stop() == 0


AGENT = """
import os, sys
files = [open(os.path.join(sys.argv[1], f"f{i:04}"), "w") for i in range(int(sys.argv[2]))]
for i, f in enumerate(files):
    f.write(f"file {i}\\n")
    f.flush()
for f in files[:50]:
    os.fsync(f.fileno())
print("holding", flush=True)
sys.stdin.read()
for f in files:
    f.close()
"""


def hold_files(folder: Path, count: int) -> subprocess.Popen[bytes]:
    """The hostile agent: opens ``count`` files in ``folder``, writes and holds them."""
    return hold_files_as(HOG, folder, count)


def hold_files_as(uid: int, folder: Path, count: int) -> subprocess.Popen[bytes]:
    """An unprivileged agent that opens ``count`` files in ``folder``, writes and holds them."""
    agent = subprocess.Popen(
        as_user(uid, "/usr/bin/python3", "-c", AGENT, str(folder), str(count)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=nofile(4096, 4096),
    )
    assert agent.stdout is not None
    assert agent.stdout.readline() == b"holding\n", agent.communicate()[1]
    return agent


def test_one_agent_holding_a_thousand_files_open_leaves_another_its_reads_writes_and_turn_end(
    root: Path,
) -> None:
    # The daemon may hold 256 descriptors in all; the agent opens 1,000 files through it.
    daemon = Daemon(root, preexec=nofile(256, 256))
    try:
        hog = start_as(root, "hog", DANA, HOG)
        other = start_as(root, "other", CAROL, OTHER)
        agent = hold_files(hog / "me", 1000)
        work = subprocess.run(
            as_user(OTHER, "sh", "-c", "echo still works > me/notes.md && cat me/notes.md"),
            cwd=other,
            capture_output=True,
            check=False,
        )
        assert work.stdout == b"still works\n", work.stderr
        ended = memfs_cli("turn", "end", "other", root=root)
        assert ended["spaces"]["me"]["status"] == "saved"
        assert ended["spaces"]["me"]["created"] == ["notes.md"]
        agent.communicate(b"", timeout=60)
        assert agent.returncode == 0
        hogged = memfs_cli("turn", "end", "hog", root=root)
        assert len(hogged["spaces"]["me"]["created"]) == 1000
    finally:
        daemon.stop()


def test_a_session_past_max_open_files_gets_emfile_on_a_mount(root: Path) -> None:
    daemon = Daemon(root, limits="max_open_files = 20")
    try:
        hog = start_as(root, "hog", DANA, HOG)
        other = start_as(root, "other", CAROL, OTHER)
        agent = hold_files(hog / "me", 20)  # at the cap: every open works
        past = subprocess.run(
            as_user(HOG, "sh", "-c", "cat me/f0000"), cwd=hog, capture_output=True, check=False
        )
        assert b"Too many open files" in past.stderr
        # The other session opens as many at once while the hog holds its 20.
        theirs = hold_files_as(OTHER, other / "me", 20)
        theirs.communicate(b"", timeout=60)
        agent.communicate(b"", timeout=60)
        assert agent.returncode == theirs.returncode == 0
        assert len(memfs_cli("turn", "end", "hog", root=root)["spaces"]["me"]["created"]) == 20
        assert len(memfs_cli("turn", "end", "other", root=root)["spaces"]["me"]["created"]) == 20
    finally:
        daemon.stop()


def test_a_churned_journal_stays_bounded_and_a_kill_9_still_recovers_every_write(
    root: Path,
) -> None:
    daemon = Daemon(root, limits="journal_bytes = 16384")
    started = memfs_cli("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    journal = root / "state" / "sessions" / "s1" / started["turn"] / "journal"
    sizes = []
    for step in range(20):
        script = (
            "for i in $(seq 20); do echo $i > me/t && mv me/t me/spin.md; done; "
            f"mkdir -p me/d{step}; echo {step} > me/d{step}/f.md; "
            f"rm -f me/d{step - 1}/f.md; rmdir me/d{step - 1} 2>/dev/null; true"
        )
        subprocess.run(["bash", "-c", script], cwd=mnt, check=True)
        sizes.append(journal.stat().st_size)
    assert max(sizes) <= 16384
    assert sum(sizes) > 16384  # it did churn past the bound
    (mnt / "me" / "last.md").write_text("last\n")
    daemon.stop(signal.SIGKILL)

    again = Daemon(root, limits="journal_bytes = 16384")
    try:
        ended = memfs_cli("turn", "end", "s1", root=root)
        assert sorted(ended["spaces"]["me"]["created"]) == ["d19/f.md", "last.md", "spin.md"]
    finally:
        again.stop()

    async def stored() -> dict[str, bytes]:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            loaded = await store.load(
                memfs.SpaceRef(layer="user", space="me", org="bank_17", user="u_dana"), "check"
            )
            return dict(loaded.files)
        finally:
            await store.aclose()

    assert trio.run(stored) == {"d19/f.md": b"19\n", "last.md": b"last\n", "spin.md": b"20\n"}
