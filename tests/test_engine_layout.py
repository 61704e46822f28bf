"""The turn engine's shape: its modules import no cycle, and nobody reaches into ``Memory``.

Static checks over the source (``ast``), plus each engine module imported alone
in a fresh interpreter, so an import that only works in one order fails here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import memfs
import memfsd

ENGINE = Path(memfs.__file__).parent / "engine"
SOURCES = [Path(memfs.__file__).parent, Path(memfsd.__file__).parent]
ENGINE_MODULES = sorted(
    f"memfs.engine.{path.stem}" for path in ENGINE.glob("*.py") if path.stem != "__init__"
)


def imported(path: Path, package: str) -> set[str]:
    """Every module a file imports, ``TYPE_CHECKING`` blocks included, by absolute name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            # ``from memfs.engine import copymode`` imports the module memfs.engine.copymode.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def engine_graph() -> dict[str, set[str]]:
    modules = set(ENGINE_MODULES)
    return {
        name: imported(ENGINE / f"{name.rsplit('.', 1)[1]}.py", "memfs.engine") & modules
        for name in ENGINE_MODULES
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each as the path that closes it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_the_cycle_finder_finds_a_cycle_it_is_given() -> None:
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_engine_imports_a_cycle() -> None:
    graph = engine_graph()
    assert "memfs.engine.turns" in graph and "memfs.engine.workspace" in graph
    assert cycles(graph) == []
    # The workspace protocol is typed on values, never on the engine's live objects.
    assert "memfs.engine.turns" not in graph["memfs.engine.workspace"]


@pytest.mark.parametrize("module", ENGINE_MODULES)
def test_each_engine_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def memory_privates() -> set[str]:
    """The private names ``Memory`` defines: its methods and the attributes it sets."""
    tree = ast.parse((ENGINE / "turns.py").read_text())
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Memory"]
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, ast.Store)
        ):
            names.add(node.attr)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def private_calls(path: Path, privates: set[str]) -> list[str]:
    """Uses of ``privates`` on anything but ``self``: a reach into another object's privates.

    A class may name its own privates as it likes (``self._store``); what is
    flagged is ``memory._end()``, ``self._memory._store(...)`` and the like.
    """
    return [
        f"{path}:{node.lineno}: .{node.attr}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in privates
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]


def test_the_private_call_finder_sees_a_call_from_another_class(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "class Memory:\n    def a(self):\n        self._end()\n"
        "class Turn:\n    def b(self):\n        self._memory._end()\n"
    )
    assert private_calls(sample, {"_end"}) == [f"{sample}:6: ._end"]


def test_nothing_calls_a_private_memory_method_from_outside_its_class() -> None:
    privates = memory_privates()
    assert {"_end", "_store", "_open"} <= privates
    files = [path for root in SOURCES for path in sorted(root.rglob("*.py"))]
    tests = Path(__file__).parent
    files += sorted(tests.glob("*.py"))
    found = [
        hit for path in files if path != Path(__file__) for hit in private_calls(path, privates)
    ]
    assert found == []
