"""The ``memfs`` command line, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.daemon_harness import require_fuse
from tests.postgres_fixtures import Databases
from tests.web_tls import free_port

MEMFS = [sys.executable, "-m", "memfs.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMFS, *args], capture_output=True, text=True, timeout=120)


def test_demo_runs_two_turns_on_the_daemon_with_the_embedded_store(tmp_path: Path) -> None:
    require_fuse()
    port = free_port()  # not 8330: tests run side by side, and a real demo may hold it
    done = run("demo", "--state-dir", str(tmp_path), "--web-listen", f"127.0.0.1:{port}", "--exit")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"store sqlite://{tmp_path}/memfs.db, FUSE daemon" in out
    assert f"==> note for Dana's turn (mounted at {tmp_path}/mnt/demo-dana)" in out
    assert "Read-only file system" in out  # Carol's agent hit EROFS on the rules
    assert '"status": "skipped"' in out
    assert "==> access log of Carol's turn" in out
    assert "==> Ada (member) approves change" in out  # Dana's rule waited for a person
    assert '"approved_by": {' in out
    # Carol read the approved rule, and the log names the exact revision she read.
    carol_log = out.split("==> access log of Carol's turn")[1].split("==>")[0]
    assert '"read": "' in carol_log
    assert '"origin": "conversation"' in out
    # Then Ada, the reviewer, may sign in: the tab's address and her token.
    tab = out.split("==> the Memory tab: Ada (member of bank_17) signs in\n")[1]
    assert tab.startswith(f"Open http://127.0.0.1:{port}/login and paste her token")
    assert re.search(r"^memfs_[\w-]{43}$", tab, re.MULTILINE)
    assert "==> the daemon keeps running" not in out  # --exit
    assert not (tmp_path / "memfs.sock").exists()  # the daemon stopped cleanly
    # What the demo itself writes into state_dir is private too: the daemon's
    # log names sessions and spaces, the config the store.
    for name in ("daemon.log", "demo.toml", "memfs.db"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def test_demo_in_copy_mode_needs_no_fuse(tmp_path: Path) -> None:
    done = run("demo", "--state-dir", str(tmp_path), "--copy-mode")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "copy mode" in out
    assert '"status": "skipped"' in out
    assert "income/self-employed.md" in out
    assert list((tmp_path / "turns").iterdir()) == []  # working copies are cleaned up


def test_copy_mode_demo_never_says_carol_wrote_the_rules_and_says_what_root_could_do(
    tmp_path: Path,
) -> None:
    done = run("demo", "--state-dir", str(tmp_path), "--copy-mode")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "wrote the rules" not in out
    carol = json.loads(out.split("==> result of Carol's turn\n")[1].split("\n==>")[0])
    rules = carol["spaces"]["lending-rules"]
    assert rules["status"] == "skipped"
    history = json.loads(out.split("==> history of lending-rules/income/self-employed.md\n")[1])
    assert [r["provenance"]["session"] for r in history] == ["demo-dana"]  # nothing from Carol
    if os.geteuid() == 0:
        # A read-only copy has no write bits, which root ignores: the demo says
        # so, and that the turn discarded what her shell changed.
        assert rules["not_saved"] == ["income/self-employed.md"]
        note = out.split("==> copy mode cannot stop root\n")[1].split("\n==>")[0]
        assert "root (this demo's user) ignores them" in note
        assert "changed the copy (lending-rules/income/self-employed.md)" in note
        assert "Ending the turn discarded that change" in note
    else:
        assert "could not write the rules" in out
        assert "copy mode cannot stop root" not in out


def test_bad_store_url_is_a_one_line_error_with_the_config_exit_code(tmp_path: Path) -> None:
    done = run("demo", "--state-dir", str(tmp_path), "--store", "nope://x")
    assert done.returncode == 78
    assert done.stderr.startswith("memfs: error: unknown store URL scheme")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_the_demo_keeps_the_daemon_and_the_memory_tab_running_for_ada_until_stopped(
    tmp_path: Path, sig: signal.Signals
) -> None:
    require_fuse()
    port = free_port()
    demo = subprocess.Popen(
        [*MEMFS, "demo", "--state-dir", str(tmp_path), "--web-listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert demo.stdout is not None
        out = ""
        deadline = time.monotonic() + 120
        while "==> the daemon keeps running" not in out:
            line = demo.stdout.readline()
            assert line, f"the demo ended: {out}{demo.stderr.read() if demo.stderr else ''}"
            assert time.monotonic() < deadline
            out += line
        [token] = re.findall(r"^(memfs_[\w-]{43})$", out, re.MULTILINE)
        assert f"Open http://127.0.0.1:{port}/login" in out
        # The story is over and the daemon still serves: the mount and the tab.
        time.sleep(0.5)
        assert demo.poll() is None
        assert (tmp_path / "memfs.sock").exists()
        me = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/me",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert me.json() == {"id": "u_ada", "org": "bank_17", "role": "member", "label": "Ada"}
        waiting = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/spaces/lending-rules/files/income/self-employed.md",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert waiting.json()["trail"][-1]["approved_by"]["id"] == "u_ada"
        demo.send_signal(sig)
        assert demo.wait(timeout=60) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        for pipe in (demo.stdout, demo.stderr):
            if pipe is not None:
                pipe.close()
    assert not (tmp_path / "memfs.sock").exists()  # the daemon stopped with the demo
    assert str(tmp_path / "mnt") not in Path("/proc/self/mountinfo").read_text()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/api/v1/me", timeout=5)


def test_demo_runs_on_the_daemon_with_a_postgresql_store(
    tmp_path: Path, postgres_databases: Databases
) -> None:
    # The whole path on a shared store: config, the daemon's open_store, turns,
    # review and approval, history, all through postgresql://.
    require_fuse()
    url = postgres_databases.url()
    done = run("demo", "--state-dir", str(tmp_path), "--store", url, "--exit")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"store {url}, FUSE daemon" in out
    assert "==> Ada (member) approves change" in out and '"approved_by": {' in out
    assert '"origin": "conversation"' in out
    assert not (tmp_path / "memfs.db").exists()  # nothing went to the embedded store


def test_demo_in_copy_mode_runs_on_a_postgresql_store(
    tmp_path: Path, postgres_databases: Databases
) -> None:
    done = run(
        "demo", "--state-dir", str(tmp_path), "--copy-mode", "--store", postgres_databases.url()
    )
    assert done.returncode == 0, done.stderr
    history = json.loads(
        done.stdout.split("==> history of lending-rules/income/self-employed.md\n")[1]
    )
    assert [r["provenance"]["session"] for r in history] == ["demo-dana"]
