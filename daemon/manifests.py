"""Shared memory's manifests, written down once and pointed to by every turn over them.

A turn start writes down every mounted file (``turn.json``) so a restart can
rebuild the turn. Written whole, that is eight fields a file at every turn
start (1.5 MB for 10,000 files, encoded and synced each time), although an
org space changes by a few files from one turn to the next. So for shared
(org) memory the daemon keeps a *base* per space: the space's files as some
turn loaded them, written once to ``<state_dir>/manifests/<name>`` and never
changed; ``turn.json`` names its mount's base and carries only the rows that
differ from it. When the rows that differ grow past :data:`REBASE_AT` (or an
eighth of the space), the next turn writes a new base.

A base file is NUL-separated rows of :data:`BASE_FIELDS` fields: path, sha256,
size, revision (empty: none), mode (octal digits), mtime and ctime
(nanoseconds; empty: unknown). ``turn.json``'s rows for a mount with a base
are the eight-field rows of :mod:`memfsd.workspace`, a file the turn does not
have written with an empty sha256 (and empty fields after it).

A person's memory never gets a base: caches of it must not outlive the turns
that use it (forgetting leaves nothing), so their rows stay whole in each
``turn.json``. One base per org space is held in memory (the daemon already
keeps each space's last loaded copy); a base file goes once no written-down
turn names it and it is not the space's current one, and at start every base
no restored turn names is swept.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memfs.core.lineage import Lineage
from memfs.core.models import DEFAULT_META, FileMeta, SpaceRef
from memfsd.nodes import Snapshot

MANIFEST_DIR = "manifests"
BASE_FIELDS = 7
# A turn's rows that differ from its base, above which the turn writes a new
# base: below it, writing the rows costs less than writing the space again.
REBASE_AT = 256


@dataclass(frozen=True, eq=False)
class Base:
    """One org space's files as written to a base file; never mutated once made."""

    name: str
    shas: Mapping[str, str]
    sizes: Mapping[str, int]
    revisions: Mapping[str, str]
    meta: Mapping[str, FileMeta]
    snapshot: Mapping[str, Snapshot]  # the same files as the overlay takes them
    # The store's version these files are, on which line (``memfs.core.lineage``);
    # None where the turn that wrote the base was not told.
    line: str | None = None
    version: int | None = None


@dataclass(frozen=True)
class Written:
    """What a turn start writes of one shared mount: its base, the rows off it, its snapshot."""

    base: str
    rows: list[str]
    snapshot: dict[str, Snapshot]


def row(
    mount: str,
    path: str,
    sha: str,
    size: int,
    revision: str | None,
    meta: FileMeta,
) -> str:
    """One file's eight fields, NUL-separated, as ``turn.json`` holds them."""
    return (
        f"{mount}\0{path}\0{sha}\0{size}\0{revision or ''}"
        f"\0{meta.mode:o}\0{_ns(meta.mtime_ns)}\0{_ns(meta.ctime_ns)}"
    )


def removed_row(mount: str, path: str) -> str:
    """A file the base has and the turn does not."""
    return f"{mount}\0{path}\0\0\0\0\0\0"


def snapshots(
    shas: Mapping[str, str], sizes: Mapping[str, int], revisions: Mapping[str, str]
) -> dict[str, Snapshot]:
    """The overlay's snapshot of a mount, built without a Python call per file."""
    paths = list(shas)
    return dict(
        zip(
            paths,
            zip(
                shas.values(), map(sizes.__getitem__, paths), map(revisions.get, paths), strict=True
            ),
            strict=True,
        )
    )


class SharedManifests:
    """The current base of every org space this daemon wrote one for; thread-safe."""

    def __init__(self, state_dir: Path, write: Callable[[Path, str], None]) -> None:
        self.folder = state_dir / MANIFEST_DIR
        self._write = write  # atomic and synced (the workspace's own writer)
        self._lock = threading.Lock()
        self._current: dict[SpaceRef, Base] = {}
        self._named: dict[str, set[str]] = {}  # base name -> sessions whose turn.json names it
        self._held: dict[str, set[str]] = {}  # session -> the bases its turn.json names

    def written(
        self,
        session: str,
        mount: str,
        ref: SpaceRef,
        shas: Mapping[str, str],
        sizes: Mapping[str, int],
        revisions: Mapping[str, str],
        meta: Mapping[str, FileMeta],
        lineage: Lineage | None,
    ) -> Written:
        """What ``session``'s turn writes of ``mount``; a new base is written (synced) first.

        ``lineage``, where the store told one, says which paths moved since
        the base's version: only those are compared, not every file.
        Call before writing ``turn.json``, and :meth:`release` when that turn is over.
        """
        with self._lock:
            base = self._current.get(ref)
            if base is not None:
                moved = None if lineage is None else lineage.moved_since(base.line, base.version)
                if moved is None:
                    rows, changed, removed = _off(mount, base, shas, sizes, revisions, meta)
                else:
                    rows, changed, removed = _off_among(
                        mount, base, moved, shas, sizes, revisions, meta
                    )
                if len(rows) <= max(REBASE_AT, len(shas) // 8):
                    snapshot = dict(base.snapshot)
                    for path in removed:
                        del snapshot[path]
                    for path in changed:
                        snapshot[path] = (shas[path], sizes[path], revisions.get(path))
                    self._name(session, base.name)
                    return Written(base.name, rows, snapshot)
            base = self._new_base(ref, shas, sizes, revisions, meta, lineage)
            self._name(session, base.name)
            return Written(base.name, [], dict(base.snapshot))

    def _new_base(
        self,
        ref: SpaceRef,
        shas: Mapping[str, str],
        sizes: Mapping[str, int],
        revisions: Mapping[str, str],
        meta: Mapping[str, FileMeta],
        lineage: Lineage | None,
    ) -> Base:
        name = secrets.token_hex(16)
        body = "\0".join(
            row("", path, sha, sizes[path], revisions.get(path), meta.get(path, DEFAULT_META))[1:]
            for path, sha in shas.items()
        )
        self._write(self.folder / name, body)
        base = Base(
            name, dict(shas), dict(sizes), dict(revisions), dict(meta),
            snapshots(shas, sizes, revisions),
            *((lineage.line, lineage.version) if lineage is not None else (None, None)),
        )  # fmt: skip
        old = self._current.get(ref)
        self._current[ref] = base
        if old is not None:
            self._drop_if_unused(old.name)
        return base

    def _name(self, session: str, base: str) -> None:
        self._named.setdefault(base, set()).add(session)
        self._held.setdefault(session, set()).add(base)

    def hold(self, session: str, bases: Iterable[str]) -> None:
        """A restored turn's ``turn.json`` names ``bases``: keep them until it is over."""
        with self._lock:
            for base in bases:
                self._name(session, base)

    def release(self, session: str) -> None:
        """The session's turn is over (its ``turn.json`` gone): its bases may go."""
        with self._lock:
            for base in self._held.pop(session, set()):
                users = self._named.get(base)
                if users is not None:
                    users.discard(session)
                self._drop_if_unused(base)

    def _drop_if_unused(self, base: str) -> None:
        if self._named.get(base):
            return
        self._named.pop(base, None)
        if any(current.name == base for current in self._current.values()):
            return
        (self.folder / base).unlink(missing_ok=True)

    def sweep(self, live: Collection[str]) -> int:
        """Remove every base file no turn of the ``live`` sessions names; return how many.

        Called at start once every open turn is back (a crash between a new
        base and its ``turn.json`` leaves one nobody names).
        """
        with self._lock:
            keep = {base for session in live for base in self._held.get(session, ())}
            removed = 0
            for path in self.folder.glob("*") if self.folder.is_dir() else ():
                if path.name not in keep:
                    path.unlink(missing_ok=True)
                    removed += 1
            return removed

    def read(self, base: str) -> list[str]:
        """A base file's fields, for a restart."""
        text = (self.folder / base).read_text()
        return text.split("\0") if text else []


def _off(
    mount: str,
    base: Base,
    shas: Mapping[str, str],
    sizes: Mapping[str, int],
    revisions: Mapping[str, str],
    meta: Mapping[str, FileMeta],
) -> tuple[list[str], list[str], list[str]]:
    """The rows of the files that differ from ``base``, the changed paths and the removed ones."""
    b_shas, b_revisions, b_meta = base.shas, base.revisions, base.meta
    if shas == b_shas and revisions == b_revisions and meta == b_meta:
        return [], [], []  # compared in C: an unchanged space costs no loop at all
    # Sizes are not compared: the same sha256 is the same bytes. The maps'
    # items are compared as sets, in C: only the paths they name (a few, from
    # one turn to the next) get the exact test, which a path missing from
    # ``meta`` and one with the default meta pass alike.
    suspects = {path for path, _ in shas.items() - b_shas.items()}
    suspects.update(path for path, _ in revisions.items() ^ b_revisions.items())
    suspects.update(path for path, _ in meta.items() ^ b_meta.items())
    changed = _changed(base, filter(suspects.__contains__, shas), shas, revisions, meta)
    added = sum(path not in b_shas for path in changed)
    removed = [] if len(b_shas) + added == len(shas) else [p for p in b_shas if p not in shas]
    return _rows(mount, changed, removed, shas, sizes, revisions, meta), changed, removed


def _off_among(
    mount: str,
    base: Base,
    moved: Collection[str],
    shas: Mapping[str, str],
    sizes: Mapping[str, int],
    revisions: Mapping[str, str],
    meta: Mapping[str, FileMeta],
) -> tuple[list[str], list[str], list[str]]:
    """:func:`_off` where only ``moved`` may differ from ``base``: a cost per moved path."""
    ordered = sorted(moved)
    changed = _changed(base, filter(shas.__contains__, ordered), shas, revisions, meta)
    removed = [path for path in ordered if path not in shas and path in base.shas]
    return _rows(mount, changed, removed, shas, sizes, revisions, meta), changed, removed


def _changed(
    base: Base,
    paths: Iterable[str],
    shas: Mapping[str, str],
    revisions: Mapping[str, str],
    meta: Mapping[str, FileMeta],
) -> list[str]:
    """Those of ``paths`` (every one in ``shas``) whose file is not as ``base`` has it."""
    b_shas, b_revisions, b_meta = base.shas, base.revisions, base.meta
    return [
        path
        for path in paths
        if b_shas.get(path) != shas[path]
        or b_revisions.get(path) != revisions.get(path)
        or b_meta.get(path, DEFAULT_META) != meta.get(path, DEFAULT_META)
    ]


def _rows(
    mount: str,
    changed: Iterable[str],
    removed: Iterable[str],
    shas: Mapping[str, str],
    sizes: Mapping[str, int],
    revisions: Mapping[str, str],
    meta: Mapping[str, FileMeta],
) -> list[str]:
    rows = [
        row(mount, path, shas[path], sizes[path], revisions.get(path), meta.get(path, DEFAULT_META))
        for path in changed
    ]
    rows += [removed_row(mount, path) for path in removed]
    return rows


def _ns(value: int | None) -> str:
    return "" if value is None else str(value)


__all__ = ["BASE_FIELDS", "MANIFEST_DIR", "REBASE_AT", "SharedManifests", "Written", "row"]
