"""Descriptor exhaustion across sessions, on a daemon process with a low RLIMIT_NOFILE.

The daemon is started with a hard descriptor limit below the per-session cap
(``Limits.max_open_files``, 1,024 by default): one session's agent, another
Unix user, opens files until it gets EMFILE; another session's agent still
reads, writes and ends its turn, and every write of both is stored. A limit
too low for the daemon's own needs is refused at start, by name.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

import memfs
from memfs.core.errors import ConfigError
from memfs.stores.sqlite import SqliteStore
from memfsd.main import DAEMON_DESCRIPTORS, MIN_POOL_DESCRIPTORS, data_descriptors
from tests.daemon_harness import require_fuse, require_root
from tests.test_daemon_mount import CAROL, DANA
from tests.test_daemon_process import memfs as memfs_cli

HOG = 42001  # the agent that opens files until EMFILE: uid and gid
OTHER = 42002
LOWEST = DAEMON_DESCRIPTORS + MIN_POOL_DESCRIPTORS  # 80: the least the daemon starts with

# The hostile agent: opens (creates) files, writing a line to each, until an
# open fails; says how many it holds and why it stopped, then holds them.
OPEN_UNTIL_EMFILE = """
import errno, os, sys
files = []
try:
    while True:
        f = open(os.path.join(sys.argv[1], f"f{len(files):05}"), "w")
        f.write(f"file {len(files)}\\n")
        f.flush()
        files.append(f)
except OSError as exc:
    print(len(files), errno.errorcode[exc.errno], flush=True)
sys.stdin.read()
for f in files:
    f.close()
"""


def as_user(uid: int, *command: str) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command]


def nofile(soft: int, hard: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder other users can pass through (pytest's tmp dirs are root's alone)."""
    require_fuse()
    require_root("agents run as other users")
    base = Path(tempfile.mkdtemp(prefix="memfs-nofile-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(base / "mnt")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def start_daemon(root: Path, hard: int) -> subprocess.Popen[bytes]:
    """The daemon as a child process whose descriptor limit is ``(hard // 4, hard)``."""
    config = root / "memfs.toml"
    config.write_text(
        f'mount_root = "{root}/mnt"\nstate_dir = "{root}/state"\nweb_listen = ""\n'
        '[[memory]]\nlayer = "user"\nspace = "me"\nuser = "userId"\nlabel = "name"\n'
    )
    log = open(root / "daemon.log", "ab")  # noqa: SIM115 - the child holds it
    with log:
        return subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", "daemon", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=nofile(hard // 4, hard),
        )


def wait_ready(root: Path, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError((root / "daemon.log").read_text())
        if memfs_cli("status", root=root, check=False).returncode == 0:
            return
        trio.run(trio.sleep, 0.1)
    raise AssertionError("the daemon did not start")


def start_as(root: Path, session: str, body: dict[str, str], uid: int) -> Path:
    identity = ["--extra-body", json.dumps(body), "--uid", str(uid), "--gid", str(uid)]
    return Path(memfs_cli("turn", "start", session, *identity, root=root)["root"])


def stored(root: Path, user: str) -> dict[str, bytes]:
    async def look() -> dict[str, bytes]:
        store = SqliteStore(root / "state" / "memfs.db")
        try:
            return await store.files(memfs.SpaceRef(layer="user", space="me", user=user))
        finally:
            await store.aclose()

    return trio.run(look)


@pytest.mark.parametrize("hard", [256, LOWEST])
def test_one_session_opening_files_until_emfile_leaves_another_its_reads_writes_and_end(
    root: Path, hard: int
) -> None:
    daemon = start_daemon(root, hard)
    try:
        wait_ready(root, daemon)
        limits = Path(f"/proc/{daemon.pid}/limits").read_text()
        [line] = [line for line in limits.splitlines() if line.startswith("Max open files")]
        assert line.split()[3:5] == [str(hard), str(hard)]  # soft raised to the hard limit
        hog = start_as(root, "hog", DANA, HOG)
        other = start_as(root, "other", CAROL, OTHER)
        agent = subprocess.Popen(
            as_user(HOG, "/usr/bin/python3", "-c", OPEN_UNTIL_EMFILE, str(hog / "me")),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=nofile(4096, 4096),  # the agent's own limit is not what stops it
        )
        assert agent.stdout is not None
        held, why = agent.stdout.readline().split()
        # The session's cap stops it, 1,024 handles on a daemon allowed far fewer descriptors.
        assert (int(held), why) == (1024, b"EMFILE")

        work = subprocess.run(
            as_user(OTHER, "sh", "-c", "echo still works > me/notes.md && cat me/notes.md"),
            cwd=other,
            capture_output=True,
            check=False,
        )
        assert work.stdout == b"still works\n", work.stderr
        assert memfs_cli("status", root=root)["sessions"]
        ended = memfs_cli("turn", "end", "other", root=root)["spaces"]["me"]
        assert ended["status"] == "saved" and ended["created"] == ["notes.md"]

        agent.communicate(b"", timeout=60)
        assert agent.returncode == 0
        hogged = memfs_cli("turn", "end", "hog", root=root)["spaces"]["me"]
        assert hogged["status"] == "saved" and len(hogged["created"]) == 1024
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    files = stored(root, "u_dana")
    assert len(files) == 1024
    assert all(files[f"f{i:05}"] == f"file {i}\n".encode() for i in range(1024))
    assert stored(root, "u_carol") == {"notes.md": b"still works\n"}


@pytest.mark.parametrize("hard", [LOWEST - 1, 32])
def test_a_descriptor_limit_below_what_the_daemon_needs_refuses_to_start_naming_it(
    root: Path, hard: int
) -> None:
    daemon = start_daemon(root, hard)
    assert daemon.wait(timeout=60) == 78
    said = (root / "daemon.log").read_text()
    assert f"may open only {hard} files (RLIMIT_NOFILE" in said
    assert f"at least {LOWEST}" in said
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(root / "mnt") not in mounts


def test_the_descriptor_pool_is_half_the_limit_leaving_the_daemon_its_own() -> None:
    assert data_descriptors(4096) == 2048
    assert data_descriptors(256) == 128
    assert data_descriptors(128) == 64  # half, and 64 left
    assert data_descriptors(100) == 100 - DAEMON_DESCRIPTORS  # less than half: 64 stay
    assert data_descriptors(LOWEST) == MIN_POOL_DESCRIPTORS
    with pytest.raises(ConfigError, match="RLIMIT_NOFILE"):
        data_descriptors(LOWEST - 1)
