"""``Lineage``: which paths of a space moved between the versions one reader saw.

A turn start over a space of 10,000 files that changed by two since the
last one should cost two files, not 10,000. A store that refreshes a held
manifest from the rows that moved (:mod:`memfs.stores.manifests`) knows
exactly which paths those were; it says so in a lineage, and whoever kept
what an earlier version held (the daemon's shared bases,
:mod:`memfsd.manifests`) compares only those paths instead of every file.

A *line* starts where a manifest is read whole (a fresh random name) and
goes on through every refresh of it: each step is the version reached and
the paths that moved to reach it (written, made, removed). The two answers
it gives are exact or absent, never approximate: :meth:`Lineage.moved_since`
answers for a version on the same line that its steps still reach back to
(``since`` or later), and ``None`` otherwise, and the caller then compares
everything. The steps are bounded (:data:`MAX_LINEAGE_PATHS` paths in all):
a line that grew past it forgets its oldest steps and moves ``since`` on.

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
        """The same line one step on: ``moved`` are every path that differs at ``version``."""
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
        ``version``: the caller compares only those it names.
        """
        if line != self.line or version is None or not self.since <= version <= self.version:
            return None
        moved: set[str] = set()
        for reached, paths in reversed(self.steps):
            if reached <= version:
                break
            moved |= paths
        return frozenset(moved)


__all__ = ["MAX_LINEAGE_PATHS", "Lineage"]
