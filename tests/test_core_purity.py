"""``memfs/core`` is pure: no trio, no database driver, no pyfuse3, nothing above it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memfs.core

CORE = Path(memfs.core.__file__).parent
FORBIDDEN = {"trio", "sqlite3", "psycopg", "psycopg_pool", "pyfuse3", "memfsd", "anyio", "asyncio"}
ALLOWED_MEMFS = "memfs.core"


def imported_modules(source: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


def test_core_modules_import_no_io_library_and_nothing_above_the_core() -> None:
    modules = sorted(CORE.glob("*.py"))
    assert len(modules) >= 8
    for module in modules:
        for name in imported_modules(module):
            root = name.split(".")[0]
            assert root not in FORBIDDEN, f"{module.name} imports {name}"
            if root == "memfs":
                assert name.startswith(ALLOWED_MEMFS), f"{module.name} imports {name}"


def test_core_loads_with_io_libraries_blocked() -> None:
    # Load the core without memfs/__init__ (which wires in trio for the engine)
    # and with every forbidden module made unimportable.
    script = f"""
import importlib.abc, sys, types
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {sorted(FORBIDDEN)!r}:
            raise ImportError('blocked: ' + name)
        return None
sys.meta_path.insert(0, Block())
pkg = types.ModuleType('memfs'); pkg.__path__ = [{str(CORE.parent)!r}]
sys.modules['memfs'] = pkg
import memfs.core.errors, memfs.core.names, memfs.core.models, memfs.core.diff
import memfs.core.limits, memfs.core.note, memfs.core.specs, memfs.core.policy
loaded = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r})
print(loaded)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
