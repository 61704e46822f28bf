"""What each turn saw and did: a ``Trace`` kept as JSON, a person's part of it sealed.

A trace names the files a turn opened and changed and carries the prompt.
Where the turn mounted a person's own memory, that much is the person's
(``Trace.part_of``): it is kept in ``trace_parts``, one row per (trace,
person), sealed under the person's key (``memfs.core.sealing``) and bound to
(org, user, session, turn). ``traces.data`` keeps only the rest
(``Trace.without_user`` for each person) and ``people``, how many parts it
has. A trace read back is the rest with every part whose key still exists
laid over it (``Trace.with_part``); the prompt is in every part and comes
back only while every part does (whose a prompt is, in a turn that mounted
two people's memory, is not for the store to guess), so:

- forgetting a person deletes their parts with their key, and any copy of a
  part left elsewhere (free pages, a WAL, a backup) is ciphertext nobody can
  open; the rest never held anything of theirs;
- forgetting one file of a person opens their parts, drops the file
  (``Trace.without_file``) and seals them again.

A trace is recorded once per (session, turn): a turn end repeated after a
crash traces nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

from memfs.core.models import SpaceRef, Trace
from memfs.core.story import trace_matches
from memfs.stores.sql.db import Db, chunks, marks
from memfs.stores.sql.sealed import Sealer, _person_key

_KIND = "trace"


def _part_sealer(db: Db, org: str, user: str, *, create: bool) -> Sealer | None:
    key = _person_key(db, org, user, create=create)
    # Space "": a part belongs to the person, across their spaces.
    return None if key is None else Sealer(key, org, user, "")


def _public(trace: Trace) -> Trace:
    """The trace without any person's part: what ``traces.data`` keeps."""
    for org, user in trace.people():
        trace = trace.without_user(user, org) or trace
    return trace


def _keep_parts(db: Db, trace_id: int, trace: Trace) -> None:
    """Seal each person's part of ``trace`` under their key, as rows of ``trace_parts``."""
    for org, user in trace.people():
        sealer = _part_sealer(db, org, user, create=True)
        assert sealer is not None  # made just now if it was missing
        sealed = sealer.seal_json(
            _KIND, (trace.session, trace.turn), trace.part_of(org, user).model_dump_json()
        )
        db.execute(
            'INSERT INTO trace_parts (trace_id, org, "user", sealed) VALUES (?, ?, ?, ?)'
            ' ON CONFLICT (trace_id, org, "user") DO UPDATE SET sealed = excluded.sealed',
            (trace_id, org, user, sealed),
        )


def _record_trace(db: Db, trace: Trace) -> None:
    row = db.one(
        "INSERT INTO traces (session, turn, at, data, people) SELECT ?, ?, ?, ?, ?"
        " WHERE NOT EXISTS (SELECT 1 FROM traces WHERE session = ? AND turn = ?) RETURNING id",
        (
            trace.session,
            trace.turn,
            db.stamp(trace.at),
            _public(trace).model_dump_json(),
            len(trace.people()),
            trace.session,
            trace.turn,
        ),
    )
    if row is not None:  # None: this turn was traced before
        _keep_parts(db, int(row[0]), trace)


def _whole(db: Db, rows: Iterable[tuple[int, str, int]]) -> list[Trace]:
    """Traces read back from (id, data, people) rows, each with the parts that still open."""
    traces: dict[int, Trace] = {}
    people: dict[int, int] = {}
    for id_, data, count in rows:
        traces[int(id_)] = Trace.model_validate_json(data)
        people[int(id_)] = int(count)
    opened = dict.fromkeys(traces, 0)
    ids = list(traces)
    sealers: dict[tuple[str, str], Sealer | None] = {}
    for chunk in chunks(ids):
        for trace_id, org, user, sealed in db.tuples(
            'SELECT trace_id, org, "user", sealed FROM trace_parts'
            f" WHERE trace_id IN ({marks(len(chunk))}) ORDER BY trace_id",
            chunk,
        ):
            if (org, user) not in sealers:
                sealers[(org, user)] = _part_sealer(db, org, user, create=False)
            sealer = sealers[(org, user)]
            if sealer is None:
                continue  # forgotten while this part was read: it is gone
            trace = traces[trace_id]
            part = sealer.open_json(_KIND, (trace.session, trace.turn), sealed)
            traces[trace_id] = trace.with_part(Trace.model_validate_json(part))
            opened[trace_id] += 1
    return [
        trace if opened[id_] == people[id_] else trace.model_copy(update={"prompt": None})
        for id_, trace in traces.items()
    ]


def _traces(db: Db, session: str | None) -> list[Trace]:
    if session is None:
        return _whole(db, db.tuples("SELECT id, data, people FROM traces ORDER BY id"))
    return _whole(
        db,
        db.tuples("SELECT id, data, people FROM traces WHERE session = ? ORDER BY id", (session,)),
    )


def _find_traces(
    db: Db, turn: str | None, space: SpaceRef | None, since: datetime | None
) -> list[Trace]:
    """Traces of ``turn``, mounting ``space``, ended at or after ``since``, oldest first.

    SQL narrows the rows (the turn column, the time; for an org or shared
    space its name as it appears in the JSON, for a person's space the
    person's parts) so only candidates are parsed; ``trace_matches`` decides.
    """
    query = "SELECT id, data, people FROM traces WHERE 1 = 1"
    params: list[object] = []
    if turn is not None:
        query += " AND turn = ?"
        params.append(turn)
    if since is not None:
        # To the second: the exact check below settles the rest.
        query += " AND at >= ?"
        params.append(db.stamp_floor(since))
    if space is not None and space.layer == "user":
        query += ' AND id IN (SELECT trace_id FROM trace_parts WHERE org = ? AND "user" = ?)'
        params.extend((space.org, space.user or ""))
    elif space is not None:
        query += f" AND {db.contains('data')}"
        params.append('"space":' + json.dumps(space.space, ensure_ascii=False))
    found = _whole(db, db.tuples(query + " ORDER BY id", params))
    return [t for t in found if trace_matches(t, turn=turn, space=space, since=since)]


def _forget_in_traces(db: Db, user: str, org: str) -> None:
    """Delete the person's parts of every trace (the rest never held anything of theirs).

    With ``secure_delete`` on (SQLite) the rows are zeroed in the file too;
    elsewhere what is left is ciphertext under the key deleted with them.
    """
    db.execute('DELETE FROM trace_parts WHERE org = ? AND "user" = ?', (org, user))


def _forget_file_in_traces(db: Db, ref: SpaceRef, path: str) -> None:
    """Seal again, without ``path`` of ``ref``, every part of the person's that names it."""
    user = ref.user or ""
    sealer = _part_sealer(db, ref.org, user, create=False)
    if sealer is None:
        return
    for trace_id, session, turn, sealed in db.tuples(
        "SELECT trace_parts.trace_id, traces.session, traces.turn, trace_parts.sealed"
        " FROM trace_parts JOIN traces ON traces.id = trace_parts.trace_id"
        ' WHERE trace_parts.org = ? AND trace_parts."user" = ?',
        (ref.org, user),
    ):
        part = Trace.model_validate_json(sealer.open_json(_KIND, (session, turn), sealed))
        rewritten = part.without_file(ref, path)
        if rewritten is not None:
            db.execute(
                'UPDATE trace_parts SET sealed = ? WHERE trace_id = ? AND org = ? AND "user" = ?',
                (
                    sealer.seal_json(_KIND, (session, turn), rewritten.model_dump_json()),
                    trace_id,
                    ref.org,
                    user,
                ),
            )


def _seal_trace_rows(db: Db) -> int:
    """Split every trace kept whole (by an older memfs) into its rest and sealed parts."""
    moved = 0
    for trace_id, data in db.tuples("SELECT id, data FROM traces ORDER BY id"):
        trace = Trace.model_validate_json(data)
        if not trace.people():
            continue
        db.execute(
            "UPDATE traces SET data = ?, people = ? WHERE id = ?",
            (_public(trace).model_dump_json(), len(trace.people()), trace_id),
        )
        _keep_parts(db, int(trace_id), trace)
        moved += 1
    return moved
