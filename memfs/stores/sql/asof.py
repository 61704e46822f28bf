"""The files of a space as of a cursor (the traces of a turn or a space are ``traces.py``'s).

A cursor is a number of the store's one sequence (``rows``), and so is every
revision id, so the files as of a cursor are, per path, the revision with the
largest id at or below it, unless that revision is a deletion. Two covering
indexes answer it without touching a byte of content: ``revisions_by_path``
(space, path, id) finds each path's revision, ``revisions_manifest`` gives its
sha256 and size (SQLite is told to use them; PostgreSQL's planner picks
them). The cost grows with the space's revisions, not with its bytes.
Purged files (a person's forgotten file) and forgotten people left no rows,
so they are gone from the past as well.
"""

from __future__ import annotations

from memfs.core import audit as audit_rules
from memfs.core.errors import NotFound
from memfs.core.models import AsOfFile, By, SpaceRef
from memfs.core.story import as_of_cursor
from memfs.stores.sql.audit import _log
from memfs.stores.sql.db import Db
from memfs.stores.sql.rows import (
    _in_path_order,
)
from memfs.stores.sql.sealed import _names
from memfs.stores.sql.spaces import _space_id


def _as_of_query(db: Db) -> str:
    """Parameters: the space's id, the cursor's number.

    Both sides are covering indexes, so no row (and no byte of content) of
    revisions is read.
    """
    return (
        "SELECT latest.path, revisions.id, revisions.sha256, revisions.size FROM ("
        f" SELECT path, MAX(id) AS id FROM revisions{db.index('revisions_by_path')}"
        " WHERE space_id = ? AND id <= ? GROUP BY path) AS latest"
        f" JOIN revisions{db.index('revisions_manifest')} ON revisions.id = latest.id"
        " WHERE revisions.sha256 IS NOT NULL ORDER BY latest.path"
    )


def _files_as_of(db: Db, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
    at = as_of_cursor(cursor, db.clock())
    space_id = _space_id(db, ref)
    if space_id is None:
        return {}
    rows = _in_path_order(
        db.tuples(_as_of_query(db), (space_id, at)), _names(db, space_id, create=False)
    )
    return {path: AsOfFile(str(rid), sha, int(size)) for path, rid, sha, size in rows}


def _open_files_as_of(
    db: Db, ref: SpaceRef, cursor: str, by: By | None
) -> dict[str, AsOfFile] | NotFound:
    """The files as of ``cursor``, the look at a person's recorded; a cursor not issued: why.

    Returned, not raised, so the look is recorded (in this transaction)
    even then: the caller shows the names a turn's trace kept instead.
    """
    try:
        found: dict[str, AsOfFile] | NotFound = _files_as_of(db, ref, cursor)
    except NotFound as exc:
        found = exc
    if ref.layer == "user":
        if isinstance(found, NotFound):
            detail = audit_rules.UNKNOWN_CURSOR
        else:
            detail = audit_rules.count(len(found), "file")
        _log(db, "open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
    return found
