"""Rows every part of the SQLite store writes with: spaces, revisions, live files, folders.

Revision ids and the ``edited`` number of every file put into a review
change come from one sequence, ``clock`` (:func:`_tick`), so the review
rules (:mod:`memfs.core.review`) can compare "when did the live file
change" with "when did another conversation edit it" and with "when did
this turn load". A space's cursor is the largest number of that sequence
the space has used (a revision or a change edit), and a store conflicts on
each path it touches whose latest revision is newer than the cursor
(:func:`_store`). Numbers are never reused, so every later write is newer
than any cursor handed out before, even where forgetting deleted rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from datetime import UTC, datetime

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
from memfs.stores.sqlite.sealed import _opened, _sealer


def _timestamp(at: datetime) -> str:
    # memfs makes aware times (models.now); a naive one from an app is taken as UTC
    # rather than the host's zone, so the stored instant never depends on the host.
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat()


def _space_id(conn: sqlite3.Connection, ref: SpaceRef) -> int | None:
    row = conn.execute(
        'SELECT id FROM spaces WHERE layer = ? AND org = ? AND "user" = ? AND space = ?',
        (ref.layer, ref.org, ref.user or "", ref.space),
    ).fetchone()
    return None if row is None else int(row[0])


def _ensure_space(conn: sqlite3.Connection, ref: SpaceRef) -> int:
    conn.execute(
        'INSERT INTO spaces (layer, org, "user", space) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
        (ref.layer, ref.org, ref.user or "", ref.space),
    )
    space_id = _space_id(conn, ref)
    assert space_id is not None  # inserted just above, in this transaction
    return space_id


def _tick(conn: sqlite3.Connection) -> int:
    """The next number of the store's one sequence (revisions and change edits)."""
    cur = conn.execute("INSERT INTO clock DEFAULT VALUES")
    assert cur.lastrowid is not None  # always set after an INSERT into a rowid table
    # The number lives on in sqlite_sequence; the row itself is not needed.
    conn.execute("DELETE FROM clock WHERE id = ?", (cur.lastrowid,))
    return cur.lastrowid


def _cursor(conn: sqlite3.Connection, space_id: int | None) -> int:
    """The largest number of the sequence this space has used, 0 if none.

    Per space rather than the global clock, so another space's writes do not
    move it; change edits count, so a turn's ``loaded`` (its cursor) compares
    with other changes' ``edited`` the way the review rules need.
    """
    if space_id is None:
        return 0
    (revision,) = conn.execute(
        "SELECT MAX(id) FROM revisions WHERE space_id = ?", (space_id,)
    ).fetchone()
    (edited,) = conn.execute(
        "SELECT MAX(last_edited) FROM changes WHERE space_id = ?", (space_id,)
    ).fetchone()
    return max(int(revision or 0), int(edited or 0))


def _live_files(
    conn: sqlite3.Connection, space_id: int
) -> tuple[dict[str, bytes], dict[str, str], dict[str, str]]:
    files: dict[str, bytes] = {}
    revisions: dict[str, str] = {}
    shas: dict[str, str] = {}
    sealer = _sealer(conn, space_id, create=False)
    for path, revision_id, content, sha, sealed in conn.execute(
        "SELECT live.path, live.revision_id, revisions.content, revisions.sha256,"
        " revisions.sealed FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? ORDER BY live.path",
        (space_id,),
    ):
        files[path] = _opened(sealer, path, revision_id, content, sealed)
        revisions[path] = str(revision_id)
        if sha is not None:
            shas[path] = sha
    return files, revisions, shas


_CHUNK = 500  # host parameters per IN (...) list, well under SQLite's limit


def _live_metas(conn: sqlite3.Connection, space_id: int) -> dict[str, FileMeta]:
    return {
        path: _meta(mode, mtime, ctime)
        for path, mode, mtime, ctime in conn.execute(
            "SELECT live.path, revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
            " JOIN revisions INDEXED BY revisions_manifest ON revisions.id = live.revision_id"
            " WHERE live.space_id = ?",
            (space_id,),
        )
    }


def _live_meta(conn: sqlite3.Connection, space_id: int | None, path: str) -> FileMeta | None:
    """The live file's metadata; None if ``path`` is not live."""
    if space_id is None:
        return None
    row = conn.execute(
        "SELECT revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? AND live.path = ?",
        (space_id, path),
    ).fetchone()
    return None if row is None else _meta(row[0], row[1], row[2])


def _folders(conn: sqlite3.Connection, space_id: int) -> set[str]:
    return {
        row[0] for row in conn.execute("SELECT path FROM folders WHERE space_id = ?", (space_id,))
    }


def _set_folders(conn: sqlite3.Connection, space_id: int, folders: Mapping[str, bool]) -> None:
    """Store (True) or remove (False) folders; either is a no-op where it already holds."""
    for path, made in sorted(folders.items()):
        if made:
            conn.execute(
                "INSERT INTO folders (space_id, path) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (space_id, path),
            )
        else:
            conn.execute("DELETE FROM folders WHERE space_id = ? AND path = ?", (space_id, path))


def _live_among(conn: sqlite3.Connection, space_id: int | None, paths: Collection[str]) -> set[str]:
    """Which of ``paths`` are live in the space (for the deletion rule, without reading bytes)."""
    if space_id is None or not paths:
        return set()
    found: set[str] = set()
    wanted = list(paths)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(
            row[0]
            for row in conn.execute(
                f"SELECT path FROM live WHERE space_id = ? AND path IN ({marks})",
                (space_id, *chunk),
            )
        )
    return found


def _live_sizes(conn: sqlite3.Connection, space_id: int | None) -> dict[str, int]:
    """Each live file's size, without reading its bytes."""
    if space_id is None:
        return {}
    return {
        path: int(size)
        for path, size in conn.execute(
            "SELECT live.path, revisions.size FROM live"
            " JOIN revisions INDEXED BY revisions_manifest ON revisions.id = live.revision_id"
            " WHERE live.space_id = ?",
            (space_id,),
        )
    }


def _live_origins(conn: sqlite3.Connection, space_id: int | None) -> dict[str, LiveOrigin]:
    """Each live file's size and its live revision's origin, in one query, in path order."""
    if space_id is None:
        return {}
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: one per file of a space that may hold 10,000
    rows = cur.execute(
        "SELECT live.path, revisions.size, revisions.origin FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? ORDER BY live.path",
        (space_id,),
    )
    return {path: LiveOrigin(int(size), origin) for path, size, origin in rows}


def _record(
    conn: sqlite3.Connection,
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
    # A person's memory is sealed under their key, bound to this row (``sealed``).
    sealer = _sealer(conn, space_id, create=True)
    prompt: object = provenance.prompt
    by_label: object = None if by is None else by.label
    approved_label: object = None if approved_by is None else approved_by.label
    stored_content: bytes | None = content
    if sealer is not None:
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
    conn.execute(
        "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin, session, turn,"
        " prompt, by_id, by_label, by_role, approved_by_id, approved_by_label, approved_by_role,"
        " created_at, mode, mtime_ns, ctime_ns, sealed)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            revision_id,
            space_id,
            path,
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
            _timestamp(provenance.at),
            None if settled is None else settled.mode,
            None if settled is None else settled.mtime_ns,
            None if settled is None else settled.ctime_ns,
            0 if sealer is None else 1,
        ),
    )
    return revision_id


def _make_live(conn: sqlite3.Connection, space_id: int, path: str, revision_id: int) -> None:
    conn.execute(
        "INSERT INTO live (space_id, path, revision_id) VALUES (?, ?, ?)"
        " ON CONFLICT (space_id, path) DO UPDATE SET revision_id = excluded.revision_id",
        (space_id, path, revision_id),
    )


def _store(
    conn: sqlite3.Connection,
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
        for path in changes.paths if space_id is not None else ():
            (latest,) = conn.execute(
                "SELECT MAX(id) FROM revisions WHERE space_id = ? AND path = ?", (space_id, path)
            ).fetchone()
            if latest is not None:
                last_change[path] = int(latest)
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
        conn.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, path))
        current = _record(conn, space_id, path, None, provenance)
        written[path] = str(current)
    return Stored(status="saved", revisions=written, cursor=str(current))


def _forgotten_at(conn: sqlite3.Connection, ref: SpaceRef) -> int:
    """When ``ref`` (or its whole person) was last forgotten; 0 if never, or not a person's."""
    if ref.layer != "user":
        return 0
    user = ref.user or ""
    (seq,) = conn.execute(
        "SELECT MAX(seq) FROM forgotten WHERE key IN (?, ?)",
        (_forgotten_key(ref.org, user, ref.space), _forgotten_key(ref.org, user, "")),
    ).fetchone()
    return int(seq or 0)


def _delete_live(
    conn: sqlite3.Connection,
    space_id: int,
    path: str,
    provenance: Provenance,
    approved_by: By | None = None,
) -> None:
    """A deletion revision if ``path`` is live; nothing to delete otherwise."""
    gone = conn.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, path))
    if gone.rowcount == 1:
        _record(conn, space_id, path, None, provenance, approved_by)
