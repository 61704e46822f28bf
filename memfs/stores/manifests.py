"""Manifests a store read lately, by space version: a turn over an unchanged space reads no rows.

A manifest is what a lean load says of every live file without its bytes:
the revision, sha256, size and metadata per path, and the space's folders.
Reading it costs a row per file (a quarter of a 10,000-file turn), yet most
turns start over a space nobody changed since the last one. A store that
keeps a *version* per space, moved by every write to its live files,
folders or revisions (in the database itself, so a write by any process
moves it), can ask for the version first and reuse the manifest it read at
that version.

Versions must never repeat for a space (a store hands them out from one
counter that only grows), and the cache must be emptied when the store
opens its database again (a restored backup can reuse numbers for other
contents). The cache is bounded by the files it holds in all
(``max_files``); the least recently used manifests go first.

A manifest held at an older version is not thrown away unread. A store
whose live rows name immutable revisions (ids that only grow, never
reused; rows never rewritten) and that counts every write to a space's
live rows (``changes``) refreshes it from the live rows naming a revision
newer than any it holds (``top``): when those rows are as many as the
writes counted since, every write is one of them, so the rest of the
manifest still holds, and a turn after a turn that wrote ten files reads
ten rows, not every file's (``memfs.stores.sql.files``). The space's newest
revision row of any kind when the manifest was read (``newest``: its id,
and its path, sha256 and time; a deletion is a row too) must still be there
as it was: a backup put back in place sends versions, counts and ids back,
and the writes after it hand the same numbers out again to other rows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container, Mapping
from dataclasses import dataclass
from itertools import compress
from operator import not_

from memfs.core.lineage import Lineage
from memfs.core.models import FileMeta

DEFAULT_MAX_FILES = 50_000
# The versions of one space held at once: about the writes a load's snapshot can
# be behind another's, with a pool of connections loading at once.
HELD_VERSIONS = 4


@dataclass(frozen=True, slots=True)
class Manifest:
    """A space's live files at one version, without their bytes; never mutated once made."""

    version: int
    # Path order when read whole; a refresh keeps each path where it was and
    # puts the new ones after them (sorting 10,000 paths again at every
    # turn start costs more than every other step of a refresh).
    revisions: Mapping[str, str]
    shas: Mapping[str, str]
    sizes: Mapping[str, int]
    meta: Mapping[str, FileMeta]
    folders: frozenset[str]
    # The space's count of writes to its live rows when read; None: not counted.
    changes: int | None = None
    top: int = 0  # the newest revision id a live row named when read
    # The space's newest revision row when read (its id, and what tells it
    # apart); (0, None): none. None: not known, never taken as still there.
    newest: tuple[int, object] | None = None
    # The paths each refresh moved, since the manifest was read whole; None: not told.
    lineage: Lineage | None = None

    def moved_to(self, version: int, paths: frozenset[str]) -> Lineage:
        """The lineage of this manifest refreshed to ``version`` by moving ``paths``."""
        if self.lineage is None:
            return Lineage.start(version)
        return self.lineage.then(version, paths)

    def same_read(self, other: Manifest) -> bool:
        """Whether ``other`` is this manifest read again: the same version, counts and newest row.

        What :func:`memfs.stores.sql.files._as_read` trusts to tell a version
        from the same number handed out again after a backup was put back.
        """
        return self.newest is not None and (
            self.version,
            self.changes,
            self.top,
            self.newest,
        ) == (other.version, other.changes, other.top, other.newest)

    def lacking(self, have: Container[str]) -> list[str]:
        """The paths whose sha256 ``have`` does not hold, in path order.

        Asked at every turn start over every file: where ``have`` is a set
        holding them all (a cache past its first turn over the space) it is
        one set test, and otherwise one C-level pass, never a Python call
        per file.
        """
        shas = self.shas
        if isinstance(have, set | frozenset) and have.issuperset(shas.values()):
            return []
        return list(compress(shas, map(not_, map(have.__contains__, shas.values()))))

    def __len__(self) -> int:
        return len(self.revisions)


class ManifestCache:
    """Manifests by space key, at most ``max_files`` files in all; callers hold a lock.

    A space's last few versions are held (``HELD_VERSIONS``), not only its
    newest: loads run at once on a pool of connections, each from its own
    snapshot, and one a write or two behind the others finds its version
    here (or the one just before it, to refresh from) instead of reading the
    whole manifest again on a line of its own.
    """

    def __init__(self, max_files: int = DEFAULT_MAX_FILES) -> None:
        if max_files < 0:
            raise ValueError(f"max_files must be 0 or more, not {max_files}")
        self.max_files = max_files
        # Each space's manifests, oldest version first; spaces least recently used first.
        self._held: OrderedDict[int, list[Manifest]] = OrderedDict()
        self._files = 0

    @property
    def files(self) -> int:
        """How many files the held manifests name in all."""
        return self._files

    def get(self, key: int, version: int) -> Manifest | None:
        """The manifest of ``key`` at ``version``, if held (``key`` is then the most recent)."""
        versions = self._held.get(key)
        if versions is None:
            return None
        if version > versions[-1].version:
            return None  # the space moved on: what is held is a base to refresh from (held)
        for manifest in versions:
            if manifest.version == version:
                self._held.move_to_end(key)
                return manifest
        return None

    def held(self, key: int, version: int | None = None) -> Manifest | None:
        """The newest manifest held for ``key`` (at or before ``version``): a base to refresh."""
        found = None
        for manifest in self._held.get(key, ()):
            if version is None or manifest.version <= version:
                found = manifest
        return found

    def put(self, key: int, manifest: Manifest) -> Manifest:
        """Hold ``manifest`` for ``key``; return the one a load at its version is to use.

        One that read a held version again gets the held one back, so every
        load at a version tells the same line (:mod:`memfs.core.lineage`): a
        reader comparing by lineage then finds it, instead of comparing
        every file. The same version read otherwise is a backup put back in
        place: what was held of that space goes. One larger than the whole
        bound is not held.
        """
        versions = self._held.get(key, [])
        for held in versions:
            if held.version == manifest.version:
                if held.same_read(manifest):
                    self._held.move_to_end(key)
                    return held
                self._drop(key)
                versions = []
                break
        if len(manifest) > self.max_files:
            return manifest
        versions = sorted([*versions, manifest], key=lambda held: held.version)
        self._files += len(manifest)
        while len(versions) > HELD_VERSIONS:
            self._files -= len(versions.pop(0))
        self._held[key] = versions
        self._held.move_to_end(key)
        while self._files > self.max_files:
            oldest = next(iter(self._held))
            if oldest == key and len(self._held[key]) > 1:
                self._files -= len(self._held[key].pop(0))  # its older versions go first
            else:
                self._drop(oldest)
        return manifest

    def clear(self) -> None:
        self._held.clear()
        self._files = 0

    def drop(self, key: int) -> None:
        """Let go of ``key``'s manifests, if held."""
        self._drop(key)

    def _drop(self, key: int) -> None:
        gone = self._held.pop(key, None)
        if gone is not None:
            self._files -= sum(map(len, gone))


__all__ = ["DEFAULT_MAX_FILES", "HELD_VERSIONS", "Manifest", "ManifestCache"]
