"""What each turn saw and did, kept as ``Trace`` JSON, and rewritten when someone is forgotten."""

from __future__ import annotations

import json
from collections.abc import Callable

from memfs.core.models import SpaceRef, Trace
from memfs.stores.postgres.rows import Conn, _all, _aware, _run


def _forget_in_traces(conn: Conn, user: str, org: str) -> None:
    """Rewrite every trace that mounted one of the person's spaces in ``org`` without them."""
    needle = '"user":' + json.dumps(user, ensure_ascii=False)
    _rewrite_traces(conn, needle, lambda trace: trace.without_user(user, org))


def _rewrite_traces(conn: Conn, needle: str, rewrite: Callable[[Trace], Trace | None]) -> None:
    """Rewrite in place every trace ``rewrite`` changes (it answers None for the rest).

    A cheap text match (``needle`` in the JSON) narrows the rows to parse;
    ``rewrite`` decides exactly.
    """
    for id_, data in _all(
        conn, "SELECT id, data FROM traces WHERE strpos(data, %s) > 0", (needle,)
    ):
        rewritten = rewrite(Trace.model_validate_json(data))
        if rewritten is not None:
            _run(
                conn,
                "UPDATE traces SET data = %s WHERE id = %s",
                (rewritten.model_dump_json(), id_),
            )


def _forget_file_in_traces(conn: Conn, ref: SpaceRef, path: str) -> None:
    """Rewrite every trace that names ``path`` of ``ref`` without it (see ``_forget_in_traces``)."""
    # The path as it appears inside the JSON (escaped, without its quotes).
    needle = json.dumps(path, ensure_ascii=False)[1:-1]
    _rewrite_traces(conn, needle, lambda trace: trace.without_file(ref, path))


def _record_trace(conn: Conn, trace: Trace) -> None:
    # Once per (session, turn): a turn end repeated after a crash traces nothing twice.
    _run(
        conn,
        "INSERT INTO traces (session, turn, at, data) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (session, turn) DO NOTHING",
        (trace.session, trace.turn, _aware(trace.at), trace.model_dump_json()),
    )


def _traces(conn: Conn, session: str | None) -> list[Trace]:
    if session is None:
        rows = _all(conn, "SELECT data FROM traces ORDER BY id")
    else:
        rows = _all(conn, "SELECT data FROM traces WHERE session = %s ORDER BY id", (session,))
    return [Trace.model_validate_json(row[0]) for row in rows]
