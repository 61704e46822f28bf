"""The change set of a turn, computed against the snapshot it loaded.

Contents are compared byte for byte, so a file rewritten with identical bytes
is not an update, and a rename is a delete plus a create. A file created and
deleted within the same turn never appears. Directories are not content: an
empty directory left behind by a turn is not stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memfs.core.models import ChangeSet


def diff_touched(base: Mapping[str, bytes], touched: Mapping[str, bytes | None]) -> ChangeSet:
    """Changes for the paths a turn touched; ``None`` means the path is absent at turn end.

    This is the O(touched) form the daemon uses: paths the turn never touched
    are unchanged by construction and are not looked at.
    """
    created: dict[str, bytes] = {}
    updated: dict[str, bytes] = {}
    deleted: list[str] = []
    for path in sorted(touched):
        after = touched[path]
        before = base.get(path)
        if after is None:
            if before is not None:
                deleted.append(path)
        elif before is None:
            created[path] = after
        elif before != after:
            updated[path] = after
    return ChangeSet(created=created, updated=updated, deleted=tuple(deleted))


def diff(base: Mapping[str, bytes], after: Mapping[str, bytes]) -> ChangeSet:
    """Changes between two whole trees (copy mode scans the whole folder)."""
    paths: Iterable[str] = set(base) | set(after)
    return diff_touched(base, {path: after.get(path) for path in paths})


__all__ = ["diff", "diff_touched"]
