"""The files of a space as of a cursor, the traces of one turn or one space, and live origins.

As in the SQLite store (:mod:`memfs.stores.sqlite.asof`): a cursor and every
revision id are numbers of the store's one sequence (``clock``), and the
write lock makes them commit in order, so the files as of a cursor are, per
path, the revision with the largest id at or below it, unless that revision
is a deletion. ``revisions_by_path`` (space, path, id) serves it with
``DISTINCT ON``; no content is read. Purged files (a person's forgotten file)
and forgotten people left no rows, so they are gone from the past as well.
"""

from __future__ import annotations

import json
from datetime import datetime

from memfs.core import audit as audit_rules
from memfs.core.models import AsOfFile, By, LiveOrigin, SpaceRef, Trace
from memfs.core.story import as_of_cursor, trace_matches
from memfs.stores.postgres.audit import _log
from memfs.stores.postgres.rows import Conn, _all, _aware, _one, _space_id

# Parameters: the space's id, the cursor's number.
AS_OF_QUERY = (
    "SELECT path, id, sha256, size FROM ("
    " SELECT DISTINCT ON (path) path, id, sha256, size FROM revisions"
    " WHERE space_id = %s AND id <= %s ORDER BY path, id DESC) AS latest"
    " WHERE sha256 IS NOT NULL ORDER BY path"
)


def _clock(conn: Conn) -> int:
    """Where the store's sequence stands: no cursor it issued is past it."""
    row = _one(conn, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM clock")
    return 0 if row is None else int(row[0])


def _files_as_of(conn: Conn, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
    at = as_of_cursor(cursor, _clock(conn))
    space_id = _space_id(conn, ref)
    if space_id is None:
        return {}
    rows = _all(conn, AS_OF_QUERY, (space_id, at))
    return {path: AsOfFile(str(rid), sha, int(size)) for path, rid, sha, size in rows}


def _open_files_as_of(conn: Conn, ref: SpaceRef, cursor: str, by: By | None) -> dict[str, AsOfFile]:
    found = _files_as_of(conn, ref, cursor)
    if ref.layer == "user":
        detail = audit_rules.count(len(found), "file")
        _log(conn, "open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
    return found


def _find_traces(
    conn: Conn, turn: str | None, space: SpaceRef | None, since: datetime | None
) -> list[Trace]:
    """Traces of ``turn``, mounting ``space``, ended at or after ``since``, oldest first.

    SQL narrows the rows (the turn column, the time, the space's name as it
    appears in the JSON) so only candidates are parsed; ``trace_matches``
    decides exactly.
    """
    query = "SELECT data FROM traces WHERE true"
    params: list[object] = []
    if turn is not None:
        query += " AND turn = %s"
        params.append(turn)
    if since is not None:
        query += " AND at >= %s"
        params.append(_aware(since))
    if space is not None:
        query += " AND strpos(data, %s) > 0"
        params.append('"space":' + json.dumps(space.space, ensure_ascii=False))
    found = (
        Trace.model_validate_json(row[0])
        for row in _all(conn, query + " ORDER BY id", tuple(params))
    )
    return [t for t in found if trace_matches(t, turn=turn, space=space, since=since)]


def _live_origins(conn: Conn, ref: SpaceRef) -> dict[str, LiveOrigin]:
    """Each live file's size and its live revision's origin, in one query, in path order."""
    space_id = _space_id(conn, ref)
    if space_id is None:
        return {}
    rows = _all(
        conn,
        "SELECT live.path, revisions.size, revisions.origin FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = %s ORDER BY live.path",
        (space_id,),
    )
    return {path: LiveOrigin(int(size), origin) for path, size, origin in rows}
