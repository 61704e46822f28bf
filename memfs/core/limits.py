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


def apply_limits(
    changes: ChangeSet, base_sizes: Mapping[str, int], limits: Limits
) -> tuple[ChangeSet, dict[str, MemfsError]]:
    """Split ``changes`` into what may be stored and what is refused, with why.

    ``base_sizes`` is the size of every file in the space at the snapshot.
    """
    refused: dict[str, MemfsError] = {}
    files = len(base_sizes)
    total = sum(base_sizes.values())
    for path in changes.deleted:
        files -= 1
        total -= base_sizes.get(path, 0)

    writes = {**changes.created, **changes.updated}
    for path in sorted(writes):
        size = len(writes[path])
        if size > limits.max_file_bytes:
            refused[path] = TooLarge(
                f"file is {size} bytes; the limit is {limits.max_file_bytes}", path=path
            )
            continue
        is_new = path in changes.created
        if is_new and files + 1 > limits.max_files:
            refused[path] = SpaceFull(
                f"the space already holds {files} files; the limit is {limits.max_files}",
                path=path,
            )
            continue
        grown = total - base_sizes.get(path, 0) + size
        if grown > limits.max_space_bytes:
            refused[path] = SpaceFull(
                f"the space would hold {grown} bytes; the limit is {limits.max_space_bytes}",
                path=path,
            )
            continue
        total = grown
        files += int(is_new)
    return changes.without(refused), refused


__all__ = ["apply_limits"]
