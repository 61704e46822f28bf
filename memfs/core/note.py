"""The note: the text an agent gets every turn about the memory it carries.

For each mounted space it gives the folder, the description, whether the turn
may write, and the file list with sizes. The file list of one space is capped
(``Limits.note_file_list_bytes``, 8,000 bytes by default); past the cap the
note says how many files it left out and to list the folder for the rest.

Nothing a file name, a mount path or a space description holds can start a
line or a section of the note (a name could otherwise forge a ``## ...``
section with instructions of its own in another agent's note). Names and
paths are shown as shell words, so the agent can paste them into a command:
bare when they are plain, in single quotes when they hold spaces or shell
characters, and as ``$'...'`` with every control, format or line-separator
character escaped (``$'a\\n## b.md'``) when they hold one. A description is
one line in double quotes: its line breaks and runs of white space become one
space and any other control character is escaped.

The note opens with a short memory skill (:func:`skill`): one folder per
space, plain files edited with any tool, every change saved when the turn
ends, and, when a writable space holds changes for a person, that its
section says so. Then one sentence of the limits an agent meets (links
refused, the file and space size limits of ``Limits``).

What happens to a writable space's changes is its ``saving``
(:func:`saving_for`), chosen from the space's layer, its review mode and what
the store can do: under review ``person`` a store that reviews
(``ReviewingStore``) holds the change for a person (``NOTE_LINE``); one that
cannot (the folder store, an app's own store) saves it at once, and the
space's section says so (``UNREVIEWED_LINE``) rather than promise a review
that will not happen.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field

from memfs.core.models import Frozen, Layer, Limits
from memfs.core.review import NOTE_LINE, ReviewMode, saves_at_once

Saving = Literal["at_turn_end", "after_review", "unreviewed"]
"""What becomes of a space's changes: saved as the turn ends; held for a person;
saved as the turn ends although the spec asked for review (the store has none)."""

UNREVIEWED_LINE = (
    "This store keeps no review: what you change here is saved for everyone in your "
    "organisation when the turn ends."
)

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
    files: Mapping[str, int] = Field(default_factory=dict)  # path -> size in bytes
    from_last_known_copy: bool = False
    saving: Saving = "at_turn_end"
    extra_lines: tuple[str, ...] = ()


def saving_for(layer: Layer, mode: ReviewMode, *, store_reviews: bool) -> Saving:
    """What becomes of a turn's change to a space, given whether its store holds changes."""
    if saves_at_once(layer, mode):
        return "at_turn_end"
    return "after_review" if store_reviews else "unreviewed"


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


# Characters no shell needs quoted, and that cannot be mistaken for anything.
_PLAIN_ASCII = re.compile(r"[A-Za-z0-9@%+=:,./_-]+")
_PLAIN_PUNCTUATION = frozenset("@%+=:,./_-")
# Control (C0, DEL, C1), format (bidi overrides, zero-width), line and
# paragraph separators, surrogates: shown escaped, never as themselves.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHELL_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}


def _escaped(ch: str) -> bool:
    return unicodedata.category(ch) in _ESCAPED_CATEGORIES


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x80:  # bash's $'\xHH' is a byte: past ASCII it would not be the character
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shell_word(text: str) -> str:
    """``text`` as one shell word on one line: bare, in single quotes, or as ``$'...'``."""
    if _PLAIN_ASCII.fullmatch(text) or (
        text and all(ch.isalnum() or ch in _PLAIN_PUNCTUATION for ch in text)
    ):
        return text
    if not any(_escaped(ch) for ch in text):
        return "'" + text.replace("'", "'\\''") + "'"
    out = []
    for ch in text:
        if ch in _SHELL_ESCAPES:
            out.append(_SHELL_ESCAPES[ch])
        elif _escaped(ch):
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def quoted(text: str) -> str:
    """``text`` on one line in double quotes; each white space run (line breaks too) is a space."""
    out = []
    for ch in " ".join(text.split()):
        if ch in '"\\':
            out.append("\\" + ch)
        elif _escaped(ch):
            out.append(_escape(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def limits_sentence(limits: Limits) -> str:
    """The one sentence of the intro that tells the agent the limits it meets."""
    return (
        "Links (symbolic or hard) are refused, a file may hold at most "
        f"{human_size(limits.max_file_bytes)} and each folder below at most "
        f"{human_size(limits.max_space_bytes)} in all."
    )


def file_list(mount_path: str, files: Mapping[str, int], budget: int) -> tuple[list[str], int]:
    """The lines that fit in ``budget`` bytes (UTF-8, newlines counted), and how many did not."""
    lines: list[str] = []
    used = 0
    ordered = sorted(files)
    for index, path in enumerate(ordered):
        line = f"- {shell_word(f'{mount_path}/{path}')} ({human_size(files[path])})"
        cost = len(line.encode("utf-8")) + 1
        if used + cost > budget:
            return lines, len(ordered) - index
        lines.append(line)
        used += cost
    return lines, 0


def render_space(space: NoteSpace, budget: int) -> str:
    access = "you may read and edit these files" if space.writable else "read-only this turn"
    folder = shell_word(space.path)
    head = f"## {folder}/ — {LAYER_WORDS[space.layer]} ({access})"
    out = [head]
    if space.layer != "dir":
        out.append(f"Space: {shell_word(space.space)}")
    if space.description.strip():
        out.append(f"Description: {quoted(space.description)}")
    if space.writable and space.saving == "after_review":
        out.append(NOTE_LINE)
    elif space.writable and space.saving == "unreviewed":
        out.append(UNREVIEWED_LINE)
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
            f"list the folder (ls -R {folder}) to see them all."
        )
    return "\n".join(out)


def skill(spaces: Iterable[NoteSpace]) -> str:
    """The built-in memory skill the note opens with: how the folders work and what is kept."""
    spaces = list(spaces)
    held = any(s.writable and s.saving == "after_review" for s in spaces)
    saved = (
        "Everything you change in a writable folder is saved when this turn ends, except "
        "in a folder whose section says its changes wait for review: there a person "
        "approves them first."
        if held
        else "Everything you change in a writable folder is saved when this turn ends; "
        "nothing waits for review."
    )
    return (
        "Your memory is plain files, one folder per space, in the folders below "
        "(relative to your working directory). Read them with cat, ls or grep; create, "
        "edit, move and delete them with any tool (an editor, sed, echo >>, mv, rm, a "
        "script). " + saved
    )


def render_note(spaces: Iterable[NoteSpace], *, limits: Limits | None = None) -> str:
    """The whole note for one turn; an empty string when nothing is mounted.

    The skill and the limits sentence come before the per-space file lists;
    each list keeps its own budget, ``limits.note_file_list_bytes``.

    ``limits`` (default ``Limits()``) are the ones the intro tells the agent.
    """
    limits = limits or Limits()
    spaces = list(spaces)
    sections = [render_space(space, limits.note_file_list_bytes) for space in spaces]
    if not sections:
        return ""
    intro = "# Memory\n" + skill(spaces) + " " + limits_sentence(limits)
    return "\n\n".join([intro, *sections]) + "\n"


__all__ = [
    "LAYER_WORDS",
    "UNREVIEWED_LINE",
    "NoteSpace",
    "Saving",
    "file_list",
    "human_size",
    "limits_sentence",
    "quoted",
    "render_note",
    "render_space",
    "saving_for",
    "shell_word",
    "skill",
]
