"""Size limits applied to a change set before it is stored.

A change past a limit is refused on its own; the rest of the turn's changes
still commit. Deletions are always accepted (they only free room). Creates and
updates are considered in path order, so which file is refused when a space
fills up is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping

from memfs.core.errors import MemfsError, SpaceFull, TooLarge
from memfs.core.models import ChangeSet, Limits


def file_too_large(path: str, size: int, limits: Limits) -> TooLarge | None:
    """Why a file of ``size`` bytes may not be kept, or None."""
    if size > limits.max_file_bytes:
        return TooLarge(f"file is {size} bytes; the limit is {limits.max_file_bytes}", path=path)
    return None


def too_many_files(path: str, files: int, limits: Limits) -> SpaceFull | None:
    """Why a space holding ``files`` files may not take one more, or None."""
    if files + 1 > limits.max_files:
        return SpaceFull(
            f"the space already holds {files} files; the limit is {limits.max_files}", path=path
        )
    return None


def space_too_full(path: str, total: int, limits: Limits) -> SpaceFull | None:
    """Why a space may not grow to ``total`` bytes, or None."""
    if total > limits.max_space_bytes:
        return SpaceFull(
            f"the space would hold {total} bytes; the limit is {limits.max_space_bytes}",
            path=path,
        )
    return None


def too_many_folders(path: str, folders: int, limits: Limits) -> SpaceFull | None:
    """Why a space storing ``folders`` folders may not store one more, or None."""
    if folders + 1 > limits.max_folders:
        return SpaceFull(
            f"the space already stores {folders} folders; the limit is {limits.max_folders}",
            path=path,
        )
    return None


def apply_limits(
    changes: ChangeSet, base_sizes: Mapping[str, int], limits: Limits, *, base_folders: int = 0
) -> tuple[ChangeSet, dict[str, MemfsError]]:
    """Split ``changes`` into what may be stored and what is refused, with why.

    ``base_sizes`` is the size of every file in the space at the snapshot,
    ``base_folders`` the number of folders it stores. Folders are made in
    path order, parents first, so the ones refused are the deepest last.
    """
    refused: dict[str, MemfsError] = {}
    folders = base_folders - len(changes.folders_deleted)
    for path in sorted(changes.folders_created):
        full = too_many_folders(path, folders, limits)
        if full is not None:
            refused[path] = full
        else:
            folders += 1
    files = len(base_sizes)
    total = sum(base_sizes.values())
    for path in changes.deleted:
        files -= 1
        total -= base_sizes.get(path, 0)

    writes = {**changes.created, **changes.updated}
    for path in sorted(writes):
        size = len(writes[path])
        is_new = path in changes.created
        grown = total - base_sizes.get(path, 0) + size
        error = (
            file_too_large(path, size, limits)
            or (too_many_files(path, files, limits) if is_new else None)
            or space_too_full(path, grown, limits)
        )
        if error is not None:
            refused[path] = error
            continue
        total = grown
        files += int(is_new)
    return changes.without(refused), refused


def require_within(changes: ChangeSet, base_sizes: Mapping[str, int], limits: Limits) -> None:
    """Raise the first refusal of :func:`apply_limits`, for an edit that is all or nothing.

    A reviewer's edit or a person's ``put`` is one act by one person: past a
    limit, nothing of it is kept and the person is told (``TooLarge`` or
    ``SpaceFull``), where a turn keeps the rest and reports the refused files.
    """
    _, refused = apply_limits(changes, base_sizes, limits)
    if refused:
        raise refused[min(refused)]


__all__ = [
    "apply_limits",
    "file_too_large",
    "require_within",
    "space_too_full",
    "too_many_files",
    "too_many_folders",
]
