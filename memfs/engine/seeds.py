"""Bringing a seed folder into a store: version 1 the first time, "Changed in code" after.

The rules are :mod:`memfs.core.seeds`; this module reads the folder and talks
to the store. What memfs last saw of each seed is kept in a small JSON file
(the daemon's state dir), so a change made to the folder while nothing ran is
caught at the next check.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import trio

from memfs.core.errors import ConfigError
from memfs.core.models import MIB, ChangeSet, Provenance, SpaceRef
from memfs.core.seeds import CHANGED_IN_CODE, code_change, manifest
from memfs.engine import copymode
from memfs.private import make_private_dirs, open_private
from memfs.stores.base import ManagedStore, Store

SeedStatus = Literal["seeded", "proposed", "unchanged", "adopted"]
SEED_SESSION = "code"


@dataclass(frozen=True)
class SeedResult:
    status: SeedStatus
    manifest: dict[str, str]
    change: str | None = None


def read_seed(folder: Path, *, max_file_bytes: int = MIB) -> dict[str, bytes]:
    """The seed's files; a folder that is missing or holds what memfs cannot keep fails loudly."""
    if not folder.is_dir():
        raise ConfigError("a seed must be a folder", path=str(folder))
    scan = copymode.scan(folder, max_file_bytes=max_file_bytes)
    if scan.refused:
        path, error = next(iter(scan.refused.items()))
        raise ConfigError(f"the seed folder holds a file memfs cannot keep: {error}", path=path)
    return {path: content for path, content in scan.files.items() if not path.startswith(".git/")}


async def sync_seed(
    store: Store, ref: SpaceRef, files: dict[str, bytes], previous: dict[str, str] | None
) -> SeedResult:
    """Bring ``files`` (the seed now) into ``ref``, given what was seen of it before."""
    now = manifest(files)
    if previous == now:
        return SeedResult("unchanged", now)
    # What the code conversation sees: the live files with its own waiting
    # change over them, so a change the seed takes back is proposed back.
    loaded = await store.load(ref, SEED_SESSION)
    seen = loaded.files
    # A managed store knows a space it made, files or none; another store, by its files.
    fresh = ref not in await store.spaces() if isinstance(store, ManagedStore) else not seen
    if fresh:
        stored = await store.store(
            ref,
            ChangeSet(created=files),
            cursor=loaded.cursor,
            provenance=Provenance(origin="code", prompt="Version 1, from code"),
        )
        return SeedResult("seeded" if stored.status == "saved" else "unchanged", now)
    if previous is None:
        # The space was made without this seed being seen (or the record was
        # lost): take the seed as it is now as the starting point, propose nothing.
        return SeedResult("adopted", now)
    changes = code_change(previous, files, seen)
    if changes.is_empty():
        return SeedResult("unchanged", now)
    stored = await store.store(
        ref,
        changes,
        cursor=loaded.cursor,
        provenance=Provenance(origin="code", session=SEED_SESSION, prompt=CHANGED_IN_CODE),
        review="person",
    )
    return SeedResult("proposed", now, stored.change)


class SeedRecord:
    """What memfs last saw of each seed, kept in a JSON file (or only in memory)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seen: dict[str, dict[str, str]] = {}
        if path is not None and path.exists():
            self._seen = json.loads(path.read_text())

    def refs(self) -> list[SpaceRef]:
        """Every org space a seed was brought into (keys are ``org:<org>/<space>``)."""
        found = []
        for key in self._seen:
            layer, _, rest = key.partition(":")
            org, _, space = rest.partition("/")
            if layer == "org" and org and space:
                found.append(SpaceRef(layer="org", org=org, space=space))
        return found

    def get(self, ref: SpaceRef) -> dict[str, str] | None:
        return self._seen.get(str(ref))

    async def put(self, ref: SpaceRef, seen: dict[str, str]) -> None:
        self._seen[str(ref)] = seen
        if self.path is not None:
            await trio.to_thread.run_sync(self._write)

    def _write(self) -> None:
        assert self.path is not None
        make_private_dirs(self.path.parent)
        tmp = self.path.with_suffix(".tmp")
        with open(open_private(tmp, os.O_WRONLY | os.O_TRUNC), "w") as fh:
            fh.write(json.dumps(self._seen, sort_keys=True))
        os.replace(tmp, self.path)


__all__ = ["SEED_SESSION", "SeedRecord", "SeedResult", "read_seed", "sync_seed"]
