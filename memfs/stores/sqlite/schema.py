"""The SQLite store's schema: its tables, and the migration steps that build them.

This module owns the file format. Each step of ``MIGRATIONS`` takes the
schema from version i to i + 1 (``PRAGMA user_version``) inside one write
transaction with the version bump, so a crash or a second process opening
the same new file never sees half a schema; a file newer than this memfs
understands is refused. These tables hold everything::

    spaces           one row per (layer, org, user, space); user is '' outside the user layer;
                     ``version`` moves with every write to what a lean load reads (schema 9);
                     ``live_changes`` counts every write to its live rows (schema 13)
    revisions        every write ever made, with its provenance; content NULL is a deletion
    live             (space, path) -> the revision that is the file's current content
    clock            the store's one sequence (schema 2); only its counter matters
    changes          org changes held for review, one row each (schema 2)
    review_settings  a space's own review mode, which wins over a turn's (schema 2)
    audit            every sensitive act, append-only: triggers refuse UPDATE and DELETE (schema 3),
                     and an INSERT that does not append to the hash chain (schema 6)
    traces           what each turn saw and did, a ``Trace`` as JSON (schema 4)
    folders          (space, path) of every folder the space stores, empty ones among them
                     (schema 7); a folder has no revisions and never conflicts
    stored_turns     (space, session, turn) -> the fingerprint of the change set a turn
                     stored and the ``Stored`` it got (schema 8)
    forgotten        digest of (org, user, space) -> the clock when it was forgotten;
                     space '' is the whole person (schema 8)
    space_clock      the one counter space versions come from, so none repeats (schema 9)
    members          (org, id) -> role and label of a person who may sign in (schema 10)
    tokens           sha256 of a sign-in token -> (org, member) it signs in as, never the
                     token itself (schema 10; the format is ``memfs.core.members``)
    person_keys      (org, user) -> the person's data key, wrapped by the store key (schema 11;
                     the format is ``memfs.core.sealing``); forgetting the person deletes it
    store_key_check  one row: the key check value of the store key (schema 11), so a store
                     opened with another ``store_key_file`` is refused at open, and
                     how much is sealed (schema 12; ``memfs.stores.sql.upgrade``)
    names            (space, name) -> a person's path, sealed (schema 12); the rows of
                     a person's space keep the name, never the path
    trace_parts      (trace, org, user) -> that person's part of a trace, sealed (schema 12)

Schema 11 gives every revision ``sealed``: 1 where its content, prompt and
labels are ciphertexts under its person's key (``memfs.stores.sql.sealed``).
The step cannot see the store key, so rows an older memfs wrote in people's
spaces in the clear are sealed at the first open with the key.
Schema 12 seals a person's file names, turn records and their part of
every trace as well, the same way: at the first open with the key.

Schema 7 also gives every revision its file's ``mode`` (the permission bits)
and ``mtime_ns``/``ctime_ns`` (see ``memfs.core.models.FileMeta``); revisions
written before it read as mode 0644 with their ``created_at`` as both times,
which the step writes into them once. Schema 9's versions are moved by
triggers on ``live``, ``folders`` and ``revisions``, so a write by any
process, through any code path, moves them (``memfs.stores.manifests``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from memfs.core import audit as audit_rules
from memfs.core.audit import GENESIS
from memfs.core.errors import (
    ConfigError,
)
from memfs.stores.sql.audit import _COLUMNS, _audit_entry
from memfs.stores.sqlite.db import SqliteDb

# Each step takes the schema from version i to i + 1 (``PRAGMA user_version``).
# Steps run inside one write transaction with the version bump, so a crash or a
# second process opening the same new file never sees half a schema.
_SCHEMA_V1 = (
    """
    CREATE TABLE spaces (
        id INTEGER PRIMARY KEY,
        layer TEXT NOT NULL,
        org TEXT NOT NULL,
        "user" TEXT NOT NULL,
        space TEXT NOT NULL,
        UNIQUE (layer, org, "user", space)
    )
    """,
    # AUTOINCREMENT: ids are never reused, so a cursor can never point at a
    # revision that was removed and then handed out again.
    """
    CREATE TABLE revisions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        space_id INTEGER NOT NULL REFERENCES spaces (id),
        path TEXT NOT NULL,
        content BLOB,
        sha256 TEXT,
        size INTEGER NOT NULL,
        origin TEXT NOT NULL,
        session TEXT,
        turn TEXT,
        prompt TEXT,
        by_id TEXT,
        by_label TEXT,
        by_role TEXT,
        approved_by_id TEXT,
        approved_by_label TEXT,
        approved_by_role TEXT,
        created_at TEXT NOT NULL,
        CHECK ((content IS NULL) = (sha256 IS NULL))
    )
    """,
    "CREATE INDEX revisions_by_path ON revisions (space_id, path, id)",
    # A space's cursor is MAX(id) of its revisions; this makes that one index seek.
    "CREATE INDEX revisions_by_space ON revisions (space_id, id)",
    """
    CREATE TABLE live (
        space_id INTEGER NOT NULL REFERENCES spaces (id),
        path TEXT NOT NULL,
        revision_id INTEGER NOT NULL REFERENCES revisions (id),
        PRIMARY KEY (space_id, path)
    ) WITHOUT ROWID
    """,
)


def _create_core_tables(conn: sqlite3.Connection) -> None:
    # Statement by statement: executescript would commit the migration's transaction.
    for statement in _SCHEMA_V1:
        conn.execute(statement)


_SCHEMA_V2 = (
    # One sequence for revisions and change edits (see the module docstring).
    # AUTOINCREMENT keeps the high-water mark in sqlite_sequence, so the table
    # itself stays empty (each tick deletes its row) and no number comes twice.
    "CREATE TABLE clock (id INTEGER PRIMARY KEY AUTOINCREMENT)",
    # Start where revisions left off: revisions' own high-water mark, not
    # MAX(id), because a purged user file's ids were handed out as cursors too.
    """
    INSERT INTO sqlite_sequence (name, seq)
    VALUES ('clock', COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'revisions'), 0))
    """,
    # AUTOINCREMENT: a change id a reviewer once saw never names another change.
    # last_edited (the largest ``edited`` of its files) lets a space's cursor
    # count change edits without reading the JSON.
    """
    CREATE TABLE changes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        space_id INTEGER NOT NULL REFERENCES spaces (id),
        session TEXT NOT NULL,
        state TEXT NOT NULL,
        last_edited INTEGER NOT NULL,
        data TEXT NOT NULL
    )
    """,
    "CREATE INDEX changes_by_session ON changes (space_id, session, state)",
    """
    CREATE TABLE review_settings (
        space_id INTEGER PRIMARY KEY REFERENCES spaces (id),
        mode TEXT NOT NULL,
        by_id TEXT,
        by_label TEXT,
        by_role TEXT,
        set_at TEXT NOT NULL
    )
    """,
)


def _add_review_tables(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_V2:
        conn.execute(statement)


_SCHEMA_V3 = (
    # Not tied to spaces by a foreign key: forgetting a person deletes their
    # spaces rows, and the entries about them (the forget-user entry among
    # them) must outlive that. Entries hold paths and ids, never content.
    """
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        actor_id TEXT,
        actor_label TEXT,
        actor_role TEXT,
        action TEXT NOT NULL,
        org TEXT NOT NULL,
        space TEXT,
        target TEXT,
        detail TEXT
    )
    """,
    "CREATE INDEX audit_by_org ON audit (org, id)",
    # Append-only in the file itself, not just through the API: any connection
    # that tries to change or remove an entry is refused, and its transaction with it.
    """
    CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
    """
    CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
)


def _add_audit_table(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_V3:
        conn.execute(statement)


_SCHEMA_V4 = (
    # Not tied to spaces by a foreign key: a trace spans several spaces, and
    # forgetting a person rewrites the traces that mounted theirs (see
    # _forget_user) rather than deleting the turn's record of everyone else.
    """
    CREATE TABLE traces (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session TEXT NOT NULL,
        turn TEXT NOT NULL,
        at TEXT NOT NULL,
        data TEXT NOT NULL
    )
    """,
    "CREATE INDEX traces_by_session ON traces (session, id)",
)


def _add_traces_table(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_V4:
        conn.execute(statement)


def _add_manifest_index(conn: sqlite3.Connection) -> None:
    # A revision's bytes sit before its sha256 and size in the row, so reading
    # those two would page through every file's content; this covering index
    # lets a lean load read a 10,000-file manifest without touching one byte.
    conn.execute("CREATE INDEX revisions_manifest ON revisions (id, sha256, size)")


_AUDIT_TRIGGERS = (
    """
    CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
    # INSERT OR REPLACE deletes the row it replaces without firing delete
    # triggers (unless recursive_triggers is on), so an insert is refused
    # unless it appends: a new id past every other, linked to the last hash.
    f"""
    CREATE TRIGGER audit_append_only BEFORE INSERT ON audit
    WHEN NEW.id IS NULL
        OR NEW.id <= COALESCE((SELECT MAX(id) FROM audit), 0)
        OR NEW.hash IS NULL
        OR NEW.prev_hash IS NOT COALESCE(
            (SELECT hash FROM audit ORDER BY id DESC LIMIT 1), '{GENESIS}')
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
    """,
)


_SCHEMA_FILE_METADATA = (
    "ALTER TABLE revisions ADD COLUMN mode INTEGER",
    "ALTER TABLE revisions ADD COLUMN mtime_ns INTEGER",
    "ALTER TABLE revisions ADD COLUMN ctime_ns INTEGER",
    # Older revisions take their own time as both times, so a file keeps one
    # stable mtime from turn to turn (rsync and git compare it). Milliseconds:
    # what julianday() resolves.
    """
    UPDATE revisions SET
        mtime_ns = CAST(ROUND((julianday(created_at) - 2440587.5) * 86400000) AS INTEGER)
            * 1000000,
        ctime_ns = CAST(ROUND((julianday(created_at) - 2440587.5) * 86400000) AS INTEGER)
            * 1000000
    WHERE content IS NOT NULL
    """,
    # The manifest of a lean load carries each file's metadata, still without
    # touching a byte of content.
    "DROP INDEX revisions_manifest",
    "CREATE INDEX revisions_manifest ON revisions (id, sha256, size, mode, mtime_ns, ctime_ns)",
    """
    CREATE TABLE folders (
        space_id INTEGER NOT NULL REFERENCES spaces (id),
        path TEXT NOT NULL,
        PRIMARY KEY (space_id, path)
    ) WITHOUT ROWID
    """,
)


_SCHEMA_TURNS = (
    # WITHOUT ROWID, keyed as looked up: one seek per turn store.
    """
    CREATE TABLE stored_turns (
        space_id INTEGER NOT NULL REFERENCES spaces (id),
        session TEXT NOT NULL,
        turn TEXT NOT NULL,
        changes TEXT NOT NULL,
        stored TEXT NOT NULL,
        PRIMARY KEY (space_id, session, turn)
    ) WITHOUT ROWID
    """,
    # Not tied to spaces: forgetting a person deletes their spaces rows, and
    # this must outlive them. Keyed by a digest of (org, user, space), so the
    # file names nobody it forgot (only the audit entry does); no path, no content.
    """
    CREATE TABLE forgotten (
        key TEXT PRIMARY KEY,
        seq INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
)


def _bump(table: str, event: str, row: str, *, counted: bool = False) -> str:
    count = ", live_changes = live_changes + 1" if counted else ""
    return f"""
    CREATE TRIGGER {table}_{event.lower()}_moves_version AFTER {event} ON {table}
    BEGIN
        UPDATE space_clock SET n = n + 1;
        UPDATE spaces SET version = (SELECT n FROM space_clock){count} WHERE id = {row}.space_id;
    END
    """


# Schema 9: a version per space, moved by every write to what a lean load
# reads (live files, their revisions, folders), by triggers, so a write from
# any process or any future code path moves it (``memfs.stores.manifests``).
# Versions come from one counter that only grows: a space never has the same
# version twice, even one forgotten and made again under a reused id.
_SCHEMA_SPACE_VERSIONS = (
    "CREATE TABLE space_clock (n INTEGER NOT NULL)",
    "INSERT INTO space_clock (n) VALUES (0)",
    "ALTER TABLE spaces ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
    """
    CREATE TRIGGER spaces_insert_takes_version AFTER INSERT ON spaces
    BEGIN
        UPDATE space_clock SET n = n + 1;
        UPDATE spaces SET version = (SELECT n FROM space_clock) WHERE id = NEW.id;
    END
    """,
    _bump("live", "INSERT", "NEW"),
    _bump("live", "UPDATE", "NEW"),
    _bump("live", "DELETE", "OLD"),
    _bump("folders", "INSERT", "NEW"),
    _bump("folders", "UPDATE", "NEW"),
    _bump("folders", "DELETE", "OLD"),
    _bump("revisions", "UPDATE", "OLD"),
    _bump("revisions", "DELETE", "OLD"),
)


def _add_space_versions(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_SPACE_VERSIONS:
        conn.execute(statement)


# Schema 10: who may sign in. A member's id is unique within its org only
# (ids are per org). A token row references its member, so a member cannot be
# deleted while a token of theirs is kept: removing one revokes them first.
_SCHEMA_MEMBERS = (
    """
    CREATE TABLE members (
        org TEXT NOT NULL,
        id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('viewer', 'member', 'admin')),
        label TEXT,
        added_at TEXT NOT NULL,
        PRIMARY KEY (org, id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE tokens (
        hash TEXT PRIMARY KEY,
        org TEXT NOT NULL,
        member TEXT NOT NULL,
        created_at TEXT NOT NULL,
        FOREIGN KEY (org, member) REFERENCES members (org, id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX tokens_by_member ON tokens (org, member)",
)


def _add_members(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_MEMBERS:
        conn.execute(statement)


def _chain_audit(conn: sqlite3.Connection) -> None:
    """Schema 6: every audit entry carries its hash and the one before (``memfs.core.audit``).

    Entries already in the log are linked in id order. A ``forget`` entry of
    a person's own file named its path; an org or dir forget always leaves a
    deletion revision at that path, so an entry with none is a person's, and
    its path is dropped (target NULL, detail "1 file") before it is sealed.
    """
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("ALTER TABLE audit ADD COLUMN prev_hash TEXT")
    conn.execute("ALTER TABLE audit ADD COLUMN hash TEXT")
    conn.execute(
        "UPDATE audit SET target = NULL, detail = ? WHERE action = 'forget' AND NOT EXISTS ("
        " SELECT 1 FROM revisions JOIN spaces ON spaces.id = revisions.space_id"
        " WHERE spaces.layer != 'user' AND spaces.org = audit.org"
        " AND spaces.space = audit.space AND revisions.path = audit.target)",
        (audit_rules.count(1, "file"),),
    )
    prev = GENESIS
    db = SqliteDb(conn, store_key=b"")  # nothing sealed is read here
    for row in db.tuples(_COLUMNS + " ORDER BY id"):
        sealed = audit_rules.seal(_audit_entry(db, row), prev)
        conn.execute(
            "UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?",
            (sealed.prev_hash, sealed.hash, row[0]),
        )
        prev = sealed.hash
    for statement in _AUDIT_TRIGGERS:
        conn.execute(statement)


def _add_file_metadata(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_FILE_METADATA:
        conn.execute(statement)


def _add_turn_records(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_TURNS:
        conn.execute(statement)


# Schema 11: a person's memory sealed under a key of its own (``memfs.core.sealing``).
_SCHEMA_SEALING = (
    "ALTER TABLE revisions ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0",
    """
    CREATE TABLE person_keys (
        org TEXT NOT NULL,
        "user" TEXT NOT NULL,
        wrapped BLOB NOT NULL,
        PRIMARY KEY (org, "user")
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE store_key_check (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        value TEXT NOT NULL
    )
    """,
)


def _add_sealing(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_SEALING:
        conn.execute(statement)


# Schema 12: a person's file names, turn records and traces sealed too
# (``memfs.stores.sql.upgrade`` seals what is in the clear at the next open).
_SCHEMA_NAMES = (
    """
    CREATE TABLE names (
        space_id INTEGER NOT NULL REFERENCES spaces (id),
        name TEXT NOT NULL,
        sealed BLOB NOT NULL,
        PRIMARY KEY (space_id, name)
    ) WITHOUT ROWID
    """,
    "ALTER TABLE stored_turns ADD COLUMN sealed_stored BLOB",
    # Whose words an org revision's prompt and label are (sealed = 2: under their key).
    "ALTER TABLE revisions ADD COLUMN author TEXT",
    "ALTER TABLE changes ADD COLUMN sealed_words TEXT",
    """
    CREATE TABLE trace_parts (
        trace_id INTEGER NOT NULL REFERENCES traces (id),
        org TEXT NOT NULL,
        "user" TEXT NOT NULL,
        sealed BLOB NOT NULL,
        PRIMARY KEY (trace_id, org, "user")
    ) WITHOUT ROWID
    """,
    'CREATE INDEX trace_parts_by_person ON trace_parts (org, "user")',
    "ALTER TABLE traces ADD COLUMN people integer NOT NULL DEFAULT 0",
    "ALTER TABLE traces ADD COLUMN sealed_prompt BLOB",
    "ALTER TABLE store_key_check ADD COLUMN sealing INTEGER NOT NULL DEFAULT 1",
)


def _seal_names(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_NAMES:
        conn.execute(statement)


# Schema 13: every write to a space's live rows counted (``live_changes``), by
# the triggers that move its version: a lean load refreshes a manifest from
# the live rows that moved alone when they account for every write counted
# since it was read (``memfs.stores.sql.files._refresh_manifest``).
_SCHEMA_LIVE_CHANGES = (
    "ALTER TABLE spaces ADD COLUMN live_changes INTEGER NOT NULL DEFAULT 0",
    "DROP TRIGGER live_insert_moves_version",
    "DROP TRIGGER live_update_moves_version",
    "DROP TRIGGER live_delete_moves_version",
    _bump("live", "INSERT", "NEW", counted=True),
    _bump("live", "UPDATE", "NEW", counted=True),
    _bump("live", "DELETE", "OLD", counted=True),
)


def _count_live_changes(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_LIVE_CHANGES:
        conn.execute(statement)


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _create_core_tables,
    _add_review_tables,
    _add_audit_table,
    _add_traces_table,
    _add_manifest_index,
    _chain_audit,
    _add_file_metadata,
    _add_turn_records,
    _add_space_versions,
    _add_members,
    _add_sealing,
    _seal_names,
    _count_live_changes,
)
SCHEMA_VERSION = len(MIGRATIONS)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return  # the common case: no write lock taken just to open
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the write lock: another process may have migrated meanwhile.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"the database has schema version {version}, newer than this memfs "
                f"understands ({SCHEMA_VERSION}); upgrade memfs",
                path=str(path),
            )
        for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
            step(conn)
            # PRAGMA takes no parameters; number is an int we computed.
            conn.execute(f"PRAGMA user_version = {number:d}")
        conn.execute("COMMIT")
        # A step may have scrubbed rows (schema 6 drops paths from old entries):
        # older copies of those pages must not stay in the write-ahead log.
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
