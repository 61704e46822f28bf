"""The README's snippets that need a daemon run against one configured by the shipped example."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfsd.config import load_config
from tests.daemon_harness import running_daemon
from tests.test_readme import BLOCKS, NEEDS_DAEMON, ROOT, clean_env, run_snippet

EXAMPLE_CONFIG = ROOT / "systemd" / "memfs.toml.example"


@pytest.mark.parametrize(
    "code",
    [code for _, code in BLOCKS if code.startswith(NEEDS_DAEMON)],
    ids=[f"README.md:{line}" for line, code in BLOCKS if code.startswith(NEEDS_DAEMON)],
)
async def test_readme_snippet_runs_against_the_example_config(code: str, tmp_path: Path) -> None:
    config = load_config(EXAMPLE_CONFIG)
    async with running_daemon(tmp_path, config.specs(), limits=config.limits) as daemon:
        env = clean_env() | {"MEMFS_SOCKET": str(daemon.socket)}
        work = tmp_path / "work"
        work.mkdir()
        await run_snippet(code, work, env)
