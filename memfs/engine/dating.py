"""Dating a person's words in a turn by its loads: whether a forget came after them.

A turn's cursors come from one sequence of the store. A person's own space's
cursor is at least their last forget once the load saw it, so it dates their
words exactly; a turn without one is dated by its earliest cursor, which may
date it too early (its words then dropped, never kept). ``memfsd.words``
judges open turns by it, and a turn brought back after a restart carries it
to its stores (``Provenance.words_since``).
"""

from __future__ import annotations

from collections.abc import Iterable

from memfs.core.policy import parse_cursor
from memfs.engine.plan import Mount, MountState


def earliest(cursors: Iterable[str | None]) -> str | None:
    """The earliest of a turn's cursors (they come from one sequence); None if none."""
    known = [(parse_cursor(cursor), cursor) for cursor in cursors if cursor is not None]
    return min(known)[1] if known else None


def dating(mounts: Iterable[Mount | MountState], org: str, user: str) -> str:
    """The cursor that dates the words of ``user`` of ``org`` in one turn's loads.

    Their own space's cursor is at least their last forget once the load saw
    it, so it tells a turn they started once back from one open before.
    Otherwise the earliest cursor, which may date the turn too early. Only
    the store's loads count (an app's folder has cursors of its own), and a
    load that failed has none: a turn with none left is dated before every
    forget.
    """
    known = [m for m in mounts if m.ref.layer != "dir" and m.cursor is not None]
    return earliest(own_cursors(known, org, user) or [mount.cursor for mount in known]) or "0"


def own_cursors(mounts: Iterable[Mount | MountState], org: str, user: str) -> list[str]:
    """The cursors of the loads of the person's own space: each dates their words exactly."""
    return [m.cursor for m in mounts if m.cursor is not None and m.ref.owned_by(org, user)]


__all__ = ["dating", "earliest", "own_cursors"]
