"""Name and path rules: what a space, an identity, a session and a file may be called.

Every name that reaches a store or a filesystem passes through here first, so
a bad name is refused with a clear error before it can touch data.

File paths are kept as ``str`` relative paths with ``/`` separators. They must
be valid UTF-8 (a name the filesystem hands us as bytes that do not decode is
refused, not mangled), have no empty, ``.`` or ``..`` segment, no NUL, each
segment at most 255 bytes and the whole path at most 1024 bytes, in UTF-8.

A *new* name (a file or folder an agent creates, or renames something to, a
session id, a mount path) must also hold no control character:
C0 (U+0000-U+001F) or DEL (U+007F). Such a character could start a line of its
own wherever the name is shown (the note, a terminal, a log), so it is
refused with ``InvalidName`` (``EINVAL``). A file already stored under such a
name is not refused by :func:`check_path`: it still loads, shows in the mount
and can be read, edited, renamed to a clean name or deleted, so no old name
can break a load or a turn's end; the note shows it escaped. Org and user ids
are checked as stored names are (they come back from stores' rows).
"""

from __future__ import annotations

import re
from typing import Any

from memfs.core.errors import InvalidName, NameTooLong

MAX_SPACE_NAME_CHARS = 64  # a space name is a folder name and a URL segment: short and plain
SPACE_NAME = re.compile(rf"[a-z0-9][a-z0-9._-]{{0,{MAX_SPACE_NAME_CHARS - 1}}}")
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
MAX_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 1024


def check_space_name(name: str) -> str:
    """Return ``name`` if it is a valid space name, else raise ``InvalidName``."""
    if not isinstance(name, str) or SPACE_NAME.fullmatch(name) is None:
        raise InvalidName(
            f"space names are 1-{MAX_SPACE_NAME_CHARS} characters of a-z, 0-9, '.', '_' and '-', "
            "starting with a letter or digit",
            path=str(name),
        )
    return name


def check_segment(segment: str, *, what: str = "name") -> str:
    """Check one path segment: not empty, not ``.``/``..``, no ``/`` or NUL, ≤ 255 bytes."""
    if not isinstance(segment, str):
        raise InvalidName(f"{what} must be a string", path=repr(segment))
    if segment in ("", ".", ".."):
        raise InvalidName(f"{what} may not be empty, '.' or '..'", path=segment)
    if "/" in segment or "\0" in segment:
        raise InvalidName(f"{what} may not contain '/' or NUL", path=segment)
    try:
        size = len(segment.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidName(f"{what} is not valid UTF-8", path=segment) from None
    if size > MAX_SEGMENT_BYTES:
        raise NameTooLong(
            f"{what} is {size} bytes; at most {MAX_SEGMENT_BYTES} are allowed", path=segment
        )
    return segment


def unencodable(value: Any, where: str) -> str | None:
    """Where in ``value`` a string does not encode as UTF-8 (a lone surrogate), if anywhere.

    Strings at any depth of dicts (keys too), lists and tuples are looked at.
    Text memfs keeps (a prompt, a label, an extra body) must encode: a store
    writes it as UTF-8, and seals it that way.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{where} holds a lone surrogate (U+{ord(value[exc.start]):04X})"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = unencodable(key, f"{where} key") or unencodable(item, f"{where}.{key!s}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unencodable(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


def check_text(value: str | None, *, what: str) -> str | None:
    """``value`` if it is text that encodes as UTF-8 (or None); ``InvalidName`` naming it if not."""
    found = unencodable(value, what)
    if found is not None:
        raise InvalidName(f"{what} must be valid UTF-8 text: {found}", path=what)
    return value


def has_control_character(text: str) -> bool:
    """True if ``text`` holds a C0 control character (U+0000-U+001F) or DEL (U+007F)."""
    return CONTROL_CHARACTER.search(text) is not None


def _refuse_control_characters(text: str, what: str) -> None:
    found = CONTROL_CHARACTER.search(text)
    if found is not None:
        raise InvalidName(
            f"{what} may not contain control characters (found U+{ord(found.group()):04X})",
            path=text.encode("unicode_escape").decode("ascii"),
        )


def check_new_name(segment: str, *, what: str = "name") -> str:
    """A name something is about to be created (or renamed) under: a segment, no control chars."""
    check_segment(segment, what=what)
    _refuse_control_characters(segment, what)
    return segment


def check_path(path: str) -> str:
    """Return ``path`` if it is a valid relative file path inside a space."""
    if not isinstance(path, str):
        raise InvalidName("file paths must be strings", path=repr(path))
    if path.startswith("/"):
        raise InvalidName("file paths must be relative", path=path)
    if "\0" in path:
        raise InvalidName("file paths may not contain NUL", path=path)
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidName("file path is not valid UTF-8", path=path) from None
    if size > MAX_PATH_BYTES:
        raise NameTooLong(
            f"file path is {size} bytes; at most {MAX_PATH_BYTES} are allowed", path=path
        )
    for segment in path.split("/"):
        check_segment(segment, what="file path segment")
    return path


def decode_fs_name(raw: bytes) -> str:
    """Decode a name the filesystem gave us; refuse bytes that are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidName(
            "file name is not valid UTF-8", path=raw.decode("utf-8", "backslashreplace")
        ) from None


def check_identity(value: str, *, what: str) -> str:
    """Check an org id, user id or session id: it becomes a folder name in some stores."""
    return check_segment(value, what=what)


def check_mount_path(path: str, *, nested: bool = False) -> str:
    """A mount's folder inside the session directory: one segment, like a new file name.

    With ``nested`` (a persistent dir's path), several segments joined by
    ``/`` (``persistent/user``), each a new name, at most ``MAX_PATH_BYTES``
    in all: the folders on the way are the session's, not the mount's.
    """
    if not nested or not isinstance(path, str) or "/" not in path:
        return check_new_name(path, what="mount path")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise NameTooLong(f"a mount path is at most {MAX_PATH_BYTES} bytes", path=path)
    for segment in path.split("/"):
        check_new_name(segment, what="mount path segment")
    return path


__all__ = [
    "CONTROL_CHARACTER",
    "MAX_PATH_BYTES",
    "MAX_SEGMENT_BYTES",
    "MAX_SPACE_NAME_CHARS",
    "SPACE_NAME",
    "check_identity",
    "check_mount_path",
    "check_new_name",
    "check_path",
    "check_segment",
    "check_space_name",
    "decode_fs_name",
    "has_control_character",
]
