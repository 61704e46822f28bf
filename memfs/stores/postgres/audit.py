"""The PostgreSQL store's audit log: appending to its hash chain, reading and verifying it.

The chain is :mod:`memfs.core.audit`'s: ``_log`` links each entry to the
last, and the schema's triggers refuse what would rewrite the log.
``audit_head`` keeps the id of the last entry ever written (it only grows),
so ``_verify_audit`` sees entries cut off the end, as the SQLite store sees
them against its sequence.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args

from memfs.core import audit as audit_rules
from memfs.core.audit import GENESIS, AuditCheck
from memfs.core.errors import AuditTampered
from memfs.core.models import AuditAction, AuditEntry, By
from memfs.stores.managed import by_of
from memfs.stores.postgres.rows import Conn, _all, _one, _run

_COLUMNS = (
    "SELECT id, at, actor_id, actor_label, actor_role, action, org, space, target, detail,"
    " prev_hash, hash FROM audit"
)


def _log(
    conn: Conn,
    action: AuditAction,
    org: str,
    *,
    by: By | None,
    space: str | None = None,
    target: str | None = None,
    detail: str | None = None,
) -> None:
    """Add one audit entry; called inside the act's own transaction, so both or neither commit."""
    head = _one(conn, "SELECT last_id FROM audit_head FOR UPDATE")
    assert head is not None  # the schema makes the one row
    prev = _one(conn, "SELECT hash FROM audit ORDER BY id DESC LIMIT 1")
    entry = audit_rules.seal(
        AuditEntry(
            id=str(int(head[0]) + 1),
            # Microseconds, as timestamptz keeps them: verify reads back what was hashed.
            at=datetime.now(UTC),
            actor=by,
            action=action,
            org=org,
            space=space,
            target=target,
            detail=detail,
        ),
        GENESIS if prev is None else prev[0],
    )
    _run(
        conn,
        "INSERT INTO audit (id, at, actor_id, actor_label, actor_role, action, org, space,"
        " target, detail, prev_hash, hash)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            int(entry.id),
            entry.at,
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
    _run(conn, "UPDATE audit_head SET last_id = %s", (int(entry.id),))


# Read back as the Literal it was written from, so a row's action type-checks.
_ACTIONS: dict[str, AuditAction] = {action: action for action in get_args(AuditAction)}


def _audit_entry(row: tuple[Any, ...]) -> AuditEntry:
    id_, at, actor_id, actor_label, actor_role, action, org, space, target, detail = row[:10]
    return AuditEntry(
        id=str(id_),
        at=at.astimezone(UTC),
        actor=by_of(actor_id, actor_label, actor_role),
        action=_ACTIONS[action],
        org=org,
        space=space,
        target=target,
        detail=detail,
        prev_hash=row[10] or "",
        hash=row[11] or "",
    )


def _audit(conn: Conn, org: str | None) -> list[AuditEntry]:
    if org is None:
        return [_audit_entry(row) for row in _all(conn, _COLUMNS + " ORDER BY id")]
    return [
        _audit_entry(row) for row in _all(conn, _COLUMNS + " WHERE org = %s ORDER BY id", (org,))
    ]


def _verify_audit(conn: Conn) -> AuditCheck:
    """The chain over every entry (every org), and no entry cut off its end."""
    entries: list[AuditEntry] = []
    for row in _all(conn, _COLUMNS + " ORDER BY id"):
        try:
            entries.append(_audit_entry(row))
        except (KeyError, ValueError, TypeError) as exc:
            raise AuditTampered(
                f"this audit entry cannot be read back: {exc}", path=str(row[0])
            ) from exc
    check = audit_rules.verify_chain(entries)
    head = _one(conn, "SELECT last_id FROM audit_head")
    written = 0 if head is None else int(head[0])
    last = int(entries[-1].id) if entries else 0
    if written != last:
        raise AuditTampered(
            f"the audit log ends at entry {last}, but entries up to {written} were written: "
            "the last entries were removed",
            path=str(last + 1),
        )
    return check
