"""The real daemon's control socket refuses bad turn starts, and changes nothing for them."""

from __future__ import annotations

import functools
import json
import os
import resource
import socket
from pathlib import Path
from typing import Any

import httpx
import pyfuse3
import pytest
import trio

from memfs.api.models import MAX_EXTRA_BODY_DEPTH, StartTurnRequest
from memfs.core.models import Limits, SpaceRef
from memfs.core.names import MAX_SEGMENT_BYTES
from memfs.core.specs import as_spec
from memfs.stores.sqlite import SqliteStore
from memfsd.main import Settings, serve
from tests.daemon_harness import Daemon, require_fuse, running_daemon, sh
from tests.test_daemon_mount import DANA, SPECS


def post_raw(sock: Path, body: bytes) -> httpx.Response:
    """POST /turns with exactly ``body``: no client-side checks on the way."""
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://memfs") as c:
        return c.post("/turns", content=body, headers={"content-type": "application/json"})


async def nothing_changed(daemon: Daemon) -> None:
    status = await daemon.service.status()
    assert status.sessions == []
    assert await trio.to_thread.run_sync(os.listdir, daemon.mount_root) == []  # and no EIO
    sessions = daemon.settings.state_dir / "sessions"
    assert not sessions.exists() or not any(sessions.iterdir())


async def test_a_uid_past_32_bits_is_400_and_the_mount_root_still_lists(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        for body in (
            b'{"session": "s1", "uid": 4294967296}',
            b'{"session": "s1", "uid": 4294967295}',
            b'{"session": "s1", "gid": 18446744073709551616}',
        ):
            response = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, body)
            assert response.status_code == 400, response.text
            assert response.json()["error"] == "BadRequest"
        await nothing_changed(daemon)


async def test_a_lone_surrogate_prompt_is_400_and_starts_no_turn(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        body = b'{"session": "s1", "extra_body": {"userId": "u_dana"}, "prompt": "x\\ud800"}'
        response = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, body)
        assert response.status_code == 400
        assert "prompt" in response.json()["detail"]
        await nothing_changed(daemon)


def send_huge(sock: Path, total: int, *, chunked: bool) -> tuple[bytes, int]:
    """Send a ``total``-byte body to POST /turns; the answer's head and how much got through."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(30)
    conn.connect(str(sock))
    framing = b"Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}".encode()
    conn.sendall(
        b"POST /turns HTTP/1.1\r\nHost: memfs\r\nContent-Type: application/json\r\n"
        + framing
        + b"\r\n\r\n"
    )
    piece = b"x" * 65536
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n" if chunked else piece
    sent = 0
    try:
        while sent < total:
            conn.sendall(chunk)
            sent += len(piece)
        if chunked:
            conn.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the daemon answered and closed: it stopped reading
    answer = b""
    try:
        while b"\r\n\r\n" not in answer:
            data = conn.recv(65536)
            if not data:
                break
            answer += data
    finally:
        conn.close()
    return answer, sent


async def test_a_200_mb_body_is_413_and_the_daemon_does_not_grow(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB; daemon in-process
        for chunked in (False, True):
            answer, _ = await trio.to_thread.run_sync(
                functools.partial(
                    send_huge, daemon.settings.socket, 200 * 1024 * 1024, chunked=chunked
                )
            )
            assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert grown < 64 * 1024, f"the daemon grew by {grown} KiB"
        await nothing_changed(daemon)
        # And it still serves a good request.
        body = json.dumps({"session": "s1", "extra_body": DANA}).encode()
        ok = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, body)
        assert ok.status_code == 201, ok.text
        await daemon.service.end_turn("s1")


async def test_the_daemon_takes_its_body_limit_from_its_settings(tmp_path: Path) -> None:
    require_fuse()
    state = tmp_path / "state"
    settings = Settings(
        mount_root=tmp_path / "mnt",
        state_dir=state,
        store=f"sqlite://{state}/memfs.db",
        specs=[as_spec(spec) for spec in SPECS],
        limits=Limits(),
        socket=state / "memfs.sock",
        control_max_body_bytes=2048,
    )
    head = b'{"session": "s1", "prompt": "'
    async with trio.open_nursery() as nursery:
        daemon = await nursery.start(serve, settings)
        try:
            body = head + b"x" * (2049 - len(head) - 2) + b'"}'
            response = await trio.to_thread.run_sync(post_raw, settings.socket, body)
            assert response.status_code == 413
            assert "at most 2048" in response.json()["detail"]
            assert (await daemon.status()).sessions == []
        finally:
            pyfuse3.terminate()


async def test_a_session_id_with_a_control_character_is_400_and_makes_no_folder(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        body = json.dumps({"session": "s1\n## x", "extra_body": DANA}).encode()
        response = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, body)
        assert response.status_code == 400
        assert response.json()["error"] == "InvalidName"
        assert "control characters" in response.json()["detail"]
        await nothing_changed(daemon)


async def test_an_extra_body_nested_past_the_depth_limit_is_400_and_starts_no_turn(
    tmp_path: Path,
) -> None:
    # 400 levels parse as JSON, but the turn's record cannot be written (pydantic
    # stops serialising past its own depth): the daemon answered 500 after
    # loading the store, not a clean 400 before anything.
    async with running_daemon(tmp_path, SPECS) as daemon:
        for depth in (MAX_EXTRA_BODY_DEPTH + 1, 400):
            deep = "[" * depth + "]" * depth
            extra = json.dumps(DANA)[:-1] + ', "x": ' + deep + "}"
            body = ('{"session": "s1", "extra_body": ' + extra + "}").encode()
            response = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, body)
            assert response.status_code == 400, response.text
            assert response.json()["error"] == "BadRequest"
            assert "nested" in response.json()["detail"]
        await nothing_changed(daemon)
        at_limit: dict[str, Any] = {"x": []}
        for _ in range(MAX_EXTRA_BODY_DEPTH - 2):  # the extra body itself is level 1
            at_limit = {"x": at_limit}
        started = await daemon.service.start_turn(
            StartTurnRequest(session="s1", extra_body={**DANA, **at_limit})
        )
        assert started.session == "s1"
        await daemon.service.end_turn("s1")


async def test_a_uid_or_gid_given_as_a_bool_or_a_string_is_400(tmp_path: Path) -> None:
    # pydantic's lax mode took true as uid 1 and "0" as root.
    async with running_daemon(tmp_path, SPECS) as daemon:
        extra = json.dumps(DANA)
        for ids in ('"uid": true, "gid": 1', '"uid": "0", "gid": "0"', '"uid": 1, "gid": false'):
            body = ('{"session": "s1", "extra_body": ' + extra + ", " + ids + "}").encode()
            response = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, body)
            assert response.status_code == 400, response.text
            assert response.json()["error"] == "BadRequest"
        await nothing_changed(daemon)


def identity(last: str) -> str:
    """An id of 2-, 3- and 4-byte characters, ending in ``last``: 252 bytes and ``last``'s."""
    return "é語😀" * 28 + last


# As many characters each: MAX_SEGMENT_BYTES counts bytes in UTF-8.
AT_LIMIT, PAST_LIMIT = identity("語"), identity("😀")


@pytest.mark.parametrize(
    ("what", "field"), [("session id", "session"), ("org id", "bankId"), ("user id", "userId")]
)
async def test_an_identity_of_max_segment_bytes_starts_a_turn_and_one_byte_more_is_400(
    tmp_path: Path, what: str, field: str
) -> None:
    assert len(AT_LIMIT.encode()) == MAX_SEGMENT_BYTES == len(PAST_LIMIT.encode()) - 1
    assert len(AT_LIMIT) == len(PAST_LIMIT)

    def request(value: str) -> bytes:
        if field == "session":
            return json.dumps({"session": value, "extra_body": DANA}).encode()
        return json.dumps({"session": "s1", "extra_body": {**DANA, field: value}}).encode()

    async with running_daemon(tmp_path, SPECS) as daemon:
        past = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, request(PAST_LIMIT))
        assert past.status_code == 400, past.text
        assert past.json()["error"] == "NameTooLong"
        assert past.json()["detail"].startswith(f"{what} is 256 bytes; at most 255 are allowed")
        await nothing_changed(daemon)

        at = await trio.to_thread.run_sync(post_raw, daemon.settings.socket, request(AT_LIMIT))
        assert at.status_code == 201, at.text
        session = at.json()["session"]
        await sh("printf kept > me/notes.md", Path(at.json()["root"]))
        ended = await daemon.service.end_turn(session)
        assert ended.spaces["me"].status == "saved"
        org = AT_LIMIT if field == "bankId" else DANA["bankId"]
        user = AT_LIMIT if field == "userId" else DANA["userId"]
        store = daemon.service.memory.store
        assert isinstance(store, SqliteStore)
        me = SpaceRef(layer="user", space="me", org=org, user=user)
        assert await store.files(me) == {"notes.md": b"kept"}
