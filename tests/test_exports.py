"""The public names: what ``memfs`` and ``memfs.testing`` export, and where they are documented."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

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


# The engine's side that the daemon plugs into: named in signatures of
# memfs.Memory/memfs.Turn, imported from memfs.engine by the daemon, never
# built or named by an app.
ENGINE_INSIDES = {"MountState", "Owner", "Source", "TurnPlan", "TurnState", "Workspace"}


def _memfs_types(annotation: object) -> set[type]:
    """The memfs classes an annotation names, looking inside unions and generics."""
    found: set[type] = set()
    for arg in typing.get_args(annotation):
        found |= _memfs_types(arg)
    if isinstance(annotation, type) and annotation.__module__.startswith("memfs"):
        found.add(annotation)
    return found


def _signature_types(name: str, value: object) -> dict[type, str]:
    """Each memfs class a parameter or return of ``value`` (or of its methods) names -> where."""
    functions: list[tuple[str, Any]] = []
    if inspect.isclass(value):
        for attr, member in inspect.getmembers(value):
            if attr.startswith("_") and attr != "__init__":
                continue
            member = member.fget if isinstance(member, property) else member
            # pydantic's own methods (copy, model_dump, ...) are not memfs's API.
            if inspect.isfunction(member) and member.__module__.startswith("memfs"):
                functions.append((f"{name}.{attr}", member))
    elif inspect.isfunction(value):
        functions.append((name, value))
    found: dict[type, str] = {}
    for where, function in functions:
        for hint in typing.get_type_hints(function).values():
            for cls in _memfs_types(hint):
                found.setdefault(cls, where)
    return found


def test_every_memfs_type_a_public_signature_names_is_a_name_of_memfs_too() -> None:
    exported = {id(getattr(memfs, name)) for name in memfs.__all__}
    missing = {
        f"{cls.__module__}.{cls.__name__} (in {where})"
        for name in memfs.__all__
        if name != "__version__"
        for cls, where in _signature_types(name, getattr(memfs, name)).items()
        if id(cls) not in exported and cls.__name__ not in ENGINE_INSIDES
    }
    assert not missing, sorted(missing)


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("Forgot", "memfs.core.models"),
        ("ManualHold", "memfs.engine.plan"),
        ("Members", "memfs.stores.base"),
        ("WaitingChange", "memfs.core.review"),
        ("MemorySpec", "memfs.core.specs"),
        ("Role", "memfs.core.roles"),
        ("ReviewMode", "memfs.core.review"),
    ],
)
def test_what_an_app_names_when_it_acts_reviews_or_commits_is_a_name_of_memfs(
    name: str, module: str
) -> None:
    assert memfs._EXPORTS[name] == module
    assert getattr(memfs, name) is getattr(importlib.import_module(module), name)
