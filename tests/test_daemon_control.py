"""Serving the control API on a Unix socket: the socket file's life and mode."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from memfs.api.control import control_app
from memfs.core.errors import ConfigError, Conflict
from memfs.core.models import Limits
from memfsd.control import MAX_SOCKET_FOLDER, MAX_SOCKET_PATH, serve_control, socket_in_use
from memfsd.main import Settings, serve
from tests.control_fake import FakeTarget


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # Unix socket paths are limited to 107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="memfs-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def get_status(path: Path) -> httpx.Response:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://x") as c:
        return c.get("/status")


async def test_socket_is_mode_0600_and_answers_once_started(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), path)
        mode = path.lstat().st_mode
        assert stat.S_ISSOCK(mode)
        assert stat.S_IMODE(mode) == 0o600
        response = await trio.to_thread.run_sync(get_status, path)
        assert response.status_code == 200
        assert response.json()["pid"] == 4242
        assert sorted(p.name for p in sock_dir.iterdir()) == ["memfs.sock"]  # no temp dir left
        nursery.cancel_scope.cancel()


async def test_cancelling_stops_serving_and_removes_the_socket(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_control, control_app(FakeTarget()), path)
            scope.cancel()
    assert not path.exists()
    assert list(sock_dir.iterdir()) == []


async def test_shutdown_trigger_stops_serving_gracefully(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve_control(
                control_app(FakeTarget()),
                path,
                shutdown_trigger=stop.wait,
                task_status=task_status,
            )
        )
        assert (await trio.to_thread.run_sync(get_status, path)).status_code == 200
        stop.set()
    assert not path.exists()


async def test_stale_socket_from_a_dead_daemon_is_replaced(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # bound, never listening: what a killed daemon leaves
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), path)
        assert (await trio.to_thread.run_sync(get_status, path)).status_code == 200
        nursery.cancel_scope.cancel()


async def test_socket_another_daemon_serves_is_not_taken_over(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), path)
        with pytest.raises(Conflict, match="already serving"):
            await serve_control(control_app(FakeTarget()), path)
        assert (await trio.to_thread.run_sync(get_status, path)).status_code == 200
        nursery.cancel_scope.cancel()


async def test_a_file_that_is_not_a_socket_is_left_alone(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    path.write_text("precious")
    with pytest.raises(ConfigError, match="exists and is not a socket"):
        await serve_control(control_app(FakeTarget()), path)
    assert path.read_text() == "precious"


async def test_too_long_socket_path_is_a_config_error(sock_dir: Path) -> None:
    path = sock_dir / ("d" * 120) / "memfs.sock"
    with pytest.raises(ConfigError, match="Unix sockets allow 107"):
        await serve_control(control_app(FakeTarget()), path)


def at_length(base: Path, size: int) -> Path:
    """A folder under ``base`` whose path is ``size`` bytes (not made)."""
    return base / ("d" * (size - len(os.fsencode(base)) - 1))


async def test_a_socket_path_of_max_socket_path_bytes_is_served_and_one_byte_more_is_refused(
    sock_dir: Path,
) -> None:
    # sun_path holds MAX_SOCKET_PATH bytes and a NUL. The daemon binds in a
    # private folder beside the socket first (see serve_control), so the
    # socket's folder may be at most MAX_SOCKET_FOLDER bytes. A path at both
    # limits was refused, naming a path nobody had configured.
    folder = at_length(sock_dir, MAX_SOCKET_FOLDER)
    at = folder / ("s" * (MAX_SOCKET_PATH - MAX_SOCKET_FOLDER - 1))
    assert len(os.fsencode(at)) == MAX_SOCKET_PATH
    folder.mkdir()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), at)
        response = await trio.to_thread.run_sync(get_status, at)
        assert response.status_code == 200
        nursery.cancel_scope.cancel()
    assert os.listdir(folder) == []
    past = folder / (at.name + "x")
    with pytest.raises(ConfigError, match=f"is {MAX_SOCKET_PATH + 1} bytes"):
        await serve_control(control_app(FakeTarget()), past)
    # A folder one byte longer: refused up front, in its own words, and nothing made.
    deeper = at_length(sock_dir, MAX_SOCKET_FOLDER + 1)
    with pytest.raises(ConfigError, match=f"folder is {MAX_SOCKET_FOLDER + 1} bytes") as refused:
        await serve_control(control_app(FakeTarget()), deeper / "memfs.sock")
    assert ".ctl" not in str(refused.value)
    assert not deeper.exists() and os.listdir(folder) == []


async def test_a_newer_daemons_socket_is_not_removed_on_exit(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), path)
        os.unlink(path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as newer:
            newer.bind(str(path))
            nursery.cancel_scope.cancel()
    assert path.exists()


async def test_serving_writes_no_access_log(
    sock_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = sock_dir / "memfs.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), path)
        await trio.to_thread.run_sync(get_status, path)
        nursery.cancel_scope.cancel()
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


async def test_socket_in_use_tells_a_live_daemon_from_a_stale_file(sock_dir: Path) -> None:
    path = sock_dir / "memfs.sock"
    assert socket_in_use(path) is False  # nothing there
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))
        assert socket_in_use(path) is False  # a file nobody listens on
    path.unlink()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), path)
        assert await trio.to_thread.run_sync(socket_in_use, path) is True
        nursery.cancel_scope.cancel()


async def test_a_daemon_whose_socket_path_is_too_long_stops_before_it_mounts_or_opens_the_store(
    sock_dir: Path,
) -> None:
    # The length was checked only as the control API started: after the
    # mount, the store, and bringing back every open turn.
    state = at_length(sock_dir, MAX_SOCKET_FOLDER + 1)
    settings = Settings(
        mount_root=sock_dir / "mnt",
        state_dir=sock_dir / "state",
        store=f"sqlite://{sock_dir / 'state' / 'memfs.db'}",
        specs=[],
        limits=Limits(),
        socket=state / "memfs.sock",
    )
    with pytest.raises(ConfigError, match=f"folder is {MAX_SOCKET_FOLDER + 1} bytes"):
        await serve(settings)
    assert sorted(os.listdir(sock_dir)) == []
