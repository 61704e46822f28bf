"""The ``memfs`` command line, run as a user runs it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.daemon_harness import require_fuse
from tests.postgres_fixtures import Databases

MEMFS = [sys.executable, "-m", "memfs.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMFS, *args], capture_output=True, text=True, timeout=120)


def test_demo_runs_two_turns_on_the_daemon_with_the_embedded_store(tmp_path: Path) -> None:
    require_fuse()
    done = run("demo", "--state-dir", str(tmp_path))
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


def test_demo_runs_on_the_daemon_with_a_postgresql_store(
    tmp_path: Path, postgres_databases: Databases
) -> None:
    # The whole path on a shared store: config, the daemon's open_store, turns,
    # review and approval, history, all through postgresql://.
    require_fuse()
    url = postgres_databases.url()
    done = run("demo", "--state-dir", str(tmp_path), "--store", url)
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
