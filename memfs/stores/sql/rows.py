"""Rows every part of a managed store writes with: spaces, revisions, live files, folders.

Revision ids and the ``edited`` number of every file put into a review
change come from one sequence, ``clock`` (``Db.tick``), so the review
rules (:mod:`memfs.core.review`) can compare "when did the live file
change" with "when did another conversation edit it" and with "when did
this turn load". A space's cursor is the largest number of that sequence
the space has used (a revision or a change edit), and a store conflicts on
each path it touches whose latest revision is newer than the cursor
(:func:`_store`). Numbers are never reused, so every later write is newer
than any cursor handed out before, even where forgetting deleted rows.

Every write transaction first takes the store's write lock (SQLite's own;
PostgreSQL's an advisory lock, since its sequences hand out numbers outside
transactions): numbers are taken, and committed, in one order, so a cursor
names exactly the writes a load saw.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from memfs.core import review
from memfs.core.models import (
    By,
    ChangeSet,
    FileMeta,
    LiveOrigin,
    Provenance,
    SpaceRef,
    Stored,
    digest,
    settle_meta,
)
from memfs.core.policy import moved_on, purged_since
from memfs.stores.managed import file_meta as _meta
from memfs.stores.managed import forgotten_key as _forgotten_key
from memfs.stores.sql.db import Db, chunks, marks
from memfs.stores.sql.sealed import (
    SEALED_CONTENT,
    SEALED_WORDS,
    Names,
    _author_sealer,
    _names,
    _opened,
    _sealer,
)
from memfs.stores.sql.spaces import _ensure_space, _space_id


def _cursor(db: Db, space_id: int | None) -> int:
    """The largest number of the sequence this space has used, 0 if none.

    Per space rather than the global clock, so another space's writes do not
    move it; change edits count, so a turn's ``loaded`` (its cursor) compares
    with other changes' ``edited`` the way the review rules need.
    """
    if space_id is None:
        return 0
    (revision,) = db.execute(
        "SELECT MAX(id) FROM revisions WHERE space_id = ?", (space_id,)
    ).fetchone()
    (edited,) = db.execute(
        "SELECT MAX(last_edited) FROM changes WHERE space_id = ?", (space_id,)
    ).fetchone()
    return max(int(revision or 0), int(edited or 0))


def _in_path_order(rows: list[tuple[Any, ...]], names: Names) -> list[tuple[Any, ...]]:
    """``rows`` (kept path first) with their paths opened, in path order."""
    if not names.sealed:
        return rows  # kept as the paths themselves, read in path order
    opened = [(names.path(row[0]), *row[1:]) for row in rows]
    opened.sort(key=lambda row: row[0])  # kept by name: the database's order is not the paths'
    return opened


def _live_files(db: Db, space_id: int) -> tuple[dict[str, bytes], dict[str, str], dict[str, str]]:
    files: dict[str, bytes] = {}
    revisions: dict[str, str] = {}
    shas: dict[str, str] = {}
    names = _names(db, space_id, create=False)
    sealer = _sealer(db, space_id, create=False)
    rows = db.tuples(
        "SELECT live.path, live.revision_id, revisions.content, revisions.sha256,"
        " revisions.sealed FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? ORDER BY live.path",
        (space_id,),
    )
    for path, revision_id, content, sha, sealed in _in_path_order(rows, names):
        files[path] = _opened(sealer, path, revision_id, content, sealed)
        revisions[path] = str(revision_id)
        if sha is not None:
            shas[path] = sha
    return files, revisions, shas


def _live_metas(db: Db, space_id: int) -> dict[str, FileMeta]:
    names = _names(db, space_id, create=False)
    return {
        names.path(kept): _meta(mode, mtime, ctime)
        for kept, mode, mtime, ctime in db.tuples(
            "SELECT live.path, revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
            f" JOIN revisions{db.index('revisions_manifest')} ON revisions.id = live.revision_id"
            " WHERE live.space_id = ?",
            (space_id,),
        )
    }


def _live_meta(db: Db, space_id: int | None, kept: str) -> FileMeta | None:
    """The live file's metadata (``kept`` as the rows keep its path); None if it is not live."""
    if space_id is None:
        return None
    row = db.execute(
        "SELECT revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? AND live.path = ?",
        (space_id, kept),
    ).fetchone()
    return None if row is None else _meta(row[0], row[1], row[2])


def _folders(db: Db, space_id: int) -> set[str]:
    names = _names(db, space_id, create=False)
    return {
        names.path(row[0])
        for row in db.tuples("SELECT path FROM folders WHERE space_id = ?", (space_id,))
    }


def _set_folders(db: Db, space_id: int, folders: Mapping[str, bool]) -> None:
    """Store (True) or remove (False) folders; either is a no-op where it already holds."""
    names = _names(db, space_id, create=True) if folders else None
    for path, made in sorted(folders.items()):
        assert names is not None
        if made:
            db.execute(
                "INSERT INTO folders (space_id, path) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (space_id, names.kept(path, write=True)),
            )
        else:
            db.execute(
                "DELETE FROM folders WHERE space_id = ? AND path = ?", (space_id, names.kept(path))
            )


def _live_among(db: Db, space_id: int | None, paths: Collection[str]) -> set[str]:
    """Which of ``paths`` are live in the space (for the deletion rule, without reading bytes)."""
    if space_id is None or not paths:
        return set()
    names = _names(db, space_id, create=False)
    kept = {names.kept(path): path for path in paths}
    found: set[str] = set()
    for chunk in chunks(list(kept)):
        found.update(
            kept[row[0]]
            for row in db.tuples(
                f"SELECT path FROM live WHERE space_id = ? AND path IN ({marks(len(chunk))})",
                (space_id, *chunk),
            )
        )
    return found


def _live_sizes(db: Db, space_id: int | None) -> dict[str, int]:
    """Each live file's size, without reading its bytes."""
    if space_id is None:
        return {}
    names = _names(db, space_id, create=False)
    return {
        names.path(kept): int(size)
        for kept, size in db.tuples(
            "SELECT live.path, revisions.size FROM live"
            f" JOIN revisions{db.index('revisions_manifest')} ON revisions.id = live.revision_id"
            " WHERE live.space_id = ?",
            (space_id,),
        )
    }


def _live_origins(db: Db, space_id: int | None) -> dict[str, LiveOrigin]:
    """Each live file's size and its live revision's origin, in one query, in path order."""
    if space_id is None:
        return {}
    # Plain tuples: one per file of a space that may hold 10,000.
    rows = db.tuples(
        "SELECT live.path, revisions.size, revisions.origin FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? ORDER BY live.path",
        (space_id,),
    )
    names = _names(db, space_id, create=False)
    return {
        path: LiveOrigin(int(size), origin) for path, size, origin in _in_path_order(rows, names)
    }


_INSERT_REVISION = (
    "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin, session, turn,"
    " prompt, by_id, by_label, by_role, approved_by_id, approved_by_label, approved_by_role,"
    " created_at, mode, mtime_ns, ctime_ns, sealed, author)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_LIVE = (
    "INSERT INTO live (space_id, path, revision_id) VALUES (?, ?, ?)"
    " ON CONFLICT (space_id, path) DO UPDATE SET revision_id = excluded.revision_id"
)


def _record(
    db: Db,
    space_id: int,
    path: str,
    content: bytes | None,
    provenance: Provenance,
    approved_by: By | None = None,
    meta: FileMeta | None = None,
) -> int:
    """Write one revision of ``path``; its id (from the shared clock)."""
    # The id comes from the shared clock, so it orders against change edits too.
    revision_id = db.tick()
    was = None
    if content is not None:
        was = _live_meta(db, space_id, _names(db, space_id, create=True).kept(path, write=True))
    row = _revision_row(
        db, space_id, revision_id, path, content, provenance, approved_by, meta=meta, was=was
    )
    db.execute(_INSERT_REVISION, row)
    return revision_id


def _revision_row(
    db: Db,
    space_id: int,
    revision_id: int,
    path: str,
    content: bytes | None,
    provenance: Provenance,
    approved_by: By | None = None,
    *,
    meta: FileMeta | None,
    was: FileMeta | None,
) -> tuple[object, ...]:
    """The ``revisions`` row of one revision (``was``: the live file's metadata, if live)."""
    by = provenance.by
    # A person's memory is sealed under their key, bound to this row (``sealed``),
    # and its path kept by name.
    names = _names(db, space_id, create=True)
    sealer = names.sealer
    kept = names.kept(path, write=True)
    settled = None if content is None else settle_meta(meta, was, provenance.at)
    prompt: object = db.kept_text(provenance.prompt)
    by_label: object = db.kept_text(None if by is None else by.label)
    approved_label: object = db.kept_text(None if approved_by is None else approved_by.label)
    stored_content: bytes | None = content
    sealed, author = 0, None
    if sealer is not None:
        sealed = SEALED_CONTENT
        if content is not None:
            stored_content = sealer.content(path, revision_id, content)
        prompt = sealer.text("prompt", path, revision_id, provenance.prompt)
        by_label = sealer.text("by_label", path, revision_id, None if by is None else by.label)
        approved_label = sealer.text(
            "approved_by_label",
            path,
            revision_id,
            None if approved_by is None else approved_by.label,
        )
    elif (author := provenance.words_author) is not None:
        # Org memory is the org's; the words that taught it are the author's.
        words = _author_sealer(db, space_id, author, create=True)
        assert words is not None  # made just now if the author had no key
        sealed = SEALED_WORDS
        prompt = words.text("prompt", path, revision_id, provenance.prompt)
        by_label = words.text("by_label", path, revision_id, None if by is None else by.label)
    return (
        revision_id,
        space_id,
        kept,
        stored_content,
        None if content is None else digest(content),
        0 if content is None else len(content),
        provenance.origin,
        provenance.session,
        provenance.turn,
        prompt,
        None if by is None else by.id,
        by_label,
        None if by is None else by.role,
        None if approved_by is None else approved_by.id,
        approved_label,
        None if approved_by is None else approved_by.role,
        db.stamp(provenance.at),
        None if settled is None else settled.mode,
        None if settled is None else settled.mtime_ns,
        None if settled is None else settled.ctime_ns,
        sealed,
        author,
    )


def _make_live(db: Db, space_id: int, path: str, revision_id: int) -> None:
    db.execute(_INSERT_LIVE, (space_id, _names(db, space_id, create=True).kept(path), revision_id))


def _unlive(db: Db, space_id: int, path: str) -> int:
    """Take ``path`` out of the live files; how many rows that removed (0 or 1)."""
    kept = _names(db, space_id, create=False).kept(path)
    return db.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, kept)).rowcount


def _latest_revisions(db: Db, space_id: int, paths: Collection[str]) -> dict[str, int]:
    """Each of ``paths``' latest revision in the space, deletions included (absent: none)."""
    names = _names(db, space_id, create=False)
    by_kept = {names.kept(path): path for path in paths}
    found: dict[str, int] = {}
    for chunk in chunks(list(by_kept)):
        for kept, latest in db.tuples(
            "SELECT path, MAX(id) FROM revisions"
            f" WHERE space_id = ? AND path IN ({marks(len(chunk))}) GROUP BY path",
            (space_id, *chunk),
        ):
            found[by_kept[kept]] = int(latest)
    return found


def _live_metas_of(db: Db, space_id: int, kept: Collection[str]) -> dict[str, FileMeta]:
    """The live metadata of the files among ``kept`` (paths as the rows keep them)."""
    found: dict[str, FileMeta] = {}
    for chunk in chunks(list(kept)):
        for path, mode, mtime, ctime in db.tuples(
            "SELECT live.path, revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
            " JOIN revisions ON revisions.id = live.revision_id"
            f" WHERE live.space_id = ? AND live.path IN ({marks(len(chunk))})",
            (space_id, *chunk),
        ):
            found[path] = _meta(mode, mtime, ctime)
    return found


def _put_back_since(db: Db, base: int, current: int) -> bool:
    """Whether the store was put back to a backup since a turn loaded at ``base``.

    The turn loaded at a number the store has not handed out: what it
    started from is gone, and the numbers it would compare with come again,
    so every path it changed conflicts (kept by the daemon, never written
    over, never held for a reviewer who could not tell it stale). The
    sequence is read only past the space's own numbers (``current``), where
    otherwise only a forget puts a cursor.
    """
    return base > current and base > db.clock()


def _store(
    db: Db,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
) -> Stored:
    space_id = _space_id(db, ref)
    current = _cursor(db, space_id)
    # Checked even when the space has no row: forgetting a person deletes it,
    # and a turn that loaded before must not write their files back.
    if base is not None:
        last_change = {} if space_id is None else _latest_revisions(db, space_id, changes.paths)
        conflicts = sorted(
            {*moved_on(changes.paths, last_change, base), *purged_since(changes, last_change)}
        )
        if _put_back_since(db, base, current):
            conflicts = sorted(changes.paths)
        if conflicts:
            return Stored(status="conflict", conflicts=tuple(conflicts), cursor=str(current))
    if changes.is_empty():
        return Stored(status="saved", cursor=str(current))
    review.require_deletable(changes.deleted, _live_among(db, space_id, changes.deleted))
    if space_id is None:
        space_id = _ensure_space(db, ref)

    _set_folders(db, space_id, review.folder_changes(changes))
    written: dict[str, str] = {}
    contents = sorted({**changes.created, **changes.updated}.items())
    if contents:
        # All of them at once: one statement for what is live, one for their
        # numbers, one batch of each insert (a round trip each to PostgreSQL).
        names = _names(db, space_id, create=True)
        kept = [names.kept(path, write=True) for path, _ in contents]
        was = _live_metas_of(db, space_id, kept)
        ids = db.ticks(len(contents))
        db.execute_many(
            _INSERT_REVISION,
            [
                _revision_row(
                    db,
                    space_id,
                    revision_id,
                    path,
                    content,
                    provenance,
                    meta=changes.meta.get(path),
                    was=was.get(name),
                )
                for (path, content), name, revision_id in zip(contents, kept, ids, strict=True)
            ],
        )
        db.execute_many(
            _INSERT_LIVE,
            [(space_id, name, revision_id) for name, revision_id in zip(kept, ids, strict=True)],
        )
        written.update((path, str(id_)) for (path, _), id_ in zip(contents, ids, strict=True))
        current = ids[-1]
    for path in changes.deleted:
        _unlive(db, space_id, path)
        current = _record(db, space_id, path, None, provenance)
        written[path] = str(current)
    return Stored(status="saved", revisions=written, cursor=str(current))


def _person_forgotten_at(db: Db, org: str, user: str) -> int:
    """When ``user`` of ``org`` was last forgotten whole; 0 if never."""
    row = db.execute(
        "SELECT seq FROM forgotten WHERE key = ?", (_forgotten_key(org, user, ""),)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _forgotten_at(db: Db, ref: SpaceRef) -> int:
    """When ``ref`` (or its whole person) was last forgotten; 0 if never, or not a person's."""
    if ref.layer != "user":
        return 0
    user = ref.user or ""
    (seq,) = db.execute(
        "SELECT MAX(seq) FROM forgotten WHERE key IN (?, ?)",
        (_forgotten_key(ref.org, user, ref.space), _forgotten_key(ref.org, user, "")),
    ).fetchone()
    return int(seq or 0)


def _delete_live(
    db: Db,
    space_id: int,
    path: str,
    provenance: Provenance,
    approved_by: By | None = None,
) -> None:
    """A deletion revision if ``path`` is live; nothing to delete otherwise."""
    if _unlive(db, space_id, path) == 1:
        _record(db, space_id, path, None, provenance, approved_by)
