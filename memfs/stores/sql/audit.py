"""A managed store's audit log: appending to its hash chain, reading and verifying it.

The chain is :mod:`memfs.core.audit`'s: ``_log`` links each entry to the
last, and each store's schema refuses what would rewrite the log (triggers).
The id of the last entry ever written only grows (``Db.last_audit_id``), so
``_verify_audit`` sees entries cut off the end too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args

from memfs.core import audit as audit_rules
from memfs.core.audit import GENESIS, AuditCheck
from memfs.core.errors import AuditTampered, BadRequest
from memfs.core.models import AuditAction, AuditEntry, By
from memfs.stores.managed import by_of as _by
from memfs.stores.managed import row_id
from memfs.stores.sql.db import Db

_COLUMNS = (
    "SELECT id, at, actor_id, actor_label, actor_role, action, org, space, target, detail,"
    " prev_hash, hash FROM audit"
)


def _log(
    db: Db,
    action: AuditAction,
    org: str,
    *,
    by: By | None,
    space: str | None = None,
    target: str | None = None,
    detail: str | None = None,
) -> None:
    """Add one audit entry; called inside the act's own transaction, so both or neither commit.

    The id is the next after the last ever written, given explicitly because
    it is part of what the entry's hash covers.
    """
    last = db.last_audit_id()
    prev = db.one("SELECT hash FROM audit ORDER BY id DESC LIMIT 1")
    entry = audit_rules.seal(
        AuditEntry(
            id=str(int(last) + 1),
            # As the store keeps it, so the hash is over what verify will read.
            at=db.instant(db.stamp(datetime.now(UTC))),
            actor=by,
            action=action,
            org=org,
            space=space,
            target=target,
            detail=detail,
        ),
        GENESIS if prev is None else prev[0],
    )
    db.execute(
        "INSERT INTO audit (id, at, actor_id, actor_label, actor_role, action, org, space,"
        " target, detail, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            int(entry.id),
            db.stamp(entry.at),
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
    db.audit_appended(int(entry.id))


# Read back as the Literal it was written from, so a row's action type-checks.
_ACTIONS: dict[str, AuditAction] = {action: action for action in get_args(AuditAction)}


def _audit_entry(db: Db, row: Any) -> AuditEntry:
    (id_, at, actor_id, actor_label, actor_role, action, org, space, target, detail) = row[:10]
    return AuditEntry(
        id=str(id_),
        at=db.instant(at),
        actor=_by(actor_id, actor_label, actor_role),
        action=_ACTIONS[action],
        org=org,
        space=space,
        target=target,
        detail=detail,
        prev_hash=row[10] or "",
        hash=row[11] or "",
    )


def _audit(db: Db, org: str | None, before: str | None, limit: int | None) -> list[AuditEntry]:
    where: list[str] = []
    args: list[Any] = []
    if org is not None:
        where.append("org = ?")
        args.append(org)
    if before is not None:
        below = row_id(before)
        if below is None:
            raise BadRequest("no audit entry has this id", path=before)
        where.append("id < ?")
        args.append(below)
    sql = _COLUMNS + (" WHERE " + " AND ".join(where) if where else "")
    if limit is None:
        return [_audit_entry(db, row) for row in db.tuples(sql + " ORDER BY id", tuple(args))]
    # The newest ``limit``, read newest first, then put oldest first.
    rows = db.tuples(sql + " ORDER BY id DESC LIMIT ?", (*args, audit_rules.check_limit(limit)))
    return [_audit_entry(db, row) for row in reversed(rows)]


def _verify_audit(db: Db) -> AuditCheck:
    """The chain over every entry (every org), and no entry cut off its end."""
    entries: list[AuditEntry] = []
    for row in db.tuples(_COLUMNS + " ORDER BY id"):
        try:
            entries.append(_audit_entry(db, row))
        except (KeyError, ValueError, TypeError) as exc:
            raise AuditTampered(
                f"this audit entry cannot be read back: {exc}", path=str(row[0])
            ) from exc
    check = audit_rules.verify_chain(entries)
    written = db.last_audit_id()
    last = int(entries[-1].id) if entries else 0
    if written != last:
        # Ids are handed out in order and never passed without a row.
        raise AuditTampered(
            f"the audit log ends at entry {last}, but entries up to {written} were written: "
            "the last entries were removed",
            path=str(last + 1),
        )
    return check
