"""Every Python snippet in README.md runs as written, on a fresh machine.

Each ```python block runs in its own interpreter, in an empty temporary
folder, with no ``MEMFS_*`` variable of the developer's. A block whose
first line says ``# with the daemon running`` gets one: a real daemon
(:func:`memfs.testing.mounted_daemon`) configured by the shipped
``systemd/memfs.toml.example``, its socket in ``$MEMFS_SOCKET``: those run in
``tests/test_readme_daemon.py``, with the FUSE tests.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import trio

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
NEEDS_DAEMON = "# with the daemon running"


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line, code) of every ```python block of ``text``."""
    blocks = []
    for found in re.finditer(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL):
        blocks.append((text.count("\n", 0, found.start()) + 1, found.group(1)))
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_its_snippets() -> None:
    assert len(BLOCKS) >= 3
    assert sum(code.startswith(NEEDS_DAEMON) for _, code in BLOCKS) >= 1


async def run_snippet(code: str, cwd: Path, env: dict[str, str]) -> None:
    done = await trio.run_process(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, (
        f"the snippet failed:\n{code}\n--- output\n{done.stdout.decode()}{done.stderr.decode()}"
    )


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}


@pytest.mark.parametrize(
    "code",
    [code for _, code in BLOCKS if not code.startswith(NEEDS_DAEMON)],
    ids=[f"README.md:{line}" for line, code in BLOCKS if not code.startswith(NEEDS_DAEMON)],
)
async def test_readme_snippet_runs_as_written(code: str, tmp_path: Path) -> None:
    await run_snippet(code, tmp_path, clean_env())
