"""Every config key the daemon accepts and every access-log field is documented.

The keys come from the loader's own models (``memfsd.config`` and
``memfs.Limits``) and the fields from the access log's models, so a key or
field added without its documentation fails here.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from memfs.api.models import FileAccess
from memfs.core.models import Limits, TraceFile
from memfsd import access
from memfsd.config import ByTable, DaemonConfig, MemoryTable

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = (REPO / "systemd" / "memfs.toml.example").read_text()
DAEMON_MD = (REPO / "docs" / "daemon.md").read_text()
TABLES = {"limits": "[limits]", "memory": "[[memory]]"}  # keys that are TOML tables


def section(markdown: str, title: str) -> str:
    """The text of the ``## title`` section, up to the next ``## ``; "" if there is none."""
    start = markdown.find(f"\n## {title}\n")
    if start == -1:
        return ""
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end != -1 else None]


CONFIG_MD = section(DAEMON_MD, "Configuration")
ACCESS_MD = section(DAEMON_MD, "The access log")


def keys(model: type[BaseModel]) -> list[str]:
    return sorted(model.model_fields)


def set_in_example(key: str, text: str = EXAMPLE) -> bool:
    """``key = ...`` on a line of the example, set or commented out."""
    return re.search(rf"^#? ?{re.escape(key)} = ", text, re.MULTILINE) is not None


@pytest.mark.parametrize("key", keys(DaemonConfig) + keys(Limits) + keys(MemoryTable))
def test_every_config_key_is_in_the_example_config(key: str) -> None:
    if key in TABLES:
        assert TABLES[key] in EXAMPLE
    else:
        assert set_in_example(key), f"systemd/memfs.toml.example does not show {key!r}"


@pytest.mark.parametrize("key", keys(ByTable))
def test_every_by_field_is_in_the_example_config(key: str) -> None:
    [line] = [line for line in EXAMPLE.splitlines() if line.startswith("by = {")]
    assert re.search(rf"[{{,] {key} = ", line), f"the example's `by` table lacks {key!r}"


@pytest.mark.parametrize("key", keys(DaemonConfig) + keys(Limits) + keys(MemoryTable))
def test_every_config_key_has_a_row_in_the_daemon_docs(key: str) -> None:
    assert f"| `{key}` |" in CONFIG_MD, f"docs/daemon.md's Configuration has no row for {key!r}"


@pytest.mark.parametrize("key", keys(ByTable))
def test_every_by_field_is_described_in_the_daemon_docs(key: str) -> None:
    assert f"`by.{key}`" in CONFIG_MD


def test_the_overlay_records_what_the_api_and_the_trace_carry() -> None:
    recorded = {field.name for field in dataclasses.fields(access.FileAccess)}
    assert recorded == set(FileAccess.model_fields) == set(TraceFile.model_fields)


@pytest.mark.parametrize("field", sorted(FileAccess.model_fields))
def test_every_access_log_field_has_a_row_in_the_daemon_docs(field: str) -> None:
    assert f"| `{field}` |" in ACCESS_MD, f"docs/daemon.md's access log has no row for {field!r}"


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a markdown text."""
    found = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_the_design_of_record_is_in_the_repo_and_the_readme_points_to_it() -> None:
    readme = (REPO / "README.md").read_text()
    assert "docs/design.md" in readme
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        assert "../shared" not in doc.read_text(), f"{doc.name} points outside the repository"


def test_every_link_in_the_design_names_a_doc_and_heading_that_exist() -> None:
    design = (REPO / "docs" / "design.md").read_text()
    links = re.findall(r"\]\(([^)#]+\.md)(?:#([^)]+))?\)", design)
    assert links
    for target, anchor in links:
        doc = REPO / "docs" / target
        assert doc.is_file(), target
        if anchor:
            assert anchor in anchors(doc.read_text()), f"{target}#{anchor}"
