"""sd_notify against a real datagram socket, as systemd listens for it."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfsd.notify import notify, watchdog_interval


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(5)
        yield sock, str(path)


def test_notify_sends_the_message_to_notify_socket(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    assert notify("READY=1", env={"NOTIFY_SOCKET": path}) is True
    assert sock.recv(100) == b"READY=1"
    assert notify("WATCHDOG=1", env={"NOTIFY_SOCKET": path}) is True
    assert sock.recv(100) == b"WATCHDOG=1"


def test_notify_reaches_an_abstract_socket() -> None:
    name = f"memfs-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert notify("READY=1", env={"NOTIFY_SOCKET": "@" + name}) is True
        assert sock.recv(100) == b"READY=1"


def test_notify_without_systemd_is_a_no_op() -> None:
    assert notify("READY=1", env={}) is False
    assert notify("READY=1", env={"NOTIFY_SOCKET": ""}) is False


def test_notify_to_a_vanished_socket_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert notify("WATCHDOG=1", env={"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}) is False
    assert "sd_notify 'WATCHDOG=1'" in caplog.text


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}) == (
        15.0
    )


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"WATCHDOG_USEC": "0"},
        {"WATCHDOG_USEC": "soon"},
        {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid() + 1)},
    ],
)
def test_watchdog_interval_is_none_when_off_or_meant_for_another_process(
    env: dict[str, str],
) -> None:
    assert watchdog_interval(env) is None
