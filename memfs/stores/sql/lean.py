"""``LeanCache``: a managed store's manifests by space version, shared by its threads.

A lean load serves a manifest only at the version it was read at
(:mod:`memfs.stores.manifests`). Versions are per database, so the cache is
also keyed by a generation (``Db.generation``): what tells this database
from another one behind the same path or URL (a restored backup). A load that
finds another generation empties the cache first; the stores also empty it
on every new connection (``clear``).
"""

from __future__ import annotations

import threading

from memfs.stores.manifests import Manifest, ManifestCache


class LeanCache:
    """Manifests by (generation, space, version), under a lock (pool threads share it)."""

    def __init__(self, max_files: int) -> None:
        self._lock = threading.Lock()
        self._cache = ManifestCache(max_files)
        self._generation: int | None = None

    def _at(self, generation: int) -> None:
        # Call with the lock held.
        if generation != self._generation:
            self._cache.clear()
            self._generation = generation

    def get(self, generation: int, space_id: int, version: int) -> Manifest | None:
        with self._lock:
            self._at(generation)
            return self._cache.get(space_id, version)

    def held(self, generation: int, space_id: int, version: int) -> Manifest | None:
        """The space's newest manifest read at or before ``version`` (to refresh from)."""
        with self._lock:
            self._at(generation)
            return self._cache.held(space_id, version)

    def put(self, generation: int, space_id: int, manifest: Manifest) -> Manifest:
        """Hold ``manifest``; the one a load at its version is to use (``ManifestCache.put``)."""
        with self._lock:
            if generation != self._generation:
                return manifest
            return self._cache.put(space_id, manifest)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def drop(self, space_id: int) -> None:
        """Let go of the space's manifest: a notice said it changed (a hint; versions decide)."""
        with self._lock:
            self._cache.drop(space_id)

    @property
    def files(self) -> int:
        with self._lock:
            return self._cache.files
