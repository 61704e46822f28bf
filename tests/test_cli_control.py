"""The CLI and ``memfs.Client`` against the real control server on a Unix socket.

The server runs in the test's trio loop; the CLI and the client are sync, so
they run in a worker thread.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner, Result

import memfs
from memfs import cli_manage
from memfs.api.control import control_app
from memfs.api.models import ForgetApplied, ForgetNotice, StartTurnRequest
from memfs.cli import main
from memfs.client import default_socket
from memfsd.config import DaemonConfig
from memfsd.control import serve_control
from tests.control_fake import FakeTarget
from tests.test_cli_manage import db, memfs_cli  # noqa: F401 (db is a fixture)

DANA = {"userId": "u_dana", "name": "Dana", "role": "underwriter"}


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # Unix socket paths are limited to 107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="memfs-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Daemon:
    target: FakeTarget
    socket: Path

    async def cli(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """``memfs ARGS --socket SOCKET``, as a user runs it."""
        return await run_cli(*args, "--socket", str(self.socket), env=env)


async def run_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    runner = CliRunner()
    return await trio.to_thread.run_sync(lambda: runner.invoke(main, list(args), env=env))


@pytest.fixture
async def daemon(sock_dir: Path) -> AsyncIterator[Daemon]:
    target = FakeTarget()
    path = sock_dir / "memfs.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(target), path)
        yield Daemon(target, path)
        nursery.cancel_scope.cancel()


async def test_turn_start_prints_the_mounts_and_note_as_json(daemon: Daemon) -> None:
    done = await daemon.cli("turn", "start", "s1", "--extra-body", json.dumps(DANA))
    assert done.exit_code == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"session", "turn", "root", "mounts", "note"}
    assert out["session"] == "s1"
    assert out["root"] == "/mnt/memfs/s1"
    assert out["mounts"]["lending-rules"] == {
        "path": "/mnt/memfs/s1/lending-rules",
        "read_only": False,
        "space": "lending-rules",
        "layer": "org",
    }
    assert out["note"].startswith("lending-rules/")
    assert done.stderr == ""


async def test_extra_body_prompt_and_owner_reach_the_daemon(daemon: Daemon) -> None:
    done = await daemon.cli(
        "turn",
        "start",
        "s1",
        "--extra-body",
        json.dumps(DANA),
        "--prompt",
        "Two years of SA302s?",
        "--uid",
        "1000",
        "--gid",
        "1001",
    )
    assert done.exit_code == 0, done.stderr
    assert daemon.target.calls == [
        (
            "start_turn",
            StartTurnRequest(
                session="s1", extra_body=DANA, prompt="Two years of SA302s?", uid=1000, gid=1001
            ),
        )
    ]


async def test_turn_end_prints_spaces_and_the_files_the_turn_touched(daemon: Daemon) -> None:
    await daemon.cli("turn", "start", "s1")
    done = await daemon.cli("turn", "end", "s1")
    assert done.exit_code == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"session", "turn", "spaces", "files"} <= set(out)
    me = out["spaces"]["me"]
    assert {"status", "created", "updated", "deleted", "not_saved", "error"} <= set(me)
    assert me["status"] == "saved" and me["created"] == ["style.md"]
    assert out["spaces"]["lending-rules"]["status"] == "skipped"
    assert out["files"]["lending-rules/income.md"]["read"] == "r-7"
    assert out["files"]["me/style.md"]["wrote"] is True
    assert out["files"]["me/style.md"]["deleted"] is False


async def test_commit_close_and_status_print_json(daemon: Daemon) -> None:
    await daemon.cli("turn", "start", "s1")
    status = await daemon.cli("status")
    assert status.exit_code == 0, status.stderr
    out = json.loads(status.stdout)
    assert set(out) == {
        "version",
        "pid",
        "mount_root",
        "state_dir",
        "store",
        "sessions",
        "requests",
        "store_health",
        "left_behind",
    }
    assert out["store_health"] is None  # a SQLite store: no listening connection to report on
    assert out["left_behind"] == []  # every open turn came back (there were none)
    assert out["version"] == memfs.__version__
    assert [s["session"] for s in out["sessions"]] == ["s1"]

    committed = await daemon.cli("turn", "commit", "s1", "t-1")
    assert committed.exit_code == 0, committed.stderr
    assert json.loads(committed.stdout)["turn"] == "t-1"
    assert daemon.target.calls[-1] == ("commit_turn", ("s1", "t-1"))

    closed = await daemon.cli("session", "close", "s1")
    assert closed.exit_code == 0, closed.stderr
    assert json.loads(closed.stdout) == {"session": "s1", "closed": True}


async def test_daemon_error_is_one_line_on_stderr_with_its_exit_code(daemon: Daemon) -> None:
    done = await daemon.cli("turn", "end", "ghost")
    assert done.exit_code == memfs.NotFound.exit_code == 3
    assert done.stdout == ""
    assert done.stderr == "memfs: error: no open turn in this session: 'ghost'\n"

    await daemon.cli("turn", "start", "s1")
    again = await daemon.cli("turn", "start", "s1")
    assert again.exit_code == memfs.TurnOpen.exit_code == 5
    assert again.stderr.startswith("memfs: error: this session already has an open turn")


@pytest.mark.parametrize(
    ("extra_body", "reason"),
    [
        ("{userId: u1}", "--extra-body is not valid JSON"),
        ('["u1"]', "--extra-body must be a JSON object, not list"),
        (
            '{"userId": "u1", "userId": "u2"}',
            '--extra-body is not valid JSON: the key "userId" appears twice in one object',
        ),
        (
            '{"userId": "u1", "team": {"id": 1, "id": 2}}',
            '--extra-body is not valid JSON: the key "id" appears twice in one object',
        ),
    ],
)
async def test_bad_extra_body_is_exit_2_and_sends_nothing(
    daemon: Daemon, extra_body: str, reason: str
) -> None:
    done = await daemon.cli("turn", "start", "s1", "--extra-body", extra_body)
    assert done.exit_code == 2
    assert done.stderr.startswith(f"memfs: error: {reason}")
    assert daemon.target.calls == []


async def test_missing_daemon_socket_is_daemon_unavailable_exit_9(sock_dir: Path) -> None:
    done = await run_cli("status", "--socket", str(sock_dir / "memfs.sock"))
    assert done.exit_code == memfs.DaemonUnavailable.exit_code == 9
    assert done.stderr == (
        "memfs: error: the memfs daemon is not running (nothing listens on its control socket): "
        f"'{sock_dir / 'memfs.sock'}'\n"
    )


async def test_socket_defaults_to_memfs_socket_then_the_state_dir(daemon: Daemon) -> None:
    by_socket = await run_cli("status", env={"MEMFS_SOCKET": str(daemon.socket)})
    assert by_socket.exit_code == 0, by_socket.stderr
    by_state_dir = await run_cli(
        "status", env={"MEMFS_SOCKET": "", "MEMFS_STATE_DIR": str(daemon.socket.parent)}
    )
    assert by_state_dir.exit_code == 0, by_state_dir.stderr
    assert default_socket({}) == Path("/var/lib/memfs/memfs.sock")
    assert default_socket({"MEMFS_STATE_DIR": "/srv/m"}) == Path("/srv/m/memfs.sock")
    assert default_socket({"MEMFS_STATE_DIR": "/srv/m", "MEMFS_SOCKET": "/run/s"}) == Path("/run/s")
    # The daemon listens where the client looks by default.
    assert DaemonConfig(state_dir=Path("/srv/m")).socket == default_socket(
        {"MEMFS_STATE_DIR": "/srv/m"}
    )


async def test_control_socket_is_mode_0600(daemon: Daemon) -> None:
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600


async def test_client_returns_models_and_raises_the_daemons_error_class(daemon: Daemon) -> None:
    def session() -> None:
        with memfs.Client(daemon.socket) as client:
            started = client.start_turn("s1", DANA, prompt="hi")
            assert started.mounts["me"].path == "/mnt/memfs/s1/me"
            with pytest.raises(memfs.TurnOpen) as caught:
                client.start_turn("s1")
            assert isinstance(caught.value, memfs.Conflict)
            assert str(caught.value) == "this session already has an open turn: 's1'"
            assert client.end_turn("s1").spaces["me"].status == "saved"
            with pytest.raises(memfs.NotFound):
                client.end_turn("s1")
            assert client.status().sessions == []
            assert client.close_session("s1").closed is True

    await trio.to_thread.run_sync(session)


async def test_an_id_with_a_slash_cannot_reach_another_route(daemon: Daemon) -> None:
    def end() -> None:
        with memfs.Client(daemon.socket) as client, pytest.raises(memfs.NotFound):
            client.end_turn("../status")

    await trio.to_thread.run_sync(end)
    assert daemon.target.calls == []


@pytest.mark.error_log(r"memfs\.api\.control: control API: GET /status failed")
async def test_unexpected_daemon_failure_reaches_the_cli_as_exit_1(daemon: Daemon) -> None:
    daemon.target.fail_with = RuntimeError("a bug")
    done = await daemon.cli("status")
    assert done.exit_code == 1
    assert done.stderr == "memfs: error: RuntimeError: a bug\n"


async def test_refused_socket_is_daemon_unavailable(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # bound, not listening: a daemon that died

        def status() -> None:
            with memfs.Client(path) as client:
                client.status()

        with pytest.raises(memfs.DaemonUnavailable, match="not running"):
            await trio.to_thread.run_sync(status)


@pytest.fixture
def fake_run_daemon(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Stand in for ``memfsd.main.run_daemon``: record the config instead of mounting."""
    started: list[Any] = []
    module = types.ModuleType("memfsd.main")
    module.run_daemon = started.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "memfsd.main", module)
    return started


def test_daemon_command_builds_its_config_from_file_env_and_flags(
    tmp_path: Path, fake_run_daemon: list[Any]
) -> None:
    config_file = tmp_path / "memfs.toml"
    config_file.write_text(
        'mount_root = "/srv/mnt"\nstate_dir = "/srv/state"\n\n'
        '[[memory]]\nlayer = "org"\nspace = "lending-rules"\n'
        'can_write = { role = ["underwriter"] }\n'
    )
    done = CliRunner().invoke(
        main,
        ["daemon", "--config", str(config_file), "--state-dir", "/flag/state", "--foreground"],
        env={"MEMFS_MOUNT_ROOT": "/env/mnt", "MEMFS_STORE": "memory://"},
    )
    assert done.exit_code == 0, done.stderr
    [config] = fake_run_daemon
    assert isinstance(config, DaemonConfig)
    assert config.mount_root == Path("/env/mnt")
    assert config.state_dir == Path("/flag/state")
    assert config.store == "memory://"
    assert config.socket == Path("/flag/state/memfs.sock")
    assert [spec.space for spec in config.specs()] == ["lending-rules"]


def test_daemon_command_with_a_bad_config_exits_78_and_starts_nothing(
    tmp_path: Path, fake_run_daemon: list[Any]
) -> None:
    config_file = tmp_path / "memfs.toml"
    config_file.write_text('[[memory]]\nlayer = "org"\nspace = "rules"\ncommit = "later"\n')
    done = CliRunner().invoke(main, ["daemon", "--config", str(config_file)])
    assert done.exit_code == 78
    assert done.stderr == (
        f"memfs: error: {config_file}: memory[0].commit: must be one of after-turn, manual, "
        "read-only\n"
    )
    assert fake_run_daemon == []


def test_daemon_command_reports_a_memfs_error_a_nursery_wrapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run_daemon(config: DaemonConfig) -> None:
        raise ExceptionGroup("nursery", [memfs.ConfigError("cannot mount at /mnt/memfs")])

    module = types.ModuleType("memfsd.main")
    module.run_daemon = run_daemon  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "memfsd.main", module)
    done = CliRunner().invoke(main, ["daemon"], env={"MEMFS_STORE": "memory://"})
    assert done.exit_code == 78
    assert done.stderr == "memfs: error: cannot mount at /mnt/memfs\n"


async def cli_with_stdin(daemon: Daemon, stdin: bytes, *args: str) -> Result:
    runner = CliRunner()
    argv = [*args, "--socket", str(daemon.socket)]
    return await trio.to_thread.run_sync(lambda: runner.invoke(main, argv, input=stdin))


async def test_extra_body_and_prompt_come_from_stdin_and_a_file_not_the_command_line(
    daemon: Daemon, tmp_path: Path
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes("Two years of SA302s? — ja\n".encode())
    args = ("turn", "start", "s1", "--extra-body", "-", "--prompt-file", str(prompt))
    done = await cli_with_stdin(daemon, json.dumps(DANA).encode(), *args)
    assert done.exit_code == 0, done.stderr
    assert daemon.target.calls == [
        (
            "start_turn",
            StartTurnRequest(session="s1", extra_body=DANA, prompt="Two years of SA302s? — ja\n"),
        )
    ]
    # Nothing secret was on the command line.
    assert not any("u_dana" in arg or "SA302" in arg for arg in args)


async def test_prompt_file_dash_reads_the_prompt_from_stdin(daemon: Daemon) -> None:
    args = ("turn", "start", "s1", "--extra-body", json.dumps(DANA), "--prompt-file", "-")
    done = await cli_with_stdin(daemon, b"from stdin", *args)
    assert done.exit_code == 0, done.stderr
    assert daemon.target.calls[0][1].prompt == "from stdin"


@pytest.mark.parametrize(
    ("args", "stdin", "reason"),
    [
        (("--prompt", "a", "--prompt-file", "-"), b"", "give the prompt with --prompt or"),
        (("--extra-body", "-", "--prompt-file", "-"), b"{}", "only one of --extra-body and"),
        (("--extra-body", "-"), b"[1]", "--extra-body must be a JSON object"),
        (("--extra-body", "-"), b"\xff{}", "--extra-body -: stdin is not valid UTF-8"),
        (("--prompt-file", "-"), b"\xc3(", "--prompt-file -: stdin is not valid UTF-8"),
        (("--prompt-file", "/nonexistent/p.txt"), b"", "--prompt-file: cannot read"),
    ],
)
async def test_bad_stdin_or_prompt_file_is_exit_2_and_sends_nothing(
    daemon: Daemon, args: tuple[str, ...], stdin: bytes, reason: str
) -> None:
    done = await cli_with_stdin(daemon, stdin, "turn", "start", "s1", *args)
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(f"memfs: error: {reason}")
    assert daemon.target.calls == []


async def test_input_at_max_input_bytes_is_read_and_one_byte_past_is_exit_6(
    daemon: Daemon, tmp_path: Path
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(b"p" * 64)
    start = ("turn", "start", "s1", "--extra-body", json.dumps(DANA), "--max-input-bytes")
    at = await cli_with_stdin(daemon, b"", *start, "64", "--prompt-file", str(prompt))
    assert at.exit_code == 0, at.stderr
    assert daemon.target.calls[0][1].prompt == "p" * 64
    past = await cli_with_stdin(daemon, b"", *start, "63", "--prompt-file", str(prompt))
    assert past.exit_code == 6
    assert past.stderr.startswith("memfs: error: --prompt-file: the input is over 63 bytes")
    body = await cli_with_stdin(
        daemon, json.dumps(DANA).encode(), "turn", "start", "s1", "--extra-body", "-",
        "--max-input-bytes", "8",
    )  # fmt: skip
    assert body.exit_code == 6 and "--extra-body -: the input is over 8 bytes" in body.stderr
    assert len(daemon.target.calls) == 1


def test_an_endless_prompt_file_is_refused_at_the_limit_not_read_forever() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "turn", "start", "s1", "--prompt-file", "/dev/zero",
         "--socket", "/nonexistent/memfs.sock"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 6, done.stderr
    assert b"the input is over 1048576 bytes" in done.stderr


@pytest.mark.parametrize("value", ["4294967295", "4294967296", "-1"])
async def test_an_id_out_of_range_on_the_command_line_is_exit_2(daemon: Daemon, value: str) -> None:
    done = await daemon.cli("turn", "start", "s1", "--uid", value)
    assert done.exit_code == 2
    assert "--uid" in done.stderr
    assert daemon.target.calls == []


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"uid": 2**32}, "uid"),
        ({"gid": -1}, "gid"),
        ({"prompt": "\ud800"}, "prompt"),
        ({"extra_body": {"name": ["\udfff"]}}, "extra_body"),
    ],
)
async def test_the_client_refuses_what_the_daemon_refuses_and_sends_nothing(
    daemon: Daemon, kwargs: dict[str, Any], where: str
) -> None:
    def attempt() -> None:
        with memfs.Client(daemon.socket) as client:
            client.start_turn("s1", **kwargs)

    with pytest.raises(memfs.BadRequest, match=where):
        await trio.to_thread.run_sync(attempt)
    assert daemon.target.calls == []


class SlowToHear(FakeTarget):
    """A daemon that answers a forget notice after ``delay`` seconds (None: never)."""

    def __init__(self, delay: float | None) -> None:
        super().__init__()
        self.delay = delay

    async def forgotten(self, notice: ForgetNotice) -> ForgetApplied:
        await trio.sleep(math.inf if self.delay is None else self.delay)
        await super().forgotten(notice)
        return ForgetApplied(dropped={"s1": ["me"]})


NOTICE_TIMEOUT = 2.0  # FORGET_NOTICE_TIMEOUT, made short


@pytest.mark.parametrize("delay", [NOTICE_TIMEOUT / 2, None])
async def test_forget_user_waits_forget_notice_timeout_for_the_daemon_and_says_so_past_it(
    sock_dir: Path,
    db: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    delay: float | None,
) -> None:
    # The store has forgotten (exit 0); the notice only hurries the daemon's
    # open turns. One the daemon took and did not answer in time is no
    # daemon to the admin unless the command says so.
    monkeypatch.setattr(cli_manage, "FORGET_NOTICE_TIMEOUT", NOTICE_TIMEOUT)
    target, path = SlowToHear(delay), sock_dir / "memfs.sock"
    monkeypatch.setenv("MEMFS_SOCKET", str(path))
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(target), path)
        began = time.monotonic()
        done = await trio.to_thread.run_sync(
            lambda: memfs_cli(db, "forget-user", "u_dana", role="admin")
        )
        waited = time.monotonic() - began
        nursery.cancel_scope.cancel()
    assert done.exit_code == 0, done.output
    if delay is not None:  # in time
        assert json.loads(done.stdout)["open_turns"] == {"s1": ["me"]}
        assert done.stderr == ""
        return
    assert json.loads(done.stdout)["open_turns"] is None
    assert NOTICE_TIMEOUT <= waited < NOTICE_TIMEOUT + 10
    assert done.stderr == (
        "memfs: warning: the daemon did not confirm the forget (the memfs daemon did not "
        f"answer in time on its control socket: {str(path)!r}); its open turns may hold "
        "what was forgotten until it next asks the store (forget_poll_seconds), and none "
        "can store it back\n"
    )
