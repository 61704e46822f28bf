"""The SQLite store: the embedded default, a managed store in one database file.

This module owns the database file and its schema: the migration steps that
build it, and every read and write of it. These tables hold everything::

    spaces           one row per (layer, org, user, space); user is '' outside the user layer
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

Schema 7 also gives every revision its file's ``mode`` (the
permission bits) and ``mtime_ns``/``ctime_ns`` (see ``memfs.core.models.FileMeta``);
revisions written before it read as mode 0644 with their ``created_at`` as
both times, which the step writes into them once.
    stored_turns     (space, session, turn) -> the fingerprint of the change set a turn
                     stored and the ``Stored`` it got (schema 8)
    forgotten        digest of (org, user, space) -> the clock when it was forgotten;
                     space '' is the whole person (schema 8)

A turn's store is exactly once: a second store of the same change set from the
same (space, session, turn) returns the ``Stored`` the first got and writes nothing, so a turn end
repeated after a crash between the store and the daemon's own record is
reported as saved, not as a conflict. A person's space keeps, in
``forgotten``, when it (or a file of it) was last forgotten, with no path or
content; a store from a turn that loaded before then is refused
(``Forgotten``), whatever it touches, and a load after it gets a cursor no
older than that moment.

Revision ids and the ``edited`` number of every file put into a review
change come from one sequence, ``clock``, so the review rules
(:mod:`memfs.core.review`) can compare "when did the live file change" with
"when did another conversation edit it" and with "when did this turn load".
A space's cursor is the largest number of that sequence the space has used
(a revision or a change edit), and a store conflicts on each path it touches
whose latest revision is newer than the cursor, as in the memory store. The
check and the writes run in one ``BEGIN IMMEDIATE`` transaction, so several
processes writing the same file serialize on SQLite's write lock and a
conflicting or failing change set writes nothing. Forgetting a file of a
person's own memory deletes its rows (forgetting the person deletes every row
of their spaces, ``spaces`` rows included), so a space's cursor can go back;
numbers are never reused, so every later write is still newer than any
cursor handed out before.

A change waiting for review is not live: it is a ``WaitingChange`` kept as
JSON in ``changes`` (its state also in a column, to query by). ``load``
overlays a conversation's own waiting change on the live files, so the
conversation sees what it saved and nobody else does.

One connection per store, used from worker threads under a lock, so trio
never blocks on the database. Every SQLite error (and an ``OSError`` about
the file) leaves this module as ``StoreUnavailable`` with the original as its
cause; so does a database file that existed and is missing or was replaced
(see ``SqliteStore``), rather than a fresh empty database in its place.

The audit log is a hash chain (``memfs.core.audit``): ``_log`` links each
entry to the last, and triggers refuse what would rewrite the log.

The database file is made 0600 (and narrowed to 0600 if this user owns a
wider one), with its ``-wal`` and ``-shm``: it holds people's memory and
prompts, whoever opens the store (the daemon, the CLI, a library caller).

Forgetting must leave nothing readable in the file: connections run with
``secure_delete`` (freed space is zeroed), and a purge ends with a checkpoint
that empties the write-ahead log, where older copies of the pages live.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Collection, Container, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TypeVar, get_args

import trio

from memfs.core import audit as audit_rules
from memfs.core import review
from memfs.core.audit import GENESIS, AuditCheck
from memfs.core.errors import (
    AuditTampered,
    ConfigError,
    Forgotten,
    NotFound,
    StoreUnavailable,
)
from memfs.core.limits import require_within
from memfs.core.models import (
    AuditAction,
    AuditEntry,
    By,
    ChangeSet,
    FileMeta,
    Forgot,
    Limits,
    Loaded,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
    Trace,
    digest,
    settle_meta,
)
from memfs.core.names import check_identity, check_path
from memfs.core.policy import moved_on, parse_cursor, purged_since
from memfs.core.review import OPEN_STATES, ChangeState, Effect, ReviewMode, WaitingChange
from memfs.private import create_private_file, narrow_if_ours
from memfs.stores.manifests import DEFAULT_MAX_FILES, Manifest, ManifestCache

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000
_MAX_ROWID = 2**63 - 1

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


def _bump(table: str, event: str, row: str) -> str:
    return f"""
    CREATE TRIGGER {table}_{event.lower()}_moves_version AFTER {event} ON {table}
    BEGIN
        UPDATE space_clock SET n = n + 1;
        UPDATE spaces SET version = (SELECT n FROM space_clock) WHERE id = {row}.space_id;
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
    rows = conn.cursor()
    rows.row_factory = sqlite3.Row  # the migration may run on a connection without it
    for row in rows.execute("SELECT * FROM audit ORDER BY id").fetchall():
        sealed = audit_rules.seal(_audit_entry(row), prev)
        conn.execute(
            "UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?",
            (sealed.prev_hash, sealed.hash, row["id"]),
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
)
SCHEMA_VERSION = len(MIGRATIONS)


@contextlib.contextmanager
def _map_exceptions(path: Path) -> Iterator[None]:
    """Report any SQLite failure as the store being unavailable, cause attached."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(f"the sqlite store failed: {exc}", path=str(path)) from exc


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


def _timestamp(at: datetime) -> str:
    # memfs makes aware times (models.now); a naive one from an app is taken as UTC
    # rather than the host's zone, so the stored instant never depends on the host.
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat()


def _by(id_: str | None, label: str | None, role: str | None) -> By | None:
    return None if id_ is None else By(id=id_, label=label, role=role)


def _log(
    conn: sqlite3.Connection,
    action: AuditAction,
    org: str,
    *,
    by: By | None,
    space: str | None = None,
    target: str | None = None,
    detail: str | None = None,
) -> None:
    """Add one audit entry; called inside the act's own transaction, so both or neither commit.

    The id is the next of the table's own sequence, given explicitly because
    it is part of what the entry's hash covers.
    """
    (last,) = conn.execute(
        "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit'), 0)"
    ).fetchone()
    prev = conn.execute("SELECT hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
    entry = audit_rules.seal(
        AuditEntry(
            id=str(int(last) + 1),
            # Read back from its stored text, so the hash is over what verify will read.
            at=datetime.fromisoformat(_timestamp(datetime.now(UTC))),
            actor=by,
            action=action,
            org=org,
            space=space,
            target=target,
            detail=detail,
        ),
        GENESIS if prev is None else prev["hash"],
    )
    conn.execute(
        "INSERT INTO audit (id, at, actor_id, actor_label, actor_role, action, org, space,"
        " target, detail, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            int(entry.id),
            _timestamp(entry.at),
            None if by is None else by.id,
            None if by is None else by.label,
            None if by is None else by.role,
            action,
            org,
            space,
            target,
            detail,
            entry.prev_hash,
            entry.hash,
        ),
    )


# Read back as the Literal it was written from, so a row's action type-checks.
_ACTIONS: dict[str, AuditAction] = {action: action for action in get_args(AuditAction)}


def _audit_entry(row: sqlite3.Row) -> AuditEntry:
    keys = row.keys()
    return AuditEntry(
        id=str(row["id"]),
        at=datetime.fromisoformat(row["at"]),
        actor=_by(row["actor_id"], row["actor_label"], row["actor_role"]),
        action=_ACTIONS[row["action"]],
        org=row["org"],
        space=row["space"],
        target=row["target"],
        detail=row["detail"],
        prev_hash=(row["prev_hash"] if "prev_hash" in keys else None) or "",
        hash=(row["hash"] if "hash" in keys else None) or "",
    )


def _audit(conn: sqlite3.Connection, org: str | None) -> list[AuditEntry]:
    query = "SELECT * FROM audit"
    params: tuple[str, ...] = ()
    if org is not None:
        query += " WHERE org = ?"
        params = (org,)
    return [_audit_entry(row) for row in conn.execute(query + " ORDER BY id", params)]


def _verify_audit(conn: sqlite3.Connection) -> AuditCheck:
    """The chain over every entry (every org), and no entry cut off its end."""
    entries: list[AuditEntry] = []
    for row in conn.execute("SELECT * FROM audit ORDER BY id"):
        try:
            entries.append(_audit_entry(row))
        except (KeyError, ValueError, TypeError) as exc:
            raise AuditTampered(
                f"this audit entry cannot be read back: {exc}", path=str(row["id"])
            ) from exc
    check = audit_rules.verify_chain(entries)
    (seq,) = conn.execute(
        "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit'), 0)"
    ).fetchone()
    last = int(entries[-1].id) if entries else 0
    if int(seq) != last:
        # Ids are handed out by the sequence and never rolled past without a row.
        raise AuditTampered(
            f"the audit log ends at entry {last}, but entries up to {seq} were written: "
            "the last entries were removed",
            path=str(last + 1),
        )
    return check


def _space_id(conn: sqlite3.Connection, ref: SpaceRef) -> int | None:
    row = conn.execute(
        'SELECT id FROM spaces WHERE layer = ? AND org = ? AND "user" = ? AND space = ?',
        (ref.layer, ref.org, ref.user or "", ref.space),
    ).fetchone()
    return None if row is None else int(row[0])


def _ensure_space(conn: sqlite3.Connection, ref: SpaceRef) -> int:
    conn.execute(
        'INSERT INTO spaces (layer, org, "user", space) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
        (ref.layer, ref.org, ref.user or "", ref.space),
    )
    space_id = _space_id(conn, ref)
    assert space_id is not None  # inserted just above, in this transaction
    return space_id


def _tick(conn: sqlite3.Connection) -> int:
    """The next number of the store's one sequence (revisions and change edits)."""
    cur = conn.execute("INSERT INTO clock DEFAULT VALUES")
    assert cur.lastrowid is not None  # always set after an INSERT into a rowid table
    # The number lives on in sqlite_sequence; the row itself is not needed.
    conn.execute("DELETE FROM clock WHERE id = ?", (cur.lastrowid,))
    return cur.lastrowid


def _cursor(conn: sqlite3.Connection, space_id: int | None) -> int:
    """The largest number of the sequence this space has used, 0 if none.

    Per space rather than the global clock, so another space's writes do not
    move it; change edits count, so a turn's ``loaded`` (its cursor) compares
    with other changes' ``edited`` the way the review rules need.
    """
    if space_id is None:
        return 0
    (revision,) = conn.execute(
        "SELECT MAX(id) FROM revisions WHERE space_id = ?", (space_id,)
    ).fetchone()
    (edited,) = conn.execute(
        "SELECT MAX(last_edited) FROM changes WHERE space_id = ?", (space_id,)
    ).fetchone()
    return max(int(revision or 0), int(edited or 0))


def _live_files(
    conn: sqlite3.Connection, space_id: int
) -> tuple[dict[str, bytes], dict[str, str], dict[str, str]]:
    files: dict[str, bytes] = {}
    revisions: dict[str, str] = {}
    shas: dict[str, str] = {}
    for path, revision_id, content, sha in conn.execute(
        "SELECT live.path, live.revision_id, revisions.content, revisions.sha256 FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? ORDER BY live.path",
        (space_id,),
    ):
        files[path] = bytes(content)
        revisions[path] = str(revision_id)
        if sha is not None:
            shas[path] = sha
    return files, revisions, shas


_CHUNK = 500  # host parameters per IN (...) list, well under SQLite's limit


def _load_lean(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    session: str,
    have: Container[str],
    manifests: ManifestCache,
) -> Loaded:
    """``_load`` without the bytes of live files whose sha256 is in ``have``."""
    row = conn.execute(
        'SELECT id, version FROM spaces WHERE layer = ? AND org = ? AND "user" = ? AND space = ?',
        (ref.layer, ref.org, ref.user or "", ref.space),
    ).fetchone()
    if row is None:
        return Loaded(files={}, cursor=str(_forgotten_at(conn, ref)), revisions={})
    space_id, version = int(row[0]), int(row[1])
    manifest = manifests.get(space_id, version)
    if manifest is None:
        manifest = _read_manifest(conn, space_id, version)
        manifests.put(space_id, manifest)
    files: dict[str, bytes] = {}
    wanted = {
        int(manifest.revisions[path]): path
        for path, sha in manifest.shas.items()
        if sha not in have
    }
    ids = list(wanted)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for revision_id, content in conn.execute(
            f"SELECT id, content FROM revisions WHERE id IN ({marks})", chunk
        ):
            files[wanted[revision_id]] = bytes(content)
    # model_construct: these dicts come straight from the store's own tables,
    # and validating 10,000 entries three times would cost more than the query.
    # Copies: the cached manifest is shared by every load at its version.
    live = Loaded.model_construct(
        files=files,
        cursor=str(max(_cursor(conn, space_id), _forgotten_at(conn, ref))),
        revisions=dict(manifest.revisions),
        shas=dict(manifest.shas),
        sizes=dict(manifest.sizes),
        meta=dict(manifest.meta),
        folders=tuple(sorted(manifest.folders)),
    )
    own = _own_waiting(conn, space_id, ref, session)
    if own is None:
        return live  # ordered by path already
    loaded = review.lay_over(live, own)
    return loaded.model_copy(update={"revisions": dict(sorted(loaded.revisions.items()))})


def _read_manifest(conn: sqlite3.Connection, space_id: int, version: int) -> Manifest:
    """Every live file of the space without its bytes, in path order, and its folders."""
    # Plain tuples and comprehensions: this runs over every file of a space.
    cursor = conn.cursor()
    cursor.row_factory = None
    rows = cursor.execute(
        "SELECT live.path, live.revision_id, revisions.sha256, revisions.size,"
        " revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        " JOIN revisions INDEXED BY revisions_manifest ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? ORDER BY live.path",
        (space_id,),
    ).fetchall()
    return Manifest(
        version=version,
        revisions={row[0]: str(row[1]) for row in rows},
        shas={row[0]: row[2] for row in rows},
        sizes={row[0]: row[3] for row in rows},
        meta={row[0]: _meta(row[4], row[5], row[6]) for row in rows},
        folders=frozenset(_folders(conn, space_id)),
    )


def _meta(mode: int | None, mtime_ns: int | None, ctime_ns: int | None) -> FileMeta:
    # Revisions from before the file-metadata step have no mode: 0644.
    return FileMeta(0o644 if mode is None else mode, mtime_ns, ctime_ns)


def _live_metas(conn: sqlite3.Connection, space_id: int) -> dict[str, FileMeta]:
    return {
        path: _meta(mode, mtime, ctime)
        for path, mode, mtime, ctime in conn.execute(
            "SELECT live.path, revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
            " JOIN revisions INDEXED BY revisions_manifest ON revisions.id = live.revision_id"
            " WHERE live.space_id = ?",
            (space_id,),
        )
    }


def _live_meta(conn: sqlite3.Connection, space_id: int | None, path: str) -> FileMeta | None:
    """The live file's metadata; None if ``path`` is not live."""
    if space_id is None:
        return None
    row = conn.execute(
        "SELECT revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? AND live.path = ?",
        (space_id, path),
    ).fetchone()
    return None if row is None else _meta(row[0], row[1], row[2])


def _folders(conn: sqlite3.Connection, space_id: int) -> set[str]:
    return {
        row[0] for row in conn.execute("SELECT path FROM folders WHERE space_id = ?", (space_id,))
    }


def _set_folders(conn: sqlite3.Connection, space_id: int, folders: Mapping[str, bool]) -> None:
    """Store (True) or remove (False) folders; either is a no-op where it already holds."""
    for path, made in sorted(folders.items()):
        if made:
            conn.execute(
                "INSERT INTO folders (space_id, path) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (space_id, path),
            )
        else:
            conn.execute("DELETE FROM folders WHERE space_id = ? AND path = ?", (space_id, path))


def _own_waiting(
    conn: sqlite3.Connection, space_id: int, ref: SpaceRef, session: str | None
) -> WaitingChange | None:
    """The conversation's waiting change to the space, which its loads see (core.review.joins)."""
    if session is None:
        return None
    waiting = _open_changes(conn, space_id, session, ("waiting",))  # the live ones: not read
    return review.joins(waiting, ref, session, "person")


def _live_among(conn: sqlite3.Connection, space_id: int | None, paths: Collection[str]) -> set[str]:
    """Which of ``paths`` are live in the space (for the deletion rule, without reading bytes)."""
    if space_id is None or not paths:
        return set()
    found: set[str] = set()
    wanted = list(paths)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(
            row[0]
            for row in conn.execute(
                f"SELECT path FROM live WHERE space_id = ? AND path IN ({marks})",
                (space_id, *chunk),
            )
        )
    return found


def _live_sizes(conn: sqlite3.Connection, space_id: int | None) -> dict[str, int]:
    """Each live file's size, without reading its bytes."""
    if space_id is None:
        return {}
    return {
        path: int(size)
        for path, size in conn.execute(
            "SELECT live.path, revisions.size FROM live"
            " JOIN revisions INDEXED BY revisions_manifest ON revisions.id = live.revision_id"
            " WHERE live.space_id = ?",
            (space_id,),
        )
    }


def _put(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    changes: ChangeSet,
    provenance: Provenance,
    limits: Limits,
) -> Stored:
    """A person's edit: within the limits a turn has, or nothing of it is written.

    Origin ``edited`` is audited (``put``) in the write's own transaction.
    """
    require_within(changes, _live_sizes(conn, _space_id(conn, ref)), limits)
    stored = _store_reviewed(conn, ref, changes, None, provenance, "none")
    about = audit_rules.about_put(ref, changes, provenance)
    if about is not None:  # a person's edit: recorded in the same transaction
        target, detail = about
        _log(conn, "put", ref.org, by=provenance.by, space=ref.space, target=target, detail=detail)
    return stored


def _contents(conn: sqlite3.Connection, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
    space_id = _space_id(conn, ref)
    found: dict[str, bytes] = {}
    if space_id is None:
        return found
    wanted = list(dict.fromkeys(shas))
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for sha, content in conn.execute(
            f"SELECT sha256, content FROM revisions WHERE space_id = ? AND sha256 IN ({marks})",
            (space_id, *chunk),
        ):
            found.setdefault(sha, bytes(content))
    return found


def _load(conn: sqlite3.Connection, ref: SpaceRef, session: str | None) -> Loaded:
    """The live files; with ``session``, that conversation's waiting change laid over them."""
    space_id = _space_id(conn, ref)
    if space_id is None:
        return Loaded(files={}, cursor=str(_forgotten_at(conn, ref)), revisions={})
    files, revisions, shas = _live_files(conn, space_id)
    live = Loaded(
        files=files,
        cursor=str(max(_cursor(conn, space_id), _forgotten_at(conn, ref))),
        revisions=revisions,
        shas=shas,
        meta=_live_metas(conn, space_id),
        folders=tuple(sorted(_folders(conn, space_id))),
    )
    own = _own_waiting(conn, space_id, ref, session)
    if own is None:
        return live  # ordered by path already
    loaded = review.lay_over(live, own)
    return loaded.model_copy(update={"files": dict(sorted(loaded.files.items()))})


def _record(
    conn: sqlite3.Connection,
    space_id: int,
    path: str,
    content: bytes | None,
    provenance: Provenance,
    approved_by: By | None = None,
    meta: FileMeta | None = None,
) -> int:
    by = provenance.by
    settled = (
        None
        if content is None
        else settle_meta(meta, _live_meta(conn, space_id, path), provenance.at)
    )
    # The id comes from the shared clock, so it orders against change edits too.
    revision_id = _tick(conn)
    conn.execute(
        "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin, session, turn,"
        " prompt, by_id, by_label, by_role, approved_by_id, approved_by_label, approved_by_role,"
        " created_at, mode, mtime_ns, ctime_ns)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            revision_id,
            space_id,
            path,
            content,
            None if content is None else digest(content),
            0 if content is None else len(content),
            provenance.origin,
            provenance.session,
            provenance.turn,
            provenance.prompt,
            None if by is None else by.id,
            None if by is None else by.label,
            None if by is None else by.role,
            None if approved_by is None else approved_by.id,
            None if approved_by is None else approved_by.label,
            None if approved_by is None else approved_by.role,
            _timestamp(provenance.at),
            None if settled is None else settled.mode,
            None if settled is None else settled.mtime_ns,
            None if settled is None else settled.ctime_ns,
        ),
    )
    return revision_id


def _make_live(conn: sqlite3.Connection, space_id: int, path: str, revision_id: int) -> None:
    conn.execute(
        "INSERT INTO live (space_id, path, revision_id) VALUES (?, ?, ?)"
        " ON CONFLICT (space_id, path) DO UPDATE SET revision_id = excluded.revision_id",
        (space_id, path, revision_id),
    )


def _store(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
) -> Stored:
    space_id = _space_id(conn, ref)
    current = _cursor(conn, space_id)
    # Checked even when the space has no row: forgetting a person deletes it,
    # and a turn that loaded before must not write their files back.
    if base is not None:
        last_change: dict[str, int] = {}
        for path in changes.paths if space_id is not None else ():
            (latest,) = conn.execute(
                "SELECT MAX(id) FROM revisions WHERE space_id = ? AND path = ?", (space_id, path)
            ).fetchone()
            if latest is not None:
                last_change[path] = int(latest)
        conflicts = sorted(
            {*moved_on(changes.paths, last_change, base), *purged_since(changes, last_change)}
        )
        if conflicts:
            return Stored(status="conflict", conflicts=tuple(conflicts), cursor=str(current))
    if changes.is_empty():
        return Stored(status="saved", cursor=str(current))
    review.require_deletable(changes.deleted, _live_among(conn, space_id, changes.deleted))
    if space_id is None:
        space_id = _ensure_space(conn, ref)

    _set_folders(conn, space_id, review.folder_changes(changes))
    written: dict[str, str] = {}
    for path, content in sorted({**changes.created, **changes.updated}.items()):
        current = _record(conn, space_id, path, content, provenance, meta=changes.meta.get(path))
        _make_live(conn, space_id, path, current)
        written[path] = str(current)
    for path in changes.deleted:
        conn.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, path))
        current = _record(conn, space_id, path, None, provenance)
        written[path] = str(current)
    return Stored(status="saved", revisions=written, cursor=str(current))


def _row_id(revision: str) -> int | None:
    """The row id a revision (or change) id names, or None if this store never issued it."""
    # Exact round trip: "05", " 5" or "+5" are not ids this store gave out.
    if not (revision.isascii() and revision.isdigit()) or str(int(revision)) != revision:
        return None
    value = int(revision)
    return value if value <= _MAX_ROWID else None


def _restore(
    conn: sqlite3.Connection, ref: SpaceRef, path: str, revision: str, provenance: Provenance
) -> Stored:
    unknown = NotFound(f"{path!r} in {ref} has no revision {revision!r}", path=path)
    space_id = _space_id(conn, ref)
    row_id = _row_id(revision)
    if space_id is None or row_id is None:
        raise unknown
    row = conn.execute(
        "SELECT content, mode FROM revisions WHERE id = ? AND space_id = ? AND path = ?",
        (row_id, space_id, path),
    ).fetchone()
    if row is None:
        raise unknown
    if row["content"] is None:
        raise NotFound(f"revision {revision!r} deleted {path!r}; it has no content", path=path)
    # The mode comes back with the bytes; the times are the restore's own.
    mode = FileMeta(mode=0o644 if row["mode"] is None else row["mode"])
    current = _record(conn, space_id, path, bytes(row["content"]), provenance, meta=mode)
    _make_live(conn, space_id, path, current)
    target, detail = audit_rules.about_file(ref, path, revision)
    _log(conn, "restore", ref.org, by=provenance.by, space=ref.space, target=target, detail=detail)
    return Stored(status="saved", revisions={path: str(current)}, cursor=str(current))


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
    _mark_forgotten(conn, ref.org, ref.user or "", ref.space)
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
    _mark_forgotten(conn, org, user, "")
    # The audit entry does name them, on purpose: an erasure must be accountable.
    # How many spaces went, never what they held.
    detail = audit_rules.count(len(purged), "space")
    _log(conn, "forget-user", org, by=by, target=user, detail=detail)
    return Forgot(spaces=tuple(purged), files=files)


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


def _history(conn: sqlite3.Connection, ref: SpaceRef, path: str) -> list[Revision]:
    space_id = _space_id(conn, ref)
    if space_id is None:
        return []
    rows = conn.execute(
        "SELECT id, sha256, size, origin, session, turn, prompt, by_id, by_label, by_role,"
        " approved_by_id, approved_by_label, approved_by_role, created_at, mode, mtime_ns"
        " FROM revisions WHERE space_id = ? AND path = ? ORDER BY id",
        (space_id, path),
    ).fetchall()
    return [
        Revision(
            id=str(row["id"]),
            path=path,
            sha256=row["sha256"],
            size=row["size"],
            deleted=row["sha256"] is None,
            provenance=Provenance(
                origin=row["origin"],
                session=row["session"],
                turn=row["turn"],
                prompt=row["prompt"],
                by=_by(row["by_id"], row["by_label"], row["by_role"]),
                at=datetime.fromisoformat(row["created_at"]),
            ),
            approved_by=_by(
                row["approved_by_id"], row["approved_by_label"], row["approved_by_role"]
            ),
            mode=(None if row["sha256"] is None else 0o644 if row["mode"] is None else row["mode"]),
            mtime_ns=None if row["sha256"] is None else row["mtime_ns"],
        )
        for row in rows
    ]


def _spaces(conn: sqlite3.Connection) -> list[SpaceRef]:
    rows = conn.execute(
        'SELECT layer, org, "user", space FROM spaces'
        " WHERE EXISTS (SELECT 1 FROM revisions WHERE revisions.space_id = spaces.id)"
    ).fetchall()
    refs = [
        SpaceRef(layer=layer, org=org, user=user or None, space=space)
        for layer, org, user, space in rows
    ]
    return sorted(refs, key=str)


# Review (memfs.core.review decides; these keep its changes and carry out its effects).


def _review_setting(conn: sqlite3.Connection, space_id: int | None) -> ReviewMode | None:
    if space_id is None:
        return None
    row = conn.execute(
        "SELECT mode FROM review_settings WHERE space_id = ?", (space_id,)
    ).fetchone()
    return None if row is None else review.check_mode(row["mode"])


def _set_review(conn: sqlite3.Connection, ref: SpaceRef, mode: ReviewMode, by: By | None) -> None:
    space_id = _ensure_space(conn, ref)
    conn.execute(
        "INSERT INTO review_settings (space_id, mode, by_id, by_label, by_role, set_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (space_id) DO UPDATE SET mode = excluded.mode, by_id = excluded.by_id,"
        " by_label = excluded.by_label, by_role = excluded.by_role, set_at = excluded.set_at",
        (
            space_id,
            mode,
            None if by is None else by.id,
            None if by is None else by.label,
            None if by is None else by.role,
            _timestamp(datetime.now(UTC)),
        ),
    )
    _log(conn, "set-review", ref.org, by=by, space=ref.space, detail=mode)


def _open_changes(
    conn: sqlite3.Connection,
    space_id: int,
    session: str,
    states: tuple[ChangeState, ...] = OPEN_STATES,
) -> list[WaitingChange]:
    """The conversation's changes to the space in ``states``, oldest first (for review.joins)."""
    marks = ",".join("?" * len(states))
    return [
        WaitingChange.model_validate_json(row["data"])
        for row in conn.execute(
            f"SELECT data FROM changes WHERE space_id = ? AND session = ? AND state IN ({marks})"
            " ORDER BY id",
            (space_id, session, *states),
        )
    ]


def _save_change(conn: sqlite3.Connection, change: WaitingChange) -> None:
    last_edited = max((file.edited for file in change.files.values()), default=0)
    # MAX: a partly decided change drops files, but the space's cursor must not go back.
    conn.execute(
        "UPDATE changes SET state = ?, last_edited = MAX(last_edited, ?), data = ? WHERE id = ?",
        (change.state, last_edited, change.model_dump_json(), int(change.id)),
    )


def _new_change_id(conn: sqlite3.Connection, space_id: int, session: str) -> str:
    """A row for a new change; its data is written once the change, with this id, exists."""
    cur = conn.execute(
        "INSERT INTO changes (space_id, session, state, last_edited, data)"
        " VALUES (?, ?, 'waiting', 0, '')",
        (space_id, session),
    )
    assert cur.lastrowid is not None  # always set after an INSERT into a rowid table
    return str(cur.lastrowid)


def _snapshot_at(
    conn: sqlite3.Connection, space_id: int, paths: tuple[str, ...], loaded: int
) -> dict[str, str]:
    """The revision of each path a snapshot at ``loaded`` held (absent: none, or deleted)."""
    snapshot: dict[str, str] = {}
    for path in paths:
        row = conn.execute(
            "SELECT id, content IS NULL AS deleted FROM revisions"
            " WHERE space_id = ? AND path = ? AND id <= ? ORDER BY id DESC LIMIT 1",
            (space_id, path, loaded),
        ).fetchone()
        if row is not None and not row["deleted"]:
            snapshot[path] = str(row["id"])
    return snapshot


def _keep_change(
    conn: sqlite3.Connection,
    space_id: int,
    ref: SpaceRef,
    mode: ReviewMode,
    changes: ChangeSet,
    *,
    snapshot: Mapping[str, str],
    loaded: int,
    provenance: Provenance,
) -> str:
    """Put ``changes`` into the conversation's open change (a new one if it has none)."""
    # Checked first, so no empty row is left behind.
    session = review.conversation_of(ref.layer, mode, provenance)
    assert session is not None  # only listed changes are kept
    existing = review.joins(_open_changes(conn, space_id, session), ref, session, mode)
    edited = _tick(conn)
    if existing is None:
        change = review.open_change(
            _new_change_id(conn, space_id, session),
            ref,
            mode=mode,
            changes=changes,
            snapshot=snapshot,
            loaded=loaded,
            edited=edited,
            provenance=provenance,
        )
    else:
        change = review.update(
            existing,
            changes,
            snapshot=snapshot,
            loaded=loaded,
            edited=edited,
            provenance=provenance,
        )
    _save_change(conn, change)
    return change.id


def _hold(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
) -> Stored:
    """Review ``person``: the change waits in the conversation's change; nothing goes live.

    No conflict check against the live files: nothing is overwritten yet, and
    a reviewer sees a file that moved on as stale instead.
    """
    space_id = _ensure_space(conn, ref)
    if changes.is_empty():
        return Stored(status="saved", cursor=str(_cursor(conn, space_id)))
    loaded = _cursor(conn, space_id) if base is None else base
    own = _own_waiting(conn, space_id, ref, provenance.session)
    review.require_deletable(changes.deleted, _live_among(conn, space_id, changes.deleted), own)
    snapshot = _snapshot_at(conn, space_id, changes.paths, loaded)
    change_id = _keep_change(
        conn,
        space_id,
        ref,
        "person",
        changes,
        snapshot=snapshot,
        loaded=loaded,
        provenance=provenance,
    )
    return Stored(status="waiting", change=change_id, cursor=str(_cursor(conn, space_id)))


def _store_reviewed(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
    requested: ReviewMode,
) -> Stored:
    """A turn's store under review: the space's own setting wins over the turn's mode."""
    mode = review.effective_mode(_review_setting(conn, _space_id(conn, ref)), requested)
    review.conversation_of(ref.layer, mode, provenance)  # before anything is written
    if not review.saves_at_once(ref.layer, mode):
        return _hold(conn, ref, changes, base, provenance)
    if not review.is_listed(ref.layer, mode):
        return _store(conn, ref, changes, base, provenance)
    # Review ``after``: live now (conflict-checked as usual), and listed for a person.
    space_id = _space_id(conn, ref)
    # What each path was before this write: what a reviewer's reject puts back.
    before = {} if space_id is None else _live_files(conn, space_id)[1]
    stored = _store(conn, ref, changes, base, provenance)
    if stored.status != "saved" or changes.is_empty():
        return stored
    space_id = _ensure_space(conn, ref)
    # Loaded at the write itself: the change's own revisions do not make it
    # stale, a later live write to its files does.
    loaded = int(stored.cursor or 0)
    snapshot = {path: before[path] for path in changes.paths if path in before}
    change_id = _keep_change(
        conn,
        space_id,
        ref,
        mode,
        changes,
        snapshot=snapshot,
        loaded=loaded,
        provenance=provenance,
    )
    return stored.model_copy(update={"change": change_id, "cursor": str(_cursor(conn, space_id))})


def _turn_key(provenance: Provenance) -> tuple[str, str] | None:
    """The (session, turn) a store comes from, if it comes from a turn."""
    if provenance.origin != "conversation" or not provenance.session or not provenance.turn:
        return None
    return provenance.session, provenance.turn


def _forgotten_at(conn: sqlite3.Connection, ref: SpaceRef) -> int:
    """When ``ref`` (or its whole person) was last forgotten; 0 if never, or not a person's."""
    if ref.layer != "user":
        return 0
    user = ref.user or ""
    (seq,) = conn.execute(
        "SELECT MAX(seq) FROM forgotten WHERE key IN (?, ?)",
        (_forgotten_key(ref.org, user, ref.space), _forgotten_key(ref.org, user, "")),
    ).fetchone()
    return int(seq or 0)


def _forgotten_key(org: str, user: str, space: str) -> str:
    return digest(f"{org}\0{user}\0{space}".encode())


def _mark_forgotten(conn: sqlite3.Connection, org: str, user: str, space: str) -> None:
    conn.execute(
        "INSERT INTO forgotten (key, seq) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET seq = excluded.seq",
        (_forgotten_key(org, user, space), _tick(conn)),
    )


def _scrub_stored_turns(conn: sqlite3.Connection, space_id: int, path: str) -> None:
    """Take a forgotten path out of the turn records that name it."""
    for row in conn.execute(
        "SELECT session, turn, stored FROM stored_turns WHERE space_id = ?", (space_id,)
    ).fetchall():
        stored = Stored.model_validate_json(row["stored"])
        if path in stored.revisions:
            kept = stored.model_copy(
                update={"revisions": {p: r for p, r in stored.revisions.items() if p != path}}
            )
            conn.execute(
                "UPDATE stored_turns SET stored = ? WHERE space_id = ? AND session = ?"
                " AND turn = ?",
                (kept.model_dump_json(), space_id, row["session"], row["turn"]),
            )


def _store_turn(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
    requested: ReviewMode,
) -> Stored:
    """``_store_reviewed``, exactly once per turn, and never over a forget the turn predates."""
    key = _turn_key(provenance)
    if key is not None:
        space_id = _space_id(conn, ref)
        row = (
            None
            if space_id is None
            else conn.execute(
                "SELECT changes, stored FROM stored_turns"
                " WHERE space_id = ? AND session = ? AND turn = ?",
                (space_id, *key),
            ).fetchone()
        )
        if row is not None and row["changes"] == changes.fingerprint():
            return Stored.model_validate_json(row["stored"])
    if base is not None and _forgotten_at(conn, ref) > base:
        raise Forgotten(
            "this person's memory was forgotten after the turn loaded it; nothing of the "
            "turn is stored in it",
            path=str(ref),
        )
    stored = _store_reviewed(conn, ref, changes, base, provenance, requested)
    if key is not None and stored.status != "conflict" and not changes.is_empty():
        conn.execute(
            "INSERT INTO stored_turns (space_id, session, turn, changes, stored)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (space_id, session, turn) DO UPDATE"
            " SET changes = excluded.changes, stored = excluded.stored",
            (_ensure_space(conn, ref), *key, changes.fingerprint(), stored.model_dump_json()),
        )
    return stored


def _last_live_change(conn: sqlite3.Connection, space_id: int) -> dict[str, int]:
    """Each path's latest revision in the space, deletions included."""
    return {
        path: int(latest)
        for path, latest in conn.execute(
            "SELECT path, MAX(id) FROM revisions WHERE space_id = ? GROUP BY path", (space_id,)
        )
    }


def _marked(
    conn: sqlite3.Connection, space_id: int, changes: list[WaitingChange]
) -> list[WaitingChange]:
    """``changes`` (all of one space) with their stale files marked.

    Only open changes are marked: a decided change has nothing left to
    approve, and its own applied revisions would otherwise mark it stale.
    """
    if not any(change.state in OPEN_STATES for change in changes):
        return changes
    rivals = [
        WaitingChange.model_validate_json(row["data"])
        for row in conn.execute(
            "SELECT data FROM changes WHERE space_id = ? AND state IN (?, ?)",
            (space_id, *OPEN_STATES),
        )
    ]
    live = _last_live_change(conn, space_id)
    return [
        review.mark_stale(change, live, rivals) if change.state in OPEN_STATES else change
        for change in changes
    ]


def _list_changes(
    conn: sqlite3.Connection, org: str | None, open_only: bool
) -> list[WaitingChange]:
    query = "SELECT changes.space_id, changes.data FROM changes"
    query += " JOIN spaces ON spaces.id = changes.space_id WHERE 1"
    params: list[str] = []
    if org is not None:
        query += " AND spaces.org = ?"
        params.append(org)
    if open_only:
        query += " AND changes.state IN (?, ?)"
        params.extend(OPEN_STATES)
    rows = conn.execute(query + " ORDER BY changes.id", params).fetchall()
    by_space: dict[int, list[WaitingChange]] = {}
    for row in rows:
        by_space.setdefault(row["space_id"], []).append(
            WaitingChange.model_validate_json(row["data"])
        )
    marked = itertools.chain.from_iterable(
        _marked(conn, space_id, changes) for space_id, changes in by_space.items()
    )
    return sorted(marked, key=lambda change: int(change.id))


def _change_row(conn: sqlite3.Connection, id: str) -> tuple[int, WaitingChange]:
    row_id = _row_id(id)
    row = (
        None
        if row_id is None
        else conn.execute("SELECT space_id, data FROM changes WHERE id = ?", (row_id,)).fetchone()
    )
    if row is None:
        raise NotFound(f"no change {id!r} is held for review", path=id)
    return int(row["space_id"]), WaitingChange.model_validate_json(row["data"])


def _get_change(conn: sqlite3.Connection, id: str) -> WaitingChange:
    space_id, change = _change_row(conn, id)
    [marked] = _marked(conn, space_id, [change])
    return marked


def _delete_live(
    conn: sqlite3.Connection,
    space_id: int,
    path: str,
    provenance: Provenance,
    approved_by: By | None = None,
) -> None:
    """A deletion revision if ``path`` is live; nothing to delete otherwise."""
    gone = conn.execute("DELETE FROM live WHERE space_id = ? AND path = ?", (space_id, path))
    if gone.rowcount == 1:
        _record(conn, space_id, path, None, provenance, approved_by)


def _decide(
    conn: sqlite3.Connection,
    id: str,
    action: Literal["approve", "edit", "reject"],
    by: By | None,
    paths: list[str] | None,
    edits: dict[str, bytes | None] | None,
    force: bool,
    limits: Limits,
) -> WaitingChange:
    """A reviewer's move; the new state and its effect on live files commit together."""
    space_id, unmarked = _change_row(conn, id)
    # The rules refuse to apply a stale file unforced, so they get the change marked.
    [change] = _marked(conn, space_id, [unmarked])
    decided, effect, concerned = review.decide(
        change,
        action,
        by=by,
        paths=paths,
        edits=edits,
        force=force,
        live_sizes=_live_sizes(conn, space_id),
        limits=limits,
    )
    if effect is Effect.APPLY:
        for path, content in sorted(concerned.items()):
            # Who taught each file stays on its revision; who let it in is approved_by.
            applied = review.applied_provenance(change, path, action)
            if content is None:
                _delete_live(conn, space_id, path, applied, by)
            else:
                # A reviewer's edit replaces the bytes, not the mode the turn gave.
                meta = change.files[path].meta
                revision_id = _record(conn, space_id, path, content, applied, by, meta=meta)
                _make_live(conn, space_id, path, revision_id)
    elif effect is Effect.REVERT:
        put_back = Provenance(origin="edited", by=by)
        for path in sorted(concerned):
            base = change.files[path].base
            if base is None:  # the change created it: reverting removes it
                _delete_live(conn, space_id, path, put_back)
                continue
            row = conn.execute(
                "SELECT content, mode, mtime_ns, ctime_ns FROM revisions"
                " WHERE id = ? AND space_id = ? AND path = ?",
                (_row_id(base), space_id, path),
            ).fetchone()
            if row is None or row["content"] is None:
                raise NotFound(
                    f"revision {base!r} of {path!r} is gone; cannot put it back", path=path
                )
            meta = _meta(row["mode"], row["mtime_ns"], row["ctime_ns"])
            revision_id = _record(conn, space_id, path, bytes(row["content"]), put_back, meta=meta)
            _make_live(conn, space_id, path, revision_id)
    _set_folders(conn, space_id, review.decided_folders(change, effect, paths))
    _save_change(conn, decided)
    _log(
        conn,
        action,
        change.ref.org,
        by=by,
        space=change.ref.space,
        target=id,
        detail=",".join(sorted(concerned)),
    )
    [marked] = _marked(conn, space_id, [decided])
    return marked


class SqliteStore:
    """A managed store in the SQLite database file ``path``.

    The file is created on first use if it does not exist when the store is
    made; its folder must already exist (``ConfigError`` otherwise). Once the
    file exists (it did when the store was made, or this store created it),
    it is never created again: if it, or its folder, is missing later (before
    the first connection, or while open), or is an empty file, every call is
    ``StoreUnavailable`` until the file is back, never a fresh empty database
    in its place. A file replaced by another while open fails the call that
    finds it (writes never go to a file nobody will read again); the next
    call opens what is at the path now, if it is a memfs store (a restore).
    """

    def __init__(self, path: Path, *, manifest_cache_files: int = DEFAULT_MAX_FILES) -> None:
        self.path = Path(os.path.abspath(path))
        # Checked now, not on first use, so a mistyped state dir fails at start.
        if not self.path.parent.is_dir():
            raise ConfigError(
                "the sqlite store's folder does not exist; create it first", path=str(self.path)
            )
        if self.path.is_dir():
            raise ConfigError("the sqlite store's path is a folder", path=str(self.path))
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        # Whether the file must exist from now on: it did, or we made it.
        # (An empty file, as ``touch`` leaves, is no store yet: SQLite makes one in it.)
        self._must_exist = self.path.exists() and self.path.stat().st_size > 0
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        # Lean loads' manifests by space version; emptied whenever a connection
        # opens, since the file opened may be another (a restored backup).
        self._manifests = ManifestCache(manifest_cache_files)

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        """The store's connection, opened and migrated on first use. Call with the lock held."""
        if self._closed:
            raise StoreUnavailable("the sqlite store is closed", path=str(self.path))
        if self._conn is not None:
            if self._same_file():
                return self._conn
            # Removed or replaced under us: writes to this connection would land
            # in a file nobody opens again. Drop it; reopen only the real path.
            conn, self._conn = self._conn, None
            conn.close()
            raise StoreUnavailable(
                "the sqlite store's database file was removed or replaced while open",
                path=str(self.path),
            )
        if self._must_exist and not self.path.exists():
            raise StoreUnavailable(
                "the sqlite store's database file is missing; memfs does not start an empty "
                "one in place of a store that existed",
                path=str(self.path),
            )
        # The file holds people's memory: 0600 before SQLite makes it (SQLite
        # gives -wal and -shm the database file's mode), whoever opens the store.
        if not self._must_exist:
            create_private_file(self.path)
        for suffix in ("", "-wal", "-shm"):
            narrow_if_ours(self.path.with_name(self.path.name + suffix))
        # mode=rw once the file must exist, so a file removed after the check
        # above is an error too, not silently created afresh.
        mode = "rw" if self._must_exist else "rwc"
        uri = f"file:{urllib.parse.quote(str(self.path))}?mode={mode}"
        # isolation_level=None: the sqlite3 module must not open transactions of
        # its own; every transaction here is begun explicitly, with the mode it needs.
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        try:
            # First, before any pragma that writes: an empty file where the store
            # was would otherwise be made into a fresh one.
            if self._must_exist and conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                raise StoreUnavailable(
                    "the sqlite store's database file was replaced by one that holds no "
                    "memfs store; memfs does not start an empty one in its place",
                    path=str(self.path),
                )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
            # WAL: loads read a consistent snapshot without blocking writers, and
            # writers from other processes queue on the write lock.
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL, not NORMAL: under WAL, NORMAL may lose the last commits on power
            # loss, and a store answers "saved" only for what is durable.
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            # Deleted content is overwritten with zeros, not just unlinked, so a
            # forgotten file cannot be read back from the database file's free space.
            conn.execute("PRAGMA secure_delete = ON")
            _migrate(conn, self.path)
            info = os.stat(self.path)
        except BaseException:
            conn.close()
            raise
        self._must_exist = True
        self._identity = (info.st_dev, info.st_ino)
        self._manifests.clear()
        self._conn = conn
        return conn

    def _same_file(self) -> bool:
        """Whether ``path`` is still the file the connection has open (one stat)."""
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._identity

    def _run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction; in a worker thread, never on the trio loop."""
        with self._lock, _map_exceptions(self.path):
            return self._transaction(self._connect(), fn, write=write)

    def _transaction(
        self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], *, write: bool
    ) -> T:
        """Run ``fn`` in one transaction on ``conn``. Call with the lock held."""
        # IMMEDIATE takes the write lock before the conflict check reads, so no
        # other process can write between the check and our writes.
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._abandon(conn)
            raise
        return result

    def _abandon(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            # Closing rolls back too; the next call opens a fresh connection. The
            # error that got us here is the one worth reporting, so this one is dropped.
            conn.close()
            self._conn = None

    async def load(self, ref: SpaceRef, session: str) -> Loaded:
        # One read transaction: the files and the cursor come from the same snapshot.
        return await trio.to_thread.run_sync(self._run_load, ref, session)

    def _run_load(self, ref: SpaceRef, session: str | None = None) -> Loaded:
        return self._run(lambda conn: _load(conn, ref, session), write=False)

    async def load_lean(self, ref: SpaceRef, session: str, have: Container[str]) -> Loaded:
        return await trio.to_thread.run_sync(
            lambda: self._run(
                lambda conn: _load_lean(conn, ref, session, have, self._manifests), write=False
            )
        )

    async def contents(self, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _contents(conn, ref, shas), write=False)
        )

    async def store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        base = parse_cursor(cursor)
        # Not cancellable once started (run_sync's default): the transaction
        # either commits or rolls back before this returns.
        return await trio.to_thread.run_sync(
            self._run_store, ref, changes, base, provenance, review
        )

    def _run_store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        base: int | None,
        provenance: Provenance,
        mode: ReviewMode,
    ) -> Stored:
        # The review setting is read in the same transaction as the write, so a
        # setting changed meanwhile cannot let a change skip review.
        return self._run(
            lambda conn: _store_turn(conn, ref, changes, base, provenance, mode), write=True
        )

    async def put(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        provenance: Provenance,
        limits: Limits | None = None,
    ) -> Stored:
        # A person's own edit: never held for review.
        within = limits or Limits()
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _put(conn, ref, changes, provenance, within), write=True)
        )

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        check_path(path)
        return await trio.to_thread.run_sync(self._run_history, ref, path)

    def _run_history(self, ref: SpaceRef, path: str) -> list[Revision]:
        return self._run(lambda conn: _history(conn, ref, path), write=False)

    async def open_history(self, ref: SpaceRef, path: str, *, by: By | None) -> list[Revision]:
        check_path(path)
        # A write transaction: the revisions are read and the look recorded together.
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _open_history(conn, ref, path, by), write=True)
        )

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        return (await trio.to_thread.run_sync(self._run_load, ref)).files

    async def spaces(self) -> list[SpaceRef]:
        return await trio.to_thread.run_sync(self._run_spaces)

    async def restore(self, ref: SpaceRef, path: str, revision: str, *, by: By | None) -> Stored:
        check_path(path)
        provenance = Provenance(origin="edited", by=by)
        return await trio.to_thread.run_sync(self._run_restore, ref, path, revision, provenance)

    def _run_restore(
        self, ref: SpaceRef, path: str, revision: str, provenance: Provenance
    ) -> Stored:
        return self._run(lambda conn: _restore(conn, ref, path, revision, provenance), write=True)

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        check_path(path)
        if ref.layer == "user":
            return await trio.to_thread.run_sync(self._run_purge, ref, path, by)
        provenance = Provenance(origin="edited", by=by)
        return await trio.to_thread.run_sync(self._run_forget, ref, path, provenance)

    def _run_forget(self, ref: SpaceRef, path: str, provenance: Provenance) -> Stored:
        return self._run(lambda conn: _forget(conn, ref, path, provenance), write=True)

    def _run_purge(self, ref: SpaceRef, path: str, by: By | None) -> Stored:
        return self._purging(lambda conn: _purge(conn, ref, path, by), what=repr(path))

    def _purging(self, fn: Callable[[sqlite3.Connection], T], *, what: str) -> T:
        """Run the purge ``fn`` in one write transaction, then empty the write-ahead log."""
        # One lock hold for the purge and the checkpoint, so no other call of
        # this store runs in between and the log is emptied right after the delete.
        with self._lock, _map_exceptions(self.path):
            conn = self._connect()
            result = self._transaction(conn, fn, write=True)
            # The purge wrote zeroed pages to the write-ahead log; the older
            # frames there may still hold the content. TRUNCATE copies the log
            # into the database and cuts the log file to nothing.
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise StoreUnavailable(
                f"{what} is forgotten, but another connection kept reading an older state "
                "of the database, so its content may stay in the write-ahead log until the "
                "next checkpoint",
                path=str(self.path),
            )
        return result

    async def forget_user(self, user: str, org: str, *, by: By | None) -> Forgot:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._purging(
                lambda conn: _forget_user(conn, user, org, by), what="that person's memory"
            )
        )

    async def forgotten_since(self, ref: SpaceRef, cursor: str | None) -> bool:
        base = parse_cursor(cursor)
        if base is None:
            return False
        at = await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _forgotten_at(conn, ref), write=False)
        )
        return at > base

    async def record_trace(self, trace: Trace) -> None:
        await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _record_trace(conn, trace), write=True)
        )

    async def traces(self, *, session: str | None = None) -> list[Trace]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _traces(conn, session), write=False)
        )

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _user_files(conn, user, org), write=False)
        )

    async def open_person(
        self, user: str, org: str, *, by: By | None
    ) -> dict[str, dict[str, bytes]]:
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        # A write transaction: the files are read and the look recorded together.
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _open_person(conn, user, org, by), write=True)
        )

    async def people(self, org: str) -> dict[SpaceRef, int]:
        check_identity(org, what="org id")
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _people(conn, org), write=False)
        )

    async def audit(self, *, org: str | None = None) -> list[AuditEntry]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _audit(conn, org), write=False)
        )

    async def verify_audit(self) -> AuditCheck:
        return await trio.to_thread.run_sync(lambda: self._run(_verify_audit, write=False))

    def _run_spaces(self) -> list[SpaceRef]:
        return self._run(_spaces, write=False)

    async def set_review(self, ref: SpaceRef, mode: ReviewMode, *, by: By | None) -> None:
        mode = review.check_mode(mode)
        await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _set_review(conn, ref, mode, by), write=True)
        )

    async def review_mode(self, ref: SpaceRef) -> ReviewMode | None:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _review_setting(conn, _space_id(conn, ref)), write=False)
        )

    async def list_changes(
        self, *, org: str | None = None, open_only: bool = True
    ) -> list[WaitingChange]:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _list_changes(conn, org, open_only), write=False)
        )

    async def get_change(self, id: str) -> WaitingChange:
        return await trio.to_thread.run_sync(
            lambda: self._run(lambda conn: _get_change(conn, id), write=False)
        )

    async def decide(
        self,
        id: str,
        action: Literal["approve", "edit", "reject"],
        *,
        by: By | None,
        paths: list[str] | None = None,
        edits: dict[str, bytes | None] | None = None,
        force: bool = False,
        limits: Limits | None = None,
    ) -> WaitingChange:
        for path in [*(paths or ()), *(edits or {})]:
            check_path(path)
        within = limits or Limits()
        return await trio.to_thread.run_sync(
            lambda: self._run(
                lambda conn: _decide(conn, id, action, by, paths, edits, force, within),
                write=True,
            )
        )

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``StoreUnavailable``. Safe to call twice."""
        await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._lock, _map_exceptions(self.path):
            self._closed = True
            if self._conn is not None:
                conn, self._conn = self._conn, None
                conn.close()


__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteStore"]
