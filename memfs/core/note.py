"""The note: the text an agent gets every turn about the memory it carries.

For each mounted space it gives the folder, the description, whether the turn
may write, and the file list with sizes. The file list of one space is capped
(``Limits.note_file_list_bytes``, 8,000 bytes by default); past the cap the
note says how many files it left out and to list the folder for the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import Field

from memfs.core.models import Frozen, Layer

LAYER_WORDS: Mapping[Layer, str] = {
    "org": "shared memory of your organisation",
    "user": "this person's own memory, private to them",
    "dir": "a persistent folder",
}


class NoteSpace(Frozen):
    """What the note needs to know about one mount."""

    path: str
    space: str
    layer: Layer
    description: str = ""
    writable: bool = True
    files: dict[str, int] = Field(default_factory=dict)  # path -> size in bytes
    from_last_known_copy: bool = False
    extra_lines: tuple[str, ...] = ()


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def file_list(mount_path: str, files: Mapping[str, int], budget: int) -> tuple[list[str], int]:
    """The lines that fit in ``budget`` bytes (UTF-8, newlines counted), and how many did not."""
    lines: list[str] = []
    used = 0
    ordered = sorted(files)
    for index, path in enumerate(ordered):
        line = f"- {mount_path}/{path} ({human_size(files[path])})"
        cost = len(line.encode("utf-8")) + 1
        if used + cost > budget:
            return lines, len(ordered) - index
        lines.append(line)
        used += cost
    return lines, 0


def render_space(space: NoteSpace, budget: int) -> str:
    access = "you may read and edit these files" if space.writable else "read-only this turn"
    head = f"## {space.path}/ — {LAYER_WORDS[space.layer]} ({access})"
    out = [head]
    if space.layer != "dir":
        out.append(f"Space: {space.space}")
    if space.description:
        out.append(space.description.strip())
    out.extend(space.extra_lines)
    if space.from_last_known_copy:
        out.append(
            "The memory store could not be reached: these are the last files this "
            "machine loaded, and changes made this turn will not be saved."
        )
    if not space.files:
        out.append("No files yet.")
        return "\n".join(out)
    lines, left_out = file_list(space.path, space.files, budget)
    out.append(f"Files ({len(space.files)}):")
    out.extend(lines)
    if left_out:
        out.append(
            f"... and {left_out} more file{'s' if left_out != 1 else ''} not listed here; "
            f"list the folder (ls -R {space.path}) to see them all."
        )
    return "\n".join(out)


def render_note(spaces: Iterable[NoteSpace], *, file_list_bytes: int = 8_000) -> str:
    """The whole note for one turn; an empty string when nothing is mounted."""
    sections = [render_space(space, file_list_bytes) for space in spaces]
    if not sections:
        return ""
    intro = (
        "# Memory\n"
        "Your memory is plain files in the folders below, relative to your working "
        "directory. Read them with cat or grep; edit them with ordinary tools. What you "
        "change in a writable folder is kept after this turn."
    )
    return "\n\n".join([intro, *sections]) + "\n"


__all__ = ["LAYER_WORDS", "NoteSpace", "file_list", "human_size", "render_note", "render_space"]
