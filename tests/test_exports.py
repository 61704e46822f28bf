"""The public names: what ``memfs`` and ``memfs.testing`` export, and where they are documented."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import memfs
import memfs.testing

ROOT = Path(__file__).resolve().parent.parent
INIT = Path(memfs.__file__)


def api_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## The Python API", 1)[1].split("\n## ", 1)[0]


def type_checking_imports() -> dict[str, str]:
    """name -> module of the ``if TYPE_CHECKING:`` re-exports in memfs/__init__.py."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    [block] = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names:
            assert alias.asname == alias.name, f"re-export {alias.name} as itself"
            found[alias.name] = node.module
    return found


def test_the_lazy_table_the_type_checker_block_and_all_name_the_same_things() -> None:
    table = memfs._EXPORTS
    assert type_checking_imports() == table
    assert sorted(memfs.__all__) == sorted([*table, "__version__"])
    assert len(set(memfs.__all__)) == len(memfs.__all__)


@pytest.mark.parametrize("name", memfs.__all__)
def test_every_public_name_imports_from_memfs_and_is_the_defining_modules_object(
    name: str,
) -> None:
    value = getattr(memfs, name)
    if name != "__version__":
        module = importlib.import_module(memfs._EXPORTS[name])
        assert getattr(module, name) is value
    namespace: dict[str, object] = {}
    exec(f"from memfs import {name}", namespace)
    assert namespace[name] is value


@pytest.mark.parametrize("name", memfs.__all__)
def test_every_public_name_is_documented_in_the_readmes_api_section(name: str) -> None:
    assert re.search(rf"`memfs\.{re.escape(name)}\b", api_section()), name


def test_memfs_testing_exports_import_and_are_documented() -> None:
    tree = ast.parse(Path(memfs.testing.__file__).read_text(encoding="utf-8"))
    names = [
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    assert len(names) >= 8
    section = api_section()
    for name in names:
        assert getattr(memfs.testing, name) is not None
        assert re.search(rf"`{re.escape(name)}`", section), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        memfs.Nope  # type: ignore[attr-defined]  # noqa: B018
    assert "Memory" in dir(memfs)


def test_every_package_under_memfs_and_the_daemon_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "memfs").rglob("__init__.py")
    }
    found |= {
        "memfsd" + "".join(f".{p}" for p in init.parent.relative_to(ROOT / "daemon").parts)
        for init in (ROOT / "daemon").rglob("__init__.py")
    }
    assert found == listed


def test_the_version_has_one_home() -> None:
    from memfs._version import __version__

    assert memfs.__version__ == __version__
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in config["project"]
    assert config["project"]["dynamic"] == ["version"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "memfs._version.__version__"
    }
    assert importlib.metadata.version("memfs") == __version__
