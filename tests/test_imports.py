"""Imports point down: a light core and CLI, and memfs/ needs memfsd only where it runs it.

Each check runs in a fresh interpreter, since this test process has long
imported everything.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import memfs

MEMFS = Path(memfs.__file__).parent
# What would make `import memfs.core` cost a web stack, an event loop or a daemon.
HEAVY = {
    "trio",
    "anyio",
    "httpx",
    "fastapi",
    "starlette",
    "hypercorn",
    "pydantic_settings",
    "click",
    "pyfuse3",
    "watchfiles",
    "sqlite3",
    "memfsd",
}


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def roots(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_import_memfs_core_and_all_its_modules_loads_no_web_stack_event_loop_or_daemon() -> None:
    core = sorted(f"memfs.core.{p.stem}" for p in (MEMFS / "core").glob("*.py"))
    assert len(core) >= 10
    loaded = loaded_after("import memfs.core\n" + "\n".join(f"import {m}" for m in core))
    assert roots(loaded) & HEAVY == set()
    ours = {m for m in loaded if m.split(".")[0] == "memfs"}
    assert ours - {"memfs", "memfs._version"} <= {"memfs.core", *core}


def test_memfs_help_loads_neither_the_daemon_the_api_nor_the_client() -> None:
    loaded = loaded_after(
        "import contextlib, io, sys\n"
        "from memfs.cli import main\n"
        "sys.argv = ['memfs', '--help']\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main()\n"
    )
    assert "memfs.cli" in loaded and "click" in loaded
    assert roots(loaded) & {"memfsd", "fastapi", "starlette", "httpx", "trio", "pyfuse3"} == set()
    assert {m for m in loaded if m == "memfs.api" or m.startswith("memfs.api.")} == set()
    assert {"memfs.client", "memfs.engine", "memfs.stores"} & loaded == set()


def test_memfs_public_names_still_resolve_on_first_use() -> None:
    loaded = loaded_after("import memfs\nassert memfs.Memory.__name__ == 'Memory'")
    assert "memfs.engine.turns" in loaded


def imports_of(tree: ast.AST) -> list[tuple[str, str]]:
    """(module, where) of every import in ``tree``: where is the enclosing function's name,
    ``<module>`` at module level, or ``TYPE_CHECKING`` in such a block (never run)."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and where == "<module>":
                inner = child.name
            elif isinstance(child, ast.If) and ast.unparse(child.test) == "TYPE_CHECKING":
                inner = "TYPE_CHECKING"
            if isinstance(child, ast.Import):
                found.extend((alias.name, where) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.module, where))
            visit(child, inner)

    visit(tree, "<module>")
    return found


# The places in memfs/ that run the daemon's own code, each inside the one
# function that needs it (so importing the module never loads memfsd): the
# `memfs daemon` command, the people's commands reading the daemon's
# memfs.toml for its [limits], and the test helper that runs a daemon (whose
# result names the daemon's types for a type checker only).
RUNS_THE_DAEMON = {
    ("cli.py", "daemon"),
    ("cli_manage.py", "config_limits"),
    ("testing/mount.py", "mounted_daemon"),
    ("testing/mount.py", "TYPE_CHECKING"),
}


def test_nothing_in_memfs_imports_memfsd_except_the_commands_that_run_it() -> None:
    seen: set[tuple[str, str]] = set()
    for source in sorted(MEMFS.rglob("*.py")):
        name = source.relative_to(MEMFS).as_posix()
        for module, where in imports_of(ast.parse(source.read_text(), str(source))):
            if module.split(".")[0] == "memfsd":
                assert (name, where) in RUNS_THE_DAEMON, f"{name} ({where}) imports {module}"
                seen.add((name, where))
    assert seen == RUNS_THE_DAEMON  # a stale entry here would excuse a future import


def test_the_client_speaks_http_with_the_standard_library_alone() -> None:
    loaded = loaded_after("import memfs.client")
    assert "http.client" in loaded
    assert roots(loaded) & {"httpx", "httpcore", "trio", "fastapi", "starlette", "memfsd"} == set()


def test_memfs_api_my_memory_is_the_handler_wherever_it_is_imported_from() -> None:
    loaded = loaded_after(
        "import memfs.api, memfs.api.personal\n"
        "assert callable(memfs.api.my_memory)\n"
        "from memfs.api import my_memory\n"
        "assert my_memory is memfs.api.personal.my_memory\n"
    )
    assert "memfs.api.personal" in loaded
