"""A person's memory sealed in the SQLite store (the format is ``memfs.core.sealing``).

Every revision of a user-layer space is written with ``sealed = 1``: its
content, prompt and labels are AES-GCM ciphertexts under the person's key,
bound to (org, user, space, path, revision id) and the column. The person's
key is kept only wrapped by the store key, in ``person_keys``; forgetting the
person deletes that row with theirs. Org and shared spaces are not sealed:
forgetting never reaches them.

The store key rides on the connection (``KeyedConnection``), so the row
helpers reach it without another argument. Person keys are not cached across
transactions: another process may forget the person at any moment, and a key
kept here would then seal new rows nobody could open again.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from memfs.core import sealing


class KeyedConnection(sqlite3.Connection):
    """A connection that carries the store key it was opened with."""

    store_key: bytes = b""


def _store_key(conn: sqlite3.Connection) -> bytes:
    key = getattr(conn, "store_key", b"")
    if not key:
        raise sealing.SealBroken("this connection was opened without the store key")
    return bytes(key)


@dataclass(frozen=True)
class Sealer:
    """Seals and opens the values of one person's space."""

    key: bytes
    org: str
    user: str
    space: str

    def _aad(self, kind: str, path: str, revision_id: int) -> bytes:
        return sealing.bound(kind, self.org, self.user, self.space, path, str(revision_id))

    def content(self, path: str, revision_id: int, content: bytes) -> bytes:
        return sealing.seal(self.key, content, self._aad("content", path, revision_id))

    def open_content(self, path: str, revision_id: int, sealed: bytes) -> bytes:
        return sealing.unseal(self.key, sealed, self._aad("content", path, revision_id))

    def text(self, kind: str, path: str, revision_id: int, text: str | None) -> bytes | None:
        return sealing.seal_text(self.key, text, self._aad(kind, path, revision_id))

    def open_text(self, kind: str, path: str, revision_id: int, sealed: bytes | None) -> str | None:
        if sealed is None:
            return None
        return sealing.unseal_text(self.key, bytes(sealed), self._aad(kind, path, revision_id))


def _person_key(conn: sqlite3.Connection, org: str, user: str, *, create: bool) -> bytes | None:
    store_key = _store_key(conn)
    row = conn.execute(
        'SELECT wrapped FROM person_keys WHERE org = ? AND "user" = ?', (org, user)
    ).fetchone()
    if row is not None:
        return sealing.unwrap_person_key(store_key, org, user, bytes(row[0]))
    if not create:
        return None
    key = sealing.new_key()
    conn.execute(
        'INSERT INTO person_keys (org, "user", wrapped) VALUES (?, ?, ?)',
        (org, user, sealing.wrap_person_key(store_key, org, user, key)),
    )
    return key


def _sealer(conn: sqlite3.Connection, space_id: int, *, create: bool) -> Sealer | None:
    """The sealer of a person's space; None for an org or shared space (or no key yet)."""
    row = conn.execute(
        'SELECT layer, org, "user", space FROM spaces WHERE id = ?', (space_id,)
    ).fetchone()
    if row is None or row[0] != "user":
        return None
    key = _person_key(conn, row[1], row[2], create=create)
    return None if key is None else Sealer(key, row[1], row[2], row[3])


def _opened(
    sealer: Sealer | None, path: str, revision_id: int, content: bytes, sealed: int
) -> bytes:
    raw = bytes(content)  # a memoryview, where the driver hands one out
    if not sealed:
        return raw
    if sealer is None:
        raise sealing.SealBroken("a sealed revision has no person key to open it")
    return sealer.open_content(path, revision_id, raw)


def _forget_person_key(conn: sqlite3.Connection, org: str, user: str) -> None:
    conn.execute('DELETE FROM person_keys WHERE org = ? AND "user" = ?', (org, user))


def _check_store_key(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a store key the database was not sealed under; note the key on a new one.

    Then seal what an older memfs wrote in people's spaces in the clear (the
    migration to sealing runs here, at the first open with a key, because
    the schema steps never see the key).
    """
    store_key = _store_key(conn)
    row = conn.execute("SELECT value FROM store_key_check WHERE id = 1").fetchone()
    if row is not None:
        # Checked once sealed: rows in the clear come only from before schema
        # 11, and an older memfs refuses to open this file, so none come later.
        sealing.require_key_check(str(row[0]), store_key, path=path)
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        again = conn.execute("SELECT value FROM store_key_check WHERE id = 1").fetchone()
        if again is None:
            _seal_plain_rows(conn)
            conn.execute(
                "INSERT INTO store_key_check (id, value) VALUES (1, ?)",
                (sealing.key_check(store_key),),
            )
        else:
            sealing.require_key_check(str(again[0]), store_key, path=path)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    # The clear copies were overwritten (secure_delete); none may stay in the log.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _seal_plain_rows(conn: sqlite3.Connection) -> None:
    rows = conn.execute(
        "SELECT revisions.id, revisions.space_id, revisions.path, revisions.content,"
        " revisions.prompt, revisions.by_label, revisions.approved_by_label"
        " FROM revisions JOIN spaces ON spaces.id = revisions.space_id"
        " WHERE spaces.layer = 'user' AND revisions.sealed = 0"
    ).fetchall()
    sealers: dict[int, Sealer | None] = {}
    for rid, space_id, path, content, prompt, by_label, approved_label in rows:
        if space_id not in sealers:
            sealers[space_id] = _sealer(conn, space_id, create=True)
        sealer = sealers[space_id]
        assert sealer is not None  # a user-layer space, key made just above
        conn.execute(
            "UPDATE revisions SET content = ?, prompt = ?, by_label = ?,"
            " approved_by_label = ?, sealed = 1 WHERE id = ?",
            (
                None if content is None else sealer.content(path, rid, bytes(content)),
                sealer.text("prompt", path, rid, prompt),
                sealer.text("by_label", path, rid, by_label),
                sealer.text("approved_by_label", path, rid, approved_label),
                rid,
            ),
        )
