"""A person's memory in the SQLite store: forgetting files and people, and audited reads of them.

Forgetting a file of a person's own memory deletes its rows (forgetting the
person deletes every row of their spaces, ``spaces`` rows included, and their
part of every trace), and ``forgotten`` keeps when, with no path or content.
Connections run with ``secure_delete`` and a purge ends with a checkpoint
that empties the write-ahead log, so nothing forgotten stays readable in the
file. Reading a person's memory for someone else is an audited ``open``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from memfs.core import audit as audit_rules
from memfs.core.errors import (
    NotFound,
)
from memfs.core.models import (
    By,
    Forgetting,
    Forgot,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
    forgotten_file_key,
)
from memfs.stores.managed import forgotten_key as _forgotten_key
from memfs.stores.managed import stored_without
from memfs.stores.sqlite.audit import _log
from memfs.stores.sqlite.files import _history
from memfs.stores.sqlite.rows import (
    _CHUNK,
    _cursor,
    _live_files,
    _record,
    _space_id,
    _tick,
)
from memfs.stores.sqlite.sealed import _forget_person_key
from memfs.stores.sqlite.traces import _forget_file_in_traces, _forget_in_traces


def _forget(conn: sqlite3.Connection, ref: SpaceRef, path: str, provenance: Provenance) -> Stored:
    not_live = NotFound(f"{ref} holds no file {path!r} to forget", path=path)
    space_id = _space_id(conn, ref)
    if space_id is None:
        raise not_live
    gone = conn.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, path))
    if gone.rowcount != 1:
        raise not_live
    current = _record(conn, space_id, path, None, provenance)
    _log(conn, "forget", ref.org, by=provenance.by, space=ref.space, target=path)
    return Stored(status="saved", revisions={path: str(current)}, cursor=str(current))


def _purge(conn: sqlite3.Connection, ref: SpaceRef, path: str, by: By | None) -> Stored:
    nothing = NotFound(f"{ref} holds nothing of {path!r} to forget", path=path)
    space_id = _space_id(conn, ref)
    if space_id is None:
        raise nothing
    conn.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, path))
    gone = conn.execute("DELETE FROM revisions WHERE space_id = ? AND path = ?", (space_id, path))
    if gone.rowcount == 0:
        raise nothing
    _forget_file_in_traces(conn, ref, path)
    seq = _mark_forgotten(conn, ref.org, ref.user or "", ref.space)
    # Which file, as a digest: what a daemon that holds the name asks about.
    conn.execute(
        "INSERT INTO forgotten (key, seq) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET seq = excluded.seq",
        (forgotten_file_key(ref, path), seq),
    )
    _scrub_stored_turns(conn, space_id, path)
    # Neither path nor content: the name can say as much as what was forgotten.
    target, detail = audit_rules.about_file(ref, path)
    _log(conn, "forget", ref.org, by=by, space=ref.space, target=target, detail=detail)
    return Stored(status="saved", cursor=str(_cursor(conn, space_id)))


def _own_spaces(conn: sqlite3.Connection, user: str, org: str) -> list[tuple[int, SpaceRef]]:
    """Every user-layer space row of ``user`` in ``org``, with its id, sorted by ref."""
    rows = conn.execute(
        "SELECT id, space FROM spaces WHERE layer = 'user' AND org = ? AND \"user\" = ?",
        (org, user),
    ).fetchall()
    found = [
        (int(row["id"]), SpaceRef(layer="user", org=org, user=user, space=row["space"]))
        for row in rows
    ]
    return sorted(found, key=lambda pair: str(pair[1]))


def _forget_user(conn: sqlite3.Connection, user: str, org: str, by: By | None) -> Forgot:
    """Delete every row of the person's spaces in ``org``, the ``spaces`` rows included."""
    purged: list[SpaceRef] = []
    files = 0
    for space_id, ref in _own_spaces(conn, user, org):
        held = conn.execute("DELETE FROM live WHERE space_id = ?", (space_id,)).rowcount
        gone = conn.execute("DELETE FROM revisions WHERE space_id = ?", (space_id,))
        if gone.rowcount > 0:
            purged.append(ref)
            files += held
        # The user layer never holds changes for review, but a row that exists
        # must go too: it references the space, and it may hold content.
        conn.execute("DELETE FROM changes WHERE space_id = ?", (space_id,))
        conn.execute("DELETE FROM review_settings WHERE space_id = ?", (space_id,))
        conn.execute("DELETE FROM folders WHERE space_id = ?", (space_id,))
        conn.execute("DELETE FROM stored_turns WHERE space_id = ?", (space_id,))
        # Last, so nothing of their memory left in the file names the person.
        conn.execute("DELETE FROM spaces WHERE id = ?", (space_id,))
    _forget_in_traces(conn, user, org)
    # The key goes with the rows: any copy of them left anywhere is ciphertext
    # under a key nobody holds any more (``memfs.core.sealing``).
    _forget_person_key(conn, org, user)
    _mark_forgotten(conn, org, user, "")
    # The audit entry does name them, on purpose: an erasure must be accountable.
    # How many spaces went, never what they held.
    detail = audit_rules.count(len(purged), "space")
    _log(conn, "forget-user", org, by=by, target=user, detail=detail)
    return Forgot(spaces=tuple(purged), files=files)


def _user_files(conn: sqlite3.Connection, user: str, org: str) -> dict[str, dict[str, bytes]]:
    found: dict[str, dict[str, bytes]] = {}
    for space_id, ref in _own_spaces(conn, user, org):
        files, _, _ = _live_files(conn, space_id)
        if files:
            found[ref.space] = files
    return found


def _people(conn: sqlite3.Connection, org: str) -> dict[SpaceRef, int]:
    rows = conn.execute(
        'SELECT spaces."user" AS user, spaces.space AS space, SUM(revisions.size) AS bytes'
        " FROM spaces JOIN live ON live.space_id = spaces.id"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE spaces.layer = 'user' AND spaces.org = ? GROUP BY spaces.id",
        (org,),
    ).fetchall()
    sizes = {
        SpaceRef(layer="user", org=org, user=row["user"], space=row["space"]): int(row["bytes"])
        for row in rows
    }
    return dict(sorted(sizes.items(), key=lambda item: str(item[0])))


def _open_person(
    conn: sqlite3.Connection, user: str, org: str, by: By | None
) -> dict[str, dict[str, bytes]]:
    found = _user_files(conn, user, org)
    files = sum(len(space) for space in found.values())
    _log(conn, "open", org, by=by, target=user, detail=audit_rules.count(files, "file"))
    return found


def _open_history(
    conn: sqlite3.Connection, ref: SpaceRef, path: str, by: By | None
) -> list[Revision]:
    found = _history(conn, ref, path)
    if ref.layer == "user":
        detail = audit_rules.count(len(found), "revision")
        _log(conn, "open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
    return found


def _mark_forgotten(conn: sqlite3.Connection, org: str, user: str, space: str) -> int:
    """Note that (org, user, space) was forgotten now; space '' is the whole person."""
    seq = _tick(conn)
    conn.execute(
        "INSERT INTO forgotten (key, seq) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET seq = excluded.seq",
        (_forgotten_key(org, user, space), seq),
    )
    return seq


def _forgotten_files(
    conn: sqlite3.Connection, ref: SpaceRef, base: int, paths: Collection[str]
) -> Forgetting:
    """What of ``ref`` was forgotten after ``base``: the whole person, or which of ``paths``."""
    if ref.layer != "user":
        return Forgetting()
    person = conn.execute(
        "SELECT seq FROM forgotten WHERE key = ?", (_forgotten_key(ref.org, ref.user or "", ""),)
    ).fetchone()
    if person is not None and int(person[0]) > base:
        return Forgetting(everything=True)
    keys = {forgotten_file_key(ref, path): path for path in set(paths)}
    found: set[str] = set()
    wanted = list(keys)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(
            keys[key]
            for key, seq in conn.execute(
                f"SELECT key, seq FROM forgotten WHERE key IN ({marks})", chunk
            )
            if int(seq) > base
        )
    return Forgetting(paths=tuple(sorted(found)))


def _scrub_stored_turns(conn: sqlite3.Connection, space_id: int, path: str) -> None:
    """Take a forgotten path out of the turn records that name it."""
    for row in conn.execute(
        "SELECT session, turn, stored FROM stored_turns WHERE space_id = ?", (space_id,)
    ).fetchall():
        kept = stored_without(Stored.model_validate_json(row["stored"]), path)
        if kept is not None:
            conn.execute(
                "UPDATE stored_turns SET stored = ? WHERE space_id = ? AND session = ?"
                " AND turn = ?",
                (kept.model_dump_json(), space_id, row["session"], row["turn"]),
            )
