"""The access log of a turn: which files it opened, read, wrote, created, deleted or renamed.

It is folded from the turn's journal records (:mod:`memfsd.journal`), as they
are written and again on replay, so a restarted turn reports what it did
before the crash too. The daemon hands it to the engine at the end of the
turn; the trace keeps it (``memfs.core.models.TraceFile`` has these fields).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FileAccess:
    opened: bool = False
    read: str | None = None  # the revision first read; None for a file of this turn
    wrote: bool = False
    created: bool = False
    deleted: bool = False
    renamed_from: str | None = None  # in the journal: a path in the mount; reported: NAME/path


@dataclass
class AccessLog:
    """Each (mount, path)'s entry, and which paths each mount holds now."""

    entries: dict[tuple[str, str], FileAccess] = field(default_factory=dict)
    present: dict[str, set[str]] = field(default_factory=dict)

    def start(self, mount: str, snapshot: Collection[str]) -> None:
        """A mount begins with its snapshot's files present."""
        self.present[mount] = set(snapshot)

    def get(self, mount: str, path: str) -> FileAccess | None:
        return self.entries.get((mount, path))

    def note(self, record: Mapping[str, Any], snapshot: Collection[str]) -> None:
        """Fold one journal record in; ``snapshot`` is its mount's snapshot paths."""
        op, mount, path = record["o"], record["m"], record["p"]
        if op == "a":
            return  # a change of mode or times: not an access the trace keeps
        if op == "L":  # a compacted journal's entry, whole
            self.entries[(mount, path)] = FileAccess(**record["a"])
            return
        key = (mount, path)
        entry = self.entries.get(key)
        if op == "b" and entry is None and path in self.present.get(mount, ()):
            # A compacted journal's record of a file only chmodded or touched:
            # no access (and an access it had, its ``L`` record brings after).
            return
        if entry is None:
            entry = self.entries[key] = FileAccess()
        if op in ("f", "b"):
            present = self.present.setdefault(mount, set())
            if path not in present and path not in snapshot:
                entry.created = True
            present.add(path)
        elif op == "x":
            self.present.setdefault(mount, set()).discard(path)
            entry.deleted = True
        elif op == "w":
            entry.wrote = True
        elif op == "r":
            entry.opened = True
            if entry.read is None:
                entry.read = record.get("r")
        elif op == "n":
            entry.renamed_from = record["from"]

    def compacted(self, leave_out: Collection[str]) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(mount, path, the entry's set fields) of every entry, but of mounts in ``leave_out``."""
        for (mount, path), entry in self.entries.items():
            if mount not in leave_out:
                yield mount, path, {k: v for k, v in dataclasses.asdict(entry).items() if v}

    def report(self) -> dict[str, FileAccess]:
        """The log as the turn's result carries it: ``NAME/path`` -> entry, sorted."""
        out: dict[str, FileAccess] = {}
        for (mount, path), entry in sorted(self.entries.items()):
            if not path:
                continue
            if path in self.present.get(mount, ()):
                entry.deleted = False
            if entry.renamed_from is not None:
                # Named like the keys; the journal keeps the path in the mount,
                # since a rename never leaves its space.
                entry = dataclasses.replace(entry, renamed_from=f"{mount}/{entry.renamed_from}")
            out[f"{mount}/{path}"] = entry
        return out


__all__ = ["AccessLog", "FileAccess"]
