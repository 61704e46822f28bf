"""The suite is hermetic: ``MEMFS_*`` variables a developer exported change nothing it does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Tests that read MEMFS_STATE_DIR, MEMFS_STORE, MEMFS_SOCKET and MEMFS_CONFIG
# through the CLI's defaults: each of them changes what they do.
SENSITIVE = ["tests/test_cli_manage.py", "tests/test_cli_control.py"]


def test_no_memfs_variable_reaches_a_test_or_its_subprocesses() -> None:
    assert [name for name in os.environ if name.startswith("MEMFS_")] == []
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(k for k in os.environ if 'MEMFS' in k))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def run_suite_part(exported: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env |= {
        "MEMFS_STATE_DIR": str(exported / "state"),
        "MEMFS_MOUNT_ROOT": str(exported / "mnt"),
        "MEMFS_STORE": f"sqlite://{exported}/state/memfs.db",
        "MEMFS_SOCKET": str(exported / "state" / "memfs.sock"),
        "MEMFS_CONFIG": str(exported / "memfs.toml"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, *SENSITIVE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_exported_memfs_variables_change_no_outcome_and_nothing_is_written_there(
    tmp_path: Path,
) -> None:
    exported = tmp_path / "developer"
    (exported / "state").mkdir(parents=True)
    # MEMFS_CONFIG names a config this machine does not have (the developer's).
    before = sorted(p.relative_to(exported) for p in exported.rglob("*"))

    done = run_suite_part(exported)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
    assert sorted(p.relative_to(exported) for p in exported.rglob("*")) == before

    # The contrast: without tests/conftest.py the same variables do change the outcome,
    # so the run above proves the conftest, not tests that ignore the variables anyway.
    unguarded = run_suite_part(exported, "--noconftest")
    assert unguarded.returncode != 0
    assert "failed" in unguarded.stdout
