"""The ``memfs`` command line, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MEMFS = [sys.executable, "-m", "memfs.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMFS, *args], capture_output=True, text=True, timeout=120)


def test_demo_runs_two_turns_on_the_embedded_store(tmp_path: Path) -> None:
    done = run("demo", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"store sqlite://{tmp_path}/memfs.db" in out
    assert "==> note for Dana's turn" in out
    assert '"status": "saved"' in out
    assert '"status": "skipped"' in out  # Carol's turn had the rules read-only
    assert "income/self-employed.md" in out
    assert '"origin": "conversation"' in out
    assert (tmp_path / "memfs.db").exists()
    assert list((tmp_path / "turns").iterdir()) == []  # working copies are cleaned up


def test_bad_store_url_is_a_one_line_error_with_the_config_exit_code(tmp_path: Path) -> None:
    done = run("demo", "--state-dir", str(tmp_path), "--store", "nope://x")
    assert done.returncode == 78
    assert done.stderr.startswith("memfs: error: unknown store URL scheme")
    assert "Traceback" not in done.stderr
