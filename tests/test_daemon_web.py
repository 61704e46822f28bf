"""The daemon serves the Memory tab on ``web_listen``: over its own store, TLS off loopback, and
refusing to start (by name, with nothing mounted) when it cannot."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memfs.core.errors import ConfigError
from memfs.core.members import Member
from memfs.core.models import Limits
from memfs.stores.base import Members
from memfs.stores.folder import FolderStore
from memfs.stores.memory import MemoryStore
from memfsd.main import Settings, bind_memory_tab
from tests.daemon_harness import require_fuse, running_daemon
from tests.test_daemon_process import CONFIG, DaemonProcess, root
from tests.test_web_cli import _post_in_pieces
from tests.web_tls import free_port, listening_ports, self_signed, trusting

__all__ = ["root"]  # the fixture, used by name

MEMFS = [sys.executable, "-m", "memfs.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMFS, *args], capture_output=True, text=True, timeout=60)


def token_for(store: str, user: str = "u_ada", role: str = "member", org: str = "bank_17") -> str:
    """A sign-in token made as the operator does: ``memfs people add``, ``memfs token create``."""
    added = cli("people", "add", user, "--org", org, "--role", role, "--store", store)
    assert added.returncode == 0, added.stderr
    made = cli("token", "create", user, "--org", org, "--store", store)
    assert made.returncode == 0, made.stderr
    token: str = json.loads(made.stdout)["token"]
    return token


def store_of(root: Path) -> str:
    return f"sqlite://{root / 'state' / 'memfs.db'}"


def mounted(path: Path) -> bool:
    return str(path) in Path("/proc/self/mountinfo").read_text()


def refused(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.ConnectError:
        return True
    return False


def daemon_run(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``memfs daemon`` with the suite's config and ``args``, expected to stop at start."""
    config = root / "memfs.toml"
    config.write_text(CONFIG.format(root=root))
    return subprocess.run(
        [*MEMFS, "daemon", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_the_daemon_serves_the_memory_tab_to_a_token_made_in_its_store_and_401_without(
    root: Path,
) -> None:
    port = free_port()
    daemon = DaemonProcess(root, env={"MEMFS_WEB_LISTEN": f"127.0.0.1:{port}"})
    try:
        token = token_for(store_of(root))
        url = f"http://127.0.0.1:{port}/api/v1/me"
        anonymous = httpx.get(url, timeout=10)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        me = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert me.status_code == 200
        assert me.json() == {"id": "u_ada", "org": "bank_17", "role": "member", "label": None}
        assert listening_ports(daemon.proc.pid) == {port}
    finally:
        assert daemon.stop() == 0
    assert refused(url)  # stopped with the daemon
    assert not mounted(root / "mnt")
    log = (root / "daemon.log").read_text()
    assert f"the Memory tab on http://127.0.0.1:{port} stopped" in log
    assert "Traceback" not in log


def test_an_empty_web_listen_leaves_the_daemon_listening_on_no_tcp_port(root: Path) -> None:
    daemon = DaemonProcess(root, env={"MEMFS_WEB_LISTEN": ""})
    try:
        assert listening_ports(daemon.proc.pid) == set()
    finally:
        assert daemon.stop() == 0
    assert "Memory tab" not in (root / "daemon.log").read_text()


def test_the_daemon_applies_web_max_body_bytes_to_the_memory_tab_at_and_past_it(
    root: Path,
) -> None:
    port = free_port()
    daemon = DaemonProcess(
        root,
        env={"MEMFS_WEB_LISTEN": f"127.0.0.1:{port}"},
        config="web_max_body_bytes = 4096\n" + CONFIG,
    )
    try:
        token = token_for(store_of(root))
        url = f"http://127.0.0.1:{port}/api/v1/spaces/lending-rules/files/limit.md"
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        empty = len(json.dumps({"content": ""}))
        at = httpx.put(url, content=json.dumps({"content": "a" * (4096 - empty)}), headers=headers)
        assert at.status_code == 200, at.text
        past = httpx.put(
            url, content=json.dumps({"content": "b" * (4097 - empty)}), headers=headers
        )
        assert past.status_code == 413
        assert past.json()["error"] == "TooLarge"
        got = httpx.get(url, headers=headers)
        assert got.json()["text"] == "a" * (4096 - empty)  # the refused body changed nothing
    finally:
        assert daemon.stop() == 0


def test_the_daemon_hangs_up_on_a_request_silent_past_web_read_timeout_seconds(
    root: Path,
) -> None:
    port = free_port()
    daemon = DaemonProcess(
        root,
        env={"MEMFS_WEB_LISTEN": f"127.0.0.1:{port}"},
        config="web_read_timeout_seconds = 1.5\n" + CONFIG,
    )
    try:
        assert _post_in_pieces(port, [0.5] * 4).startswith(b"HTTP/1.1 403")
        assert _post_in_pieces(port, [0.0, 3.0]) == b""
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_non_loopback_web_listen_without_tls_stops_the_start_naming_web_tls_cert(
    root: Path, how: str
) -> None:
    listen = f"0.0.0.0:{free_port()}"
    if how == "flag":
        done = daemon_run(root, "--web-listen", listen)
    else:
        done = daemon_run(root, env={"MEMFS_WEB_LISTEN": listen})
    assert done.returncode == ConfigError.exit_code
    assert done.stderr.startswith("memfs: error: web_listen")
    assert "web_tls_cert" in done.stderr and "web_tls_key" in done.stderr
    assert "Traceback" not in done.stderr
    assert not mounted(root / "mnt")
    assert not (root / "state").exists()  # refused before anything was made


def test_a_web_listen_port_in_use_stops_the_start_clearly_and_leaves_no_mount(
    root: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = daemon_run(root, "--web-listen", f"127.0.0.1:{port}")
    assert done.returncode == ConfigError.exit_code
    assert done.stderr == (
        f"memfs: error: web_listen '127.0.0.1:{port}': cannot listen there: that port is "
        "already in use (another memfs daemon or `memfs web`?); choose another address, "
        'or web_listen = "" to serve no Memory tab\n'
    )
    assert not mounted(root / "mnt")
    assert not (root / "state" / "memfs.sock").exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_with_a_certificate_and_key_the_memory_tab_speaks_https_only(
    root: Path, tmp_path_factory: pytest.TempPathFactory, host: str
) -> None:
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    port = free_port()
    daemon = DaemonProcess(
        root,
        env={
            "MEMFS_WEB_LISTEN": f"{host}:{port}",
            "MEMFS_WEB_TLS_CERT": str(cert),
            "MEMFS_WEB_TLS_KEY": str(key),
        },
    )
    try:
        token = token_for(store_of(root))
        url = f"https://127.0.0.1:{port}/api/v1/me"
        assert httpx.get(url, verify=trusting(cert), timeout=10).status_code == 401
        me = httpx.get(
            url, headers={"Authorization": f"Bearer {token}"}, verify=trusting(cert), timeout=10
        )
        assert me.json()["id"] == "u_ada"
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/api/v1/me", timeout=10)  # no plain http
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(url, timeout=10)  # a client that does not trust the certificate
    finally:
        assert daemon.stop() == 0
    assert "https://" in (root / "daemon.log").read_text()


def test_tls_files_that_do_not_load_stop_the_start_naming_web_tls_cert(root: Path) -> None:
    cert, key = self_signed(root)
    key.write_text("not a key\n")
    done = daemon_run(
        root,
        "--web-listen",
        f"127.0.0.1:{free_port()}",
        "--web-tls-cert",
        str(cert),
        "--web-tls-key",
        str(key),
    )
    assert done.returncode == ConfigError.exit_code
    assert done.stderr.startswith(f"memfs: error: web_tls_cert '{cert}' and web_tls_key '{key}'")
    assert "Traceback" not in done.stderr
    assert not mounted(root / "mnt")


def test_an_explicit_web_listen_over_the_folder_store_stops_the_start_naming_it(
    root: Path,
) -> None:
    done = daemon_run(
        root,
        "--store",
        f"folder://{root / 'folder'}",
        "--web-listen",
        f"127.0.0.1:{free_port()}",
    )
    assert done.returncode == ConfigError.exit_code
    assert done.stderr.startswith("memfs: error: web_listen '127.0.0.1:")
    assert "keeps no members, history or review" in done.stderr
    assert not mounted(root / "mnt")


def test_the_folder_store_with_web_listen_left_at_its_default_runs_without_the_tab(
    root: Path,
) -> None:
    config = root / "memfs.toml"
    config.write_text(CONFIG.format(root=root))
    env = {k: v for k, v in os.environ.items() if k != "MEMFS_WEB_LISTEN"}
    log = root / "daemon.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*MEMFS, "daemon", "--config", str(config), "--store", f"folder://{root / 'f'}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 30
        while not (root / "state" / "memfs.sock").exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        while "memfs mounted at" not in log.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert listening_ports(proc.pid) == set()
        assert "the Memory tab is off: the store folder://" in log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def settings(tmp_path: Path, *, listen: str, required: bool) -> Settings:
    return Settings(
        mount_root=tmp_path / "mnt",
        state_dir=tmp_path / "state",
        store="folder://x",
        specs=[],
        limits=Limits(),
        socket=tmp_path / "state" / "memfs.sock",
        web_listen=listen,
        web_required=required,
    )


def test_over_an_unmanaged_store_the_tab_is_off_with_a_warning_unless_asked_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = FolderStore(tmp_path / "folder")
    listen = f"127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING, logger="memfsd"):
        assert bind_memory_tab(settings(tmp_path, listen=listen, required=False), folder) is None
    assert "the Memory tab is off" in caplog.text
    with pytest.raises(ConfigError, match=r"web_listen '127\.0\.0\.1:\d+': the store folder://x"):
        bind_memory_tab(settings(tmp_path, listen=listen, required=True), folder)
    assert bind_memory_tab(settings(tmp_path, listen="", required=False), MemoryStore()) is None
    bound = bind_memory_tab(settings(tmp_path, listen=listen, required=True), MemoryStore())
    assert bound is not None
    try:
        assert bound.url == f"http://{listen}"
    finally:
        bound.close()


async def test_mounted_daemon_serves_the_tab_over_the_daemons_own_store_when_given_web_listen(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with running_daemon(tmp_path, [], web_listen=f"127.0.0.1:{port}") as daemon:
        store = daemon.service.memory.store  # the daemon's own: what its turns use
        assert isinstance(store, Members)
        await store.add_member(Member(id="u_ada", org="bank_17", role="viewer"), by=None)
        issued = await store.create_token("u_ada", "bank_17", by=None)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            me = await client.get("/api/v1/me", headers={"Authorization": f"Bearer {issued.token}"})
        assert me.json()["role"] == "viewer"
    assert refused(f"http://127.0.0.1:{port}/api/v1/me")


async def test_mounted_daemon_serves_no_tab_by_default(tmp_path: Path) -> None:
    require_fuse()
    before = listening_ports(os.getpid())
    async with running_daemon(tmp_path, []) as daemon:
        assert daemon.settings.web_listen == ""
        assert listening_ports(os.getpid()) == before
