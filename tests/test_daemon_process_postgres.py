"""Two daemons on one PostgreSQL database behave as one: review, conflicts, forgets, outages.

Each daemon is a process of its own with its own mount root and state dir
(two hosts, as far as memfs can tell), started by the CLI on the session's
throwaway server; the `memfs` commands act on the same URL. Notices
(LISTEN/NOTIFY) only hurry what versions already guarantee: a test here
drops a daemon's listening connection and the daemon's next turn is still
fresh, and the listener comes back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memfs.stores.postgres.listen import APPLICATION_NAME
from memfs.testing.postgres import ThrowawayPostgres
from tests.daemon_harness import require_fuse
from tests.postgres_fixtures import Databases
from tests.test_daemon_forget_poll import listing
from tests.test_daemon_process import DANA, DaemonProcess, memfs
from tests.web_tls import free_port

CONFIG = """
mount_root = "{root}/mnt"
state_dir = "{root}/state"
forget_poll_seconds = 0
listen_retry_seconds = 0.2

[[memory]]
layer = "org"
space = "lending-rules"
org = "bankId"
review = "none"

[[memory]]
layer = "org"
space = "handbook"
org = "bankId"

[[memory]]
layer = "user"
space = "me"
user = "userId"
label = "name"
org = "bankId"
"""

# One org space only: a turn start while the server is down waits for each
# space's load to time out, so the outage test mounts as few as it can.
OUTAGE_CONFIG = """
mount_root = "{root}/mnt"
state_dir = "{root}/state"
forget_poll_seconds = 0
listen_retry_seconds = 0.2

[[memory]]
layer = "org"
space = "lending-rules"
org = "bankId"
review = "none"
"""


@pytest.fixture(autouse=True)
def one_store_key(monkeypatch: pytest.MonkeyPatch, postgres_key_file: Path) -> None:
    """Every daemon and command here names the same store key, as on real hosts they must."""
    monkeypatch.setenv("MEMFS_STORE_KEY_FILE", str(postgres_key_file))


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    require_fuse()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    yield a, b
    for root in (a, b):
        subprocess.run(["fusermount3", "-u", "-z", str(root / "mnt")], capture_output=True)


ADA = ("--as", "ada", "--role", "admin")


def cli(url: str, *args: str) -> Any:
    """A `memfs` store command on ``url``, as Ada (an admin of the bank) on a third machine."""
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", *args, "--store", url, "--org", "bank_17", *ADA],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        # No daemon to tell: a forget reaches the daemons through the store only.
        env={
            "PATH": "/usr/bin:/bin",
            "MEMFS_SOCKET": "/nonexistent/memfs.sock",
            "MEMFS_STORE_KEY_FILE": os.environ["MEMFS_STORE_KEY_FILE"],
        },
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def turn(root: Path, session: str, script: str = "true") -> tuple[Path, dict[str, Any]]:
    """Start a turn of Dana's on the daemon at ``root`` and run ``script`` in it; (mount, start)."""
    started = memfs("turn", "start", session, "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    subprocess.run(["sh", "-c", script], cwd=mnt, check=True)
    return mnt, started


def end(root: Path, session: str) -> dict[str, Any]:
    spaces: dict[str, Any] = memfs("turn", "end", session, root=root)["spaces"]
    return spaces


def cat(path: Path) -> str:
    done = subprocess.run(["cat", str(path)], capture_output=True, text=True, check=False)
    return done.stdout


def within(seconds: float, done: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def daemon(root: Path, url: str, config: str = CONFIG) -> DaemonProcess:
    return DaemonProcess(root, {"MEMFS_STORE": url}, config=config)


@contextmanager
def running(*daemons: DaemonProcess) -> Iterator[None]:
    """The daemons serve for the block; after it each is stopped, and each must exit 0."""
    try:
        yield
    finally:
        codes = [d.stop() for d in daemons]  # every one stopped, even if one fails
        assert codes == [0] * len(daemons)


def listening(url: str, pid: int) -> list[int]:
    """The backends of the daemon ``pid``'s listening connection."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            (f"{APPLICATION_NAME}:{pid}",),
        ).fetchall()
    return [int(pid) for (pid,) in rows]


def operator(url: str, *args: str) -> Any:
    """An operator's `memfs people` / `memfs token` command on ``url``."""
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", *args, "--org", "bank_17", "--store", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@contextmanager
def memfs_web(url: str, port: int, log: Path) -> Iterator[str]:
    """`memfs web` on ``url`` (loopback): the review host beside the daemons; its base URL."""
    listen = f"127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", "web", "--store", url, "--listen", listen],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        assert within(30, lambda: serving(base)), log.read_text()
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def serving(base: str) -> bool:
    try:
        return httpx.get(f"{base}/api/v1/me", timeout=2).status_code == 401
    except httpx.TransportError:
        return False


def approve_over_api(base: str, token: str) -> None:
    """List the one waiting change through a Memory tab's API and approve it there."""
    auth = {"Authorization": f"Bearer {token}"}
    [change] = httpx.get(f"{base}/api/v1/review", headers=auth, timeout=10).json()["changes"]
    assert [f["path"] for f in change["files"]] == ["income.md"]
    done = httpx.post(f"{base}/api/v1/review/{change['id']}/approve", headers=auth, timeout=10)
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "approved"


def approve_with_cli(url: str) -> None:
    [change] = cli(url, "review", "list")
    assert change["files"] == ["income.md"] and change["space"] == "handbook"
    assert cli(url, "review", "approve", change["id"])["state"] == "approved"


def test_a_change_waiting_through_daemon_a_is_approved_through_b_memfs_web_or_the_cli_at_once(
    hosts: tuple[Path, Path], postgres_databases: Databases
) -> None:
    url = postgres_databases.url()
    a_root, b_root = hosts
    b_port, web_port = free_port(), free_port()
    operator(url, "people", "add", "ada", "--role", "member")
    token = operator(url, "token", "create", "ada")["token"]
    a = daemon(a_root, url)
    b = DaemonProcess(
        b_root, {"MEMFS_STORE": url, "MEMFS_WEB_LISTEN": f"127.0.0.1:{b_port}"}, config=CONFIG
    )
    with running(a, b):
        # B reads the handbook first: its store holds the manifest, its blob cache the bytes.
        mnt, _ = turn(b_root, "b1")
        assert listing(mnt / "handbook") == []
        end(b_root, "b1")
        with memfs_web(url, web_port, a_root / "web.log") as web:
            approvals: list[Callable[[], None]] = [
                lambda: approve_over_api(f"http://127.0.0.1:{b_port}", token),  # daemon B's tab
                lambda: approve_over_api(web, token),  # memfs web beside the daemons
                lambda: approve_with_cli(url),  # memfs review on a third machine
            ]
            for round_, approve in enumerate(approvals):
                text = f"rule {round_}"
                turn(a_root, f"a{round_}", f"echo '{text}' > handbook/income.md")
                assert end(a_root, f"a{round_}")["handbook"]["status"] == "waiting"
                approve()
                # B's very next turn: no notice waited for, no stale manifest or blob served.
                mnt, _ = turn(b_root, f"b{round_ + 2}")
                assert cat(mnt / "handbook" / "income.md") == f"{text}\n"
                end(b_root, f"b{round_ + 2}")
        assert memfs("status", root=b_root)["store_health"] == {"ok": True, "error": None}


def test_two_daemons_turns_conflict_per_file_as_two_sessions_of_one_daemon_do(
    hosts: tuple[Path, Path], postgres_databases: Databases
) -> None:
    url = postgres_databases.url()
    a_root, b_root = hosts
    a, b = daemon(a_root, url), daemon(b_root, url)
    with running(a, b):
        turn(a_root, "a0", "echo v1 > lending-rules/a.md && echo v1 > lending-rules/b.md")
        assert end(a_root, "a0")["lending-rules"]["status"] == "saved"
        turn(a_root, "a1", "echo from-a > lending-rules/a.md")
        turn(b_root, "b1", "echo from-b > lending-rules/a.md && echo from-b > lending-rules/b.md")
        turn(b_root, "b2", "echo from-b2 > lending-rules/c.md")
        assert end(a_root, "a1")["lending-rules"]["status"] == "saved"
        other_file = end(b_root, "b2")["lending-rules"]
        assert other_file["status"] == "saved"  # a file nobody else wrote never blocks
        late = end(b_root, "b1")["lending-rules"]
        assert late["status"] == "not_saved"
        assert late["conflicts"] == ["a.md"]
        assert late["updated"] == ["a.md", "b.md"]
        # As on one daemon: the conflicting turn's space is not saved, the others' writes stand.
        sizes = cli(url, "files", "lending-rules")["files"]
        assert sizes == {"a.md": len("from-a\n"), "b.md": len("v1\n"), "c.md": len("from-b2\n")}
        mnt, _ = turn(a_root, "a2")
        assert cat(mnt / "lending-rules" / "a.md") == "from-a\n"
        assert cat(mnt / "lending-rules" / "c.md") == "from-b2\n"
        end(a_root, "a2")


def test_a_forget_elsewhere_reaches_b_at_once_even_after_its_listener_was_killed(
    hosts: tuple[Path, Path], postgres_databases: Databases
) -> None:
    url = postgres_databases.url()
    a_root, b_root = hosts
    a, b = daemon(a_root, url), daemon(b_root, url)
    with running(a, b):
        for attempt in range(2):
            turn(a_root, f"a{attempt}", "echo 'my diagnosis' > me/g.md")
            assert end(a_root, f"a{attempt}")["me"]["status"] == "saved"
            mnt, _ = turn(b_root, f"b{attempt}")
            assert cat(mnt / "me" / "g.md") == "my diagnosis\n"
            # forget_poll_seconds = 0: B never polls; only the notice can tell it.
            cli(url, "forget-user", "u_dana")
            assert within(5, lambda mnt=mnt: "g.md" not in listing(mnt / "me"))  # type: ignore[misc]
            assert end(b_root, f"b{attempt}")["me"]["reason"] == "forgotten"
            if attempt == 1:
                break
            # Drop B's listening connection, as a server restart or a proxy would.
            [backend] = listening(url, b.proc.pid)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
            # Whatever a notice would have said, B's next turn reads by version.
            turn(a_root, "a-rules", "echo after-the-drop > lending-rules/r.md")
            end(a_root, "a-rules")
            mnt, _ = turn(b_root, "b-rules")
            assert cat(mnt / "lending-rules" / "r.md") == "after-the-drop\n"
            end(b_root, "b-rules")
            # And it listens again (listen_retry_seconds = 0.2): the second forget is heard too.
            back = lambda old=backend: listening(url, b.proc.pid) not in ([], [old])  # noqa: E731
            assert within(5, back)


def test_postgresql_stopped_mid_turn_keeps_the_turn_and_status_says_so_until_it_is_back(
    hosts: tuple[Path, Path], postgres_databases: Databases, postgres_server: ThrowawayPostgres
) -> None:
    url = postgres_databases.url()
    a_root, _ = hosts
    a = daemon(a_root, url, OUTAGE_CONFIG)
    with running(a):
        turn(a_root, "s1", "echo v1 > lending-rules/a.md")
        assert end(a_root, "s1")["lending-rules"]["status"] == "saved"
        mnt, _ = turn(a_root, "s2", "echo during-the-outage > lending-rules/a.md")
        postgres_server.stop_server()
        try:
            assert within(5, lambda: not memfs("status", root=a_root)["store_health"]["ok"])
            health = memfs("status", root=a_root)["store_health"]
            assert health["error"]
            kept = end(a_root, "s2")["lending-rules"]
            assert kept["status"] == "not_saved" and kept["kept"] is True
            assert cat(mnt / "lending-rules" / "a.md") == "during-the-outage\n"  # nothing lost
            # A new turn goes on from the last known copy; what it writes there is never sent.
            stale_mnt, _ = turn(a_root, "s3", "echo stale > lending-rules/n.md")
            assert cat(stale_mnt / "lending-rules" / "a.md") == "v1\n"
        finally:
            postgres_server.start_server()
        assert within(5, lambda: memfs("status", root=a_root)["store_health"]["ok"])
        again = end(a_root, "s2")["lending-rules"]
        assert again["status"] == "saved", again["error"]
        stale = end(a_root, "s3")["lending-rules"]
        assert stale["status"] == "not_saved" and stale["reason"] == "last known copy", stale
        mnt, _ = turn(a_root, "s4")
        assert cat(mnt / "lending-rules" / "a.md") == "during-the-outage\n"  # loaded fresh
        assert listing(mnt / "lending-rules") == ["a.md"]
        end(a_root, "s4")
