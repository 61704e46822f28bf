"""A person's memory in a managed store: forgetting files and people, and audited reads of them.

Forgetting a file of a person's own memory deletes its rows (forgetting the
person deletes every row of their spaces, ``spaces`` rows included, and their
part of every trace), and ``forgotten`` keeps when, with no path or content.
What is forgotten was sealed under the person's key (``sealed.py``), and
forgetting the person deletes the key; SQLite's connections also run with
``secure_delete`` and its purges end with a checkpoint that empties the
write-ahead log, so nothing forgotten stays in its file at all. Reading a
person's memory for someone else is an audited ``open``.
"""

from __future__ import annotations

import json
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
from memfs.stores.sql.audit import _log
from memfs.stores.sql.db import Db, chunks, marks
from memfs.stores.sql.files import _history, _kept_stored, _stored_of
from memfs.stores.sql.rows import (
    _cursor,
    _live_files,
    _person_forgotten_at,
    _record,
)
from memfs.stores.sql.sealed import SEALED_WORDS, Names, _forget_person_key, _names
from memfs.stores.sql.spaces import _space_id
from memfs.stores.sql.traces import _forget_file_in_traces, _forget_in_traces


def _forget(db: Db, ref: SpaceRef, path: str, provenance: Provenance) -> Stored:
    not_live = NotFound(f"{ref} holds no file {path!r} to forget", path=path)
    space_id = _space_id(db, ref)
    if space_id is None:
        raise not_live
    gone = db.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, path))
    if gone.rowcount != 1:
        raise not_live
    current = _record(db, space_id, path, None, provenance)
    _log(db, "forget", ref.org, by=provenance.by, space=ref.space, target=path)
    return Stored(status="saved", revisions={path: str(current)}, cursor=str(current))


def _purge(db: Db, ref: SpaceRef, path: str, by: By | None) -> Stored:
    nothing = NotFound(f"{ref} holds nothing of {path!r} to forget", path=path)
    space_id = _space_id(db, ref)
    if space_id is None:
        raise nothing
    names = _names(db, space_id, create=False)
    kept = names.kept(path)
    db.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, kept))
    gone = db.execute("DELETE FROM revisions WHERE space_id = ? AND path = ?", (space_id, kept))
    if gone.rowcount == 0:
        # Not a file's: a folder's name (a folder has no revisions), made or removed.
        folder = db.execute("DELETE FROM folders WHERE space_id = ? AND path = ?", (space_id, kept))
        named = db.execute("DELETE FROM names WHERE space_id = ? AND name = ?", (space_id, kept))
        if folder.rowcount == 0 and (not names.sealed or named.rowcount == 0):
            raise nothing
    else:
        # Its name goes too, unless a folder of the space has that path now.
        db.execute(
            "DELETE FROM names WHERE space_id = ? AND name = ?"
            " AND NOT EXISTS (SELECT 1 FROM folders WHERE space_id = ? AND path = ?)",
            (space_id, kept, space_id, kept),
        )
    _forget_file_in_traces(db, ref, path)
    seq = _mark_forgotten(db, ref.org, ref.user or "", ref.space)
    # Which file, as a digest: what a daemon that holds the name asks about.
    db.execute(
        "INSERT INTO forgotten (key, seq) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET seq = excluded.seq",
        (_file_key(ref, path, names), seq),
    )
    _scrub_stored_turns(db, space_id, path)
    # Neither path nor content: the name can say as much as what was forgotten.
    target, detail = audit_rules.about_file(ref, path)
    _log(db, "forget", ref.org, by=by, space=ref.space, target=target, detail=detail)
    return Stored(status="saved", cursor=str(_cursor(db, space_id)))


def _own_spaces(db: Db, user: str, org: str) -> list[tuple[int, SpaceRef]]:
    """Every user-layer space row of ``user`` in ``org``, with its id, sorted by ref."""
    rows = db.execute(
        "SELECT id, space FROM spaces WHERE layer = 'user' AND org = ? AND \"user\" = ?",
        (org, user),
    ).fetchall()
    found = [
        (int(row["id"]), SpaceRef(layer="user", org=org, user=user, space=row["space"]))
        for row in rows
    ]
    return sorted(found, key=lambda pair: str(pair[1]))


def _forget_user(db: Db, user: str, org: str, by: By | None) -> Forgot:
    """Delete every row of the person's spaces in ``org``, the ``spaces`` rows included."""
    purged: list[SpaceRef] = []
    files = 0
    for space_id, ref in _own_spaces(db, user, org):
        held = db.execute("DELETE FROM live WHERE space_id = ?", (space_id,)).rowcount
        gone = db.execute("DELETE FROM revisions WHERE space_id = ?", (space_id,))
        if gone.rowcount > 0:
            purged.append(ref)
            files += held
        # The user layer never holds changes for review, but a row that exists
        # must go too: it references the space, and it may hold content.
        db.execute("DELETE FROM changes WHERE space_id = ?", (space_id,))
        db.execute("DELETE FROM review_settings WHERE space_id = ?", (space_id,))
        db.execute("DELETE FROM folders WHERE space_id = ?", (space_id,))
        db.execute("DELETE FROM stored_turns WHERE space_id = ?", (space_id,))
        db.execute("DELETE FROM names WHERE space_id = ?", (space_id,))
        # Last, so nothing of their memory left in the file names the person.
        db.execute("DELETE FROM spaces WHERE id = ?", (space_id,))
        db.forget_lookups()
    _forget_in_traces(db, user, org)
    _forget_words(db, user, org)
    # The key goes with the rows: any copy of them left anywhere is ciphertext
    # under a key nobody holds any more (``memfs.core.sealing``).
    _forget_person_key(db, org, user)
    _mark_forgotten(db, org, user, "")
    # The audit entry does name them, on purpose: an erasure must be accountable.
    # How many spaces went, never what they held.
    detail = audit_rules.count(len(purged), "space")
    _log(db, "forget-user", org, by=by, target=user, detail=detail)
    return Forgot(spaces=tuple(purged), files=files)


def _forget_words(db: Db, user: str, org: str) -> None:
    """Their words in ``org``'s memory go with their key: the columns too, not only the key.

    What is left would be ciphertext under a key nobody holds, read as gone;
    but a person forgotten and written again gets a new key, which must not
    be asked to open the old words (a seal that does not open is tampering).
    """
    db.execute(
        "UPDATE revisions SET prompt = NULL, by_label = NULL, sealed = 0, author = NULL"
        " WHERE sealed = ? AND author = ? AND space_id IN (SELECT id FROM spaces WHERE org = ?)",
        (SEALED_WORDS, user, org),
    )
    for change_id, sealed in db.tuples(
        "SELECT changes.id, changes.sealed_words FROM changes"
        " JOIN spaces ON spaces.id = changes.space_id"
        " WHERE spaces.org = ? AND changes.sealed_words IS NOT NULL",
        (org,),
    ):
        words = json.loads(sealed)
        left = {key: kept for key, kept in words.items() if kept["author"] != user}
        if len(left) != len(words):
            db.execute(
                "UPDATE changes SET sealed_words = ? WHERE id = ?",
                (json.dumps(left, sort_keys=True) if left else None, change_id),
            )


def _user_files(db: Db, user: str, org: str) -> dict[str, dict[str, bytes]]:
    found: dict[str, dict[str, bytes]] = {}
    for space_id, ref in _own_spaces(db, user, org):
        files, _, _ = _live_files(db, space_id)
        if files:
            found[ref.space] = files
    return found


def _people(db: Db, org: str) -> dict[SpaceRef, int]:
    rows = db.execute(
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


def _open_person(db: Db, user: str, org: str, by: By | None) -> dict[str, dict[str, bytes]]:
    found = _user_files(db, user, org)
    files = sum(len(space) for space in found.values())
    _log(db, "open", org, by=by, target=user, detail=audit_rules.count(files, "file"))
    return found


def _open_history(db: Db, ref: SpaceRef, path: str, by: By | None) -> list[Revision]:
    found = _history(db, ref, path)
    if ref.layer == "user":
        detail = audit_rules.count(len(found), "revision")
        _log(db, "open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
    return found


def _mark_forgotten(db: Db, org: str, user: str, space: str) -> int:
    """Note that (org, user, space) was forgotten now; space '' is the whole person."""
    seq = db.tick()
    db.execute(
        "INSERT INTO forgotten (key, seq) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET seq = excluded.seq",
        (_forgotten_key(org, user, space), seq),
    )
    return seq


def _forgotten_files(db: Db, ref: SpaceRef, base: int, paths: Collection[str]) -> Forgetting:
    """What of ``ref`` was forgotten after ``base``: the whole person, or which of ``paths``."""
    if ref.layer != "user":
        return Forgetting()
    if _person_forgotten_at(db, ref.org, ref.user or "") > base:
        return Forgetting(everything=True)
    space_id = _space_id(db, ref)
    names = None if space_id is None else _names(db, space_id, create=False)
    keys = {_file_key(ref, path, names): path for path in set(paths)}
    found: set[str] = set()
    for chunk in chunks(list(keys)):
        found.update(
            keys[key]
            for key, seq in db.tuples(
                f"SELECT key, seq FROM forgotten WHERE key IN ({marks(len(chunk))})", chunk
            )
            if int(seq) > base
        )
    return Forgetting(paths=tuple(sorted(found)))


def _file_key(ref: SpaceRef, path: str, names: Names | None) -> str:
    """How ``forgotten`` keys "``path`` of ``ref`` was forgotten": by its kept name.

    A person's path is kept by a name keyed by their key, so the digest says
    nothing to whoever guesses a name, once the key is gone or without it.
    """
    return forgotten_file_key(ref, path if names is None else names.kept(path))


def _scrub_stored_turns(db: Db, space_id: int, path: str) -> None:
    """Take a forgotten path out of the turn records that name it."""
    for session, turn, plain, sealed in db.tuples(
        "SELECT session, turn, stored, sealed_stored FROM stored_turns WHERE space_id = ?",
        (space_id,),
    ):
        key = (session, turn)
        kept = stored_without(_stored_of(db, space_id, key, plain, sealed), path)
        if kept is not None:
            plain, sealed = _kept_stored(db, space_id, key, kept)
            db.execute(
                "UPDATE stored_turns SET stored = ?, sealed_stored = ? WHERE space_id = ?"
                " AND session = ? AND turn = ?",
                (plain, sealed, space_id, session, turn),
            )
