"""The SQLite store's audit log: appending to its hash chain, reading and verifying it.

The chain is :mod:`memfs.core.audit`'s: ``_log`` links each entry to the
last, and the schema's triggers refuse what would rewrite the log.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import get_args

from memfs.core import audit as audit_rules
from memfs.core.audit import GENESIS, AuditCheck
from memfs.core.errors import (
    AuditTampered,
)
from memfs.core.models import (
    AuditAction,
    AuditEntry,
    By,
)
from memfs.stores.managed import by_of as _by
from memfs.stores.sqlite.rows import (
    _timestamp,
)


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
