"""``memfs.Client`` on its socket: kept connections, servers that close them, each way to fail."""

from __future__ import annotations

import os
import select
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import trio

import memfs
from memfs.api.control import control_app
from memfs.api.models import DaemonStatus
from memfs.unix_http import (
    REUSE_IDLE_SECONDS,
    SERVER_KEEP_ALIVE_SECONDS,
    Answer,
    UnixHTTP,
)
from memfsd.control import _config, serve_control
from tests.control_fake import FakeTarget

STATUS_BODY = (
    b'{"version": "0", "pid": 1, "mount_root": "/m", "state_dir": "/s", "store": "memory", '
    b'"sessions": []}'
)


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # Unix socket paths are limited to 107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="memfs-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def read_request(conn: socket.socket) -> bytes:
    """One request's head (these tests send no bodies to the raw servers)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    return data


Server = Callable[[Path, Callable[[socket.socket], None]], Callable[[], int]]


@pytest.fixture
def raw_server() -> Iterator[Server]:
    """Start servers that run a function for each connection; closed when the test ends."""
    listeners: list[socket.socket] = []

    def start(path: Path, serve: Callable[[socket.socket], None]) -> Callable[[], int]:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(8)
        listeners.append(listener)
        return accept_loop(listener, serve)

    yield start
    for listener in listeners:
        listener.close()


def accept_loop(
    listener: socket.socket, serve: Callable[[socket.socket], None]
) -> Callable[[], int]:
    """Serve each connection in turn in a thread; returns a count of connections accepted."""
    accepted = 0

    def loop() -> None:
        nonlocal accepted
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            accepted += 1
            with conn:
                serve(conn)

    threading.Thread(target=loop, daemon=True).start()
    return lambda: accepted


def answer(conn: socket.socket, head: bytes = b"") -> None:
    """A 200 status answer, keeping the connection unless ``head`` says otherwise."""
    conn.sendall(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + head
        + f"content-length: {len(STATUS_BODY)}\r\n\r\n".encode()
        + STATUS_BODY
    )


def status_of(path: Path, timeout: float = 5.0) -> DaemonStatus:
    with memfs.Client(path, timeout=timeout) as client:
        return client.status()


def test_a_connection_the_server_closed_while_idle_is_replaced_not_failed(
    sock_dir: Path, raw_server: Server
) -> None:
    path = sock_dir / "memfs.sock"

    closed = threading.Semaphore(0)

    def once_then_close(conn: socket.socket) -> None:
        # Answers one request and closes, without saying so: a keep-alive timeout.
        read_request(conn)
        answer(conn)
        time.sleep(0.05)  # the close comes a little after the answer, as a timeout's does
        conn.close()
        closed.release()

    connections = raw_server(path, once_then_close)
    with memfs.Client(path, timeout=5) as client:
        for _ in range(3):
            assert client.status().store == "memory"
            # While idle: a close that crosses a request is the next test's case.
            assert closed.acquire(timeout=5)
    assert connections() == 3


def test_an_idle_connection_is_not_reused_past_reuse_idle_so_no_request_crosses_the_close(
    sock_dir: Path, raw_server: Server
) -> None:
    path = sock_dir / "memfs.sock"

    def close_as_the_next_request_arrives(conn: socket.socket) -> None:
        # The worst moment for a keep-alive timeout: it fires as the client
        # sends on the idle connection, and the request is dropped unread.
        read_request(conn)
        answer(conn)
        select.select([conn], [], [], 5)
        conn.close()

    connections = raw_server(path, close_as_the_next_request_arrives)
    http = UnixHTTP(path, timeout=5, reuse_idle=0.05)
    try:
        for _ in range(3):
            assert http.request("GET", "/status") == Answer(200, STATUS_BODY)
            time.sleep(0.1)
    finally:
        http.close()
    assert connections() == 3


def test_the_client_reuses_idle_connections_for_less_than_the_daemon_keeps_them() -> None:
    assert REUSE_IDLE_SECONDS < SERVER_KEEP_ALIVE_SECONDS
    assert _config("unix:/run/memfs.sock").keep_alive_timeout == SERVER_KEEP_ALIVE_SECONDS


def test_a_kept_connection_serves_the_next_request(sock_dir: Path, raw_server: Server) -> None:
    path = sock_dir / "memfs.sock"

    def keep_alive(conn: socket.socket) -> None:
        while read_request(conn):
            answer(conn)

    connections = raw_server(path, keep_alive)
    with memfs.Client(path, timeout=5) as client:
        for _ in range(5):
            client.status()
    assert connections() == 1


def test_a_daemon_that_never_answers_is_unavailable_after_the_timeout(
    sock_dir: Path, raw_server: Server
) -> None:
    path = sock_dir / "memfs.sock"
    release = threading.Event()

    def silent(conn: socket.socket) -> None:
        read_request(conn)
        release.wait(10)

    raw_server(path, silent)
    try:
        with pytest.raises(memfs.DaemonUnavailable, match="did not answer in time"):
            status_of(path, timeout=0.3)
    finally:
        release.set()


def test_a_daemon_that_breaks_off_its_answer_is_unavailable_not_a_bad_answer(
    sock_dir: Path, raw_server: Server
) -> None:
    path = sock_dir / "memfs.sock"

    def torn(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b'HTTP/1.1 200 OK\r\ncontent-length: 500\r\n\r\n{"version')

    raw_server(path, torn)
    with pytest.raises(memfs.DaemonUnavailable, match="broke off the request"):
        status_of(path)


def test_a_socket_its_user_may_not_open_is_no_permission(
    sock_dir: Path, raw_server: Server
) -> None:
    path = sock_dir / "memfs.sock"
    raw_server(path, lambda conn: None)
    os.chmod(path, 0o600)

    def as_nobody() -> None:
        os.setresuid(65534, 65534, -1)  # in a child: this process stays root
        try:
            status_of(path)
        except memfs.DaemonUnavailable as exc:
            os._exit(0 if "no permission" in str(exc) else 3)
        os._exit(4)

    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    pid = os.fork()
    if pid == 0:
        as_nobody()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_threads_sharing_one_client_each_get_their_own_answer(
    sock_dir: Path, raw_server: Server
) -> None:
    path = sock_dir / "memfs.sock"

    def keep_alive(conn: socket.socket) -> None:
        while read_request(conn):
            answer(conn)

    def own(conn: socket.socket) -> None:
        with conn:
            keep_alive(conn)

    def serve_each(conn: socket.socket) -> None:
        threading.Thread(target=own, args=(conn.dup(),), daemon=True).start()

    raw_server(path, serve_each)
    with memfs.Client(path, timeout=5) as client, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: client.status().store, range(200)))
    assert answers == ["memory"] * 200


async def test_a_body_past_the_daemons_limit_is_too_large_not_a_broken_pipe(
    sock_dir: Path,
) -> None:
    path = sock_dir / "memfs.sock"
    target = FakeTarget()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(target, max_body_bytes=1024), path)

        def start() -> None:
            with memfs.Client(path, timeout=10) as client:
                client.start_turn("s1", {"blob": "x" * (4 * 1024 * 1024)})

        with pytest.raises(memfs.TooLarge, match="at most 1024"):
            await trio.to_thread.run_sync(start)
        nursery.cancel_scope.cancel()
    assert target.calls == []


@pytest.mark.parametrize("keep", [3, 2], ids=["at-the-limit", "past-it"])
def test_at_most_keep_idle_connections_stay_open_after_a_burst(
    sock_dir: Path, raw_server: Server, keep: int
) -> None:
    path = sock_dir / "memfs.sock"
    together = threading.Barrier(3)
    closed: list[int] = []

    def keep_alive(conn: socket.socket) -> None:
        with conn:
            if read_request(conn):
                together.wait(10)  # three requests in flight at once: three connections
                answer(conn)
            while read_request(conn):
                answer(conn)
            closed.append(1)

    def serve_each(conn: socket.socket) -> None:
        threading.Thread(target=keep_alive, args=(conn.dup(),), daemon=True).start()

    raw_server(path, serve_each)
    http = UnixHTTP(path, timeout=5, keep=keep)
    with ThreadPoolExecutor(3) as pool:
        statuses = list(pool.map(lambda _: http.request("GET", "/status").status, range(3)))
    assert statuses == [200, 200, 200]
    deadline = time.monotonic() + 5
    while len(closed) < 3 - keep and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(closed) == 3 - keep  # the rest stay open for the next requests
    http.close()
    while len(closed) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(closed) == 3


def test_a_client_reads_a_newer_daemons_answer_with_fields_it_does_not_know(
    sock_dir: Path, raw_server: Server
) -> None:
    # Fields are only ever added to answers (left_behind, store_health): a
    # client older than its daemon refused every status with a ValidationError.
    path = sock_dir / "memfs.sock"
    body = (
        b'{"version": "9", "pid": 1, "mount_root": "/m", "state_dir": "/s", "store": "memory", '
        b'"sessions": [{"session": "s1", "turn": null, "root": "/m/s1", "mounts": [], '
        b'"added_later": true}], "added_later": {"x": 1}}'
    )

    def newer(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )

    raw_server(path, newer)
    status = status_of(path)
    assert status.version == "9"
    assert [s.session for s in status.sessions] == ["s1"]


async def test_the_daemon_still_refuses_a_request_field_it_does_not_know(
    sock_dir: Path,
) -> None:
    # Answers are read leniently; a request the daemon does not understand
    # (a misspelt field would otherwise be dropped unseen) is a bad request.
    path = sock_dir / "memfs.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, control_app(FakeTarget()), path)

        def start() -> int:
            http = UnixHTTP(path, timeout=5)
            try:
                body = b'{"session": "s1", "promt": "misspelt"}'
                json = {"Content-Type": "application/json"}
                return http.request("POST", "/turns", body, json).status
            finally:
                http.close()

        assert await trio.to_thread.run_sync(start) == 400
        nursery.cancel_scope.cancel()
