"""The content-addressed blob cache: snapshot contents on disk, shared by every session.

A blob is stored once under ``<state_dir>/blobs/<sha[:2]>/<sha>``. New blobs
are written under temporary names, synced, and only then renamed into place
(and synced again), so a blob's name never points at half its content, even
after a crash, and an open turn's snapshot survives one. Two sessions loading
the same space share one copy.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from memfs.core.models import digest


class BlobCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def put(self, content: bytes) -> str:
        """Store ``content`` if it is not there yet; return its address."""
        [sha] = self.put_many([content])
        return sha

    def put_many(self, contents: Iterable[bytes]) -> list[str]:
        """Store many blobs with two syncs in all rather than one per blob."""
        shas: list[str] = []
        pending: list[tuple[Path, Path]] = []
        seen: set[str] = set()
        for content in contents:
            sha = digest(content)
            shas.append(sha)
            target = self.path(sha)
            if sha in seen or target.exists():
                continue
            seen.add(sha)
            target.parent.mkdir(exist_ok=True)
            # A name of its own: two turns starting at once may write the same blob.
            fd, name = tempfile.mkstemp(prefix=f".{sha}.", suffix=".tmp", dir=target.parent)
            tmp = Path(name)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            pending.append((tmp, target))
        if pending:
            os.sync()
            for tmp, target in pending:
                os.replace(tmp, target)
            os.sync()
        return shas

    def get(self, sha: str) -> bytes:
        return self.path(sha).read_bytes()

    def __contains__(self, sha: object) -> bool:
        return isinstance(sha, str) and self.path(sha).exists()


__all__ = ["BlobCache"]
