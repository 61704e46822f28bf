"""A person's memory in the PostgreSQL store: forgetting files and people, and audited reads.

The same rows go as in the SQLite store (:mod:`memfs.stores.sqlite.privacy`):
forgetting a person's file deletes its rows, forgetting the person deletes
every row of their spaces (``spaces`` rows included) and their part of
every trace, and ``forgotten`` keeps when, with no path or content.
Reading a person's memory for someone else is an audited ``open``.
"""

from __future__ import annotations

from collections.abc import Collection

from memfs.core import audit as audit_rules
from memfs.core.errors import NotFound
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
from memfs.stores.managed import forgotten_key, stored_without
from memfs.stores.postgres.audit import _log
from memfs.stores.postgres.files import _history
from memfs.stores.postgres.rows import (
    Conn,
    _all,
    _cursor,
    _live_files,
    _one,
    _record,
    _run,
    _space_id,
    _tick,
)
from memfs.stores.postgres.traces import _forget_file_in_traces, _forget_in_traces


def _forget(conn: Conn, ref: SpaceRef, path: str, provenance: Provenance) -> Stored:
    not_live = NotFound(f"{ref} holds no file {path!r} to forget", path=path)
    space_id = _space_id(conn, ref)
    if space_id is None:
        raise not_live
    if _run(conn, "DELETE FROM live WHERE space_id = %s AND path = %s", (space_id, path)) != 1:
        raise not_live
    current = _record(conn, space_id, path, None, provenance)
    _log(conn, "forget", ref.org, by=provenance.by, space=ref.space, target=path)
    return Stored(status="saved", revisions={path: str(current)}, cursor=str(current))


def _purge(conn: Conn, ref: SpaceRef, path: str, by: By | None) -> Stored:
    nothing = NotFound(f"{ref} holds nothing of {path!r} to forget", path=path)
    space_id = _space_id(conn, ref)
    if space_id is None:
        raise nothing
    _run(conn, "DELETE FROM live WHERE space_id = %s AND path = %s", (space_id, path))
    if _run(conn, "DELETE FROM revisions WHERE space_id = %s AND path = %s", (space_id, path)) == 0:
        raise nothing
    _forget_file_in_traces(conn, ref, path)
    seq = _mark_forgotten(conn, ref.org, ref.user or "", ref.space)
    # Which file, as a digest: what a daemon that holds the name asks about.
    _run(
        conn,
        "INSERT INTO forgotten (key, seq) VALUES (%s, %s)"
        " ON CONFLICT (key) DO UPDATE SET seq = excluded.seq",
        (forgotten_file_key(ref, path), seq),
    )
    _scrub_stored_turns(conn, space_id, path)
    # Neither path nor content: the name can say as much as what was forgotten.
    target, detail = audit_rules.about_file(ref, path)
    _log(conn, "forget", ref.org, by=by, space=ref.space, target=target, detail=detail)
    return Stored(status="saved", cursor=str(_cursor(conn, space_id)))


def _own_spaces(conn: Conn, user: str, org: str) -> list[tuple[int, SpaceRef]]:
    """Every user-layer space row of ``user`` in ``org``, with its id, sorted by ref."""
    rows = _all(
        conn,
        "SELECT id, space FROM spaces WHERE layer = 'user' AND org = %s AND \"user\" = %s",
        (org, user),
    )
    found = [
        (int(id_), SpaceRef(layer="user", org=org, user=user, space=space)) for id_, space in rows
    ]
    return sorted(found, key=lambda pair: str(pair[1]))


def _forget_user(conn: Conn, user: str, org: str, by: By | None) -> Forgot:
    """Delete every row of the person's spaces in ``org``, the ``spaces`` rows included."""
    purged: list[SpaceRef] = []
    files = 0
    for space_id, ref in _own_spaces(conn, user, org):
        held = _run(conn, "DELETE FROM live WHERE space_id = %s", (space_id,))
        if _run(conn, "DELETE FROM revisions WHERE space_id = %s", (space_id,)) > 0:
            purged.append(ref)
            files += held
        for table in ("changes", "review_settings", "folders", "stored_turns"):
            _run(conn, f"DELETE FROM {table} WHERE space_id = %s", (space_id,))
        # Last, so nothing of their memory left in the database names the person.
        _run(conn, "DELETE FROM spaces WHERE id = %s", (space_id,))
    _forget_in_traces(conn, user, org)
    _mark_forgotten(conn, org, user, "")
    # The audit entry does name them, on purpose: an erasure must be accountable.
    _log(
        conn, "forget-user", org, by=by, target=user, detail=audit_rules.count(len(purged), "space")
    )
    return Forgot(spaces=tuple(purged), files=files)


def _user_files(conn: Conn, user: str, org: str) -> dict[str, dict[str, bytes]]:
    found: dict[str, dict[str, bytes]] = {}
    for space_id, ref in _own_spaces(conn, user, org):
        files, _, _ = _live_files(conn, space_id)
        if files:
            found[ref.space] = files
    return found


def _people(conn: Conn, org: str) -> dict[SpaceRef, int]:
    rows = _all(
        conn,
        'SELECT spaces."user", spaces.space, SUM(revisions.size)'
        " FROM spaces JOIN live ON live.space_id = spaces.id"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE spaces.layer = 'user' AND spaces.org = %s GROUP BY spaces.id",
        (org,),
    )
    sizes = {
        SpaceRef(layer="user", org=org, user=user, space=space): int(size)
        for user, space, size in rows
    }
    return dict(sorted(sizes.items(), key=lambda item: str(item[0])))


def _open_person(conn: Conn, user: str, org: str, by: By | None) -> dict[str, dict[str, bytes]]:
    found = _user_files(conn, user, org)
    files = sum(len(space) for space in found.values())
    _log(conn, "open", org, by=by, target=user, detail=audit_rules.count(files, "file"))
    return found


def _open_history(conn: Conn, ref: SpaceRef, path: str, by: By | None) -> list[Revision]:
    found = _history(conn, ref, path)
    if ref.layer == "user":
        detail = audit_rules.count(len(found), "revision")
        _log(conn, "open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
    return found


def _mark_forgotten(conn: Conn, org: str, user: str, space: str) -> int:
    """Note that (org, user, space) was forgotten now; space '' is the whole person."""
    seq = _tick(conn)
    _run(
        conn,
        "INSERT INTO forgotten (key, seq) VALUES (%s, %s)"
        " ON CONFLICT (key) DO UPDATE SET seq = excluded.seq",
        (forgotten_key(org, user, space), seq),
    )
    return seq


def _forgotten_files(conn: Conn, ref: SpaceRef, base: int, paths: Collection[str]) -> Forgetting:
    """What of ``ref`` was forgotten after ``base``: the whole person, or which of ``paths``."""
    if ref.layer != "user":
        return Forgetting()
    person = _one(
        conn,
        "SELECT seq FROM forgotten WHERE key = %s",
        (forgotten_key(ref.org, ref.user or "", ""),),
    )
    if person is not None and int(person[0]) > base:
        return Forgetting(everything=True)
    keys = {forgotten_file_key(ref, path): path for path in set(paths)}
    if not keys:
        return Forgetting()
    found = {
        keys[key]
        for key, seq in _all(
            conn, "SELECT key, seq FROM forgotten WHERE key = ANY(%s)", (list(keys),)
        )
        if int(seq) > base
    }
    return Forgetting(paths=tuple(sorted(found)))


def _scrub_stored_turns(conn: Conn, space_id: int, path: str) -> None:
    """Take a forgotten path out of the turn records that name it."""
    for session, turn, data in _all(
        conn, "SELECT session, turn, stored FROM stored_turns WHERE space_id = %s", (space_id,)
    ):
        kept = stored_without(Stored.model_validate_json(data), path)
        if kept is not None:
            _run(
                conn,
                "UPDATE stored_turns SET stored = %s WHERE space_id = %s AND session = %s"
                " AND turn = %s",
                (kept.model_dump_json(), space_id, session, turn),
            )
