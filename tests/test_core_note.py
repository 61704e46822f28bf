"""The note an agent gets each turn."""

from __future__ import annotations

from memfs.core.note import NoteSpace, render_note


def rules(**kwargs: object) -> NoteSpace:
    fields: dict[str, object] = {
        "path": "lending-rules",
        "space": "lending-rules",
        "layer": "org",
        "description": "The bank's lending rules.",
        "files": {"income.md": 1200, "self-employed.md": 80},
    }
    fields.update(kwargs)
    return NoteSpace.model_validate(fields)


def test_note_names_each_space_its_description_access_and_files() -> None:
    note = render_note([rules(), NoteSpace(path="me", space="me", layer="user")])
    assert "## lending-rules/ — shared memory" in note
    assert "The bank's lending rules." in note
    assert "you may read and edit these files" in note
    assert "- lending-rules/income.md (1.2 KiB)" in note
    assert "- lending-rules/self-employed.md (80 B)" in note
    assert "## me/ — this person's own memory" in note
    assert "No files yet." in note


def test_note_says_when_a_space_is_read_only() -> None:
    assert "(read-only this turn)" in render_note([rules(writable=False)])


def test_note_is_empty_without_mounts() -> None:
    assert render_note([]) == ""


def file_lines(note: str) -> list[str]:
    return [line for line in note.splitlines() if line.startswith("- ")]


def test_file_list_that_fits_the_budget_exactly_is_listed_whole() -> None:
    files = {f"f{i:03}.md": 10 for i in range(10)}
    one_line = len(b"- lending-rules/f000.md (10 B)\n")
    note = render_note([rules(files=files)], file_list_bytes=one_line * 10)
    assert len(file_lines(note)) == 10
    assert "not listed" not in note


def test_file_list_past_the_budget_says_how_many_are_left_out() -> None:
    files = {f"f{i:03}.md": 10 for i in range(10)}
    one_line = len(b"- lending-rules/f000.md (10 B)\n")
    note = render_note([rules(files=files)], file_list_bytes=one_line * 10 - 1)
    assert len(file_lines(note)) == 9
    assert "... and 1 more file not listed here; list the folder (ls -R lending-rules)" in note


def test_default_budget_is_8000_bytes_per_space() -> None:
    files = {f"notes/file-{i:05}.md": 2048 for i in range(1000)}
    note = render_note([rules(files=files), rules(path="other", files=files)])
    sections = note.split("## ")[1:]
    for section in sections:
        listed = "".join(line + "\n" for line in file_lines(section))
        assert 7_900 < len(listed.encode()) <= 8_000
        assert "more files not listed here" in section


def test_note_warns_when_loaded_from_the_last_known_copy() -> None:
    note = render_note([rules(from_last_known_copy=True)])
    assert "could not be reached" in note
