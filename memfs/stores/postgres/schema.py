"""The PostgreSQL store's schema: versioned SQL migrations, applied at open under an advisory lock.

This module owns the database format. ``MIGRATIONS`` is a list of steps,
each a name and the SQL that takes the schema from version i to i + 1;
``memfs_migrations`` records each step applied (version, name, when).
``_migrate`` applies the pending steps in one transaction, which first takes
a transaction-level advisory lock (``MIGRATION_LOCK``) and the store's write
lock: two processes that open one new database at once migrate it once (the
second waits, then finds nothing pending), no write interleaves with a
migration, and a failing step leaves the database as it was (PostgreSQL's
DDL is transactional). A database newer than this memfs understands is
refused (``ConfigError``).

The tables are the SQLite store's (:mod:`memfs.stores.sqlite.schema`), in
PostgreSQL's terms, and both run the same statements (:mod:`memfs.stores.sql`)::

    spaces           one row per (layer, org, user, space); user is '' outside the user layer;
                     ``version`` moves with every write to what a lean load reads;
                     ``live_changes`` counts every write to its live rows
    revisions        every write ever made, with its provenance; content NULL is a deletion
    live             (space, path) -> the revision that is the file's current content
    folders          (space, path) of every folder the space stores, empty ones among them
    clock            a SEQUENCE: revision ids and change edits (see ``rows.py`` on its order)
    space_clock      a SEQUENCE: the one counter space versions come from, so none repeats
    changes          org changes held for review, one row each (``WaitingChange`` JSON)
    review_settings  a space's own review mode, which wins over a turn's
    audit            every sensitive act, append-only (triggers refuse UPDATE, DELETE,
                     TRUNCATE, and an INSERT that does not append to the hash chain)
    audit_head       one row: the id of the last audit entry ever written (only grows)
    traces           what each turn saw and did, a ``Trace`` as JSON, once per (session, turn)
    stored_turns     (space, session, turn) -> the fingerprint of the change set a turn
                     stored and the ``Stored`` it got
    forgotten        digest of (org, user, space) -> the clock when it was forgotten;
                     space '' is the whole person
    members          (org, id) -> role and label of a person who may sign in
    tokens           sha256 of a sign-in token -> (org, member), never the token itself
    person_keys      (org, user) -> the person's data key, wrapped by the store key
                     (``memfs.core.sealing``); forgetting the person deletes it
    store_key_check  one row: what tells, at open, whether a store key is this store's,
                     and how much is sealed (``memfs.stores.sql.upgrade``)
    names            (space, name) -> a person's path, sealed; their rows keep the name
    trace_parts      (trace, org, user) -> that person's part of the trace, sealed

Names and paths are ``COLLATE "C"``: they compare and sort by code point, as
Python and SQLite do, whatever the database's own collation. Space versions
are moved by triggers on ``live``, ``folders`` and ``revisions``, so a write
by any process, through any code path, moves them (``memfs.stores.manifests``),
and a trigger on ``spaces`` sends a notice on the ``memfs_spaces`` channel
when a version moves or a space is deleted (``memfs.stores.postgres.listen``
owns its payload).
"""

from __future__ import annotations

from dataclasses import dataclass

from memfs.core.audit import GENESIS
from memfs.core.errors import ConfigError
from memfs.stores.postgres.db import Conn

# pg_advisory_xact_lock keys: (memfs, what). Two ints, so they stay clear of
# other applications' single-bigint keys on a shared database.
LOCK_CLASS = 0x6D656D66  # "memf"
WRITE_LOCK = 1
MIGRATION_LOCK = 2


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its name (shown by ``memfs db status``) and its SQL."""

    name: str
    statements: tuple[str, ...]


_NAME = 'text COLLATE "C" NOT NULL'

_CORE = Migration(
    "spaces, revisions, live files, folders and the clock",
    (
        "CREATE SEQUENCE clock",
        "CREATE SEQUENCE space_clock",
        f"""
        CREATE TABLE spaces (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            layer {_NAME},
            org {_NAME},
            "user" {_NAME},
            space {_NAME},
            version bigint NOT NULL DEFAULT nextval('space_clock'),
            UNIQUE (layer, org, "user", space)
        )
        """,
        f"""
        CREATE TABLE revisions (
            id bigint PRIMARY KEY,
            space_id bigint NOT NULL REFERENCES spaces (id),
            path {_NAME},
            content bytea,
            sha256 text,
            size bigint NOT NULL,
            origin text NOT NULL,
            session text,
            turn text,
            prompt text,
            by_id text,
            by_label text,
            by_role text,
            approved_by_id text,
            approved_by_label text,
            approved_by_role text,
            created_at timestamptz NOT NULL,
            mode integer,
            mtime_ns bigint,
            ctime_ns bigint,
            CHECK ((content IS NULL) = (sha256 IS NULL))
        )
        """,
        "CREATE INDEX revisions_by_path ON revisions (space_id, path, id)",
        # A space's cursor is MAX(id) of its revisions: one index seek.
        "CREATE INDEX revisions_by_space ON revisions (space_id, id)",
        "CREATE INDEX revisions_by_sha ON revisions (space_id, sha256)",
        f"""
        CREATE TABLE live (
            space_id bigint NOT NULL REFERENCES spaces (id),
            path {_NAME},
            revision_id bigint NOT NULL REFERENCES revisions (id),
            PRIMARY KEY (space_id, path)
        )
        """,
        f"""
        CREATE TABLE folders (
            space_id bigint NOT NULL REFERENCES spaces (id),
            path {_NAME},
            PRIMARY KEY (space_id, path)
        )
        """,
    ),
)

_REVIEW = Migration(
    "changes held for review and review settings",
    (
        """
        CREATE TABLE changes (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            space_id bigint NOT NULL REFERENCES spaces (id),
            session text NOT NULL,
            state text NOT NULL,
            last_edited bigint NOT NULL,
            data text NOT NULL
        )
        """,
        "CREATE INDEX changes_by_session ON changes (space_id, session, state)",
        "CREATE INDEX changes_by_space ON changes (space_id, last_edited)",
        """
        CREATE TABLE review_settings (
            space_id bigint PRIMARY KEY REFERENCES spaces (id),
            mode text NOT NULL,
            by_id text,
            by_label text,
            by_role text,
            set_at timestamptz NOT NULL
        )
        """,
    ),
)

_AUDIT = Migration(
    "the audit log, append-only and hash-chained",
    (
        # Not tied to spaces by a foreign key: entries about a forgotten
        # person must outlive their spaces rows. Paths and ids, never content.
        f"""
        CREATE TABLE audit (
            id bigint PRIMARY KEY,
            at timestamptz NOT NULL,
            actor_id text,
            actor_label text,
            actor_role text,
            action text NOT NULL,
            org {_NAME},
            space text,
            target text,
            detail text,
            prev_hash text NOT NULL,
            hash text NOT NULL
        )
        """,
        "CREATE INDEX audit_by_org ON audit (org, id)",
        """
        CREATE TABLE audit_head (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            last_id bigint NOT NULL
        )
        """,
        "INSERT INTO audit_head (one, last_id) VALUES (true, 0)",
        """
        CREATE FUNCTION memfs_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'the audit log is append-only';
        END
        $$
        """,
        # An insert is refused unless it appends: a new id past every other,
        # linked to the last entry's hash.
        f"""
        CREATE FUNCTION memfs_audit_appends() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.id <= COALESCE((SELECT MAX(id) FROM audit), 0)
                OR NEW.prev_hash IS DISTINCT FROM COALESCE(
                    (SELECT hash FROM audit ORDER BY id DESC LIMIT 1), '{GENESIS}')
            THEN
                RAISE EXCEPTION 'the audit log is append-only';
            END IF;
            RETURN NEW;
        END
        $$
        """,
        """
        CREATE FUNCTION memfs_audit_head_grows() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'UPDATE' OR NEW.last_id < OLD.last_id THEN
                RAISE EXCEPTION 'the audit log is append-only';
            END IF;
            RETURN NEW;
        END
        $$
        """,
        "CREATE TRIGGER audit_no_update BEFORE UPDATE OR DELETE ON audit"
        " FOR EACH ROW EXECUTE FUNCTION memfs_audit_refuse()",
        "CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit"
        " FOR EACH STATEMENT EXECUTE FUNCTION memfs_audit_refuse()",
        "CREATE TRIGGER audit_append_only BEFORE INSERT ON audit"
        " FOR EACH ROW EXECUTE FUNCTION memfs_audit_appends()",
        "CREATE TRIGGER audit_head_grows BEFORE UPDATE OR DELETE ON audit_head"
        " FOR EACH ROW EXECUTE FUNCTION memfs_audit_head_grows()",
        "CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head"
        " FOR EACH STATEMENT EXECUTE FUNCTION memfs_audit_refuse()",
    ),
)

_TURNS = Migration(
    "traces, turn records and what was forgotten",
    (
        """
        CREATE TABLE traces (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session text NOT NULL,
            turn text NOT NULL,
            at timestamptz NOT NULL,
            data text NOT NULL,
            UNIQUE (session, turn)
        )
        """,
        "CREATE INDEX traces_by_session ON traces (session, id)",
        """
        CREATE TABLE stored_turns (
            space_id bigint NOT NULL REFERENCES spaces (id),
            session text NOT NULL,
            turn text NOT NULL,
            changes text NOT NULL,
            stored text NOT NULL,
            PRIMARY KEY (space_id, session, turn)
        )
        """,
        # Not tied to spaces: it must outlive the spaces rows of a forgotten
        # person. Keyed by a digest, so it names nobody; no path, no content.
        """
        CREATE TABLE forgotten (
            key text PRIMARY KEY,
            seq bigint NOT NULL
        )
        """,
    ),
)

_VERSIONS = Migration(
    "space versions, moved by triggers",
    (
        # A row trigger per written row: a write by any process or code path
        # moves the version, from one sequence that only grows.
        """
        CREATE FUNCTION memfs_move_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'INSERT' THEN
                UPDATE spaces SET version = nextval('space_clock') WHERE id = OLD.space_id;
            END IF;
            IF TG_OP <> 'DELETE' THEN
                UPDATE spaces SET version = nextval('space_clock') WHERE id = NEW.space_id;
            END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE FUNCTION memfs_move_every_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE spaces SET version = nextval('space_clock');
            RETURN NULL;
        END
        $$
        """,
        "CREATE TRIGGER live_moves_version AFTER INSERT OR UPDATE OR DELETE ON live"
        " FOR EACH ROW EXECUTE FUNCTION memfs_move_version()",
        "CREATE TRIGGER folders_moves_version AFTER INSERT OR UPDATE OR DELETE ON folders"
        " FOR EACH ROW EXECUTE FUNCTION memfs_move_version()",
        "CREATE TRIGGER revisions_moves_version AFTER UPDATE OR DELETE ON revisions"
        " FOR EACH ROW EXECUTE FUNCTION memfs_move_version()",
        "CREATE TRIGGER live_truncate_moves_versions AFTER TRUNCATE ON live"
        " FOR EACH STATEMENT EXECUTE FUNCTION memfs_move_every_version()",
        "CREATE TRIGGER folders_truncate_moves_versions AFTER TRUNCATE ON folders"
        " FOR EACH STATEMENT EXECUTE FUNCTION memfs_move_every_version()",
    ),
)

_MEMBERS = Migration(
    "members and their tokens' hashes",
    (
        f"""
        CREATE TABLE members (
            org {_NAME},
            id {_NAME},
            role text NOT NULL CHECK (role IN ('viewer', 'member', 'admin')),
            label text,
            added_at timestamptz NOT NULL,
            PRIMARY KEY (org, id)
        )
        """,
        """
        CREATE TABLE tokens (
            hash text PRIMARY KEY,
            org text COLLATE "C" NOT NULL,
            member text COLLATE "C" NOT NULL,
            created_at timestamptz NOT NULL,
            FOREIGN KEY (org, member) REFERENCES members (org, id)
        )
        """,
        "CREATE INDEX tokens_by_member ON tokens (org, member)",
    ),
)

_SEALING = Migration(
    "a person's memory sealed under a key of its own",
    (
        # 1 where content, prompt and labels are ciphertexts under the person's
        # key (memfs.stores.sql.sealed); rows in the clear are sealed at the
        # first open with the store key, which the schema steps never see.
        "ALTER TABLE revisions ADD COLUMN sealed integer NOT NULL DEFAULT 0",
        # bytea: sealed bytes in people's spaces, UTF-8 in the clear elsewhere.
        "ALTER TABLE revisions ALTER COLUMN prompt TYPE bytea USING convert_to(prompt, 'UTF8')",
        "ALTER TABLE revisions ALTER COLUMN by_label TYPE bytea USING convert_to(by_label, 'UTF8')",
        "ALTER TABLE revisions ALTER COLUMN approved_by_label TYPE bytea"
        " USING convert_to(approved_by_label, 'UTF8')",
        f"""
        CREATE TABLE person_keys (
            org {_NAME},
            "user" {_NAME},
            wrapped bytea NOT NULL,
            PRIMARY KEY (org, "user")
        )
        """,
        """
        CREATE TABLE store_key_check (
            id integer PRIMARY KEY CHECK (id = 1),
            value text NOT NULL
        )
        """,
    ),
)

_NAMES = Migration(
    "a person's file names, turn records and traces sealed too",
    (
        f"""
        CREATE TABLE names (
            space_id bigint NOT NULL REFERENCES spaces (id),
            name {_NAME},
            sealed bytea NOT NULL,
            PRIMARY KEY (space_id, name)
        )
        """,
        "ALTER TABLE stored_turns ADD COLUMN sealed_stored bytea",
        # Whose words an org revision's prompt and label are (sealed = 2: under their key).
        'ALTER TABLE revisions ADD COLUMN author text COLLATE "C"',
        "ALTER TABLE changes ADD COLUMN sealed_words text",
        f"""
        CREATE TABLE trace_parts (
            trace_id bigint NOT NULL REFERENCES traces (id),
            org {_NAME},
            "user" {_NAME},
            sealed bytea NOT NULL,
            PRIMARY KEY (trace_id, org, "user")
        )
        """,
        'CREATE INDEX trace_parts_by_person ON trace_parts (org, "user")',
        "ALTER TABLE traces ADD COLUMN people integer NOT NULL DEFAULT 0",
        "ALTER TABLE traces ADD COLUMN sealed_prompt bytea",
        "ALTER TABLE store_key_check ADD COLUMN sealing integer NOT NULL DEFAULT 1",
    ),
)

_NOTICES = Migration(
    "a notice on the memfs_spaces channel when a space's version moves or the space goes",
    (
        # A hint to other processes (memfs.stores.postgres.listen), never what
        # correctness rests on. The payload names the space, not its version:
        # PostgreSQL folds identical notices of one transaction into one, so a
        # turn that writes a hundred files sends one notice, at its commit.
        """
        CREATE FUNCTION memfs_notify_space() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('memfs_spaces', json_build_object(
                'schema', TG_TABLE_SCHEMA, 'id', OLD.id, 'layer', OLD.layer,
                'org', OLD.org, 'user', OLD."user", 'space', OLD.space)::text);
            RETURN NULL;
        END
        $$
        """,
        "CREATE TRIGGER spaces_notify AFTER UPDATE OF version OR DELETE ON spaces"
        " FOR EACH ROW EXECUTE FUNCTION memfs_notify_space()",
    ),
)

_LIVE_CHANGES = Migration(
    "every write to a space's live rows counted",
    (
        # Counted by the trigger that moves the version, in the same UPDATE: a
        # lean load refreshes a manifest from the live rows that moved alone
        # when they account for every write counted since it was read
        # (memfs.stores.sql.files._refresh_manifest). A TRUNCATE counts too,
        # for every space, so no refresh takes it for no write at all.
        "ALTER TABLE spaces ADD COLUMN live_changes bigint NOT NULL DEFAULT 0",
        """
        CREATE OR REPLACE FUNCTION memfs_move_version() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            counted integer := CASE WHEN TG_TABLE_NAME = 'live' THEN 1 ELSE 0 END;
        BEGIN
            -- One count per row written: an UPDATE within a space counts once.
            IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.space_id <> NEW.space_id) THEN
                UPDATE spaces SET version = nextval('space_clock'),
                    live_changes = live_changes + counted WHERE id = OLD.space_id;
            END IF;
            IF TG_OP <> 'DELETE' THEN
                UPDATE spaces SET version = nextval('space_clock'),
                    live_changes = live_changes + counted WHERE id = NEW.space_id;
            END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION memfs_move_every_version() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE spaces SET version = nextval('space_clock'), live_changes = live_changes + 1;
            RETURN NULL;
        END
        $$
        """,
    ),
)

MIGRATIONS: tuple[Migration, ...] = (
    _CORE, _REVIEW, _AUDIT, _TURNS, _VERSIONS, _MEMBERS, _NOTICES, _SEALING, _NAMES,
    _LIVE_CHANGES,
)  # fmt: skip
SCHEMA_VERSION = len(MIGRATIONS)

_BOOKKEEPING = """
    CREATE TABLE IF NOT EXISTS memfs_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    )
"""


def applied_migrations(conn: Conn) -> list[tuple[int, str]]:
    """The steps recorded as applied, (version, name) in order; [] for a database without any."""
    row = conn.execute("SELECT to_regclass('memfs_migrations')").fetchone()
    if row is None or row[0] is None:
        return []
    return [
        (int(v), str(n))
        for v, n in conn.execute("SELECT version, name FROM memfs_migrations ORDER BY version")
    ]


def _version(conn: Conn) -> int:
    applied = applied_migrations(conn)
    return applied[-1][0] if applied else 0


def _migrate(conn: Conn, where: str) -> int:
    """Apply the pending steps; how many were applied. ``conn`` is in autocommit mode."""
    if _version(conn) == SCHEMA_VERSION:
        return 0  # the common case: no lock taken just to open
    with conn.transaction():
        # Locks before reading again: whoever migrated meanwhile is seen now.
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, MIGRATION_LOCK))
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, WRITE_LOCK))
        conn.execute(_BOOKKEEPING)
        version = _version(conn)
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"the database has schema version {version}, newer than this memfs "
                f"understands ({SCHEMA_VERSION}); upgrade memfs",
                path=where,
            )
        for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO memfs_migrations (version, name) VALUES (%s, %s)",
                (number, step.name),
            )
        return SCHEMA_VERSION - version
