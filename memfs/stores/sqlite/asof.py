"""The files of a space as of a cursor, and the traces of one turn or one space.

A cursor is a number of the store's one sequence (``rows``), and so is every
revision id, so the files as of a cursor are, per path, the revision with the
largest id at or below it, unless that revision is a deletion. Two covering
indexes answer it without touching a byte of content: ``revisions_by_path``
(space, path, id) finds each path's revision, ``revisions_manifest`` gives its
sha256 and size. The cost grows with the space's revisions, not with its bytes.
Purged files (a person's forgotten file) and forgotten people left no rows,
so they are gone from the past as well.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from memfs.core import audit as audit_rules
from memfs.core.models import AsOfFile, By, SpaceRef, Trace
from memfs.core.story import as_of_cursor, trace_matches
from memfs.stores.sqlite.audit import _log
from memfs.stores.sqlite.rows import _space_id, _timestamp

# Parameters: the space's id, the cursor's number. Both sides are covering
# indexes, so no row (and no byte of content) of revisions is read.
AS_OF_QUERY = (
    "SELECT latest.path, revisions.id, revisions.sha256, revisions.size FROM ("
    " SELECT path, MAX(id) AS id FROM revisions INDEXED BY revisions_by_path"
    " WHERE space_id = ? AND id <= ? GROUP BY path) AS latest"
    " JOIN revisions INDEXED BY revisions_manifest ON revisions.id = latest.id"
    " WHERE revisions.sha256 IS NOT NULL ORDER BY latest.path"
)


def _clock(conn: sqlite3.Connection) -> int:
    """Where the store's sequence stands: no cursor it issued is past it."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'clock'").fetchone()
    return 0 if row is None else int(row[0])


def _files_as_of(conn: sqlite3.Connection, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
    at = as_of_cursor(cursor, _clock(conn))
    space_id = _space_id(conn, ref)
    if space_id is None:
        return {}
    cur = conn.cursor()
    cur.row_factory = None
    rows = cur.execute(AS_OF_QUERY, (space_id, at)).fetchall()
    return {path: AsOfFile(str(rid), sha, size) for path, rid, sha, size in rows}


def _open_files_as_of(
    conn: sqlite3.Connection, ref: SpaceRef, cursor: str, by: By | None
) -> dict[str, AsOfFile]:
    found = _files_as_of(conn, ref, cursor)
    if ref.layer == "user":
        detail = audit_rules.count(len(found), "file")
        _log(conn, "open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
    return found


def _find_traces(
    conn: sqlite3.Connection,
    turn: str | None,
    space: SpaceRef | None,
    since: datetime | None,
) -> list[Trace]:
    """Traces of ``turn``, mounting ``space``, ended at or after ``since``, oldest first.

    SQL narrows the rows (the turn column, the time, the space's name as it
    appears in the JSON) so only candidates are parsed; ``trace_matches``
    decides exactly.
    """
    query = "SELECT data FROM traces WHERE 1"
    params: list[str] = []
    if turn is not None:
        query += " AND turn = ?"
        params.append(turn)
    if since is not None:
        # Timestamps are UTC ISO strings (``_timestamp``), so text order is time order
        # to the second; the exact check below settles the rest.
        query += " AND at >= ?"
        params.append(_timestamp(since)[:19])
    if space is not None:
        query += " AND instr(data, ?) > 0"
        params.append('"space":' + json.dumps(space.space, ensure_ascii=False))
    rows = conn.execute(query + " ORDER BY id", params)
    found = (Trace.model_validate_json(row[0]) for row in rows)
    return [t for t in found if trace_matches(t, turn=turn, space=space, since=since)]
