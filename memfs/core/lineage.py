"""``Lineage``: which paths of a space moved between the versions one reader saw.

A turn start over a space of 10,000 files that changed by two since the
last one should cost two files, not 10,000. A store that refreshes a held
manifest from the rows that moved (:mod:`memfs.stores.manifests`) knows
exactly which paths those were; it says so in a lineage, and whoever kept
what an earlier version held (the daemon's shared bases,
:mod:`memfsd.manifests`) compares only those paths instead of every file.

A *line* starts where a manifest is read whole (a fresh random name) and
goes on through every refresh of it to a later version: each step is the
version reached and the paths that moved to reach it (written, made,
removed). A refresh to a version no later than the one it started from (a
backup put back in place) starts a new line. Two threads of one store may
refresh one manifest to different versions, so a line can branch; each
branch is exact about the versions it passed through, and only those.

:meth:`Lineage.moved_since` is exact or silent, never approximate: it
answers for a version this branch passed through and still remembers
(``since``, or one a step reached), and ``None`` otherwise, and the caller
then compares everything. The steps are bounded (:data:`MAX_LINEAGE_PATHS`
paths in all): a line that grew past it forgets its oldest steps and moves
``since`` on.

A line names versions of one space in one store process: its name is new
each time a manifest is read whole, so two lines never share a name, and
a reader that holds a version of another line (or of none) compares all.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

# The paths a line remembers in all; past it, its oldest steps go. A reader
# whose version is older than the line reaches compares every file instead,
# which is what it would do at that distance anyway.
MAX_LINEAGE_PATHS = 1024


@dataclass(frozen=True, slots=True)
class Lineage:
    """One space's versions on one line: the paths that moved at each step since ``since``."""

    line: str
    version: int  # the version this lineage ends at
    since: int  # the oldest version its steps reach back to
    steps: tuple[tuple[int, frozenset[str]], ...] = ()  # (version reached, paths moved to it)

    @classmethod
    def start(cls, version: int) -> Lineage:
        """A new line, at a manifest read whole."""
        return cls(line=secrets.token_hex(8), version=version, since=version)

    def then(self, version: int, moved: frozenset[str]) -> Lineage:
        """The same line one step on: ``moved`` are every path that differs at ``version``.

        A version no later than this one's (a backup put back in place sends
        a space's versions back; a thread whose snapshot is older than the
        manifest it refreshed) starts a new line: a line's versions only grow.
        """
        if version <= self.version:
            return Lineage.start(version)
        steps = (*self.steps, (version, moved))
        since = self.since
        held = sum(len(paths) for _, paths in steps)
        while steps and held > MAX_LINEAGE_PATHS:
            since, dropped = steps[0]
            held -= len(dropped)
            steps = steps[1:]
        return Lineage(self.line, version, since, steps)

    def moved_since(self, line: str | None, version: int | None) -> frozenset[str] | None:
        """The paths that moved since ``version`` of ``line``; None where the steps do not say.

        Every path outside the answer holds at :attr:`version` what it held at
        ``version``: the caller compares only those it names. Only a version
        this lineage passed through is answered (``since``, or one a step
        reached): two threads may refresh one manifest to different versions,
        so one line can branch, and a version between two steps of this
        branch may be a step of another.
        """
        if line != self.line or version is None:
            return None
        moved: set[str] = set()
        for reached, paths in reversed(self.steps):
            if reached == version:
                return frozenset(moved)
            if reached < version:
                return None
            moved |= paths
        return frozenset(moved) if version == self.since else None


__all__ = ["MAX_LINEAGE_PATHS", "Lineage"]
