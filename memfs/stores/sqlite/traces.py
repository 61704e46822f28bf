"""What each turn saw and did, kept as ``Trace`` JSON, and rewritten when someone is forgotten."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from memfs.core.models import (
    SpaceRef,
    Trace,
)
from memfs.stores.sqlite.rows import _timestamp


def _forget_in_traces(conn: sqlite3.Connection, user: str, org: str) -> None:
    """Rewrite every trace that mounted one of the person's spaces in ``org`` without them.

    The row is updated in place; with ``secure_delete`` on, the space the old
    JSON took is zeroed, and the purge's checkpoint empties the log after.
    """
    needle = '"user":' + json.dumps(user, ensure_ascii=False)
    _rewrite_traces(conn, needle, lambda trace: trace.without_user(user, org))


def _rewrite_traces(
    conn: sqlite3.Connection, needle: str, rewrite: Callable[[Trace], Trace | None]
) -> None:
    """Rewrite in place every trace ``rewrite`` changes (it answers None for the rest).

    A cheap text match (``needle`` in the JSON) narrows the rows to parse;
    ``rewrite`` decides exactly.
    """
    rows = conn.execute(
        "SELECT id, data FROM traces WHERE instr(data, ?) > 0", (needle,)
    ).fetchall()
    for row in rows:
        rewritten = rewrite(Trace.model_validate_json(row["data"]))
        if rewritten is not None:
            conn.execute(
                "UPDATE traces SET data = ? WHERE id = ?",
                (rewritten.model_dump_json(), row["id"]),
            )


def _forget_file_in_traces(conn: sqlite3.Connection, ref: SpaceRef, path: str) -> None:
    """Rewrite every trace that names ``path`` of ``ref`` without it (see ``_forget_in_traces``)."""
    # The path as it appears inside the JSON (escaped, without its quotes).
    needle = json.dumps(path, ensure_ascii=False)[1:-1]
    _rewrite_traces(conn, needle, lambda trace: trace.without_file(ref, path))


def _record_trace(conn: sqlite3.Connection, trace: Trace) -> None:
    # Once per (session, turn): a turn end repeated after a crash traces nothing twice.
    conn.execute(
        "INSERT INTO traces (session, turn, at, data) SELECT ?, ?, ?, ?"
        " WHERE NOT EXISTS (SELECT 1 FROM traces WHERE session = ? AND turn = ?)",
        (
            trace.session,
            trace.turn,
            _timestamp(trace.at),
            trace.model_dump_json(),
            trace.session,
            trace.turn,
        ),
    )


def _traces(conn: sqlite3.Connection, session: str | None) -> list[Trace]:
    query = "SELECT data FROM traces"
    params: tuple[str, ...] = ()
    if session is not None:
        query += " WHERE session = ?"
        params = (session,)
    return [
        Trace.model_validate_json(row["data"])
        for row in conn.execute(query + " ORDER BY id", params)
    ]
