"""The store key at open: refusing a wrong one, and sealing what an older memfs kept in the clear.

``store_key_check`` holds one row: the key check (``sealing.key_check``) and
``sealing``, how much of a person's memory the database keeps sealed::

    1  revisions' content, prompt and labels (SQLite schema 11)
    2  also file names (``names``), turn records, traces (``trace_parts``), and
       the words (prompt, ``by`` label) of whoever taught org memory, in its
       revisions (``sealed = 2``) and in changes waiting for review

A database opened with the key is brought to ``SEALING`` in one write
transaction: what it kept in the clear is sealed now, because the schema
steps never see the key. The store then empties its logs of the clear
copies where it can (SQLite checkpoints its WAL).
"""

from __future__ import annotations

from memfs.core import sealing
from memfs.core.review import WaitingChange
from memfs.stores.sql.db import Db
from memfs.stores.sql.review import _kept_change
from memfs.stores.sql.sealed import Sealer, _author_sealer, _names, _sealer, _store_key
from memfs.stores.sql.traces import _seal_trace_rows

SEALING = 2


def _key_is_current(db: Db, path: str) -> bool:
    """Whether the database is sealed under this key to the current level (a read).

    A key it was not sealed under is refused here (``ConfigError``); False
    means ``_check_store_key`` has sealing to do, in a write transaction.
    """
    row = db.one("SELECT value, sealing FROM store_key_check WHERE id = 1")
    if row is None:
        return False
    sealing.require_key_check(str(row[0]), _store_key(db), path=path)
    return int(row[1]) >= SEALING


def _check_store_key(db: Db, path: str) -> bool:
    """Refuse a key the database was not sealed under; seal what is in the clear. Sealed any?

    Run in a write transaction at open.
    """
    store_key = _store_key(db)
    row = db.one("SELECT value, sealing FROM store_key_check WHERE id = 1")
    if row is not None:
        sealing.require_key_check(str(row[0]), store_key, path=path)
        if int(row[1]) >= SEALING:
            return False
    sealed = (
        _seal_plain_rows(db)
        + _seal_names(db)
        + _seal_turn_records(db)
        + _seal_trace_rows(db)
        + _seal_org_words(db)
        + _seal_change_words(db)
    )
    if row is None:
        db.execute(
            "INSERT INTO store_key_check (id, value, sealing) VALUES (1, ?, ?)",
            (sealing.key_check(store_key), SEALING),
        )
    else:
        db.execute("UPDATE store_key_check SET sealing = ? WHERE id = 1", (SEALING,))
    return sealed > 0


def _person_spaces(db: Db) -> list[int]:
    return [int(row[0]) for row in db.tuples("SELECT id FROM spaces WHERE layer = 'user'")]


def _seal_names(db: Db) -> int:
    """Keep every path of a person's space by name (revisions, live files, folders)."""
    renamed = 0
    for space_id in _person_spaces(db):
        names = _names(db, space_id, create=True)
        for table in ("revisions", "live", "folders"):
            for (path,) in db.tuples(
                f"SELECT DISTINCT path FROM {table} WHERE space_id = ?", (space_id,)
            ):
                db.execute(
                    f"UPDATE {table} SET path = ? WHERE space_id = ? AND path = ?",
                    (names.kept(path, write=True), space_id, path),
                )
                renamed += 1
    return renamed


def _seal_turn_records(db: Db) -> int:
    """Seal the turn records of people's spaces (a ``Stored`` names the turn's paths)."""
    sealed = 0
    for space_id in _person_spaces(db):
        sealer = _sealer(db, space_id, create=True)
        assert sealer is not None  # a person's space, key made if it had none
        for session, turn, fingerprint, plain in db.tuples(
            "SELECT session, turn, changes, stored FROM stored_turns"
            " WHERE space_id = ? AND sealed_stored IS NULL",
            (space_id,),
        ):
            db.execute(
                "UPDATE stored_turns SET changes = ?, stored = '', sealed_stored = ?"
                " WHERE space_id = ? AND session = ? AND turn = ?",
                (
                    sealer.fingerprint(fingerprint),
                    sealer.seal_json("stored-turn", (session, turn), plain),
                    space_id,
                    session,
                    turn,
                ),
            )
            sealed += 1
    return sealed


def _seal_plain_rows(db: Db) -> int:
    """Seal every revision of a person's space written in the clear; how many."""
    rows = db.tuples(
        "SELECT revisions.id, revisions.space_id, revisions.path, revisions.content,"
        " revisions.prompt, revisions.by_label, revisions.approved_by_label"
        " FROM revisions JOIN spaces ON spaces.id = revisions.space_id"
        " WHERE spaces.layer = 'user' AND revisions.sealed = 0"
    )
    sealers: dict[int, Sealer | None] = {}
    for rid, space_id, path, content, prompt, by_label, approved_label in rows:
        if space_id not in sealers:
            sealers[space_id] = _sealer(db, space_id, create=True)
        sealer = sealers[space_id]
        assert sealer is not None  # a user-layer space, key made just above
        db.execute(
            "UPDATE revisions SET content = ?, prompt = ?, by_label = ?,"
            " approved_by_label = ?, sealed = 1 WHERE id = ?",
            (
                None if content is None else sealer.content(path, rid, bytes(content)),
                sealer.text("prompt", path, rid, db.read_text(prompt)),
                sealer.text("by_label", path, rid, db.read_text(by_label)),
                sealer.text("approved_by_label", path, rid, db.read_text(approved_label)),
                rid,
            ),
        )
    return len(rows)


def _seal_org_words(db: Db) -> int:
    """Seal the prompts and labels of org revisions under their authors' keys (``by_id``)."""
    rows = db.tuples(
        "SELECT revisions.id, revisions.space_id, revisions.path, revisions.prompt,"
        " revisions.by_id, revisions.by_label FROM revisions"
        " JOIN spaces ON spaces.id = revisions.space_id"
        " WHERE spaces.layer != 'user' AND revisions.sealed = 0 AND revisions.by_id IS NOT NULL"
        " AND (revisions.prompt IS NOT NULL OR revisions.by_label IS NOT NULL)"
    )
    for rid, space_id, path, prompt, author, label in rows:
        words = _author_sealer(db, space_id, author, create=True)
        assert words is not None  # made just now if the author had no key
        db.execute(
            "UPDATE revisions SET prompt = ?, by_label = ?, sealed = 2, author = ? WHERE id = ?",
            (
                words.text("prompt", path, rid, db.read_text(prompt)),
                words.text("by_label", path, rid, db.read_text(label)),
                author,
                rid,
            ),
        )
    return len(rows)


def _seal_change_words(db: Db) -> int:
    """Keep the words of every change waiting (or decided) apart, sealed (``_kept_change``)."""
    rows = db.tuples("SELECT id, space_id, data FROM changes WHERE sealed_words IS NULL")
    sealed = 0
    for change_id, space_id, data in rows:
        if not data:
            continue  # a row whose change was never written (a crash between two statements)
        plain, words = _kept_change(db, int(space_id), WaitingChange.model_validate_json(data))
        if words is not None:
            db.execute(
                "UPDATE changes SET data = ?, sealed_words = ? WHERE id = ?",
                (plain, words, change_id),
            )
            sealed += 1
    return sealed
