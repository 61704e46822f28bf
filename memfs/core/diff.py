"""The change set of a turn, computed against the snapshot it loaded.

A file changes when its content or its mode does: contents are compared byte
for byte, so a file rewritten with identical bytes and mode is no change,
however its times moved (git rewriting ``.git/index`` the same on every
``git status``, an editor saving an unchanged buffer). A mode-only change is
an update. Times alone are not: ``touch`` of an unchanged file, or rsync
setting the time of a file whose bytes already match, is not kept, and the
file's next turn shows the time of its last revision. Keeping it would make
every identical rewrite a new revision (under review ``person``, a change
waiting for a person because a tool looked at the space). Every revision does
keep the times its file had at turn end, so what rsync, make and git compare
comes back as they left it whenever they changed a file.

A rename is a delete plus a create. A file created and deleted within the
same turn never appears.

Folders (see :mod:`memfs.core.models`): a folder is stored when the turn
leaves it existing, not stored, and not kept by files anyway (some file below
it at the snapshot and at the end); a stored folder that no longer exists is
removed. :func:`diff_folders` decides from what the caller saw of each folder
it considers, so the daemon looks only at folders a turn touched.

For people, :func:`unified` shows one file of a change against the live file
as a unified diff (``--- a/PATH`` / ``+++ b/PATH``, ``/dev/null`` for a file
that is new or deleted, git's ``\\ No newline at end of file`` marker). A
file that is not UTF-8 text, or holds a NUL byte, is not shown line by line:
its diff is one line saying ``binary, N bytes`` (and what it was, or that it
is deleted).
"""

from __future__ import annotations

import difflib
from collections.abc import Container, Iterable, Mapping

from memfs.core.models import DEFAULT_META, ChangeSet, FileMeta

# What a folder is at turn end: None if gone, else whether any file lies below it.
FolderEnd = bool | None


def diff_touched(
    base: Mapping[str, bytes],
    touched: Mapping[str, bytes | None],
    *,
    base_meta: Mapping[str, FileMeta] | None = None,
    meta: Mapping[str, FileMeta] | None = None,
    folders: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
) -> ChangeSet:
    """Changes for the paths a turn touched; ``None`` means the path is absent at turn end.

    This is the O(touched) form the daemon uses: paths the turn never touched
    are unchanged by construction and are not looked at. ``base_meta`` is the
    snapshot's metadata, ``meta`` the touched files' at turn end (a path left
    out of ``meta`` keeps its mode); ``folders`` is what :func:`diff_folders`
    found, (created, deleted).
    """
    base_meta = base_meta or {}
    meta = meta or {}
    created: dict[str, bytes] = {}
    updated: dict[str, bytes] = {}
    deleted: list[str] = []
    kept: dict[str, FileMeta] = {}
    for path in sorted(touched):
        after = touched[path]
        before = base.get(path)
        if after is None:
            if before is not None:
                deleted.append(path)
            continue
        now = meta.get(path)
        if before is None:
            created[path] = after
        else:
            mode = base_meta.get(path, DEFAULT_META).mode
            if before == after and (now is None or now.mode == mode):
                continue
            updated[path] = after
        if now is not None:
            kept[path] = now
    return ChangeSet(
        created=created,
        updated=updated,
        deleted=tuple(deleted),
        meta=kept,
        folders_created=folders[0],
        folders_deleted=folders[1],
    )


def diff_folders(
    at_end: Mapping[str, FolderEnd],
    *,
    stored: Container[str],
    implied_before: Container[str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The folders to store and to remove, (created, deleted), of those in ``at_end``.

    ``at_end`` maps each folder the caller considers to what it is at turn
    end (:data:`FolderEnd`); ``stored`` is the snapshot's stored folders and
    ``implied_before`` the folders its files' paths imply. A folder implied
    before and holding files after needs no entry of its own: its files keep
    it. One that outlived its files (the last one deleted, the folder kept)
    is stored, so it is still there next turn.
    """
    created: list[str] = []
    deleted: list[str] = []
    for path in sorted(at_end):
        holds_files = at_end[path]
        if holds_files is None:
            if path in stored:
                deleted.append(path)
        elif path not in stored and not (holds_files and path in implied_before):
            created.append(path)
    return tuple(created), tuple(deleted)


def implied_folders(paths: Iterable[str]) -> set[str]:
    """Every folder the file paths ``paths`` pass through."""
    found: set[str] = set()
    for path in paths:
        cut = path.rfind("/")
        while cut > 0:
            folder = path[:cut]
            if folder in found:
                break
            found.add(folder)
            cut = folder.rfind("/")
    return found


def diff(
    base: Mapping[str, bytes],
    after: Mapping[str, bytes],
    *,
    base_meta: Mapping[str, FileMeta] | None = None,
    meta: Mapping[str, FileMeta] | None = None,
    base_folders: Iterable[str] | None = None,
    folders: Iterable[str] | None = None,
) -> ChangeSet:
    """Changes between two whole trees (copy mode scans the whole folder).

    ``base_folders`` are the snapshot's stored folders and ``folders`` every
    folder at the end; with neither, folders are left as they were.
    """
    paths: Iterable[str] = set(base) | set(after)
    found: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    if folders is not None:
        stored = set(base_folders or ())
        holding = implied_folders(after)
        at_end: dict[str, FolderEnd] = {path: path in holding for path in folders}
        at_end.update((path, None) for path in stored if path not in at_end)
        found = diff_folders(at_end, stored=stored, implied_before=implied_folders(base))
    return diff_touched(
        base,
        {path: after.get(path) for path in paths},
        base_meta=base_meta,
        meta=meta,
        folders=found,
    )


NO_NEWLINE = "\\ No newline at end of file\n"


def _text(content: bytes) -> str | None:
    if b"\0" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _bytes(n: int) -> str:
    return f"{n} byte" if n == 1 else f"{n} bytes"


def unified(path: str, live: bytes | None, new: bytes | None, *, context: int = 3) -> str:
    """``live`` (None: no such file) to ``new`` (None: deleted) as a unified diff of ``path``.

    Empty when the contents are the same (a change of mode only). A binary
    side makes the whole diff one line: ``binary, N bytes`` for a new file,
    ``binary, N bytes (was M bytes)`` for an update, ``binary, M bytes,
    deleted`` for a deletion.
    """
    if live == new:
        return ""
    old_text = "" if live is None else _text(live)
    new_text = "" if new is None else _text(new)
    if old_text is None or new_text is None:
        if new is None:
            assert live is not None
            return f"binary, {_bytes(len(live))}, deleted\n"
        was = "" if live is None else f" (was {_bytes(len(live))})"
        return f"binary, {_bytes(len(new))}{was}\n"
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile="/dev/null" if live is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
        n=context,
    )
    out = []
    for line in lines:
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n" + NO_NEWLINE)
    return "".join(out)


__all__ = [
    "NO_NEWLINE",
    "FolderEnd",
    "diff",
    "diff_folders",
    "diff_touched",
    "implied_folders",
    "unified",
]
