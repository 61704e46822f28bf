"""Rows every part of the PostgreSQL store writes with: spaces, revisions, live files, folders.

As in the SQLite store (:mod:`memfs.stores.sqlite.rows`), revision ids and
the ``edited`` number of every file put into a review change come from one
sequence, ``clock`` (:func:`_tick`), a space's cursor is the largest number
of it the space has used, and a store conflicts on each path it touches
whose latest revision is newer than the cursor (:func:`_store`).

A PostgreSQL sequence hands out numbers outside transactions, so on its own
a number taken earlier could commit later than one taken after it, and a
cursor would not cover everything at or below it. Every write transaction
therefore first takes the store's write lock (:data:`WRITE_LOCK`, a
transaction-level advisory lock; see ``store.py``), as SQLite's writers take
its write lock: numbers are taken, and committed, in one order, and a cursor
names exactly the writes a load saw.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from memfs.core import review
from memfs.core.models import (
    By,
    ChangeSet,
    FileMeta,
    Provenance,
    SpaceRef,
    Stored,
    digest,
    settle_meta,
)
from memfs.core.policy import moved_on, purged_since
from memfs.stores.managed import file_meta, forgotten_key

Conn = psycopg.Connection[TupleRow]

# pg_advisory_xact_lock keys: (memfs, what). Two ints, so they stay clear of
# other applications' single-bigint keys on a shared database.
LOCK_CLASS = 0x6D656D66  # "memf"
WRITE_LOCK = 1
MIGRATION_LOCK = 2


def _one(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> TupleRow | None:
    return conn.execute(query, params).fetchone()


def _all(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> list[TupleRow]:
    return conn.execute(query, params).fetchall()


def _run(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> int:
    """Run a statement; how many rows it touched."""
    return conn.execute(query, params).rowcount


def _space_id(conn: Conn, ref: SpaceRef) -> int | None:
    row = _one(
        conn,
        'SELECT id FROM spaces WHERE layer = %s AND org = %s AND "user" = %s AND space = %s',
        (ref.layer, ref.org, ref.user or "", ref.space),
    )
    return None if row is None else int(row[0])


def _ensure_space(conn: Conn, ref: SpaceRef) -> int:
    _run(
        conn,
        'INSERT INTO spaces (layer, org, "user", space) VALUES (%s, %s, %s, %s)'
        " ON CONFLICT DO NOTHING",
        (ref.layer, ref.org, ref.user or "", ref.space),
    )
    space_id = _space_id(conn, ref)
    assert space_id is not None  # inserted just above, in this transaction
    return space_id


def _tick(conn: Conn) -> int:
    """The next number of the store's one sequence (revisions and change edits)."""
    row = _one(conn, "SELECT nextval('clock')")
    assert row is not None
    return int(row[0])


def _cursor(conn: Conn, space_id: int | None) -> int:
    """The largest number of the sequence this space has used, 0 if none (see the SQLite store)."""
    if space_id is None:
        return 0
    row = _one(
        conn,
        "SELECT GREATEST((SELECT MAX(id) FROM revisions WHERE space_id = %s),"
        " (SELECT MAX(last_edited) FROM changes WHERE space_id = %s))",
        (space_id, space_id),
    )
    return 0 if row is None or row[0] is None else int(row[0])


def _live_files(
    conn: Conn, space_id: int
) -> tuple[dict[str, bytes], dict[str, str], dict[str, str]]:
    files: dict[str, bytes] = {}
    revisions: dict[str, str] = {}
    shas: dict[str, str] = {}
    for path, revision_id, content, sha in _all(
        conn,
        "SELECT live.path, live.revision_id, revisions.content, revisions.sha256 FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = %s ORDER BY live.path",
        (space_id,),
    ):
        files[path] = bytes(content)
        revisions[path] = str(revision_id)
        if sha is not None:
            shas[path] = sha
    return files, revisions, shas


def _live_metas(conn: Conn, space_id: int) -> dict[str, FileMeta]:
    return {
        path: file_meta(mode, mtime, ctime)
        for path, mode, mtime, ctime in _all(
            conn,
            "SELECT live.path, revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
            " JOIN revisions ON revisions.id = live.revision_id WHERE live.space_id = %s",
            (space_id,),
        )
    }


def _live_meta(conn: Conn, space_id: int | None, path: str) -> FileMeta | None:
    """The live file's metadata; None if ``path`` is not live."""
    if space_id is None:
        return None
    row = _one(
        conn,
        "SELECT revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = %s AND live.path = %s",
        (space_id, path),
    )
    return None if row is None else file_meta(row[0], row[1], row[2])


def _folders(conn: Conn, space_id: int) -> set[str]:
    return {
        row[0] for row in _all(conn, "SELECT path FROM folders WHERE space_id = %s", (space_id,))
    }


def _set_folders(conn: Conn, space_id: int, folders: Mapping[str, bool]) -> None:
    """Store (True) or remove (False) folders; either is a no-op where it already holds."""
    for path, made in sorted(folders.items()):
        if made:
            _run(
                conn,
                "INSERT INTO folders (space_id, path) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (space_id, path),
            )
        else:
            _run(conn, "DELETE FROM folders WHERE space_id = %s AND path = %s", (space_id, path))


def _live_among(conn: Conn, space_id: int | None, paths: Collection[str]) -> set[str]:
    """Which of ``paths`` are live in the space (for the deletion rule, without reading bytes)."""
    if space_id is None or not paths:
        return set()
    return {
        row[0]
        for row in _all(
            conn,
            "SELECT path FROM live WHERE space_id = %s AND path = ANY(%s)",
            (space_id, list(paths)),
        )
    }


def _live_sizes(conn: Conn, space_id: int | None) -> dict[str, int]:
    """Each live file's size, without reading its bytes."""
    if space_id is None:
        return {}
    return {
        path: int(size)
        for path, size in _all(
            conn,
            "SELECT live.path, revisions.size FROM live"
            " JOIN revisions ON revisions.id = live.revision_id WHERE live.space_id = %s",
            (space_id,),
        )
    }


def _record(
    conn: Conn,
    space_id: int,
    path: str,
    content: bytes | None,
    provenance: Provenance,
    approved_by: By | None = None,
    meta: FileMeta | None = None,
) -> int:
    by = provenance.by
    settled = (
        None
        if content is None
        else settle_meta(meta, _live_meta(conn, space_id, path), provenance.at)
    )
    # The id comes from the shared clock, so it orders against change edits too.
    revision_id = _tick(conn)
    _run(
        conn,
        "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin, session, turn,"
        " prompt, by_id, by_label, by_role, approved_by_id, approved_by_label, approved_by_role,"
        " created_at, mode, mtime_ns, ctime_ns)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            revision_id,
            space_id,
            path,
            content,
            None if content is None else digest(content),
            0 if content is None else len(content),
            provenance.origin,
            provenance.session,
            provenance.turn,
            provenance.prompt,
            None if by is None else by.id,
            None if by is None else by.label,
            None if by is None else by.role,
            None if approved_by is None else approved_by.id,
            None if approved_by is None else approved_by.label,
            None if approved_by is None else approved_by.role,
            _aware(provenance.at),
            None if settled is None else settled.mode,
            None if settled is None else settled.mtime_ns,
            None if settled is None else settled.ctime_ns,
        ),
    )
    return revision_id


def _aware(at: datetime) -> datetime:
    # memfs makes aware times (models.now); a naive one from an app is taken as UTC
    # rather than the server's zone, as the SQLite store takes it.
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def _make_live(conn: Conn, space_id: int, path: str, revision_id: int) -> None:
    _run(
        conn,
        "INSERT INTO live (space_id, path, revision_id) VALUES (%s, %s, %s)"
        " ON CONFLICT (space_id, path) DO UPDATE SET revision_id = excluded.revision_id",
        (space_id, path, revision_id),
    )


def _store(
    conn: Conn,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
) -> Stored:
    space_id = _space_id(conn, ref)
    current = _cursor(conn, space_id)
    # Checked even when the space has no row: forgetting a person deletes it,
    # and a turn that loaded before must not write their files back.
    if base is not None:
        last_change: dict[str, int] = {}
        if space_id is not None and changes.paths:
            last_change = {
                path: int(latest)
                for path, latest in _all(
                    conn,
                    "SELECT path, MAX(id) FROM revisions WHERE space_id = %s AND path = ANY(%s)"
                    " GROUP BY path",
                    (space_id, list(changes.paths)),
                )
            }
        conflicts = sorted(
            {*moved_on(changes.paths, last_change, base), *purged_since(changes, last_change)}
        )
        if conflicts:
            return Stored(status="conflict", conflicts=tuple(conflicts), cursor=str(current))
    if changes.is_empty():
        return Stored(status="saved", cursor=str(current))
    review.require_deletable(changes.deleted, _live_among(conn, space_id, changes.deleted))
    if space_id is None:
        space_id = _ensure_space(conn, ref)

    _set_folders(conn, space_id, review.folder_changes(changes))
    written: dict[str, str] = {}
    for path, content in sorted({**changes.created, **changes.updated}.items()):
        current = _record(conn, space_id, path, content, provenance, meta=changes.meta.get(path))
        _make_live(conn, space_id, path, current)
        written[path] = str(current)
    for path in changes.deleted:
        _run(conn, "DELETE FROM live WHERE space_id = %s AND path = %s", (space_id, path))
        current = _record(conn, space_id, path, None, provenance)
        written[path] = str(current)
    return Stored(status="saved", revisions=written, cursor=str(current))


def _forgotten_at(conn: Conn, ref: SpaceRef) -> int:
    """When ``ref`` (or its whole person) was last forgotten; 0 if never, or not a person's."""
    if ref.layer != "user":
        return 0
    user = ref.user or ""
    row = _one(
        conn,
        "SELECT MAX(seq) FROM forgotten WHERE key IN (%s, %s)",
        (forgotten_key(ref.org, user, ref.space), forgotten_key(ref.org, user, "")),
    )
    return 0 if row is None or row[0] is None else int(row[0])


def _delete_live(
    conn: Conn,
    space_id: int,
    path: str,
    provenance: Provenance,
    approved_by: By | None = None,
) -> None:
    """A deletion revision if ``path`` is live; nothing to delete otherwise."""
    if _run(conn, "DELETE FROM live WHERE space_id = %s AND path = %s", (space_id, path)) == 1:
        _record(conn, space_id, path, None, provenance, approved_by)
