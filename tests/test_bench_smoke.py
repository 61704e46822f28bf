"""Smoke test for the benchmark suite: ``bench/run.py --quick`` runs and prints its table.

No timings are asserted; this only checks that the suite runs end to end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon_harness import require_fuse

RUNNER = Path(__file__).resolve().parent.parent / "bench" / "run.py"


def test_bench_quick_runs(tmp_path: Path) -> None:
    require_fuse()
    if shutil.which("fuse-overlayfs") is None and not os.environ.get("CI"):
        pytest.skip("fuse-overlayfs is missing and CI is unset (apt-get install -y fuse-overlayfs)")
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--quick", "--runs", "1", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "| grep -r" in done.stdout
    assert "| workload | native | fuse-overlayfs | pyfuse3 floor | memfs |" in done.stdout
    assert "| FUSE requests memfs served (last run) |" in done.stdout
    assert "skipped" not in done.stdout.split("| workload")[1].split("\n")[2]
