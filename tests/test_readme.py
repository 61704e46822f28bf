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


def section(title: str) -> str:
    """The README's ``## title`` section, up to the next ``## ``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


SIGNING_IN = "Signing in to the Memory tab"


def test_the_readme_signs_in_at_the_address_the_daemon_and_the_demo_serve_by_default() -> None:
    import inspect

    from memfs.cli import demo
    from memfs.core.defaults import DEFAULT_WEB_LISTEN
    from memfs.demo import run_daemon_demo
    from memfsd.config import DaemonConfig

    login = f"http://{DEFAULT_WEB_LISTEN}/login"
    assert login == "http://127.0.0.1:8330/login"
    assert DaemonConfig().web_listen == DEFAULT_WEB_LISTEN
    assert inspect.signature(run_daemon_demo).parameters["web_listen"].default == DEFAULT_WEB_LISTEN
    [option] = [p for p in demo.params if p.name == "web_listen"]
    assert option.default == DEFAULT_WEB_LISTEN
    assert f"open `{login}`" in section(SIGNING_IN)
    # The main command's paragraph says what the demo prints for Ada.
    demo_paragraph = " ".join(section("The two commands").split())  # lines wrap anywhere
    assert login in demo_paragraph and "Ada" in demo_paragraph
    assert "memfs people add u_ada --org bank_17 --role member" in demo_paragraph


def test_the_readme_sign_in_commands_run_as_written_and_make_a_token(tmp_path: Path) -> None:
    import json
    import shlex
    import subprocess

    [block] = re.findall(r"^```sh\n(.*?)^```$", section(SIGNING_IN), re.MULTILINE | re.DOTALL)
    store = f"sqlite://{tmp_path / 'memfs.db'}"
    lines = [shlex.split(line, comments=True) for line in block.splitlines()]
    assert [line[:3] for line in lines] == [
        ["memfs", "people", "add"],
        ["memfs", "token", "create"],
    ]
    for line in lines:
        done = subprocess.run(
            [sys.executable, "-m", "memfs.cli", *line[1:], "--store", store],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    issued = json.loads(done.stdout)
    assert issued["token"].startswith("memfs_")
    assert (issued["id"], issued["org"], issued["role"]) == ("ada", "bank_17", "member")
