"""`memfs web`: where it may listen, and that it really serves the API over hypercorn."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.core.errors import ConfigError
from memfs.core.listen import parse_listen, require_tls
from tests.web_tls import free_port, self_signed, trusting

MEMFS = [sys.executable, "-m", "memfs.cli"]


@pytest.mark.parametrize("listen", ["0.0.0.0:8330", "10.1.2.3:80", "[::]:8330", "example.org:443"])
def test_memfs_web_refuses_a_non_loopback_listen_without_tls_naming_the_keys(
    listen: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [*MEMFS, "web", "--store", f"sqlite://{tmp_path / 'm.db'}", "--listen", listen],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == ConfigError.exit_code
    assert "web_tls_cert" in done.stderr and "web_tls_key" in done.stderr
    assert not (tmp_path / "m.db").exists()  # refused before the store was opened


@pytest.mark.parametrize("listen", ["127.0.0.1:8330", "localhost:1", "[::1]:9000", "127.9.9.9:80"])
def test_loopback_listens_need_no_tls(listen: str) -> None:
    assert require_tls(listen, None, None)[1] == int(listen.rsplit(":", 1)[1])


def test_a_non_loopback_listen_with_both_tls_files_is_allowed_and_one_alone_is_not() -> None:
    assert require_tls("0.0.0.0:8443", "c.pem", "k.pem") == ("0.0.0.0", 8443)
    with pytest.raises(ConfigError, match="web_tls_key"):
        require_tls("0.0.0.0:8443", "c.pem", None)


@pytest.mark.parametrize("listen", ["", "8330", "host:", "host:0", "host:65536", ":80"])
def test_a_malformed_listen_is_a_config_error(listen: str) -> None:
    with pytest.raises(ConfigError, match="HOST:PORT"):
        parse_listen(listen)


def test_memfs_web_serves_the_api_on_loopback_with_hypercorn(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'm.db'}"
    subprocess.run(
        [*MEMFS, "people", "add", "ada", "--role", "viewer", "--store", store],
        check=True,
        capture_output=True,
        timeout=60,
    )
    made = subprocess.run(
        [*MEMFS, "token", "create", "ada", "--store", store],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    token = json.loads(made.stdout)["token"]
    port = free_port()
    server = subprocess.Popen(
        [*MEMFS, "web", "--store", store, "--listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                anonymous = httpx.get(f"http://127.0.0.1:{port}/api/v1/me", timeout=5)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        me = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/me",
            headers={"Authorization": f"Bearer {token}"},
            timeout=5,
        )
        assert me.json()["id"] == "ada" and me.json()["role"] == "viewer"
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()


def serve_until_answered(args: list[str], url: str, **get: Any) -> subprocess.Popen[bytes]:
    """Start ``memfs web ARGS`` and wait until ``url`` answers (any status)."""
    server = subprocess.Popen([*MEMFS, "web", *args], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url, timeout=5, **get)
            return server
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                _, err = server.communicate()
                raise AssertionError(err.decode()) from None
            time.sleep(0.1)


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(timeout=30)
    if server.stderr is not None:
        server.stderr.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_memfs_web_with_tls_cert_and_key_serves_https_only(tmp_path: Path, host: str) -> None:
    store = f"sqlite://{tmp_path / 'm.db'}"
    for command in (["people", "add", "ada", "--role", "admin"], ["token", "create", "ada"]):
        made = subprocess.run(
            [*MEMFS, *command, "--store", store], check=True, capture_output=True, text=True
        )
    token = json.loads(made.stdout)["token"]
    cert, key = self_signed(tmp_path)
    port = free_port()
    url = f"https://127.0.0.1:{port}/api/v1/me"
    args = ["--store", store, "--listen", f"{host}:{port}"]
    server = serve_until_answered(
        [*args, "--tls-cert", str(cert), "--tls-key", str(key)], url, verify=trusting(cert)
    )
    try:
        assert httpx.get(url, verify=trusting(cert), timeout=5).status_code == 401
        me = httpx.get(
            url, headers={"Authorization": f"Bearer {token}"}, verify=trusting(cert), timeout=5
        )
        assert me.json()["role"] == "admin"
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/api/v1/me", timeout=5)
    finally:
        stop(server)


def test_memfs_web_with_a_tls_key_that_does_not_load_exits_78_naming_web_tls_cert(
    tmp_path: Path,
) -> None:
    cert, key = self_signed(tmp_path)
    key.write_text("not a key\n")
    done = subprocess.run(
        [
            *MEMFS,
            "web",
            *("--store", f"sqlite://{tmp_path / 'm.db'}", "--listen", f"127.0.0.1:{free_port()}"),
            *("--tls-cert", str(cert), "--tls-key", str(key)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == ConfigError.exit_code
    assert done.stderr.startswith(f"memfs: error: web_tls_cert '{cert}' and web_tls_key '{key}'")
    assert "Traceback" not in done.stderr


def test_memfs_web_on_a_port_in_use_exits_78_with_one_line_naming_web_listen(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                *MEMFS,
                "web",
                "--store",
                f"sqlite://{tmp_path / 'm.db'}",
                "--listen",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == ConfigError.exit_code
    assert done.stderr.startswith(f"memfs: error: web_listen '127.0.0.1:{port}': cannot listen")
    assert "already in use" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "m.db").exists()  # refused before the store was opened


def _post_in_pieces(port: int, pauses: list[float]) -> bytes:
    """POST /login's headers, then one body byte after each pause; what the server said."""
    body = b"t" * len(pauses)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /login HTTP/1.1\r\nHost: memfs\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        for pause, byte in zip(pauses, body, strict=True):
            time.sleep(pause)
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break  # the server hung up on us
        sock.settimeout(10)
        try:
            return sock.recv(100)
        except OSError:
            return b""


def test_memfs_web_hangs_up_on_a_request_body_silent_past_web_read_timeout_seconds(
    tmp_path: Path,
) -> None:
    # A client that sends headers and then nothing held its connection (and a
    # descriptor of the process the daemon's FUSE mount needs too) for ever.
    port = free_port()
    url = f"http://127.0.0.1:{port}/login"
    store = f"sqlite://{tmp_path / 'm.db'}"
    server = serve_until_answered(
        ["--store", store, "--listen", f"127.0.0.1:{port}", "--read-timeout-seconds", "1.5"], url
    )
    try:
        # Within the bound: each piece 0.5 s after the last, answered (403: no form secret).
        assert _post_in_pieces(port, [0.5] * 4).startswith(b"HTTP/1.1 403")
        # Past it: silent for 3 s, and the server has hung up without an answer.
        started = time.monotonic()
        assert _post_in_pieces(port, [0.0, 3.0]) == b""
        assert time.monotonic() - started < 8
    finally:
        stop(server)
