"""Forgets made by another process reach a running daemon's open turns within forget_poll_seconds.

The CLI tells the daemon of a forget (``POST /forgotten``); a person
forgetting their own memory through an app's ``my_memory`` handler tells
nobody. These run the real daemon process and a separate process for the
app, and look at the mount with real commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memfs.core.errors import ConfigError
from memfs.core.models import digest
from memfsd.config import DEFAULT_FORGET_POLL_SECONDS, load_config
from tests.test_daemon_process import CONFIG, DANA, DaemonProcess, memfs, root

__all__ = ["root"]  # the fixture, shared with test_daemon_process

SECRET = b"my diagnosis\n"

# The app's backend, in a process of its own: the signed-in person (Dana)
# forgets one file of hers through the my_memory handler, over HTTP (ASGI).
APP_FORGETS = """
import sys, httpx, trio
from memfs.api import my_memory
from memfs.stores.sqlite import SqliteStore

async def main():
    store = SqliteStore(sys.argv[1])
    app = my_memory(store, lambda request: {"user": "u_dana", "org": "bank_17"})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        answer = await http.delete("/", params={"space": "me", "path": sys.argv[2]})
    await store.aclose()
    print(answer.status_code)

trio.run(main)
"""


def polling(seconds: float) -> str:
    return f"forget_poll_seconds = {seconds}\n{CONFIG}"


def forget_through_the_app(root: Path, path: str) -> None:
    db = str(root / "state" / "memfs.db")
    done = subprocess.run(
        [sys.executable, "-c", APP_FORGETS, db, path], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "200", done.stdout


def listing(folder: Path) -> list[str]:
    """``ls`` of a folder of the mount, as an agent's shell sees it."""
    done = subprocess.run(["ls", "-A", str(folder)], capture_output=True, text=True, check=False)
    return done.stdout.split()


def files_naming(folder: Path, *needles: bytes) -> list[str]:
    return [
        str(path)
        for path in folder.rglob("*")
        if path.is_file() and any(needle in path.read_bytes() for needle in needles)
    ]


def open_turn_over_g(root: Path) -> Path:
    """Dana's earlier turn stored g.md and keep.md; her next turn is open and has read g.md."""
    first = memfs("turn", "start", "s0", "--extra-body", json.dumps(DANA), root=root)
    subprocess.run(
        ["sh", "-c", "printf 'my diagnosis\\n' > me/g.md && echo keep > me/keep.md"],
        cwd=first["root"],
        check=True,
    )
    assert memfs("turn", "end", "s0", root=root)["spaces"]["me"]["status"] == "saved"
    started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
    mnt = Path(started["root"])
    seen = subprocess.run(["cat", "me/g.md"], cwd=mnt, capture_output=True, check=True)
    assert seen.stdout == SECRET
    subprocess.run(["sh", "-c", "echo draft > me/draft.md"], cwd=mnt, check=True)
    return mnt


def test_a_file_forgotten_through_my_memory_leaves_the_open_turn_within_the_poll_interval(
    root: Path,
) -> None:
    daemon = DaemonProcess(root, config=polling(0.2))
    try:
        mnt = open_turn_over_g(root)
        assert "g.md" in listing(mnt / "me")

        forget_through_the_app(root, "g.md")
        deadline = time.monotonic() + 5
        while "g.md" in listing(mnt / "me") and time.monotonic() < deadline:
            time.sleep(0.05)

        assert "g.md" not in listing(mnt / "me")
        read = subprocess.run(["cat", "me/g.md"], cwd=mnt, capture_output=True, check=False)
        assert read.returncode != 0 and read.stdout == b""
        # Nothing under state_dir names the file or holds its content any more:
        # the scrub follows the drop by a worker thread's hop, so give it that.
        state = root / "state"
        needles = (b"g.md", SECRET, digest(SECRET).encode())
        while files_naming(state, *needles) and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        assert files_naming(state, *needles) == []
        ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
        assert ended["status"] == "not_saved" and ended["reason"] == "forgotten"
        again = memfs("turn", "start", "s2", "--extra-body", json.dumps(DANA), root=root)
        assert listing(Path(again["root"]) / "me") == ["keep.md"]
        memfs("turn", "end", "s2", root=root)
    finally:
        assert daemon.stop() == 0


def test_a_poll_interval_of_zero_never_looks_and_the_next_start_catches_up(root: Path) -> None:
    daemon = DaemonProcess(root, config=polling(0))
    mnt = open_turn_over_g(root)
    forget_through_the_app(root, "g.md")
    time.sleep(10 * 0.2)  # ten intervals of the test above: with 0 there are none
    assert "g.md" in listing(mnt / "me")
    assert daemon.stop() == 0

    again = DaemonProcess(root, config=polling(0))
    try:
        assert "g.md" not in listing(mnt / "me")
        ended = memfs("turn", "end", "s1", root=root)["spaces"]["me"]
        assert ended["reason"] == "forgotten"
    finally:
        assert again.stop() == 0


def test_forget_poll_seconds_defaults_to_two_and_takes_zero_and_fractions(tmp_path: Path) -> None:
    assert DEFAULT_FORGET_POLL_SECONDS == 2.0
    assert load_config(None, env={}).forget_poll_seconds == 2.0
    config = tmp_path / "memfs.toml"
    config.write_text("forget_poll_seconds = 0\n")
    assert load_config(config, env={}).forget_poll_seconds == 0
    env = {"MEMFS_FORGET_POLL_SECONDS": "0.25"}
    assert load_config(config, env=env).forget_poll_seconds == 0.25


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("-0.5", "must be at least 0"),
        ("-1", "must be at least 0"),
        ('"soon"', "must be a number of seconds, not 'soon'"),
        ("true", "must be a number of seconds, not true or false"),
        ("inf", "must be a finite number of seconds"),
        ("nan", "must be a finite number of seconds"),
        ("[1]", "must be a number"),
    ],
)
def test_a_bad_forget_poll_seconds_is_a_config_error_naming_the_key(
    tmp_path: Path, value: str, reason: str
) -> None:
    config = tmp_path / "memfs.toml"
    config.write_text(f"forget_poll_seconds = {value}\n")
    with pytest.raises(ConfigError, match="forget_poll_seconds") as raised:
        load_config(config, env={})
    assert reason in str(raised.value)


@pytest.mark.parametrize("value", ["-2", "often", "nan"])
def test_a_bad_memfs_forget_poll_seconds_names_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match=r"forget_poll_seconds \(from MEMFS_FORGET_POLL_SEC"):
        load_config(None, env={"MEMFS_FORGET_POLL_SECONDS": value})


def test_a_file_the_cli_forgot_stays_the_only_one_dropped_while_the_daemon_polls(
    root: Path,
) -> None:
    daemon = DaemonProcess(root, config=polling(0.1))
    try:
        mnt = open_turn_over_g(root)
        state = root / "state"
        argv = ["forget", "me", "g.md", "--user", "u_dana", "--org", "bank_17"]
        argv.append(f"--store=sqlite://{state}/memfs.db")
        done = subprocess.run(
            [sys.executable, "-m", "memfs.cli", *argv, "--as", "root-admin", "--role", "admin"],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "MEMFS_SOCKET": str(state / "memfs.sock")},
        )
        assert done.returncode == 0, done.stderr
        assert "g.md" not in listing(mnt / "me")
        time.sleep(10 * 0.1)  # ten looks at the store, each finding the forget after the cursor
        # The notice dropped one file; the looks do not widen it to the whole space.
        assert sorted(listing(mnt / "me")) == ["draft.md", "keep.md"]
        assert (mnt / "me" / "keep.md").read_text() == "keep\n"
    finally:
        assert daemon.stop() == 0


async def test_a_look_for_forgets_asks_the_store_nothing_for_people_with_no_open_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Many people had turns (two at once) and went: none is open, nothing is held. The
    # look for forgets (every forget_poll_seconds) has nobody to ask about; it
    # must not grow with everyone this daemon ever served.
    from memfs.api.models import StartTurnRequest
    from memfs.core.models import ChangeSet, Provenance, SpaceRef
    from memfs.stores.sqlite import SqliteStore
    from memfsd.service import DaemonService
    from tests.test_daemon_forget import SPECS, desk

    store = SqliteStore(tmp_path / "memfs.db")
    memory, ws = desk(tmp_path, store, SPECS)
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        for n in range(20):
            theirs = SpaceRef(layer="user", space="me", user=f"u_{n}")
            await store.put(theirs, ChangeSet(created={"a.md": b"x"}), provenance=Provenance())
            body = {"userId": f"u_{n}", "name": f"P{n}", "role": "underwriter"}
            # Two conversations at once: the second load is lean (her blobs are held).
            for session in (f"a{n}", f"b{n}"):
                await service.start_turn(StartTurnRequest(session=session, extra_body=body))
            for session in (f"a{n}", f"b{n}"):
                await service.end_turn(session)
        asked: list[object] = []
        real = store.forgotten_since

        async def counted(ref: object, cursor: str | None) -> bool:
            asked.append(ref)
            return await real(ref, cursor)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "forgotten_since", counted)
        await service.poll_forgets()
        assert asked == []
    finally:
        await store.aclose()
