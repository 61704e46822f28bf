"""The people who sign in, in a managed store: members and the hashes of their tokens.

Rows only; the rules (what a member may be called, a token's format and
hash, what an audit entry says) are :mod:`memfs.core.members`. A token is
found by its hash through the primary key; what decides is then a
constant-time compare of the kept hash with the presented one. (The index
seek itself is not constant-time, but it walks SHA-256 digests of tokens
nobody can choose a preimage for, so its timing says nothing usable.)
Revoking deletes the row; with ``secure_delete`` on (SQLite), the hash is
zeroed in the file too. Every change is audited by ``_log`` in the same transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memfs.core import audit as audit_rules
from memfs.core import members as member_rules
from memfs.core.errors import NotFound
from memfs.core.members import IssuedToken, Member
from memfs.core.models import AuditAction, By
from memfs.core.signin import NO_ORG
from memfs.stores.sql.audit import _log
from memfs.stores.sql.db import Db


def _member_of(row: Any) -> Member:
    return Member(id=row["id"], org=row["org"], role=row["role"], label=row["label"])


def _find(db: Db, id: str, org: str) -> Member | None:
    row = db.execute(
        "SELECT id, org, role, label FROM members WHERE org = ? AND id = ?", (org, id)
    ).fetchone()
    return None if row is None else _member_of(row)


def _member(db: Db, id: str, org: str) -> Member:
    found = _find(db, id, org)
    if found is None:
        raise NotFound(f"org {org!r} has no member of this id", path=id)
    return found


def _members(db: Db, org: str) -> list[Member]:
    rows = db.execute(
        "SELECT id, org, role, label FROM members WHERE org = ? ORDER BY id", (org,)
    ).fetchall()
    return [_member_of(row) for row in rows]


def _add_member(db: Db, member: Member, by: By | None) -> Member:
    before = _find(db, member.id, member.org)
    detail = member_rules.member_change(before, member)
    if detail is None:
        return member
    db.execute(
        "INSERT INTO members (org, id, role, label, added_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (org, id) DO UPDATE SET role = excluded.role, label = excluded.label",
        (member.org, member.id, member.role, member.label, db.stamp(datetime.now(UTC))),
    )
    action: AuditAction = "add-member" if before is None else "change-member"
    _log(db, action, member.org, by=by, target=member.id, detail=detail)
    return member


def _drop_tokens(db: Db, id: str, org: str) -> int:
    return db.execute("DELETE FROM tokens WHERE org = ? AND member = ?", (org, id)).rowcount


def _remove_member(db: Db, id: str, org: str, by: By | None) -> Member:
    found = _member(db, id, org)
    revoked = _drop_tokens(db, id, org)  # first: the tokens reference the member
    db.execute("DELETE FROM members WHERE org = ? AND id = ?", (org, id))
    detail = audit_rules.count(revoked, "token")
    _log(db, "remove-member", org, by=by, target=id, detail=detail)
    return found


def _create_token(db: Db, id: str, org: str, by: By | None) -> IssuedToken:
    found = _member(db, id, org)
    token = member_rules.new_token()
    db.execute(
        "INSERT INTO tokens (hash, org, member, created_at) VALUES (?, ?, ?, ?)",
        (member_rules.token_hash(token), org, id, db.stamp(datetime.now(UTC))),
    )
    _log(db, "create-token", org, by=by, target=id)
    return IssuedToken(token=token, member=found)


def _revoke_tokens(db: Db, id: str, org: str, by: By | None) -> int:
    _member(db, id, org)
    revoked = _drop_tokens(db, id, org)
    _log(db, "revoke-tokens", org, by=by, target=id, detail=audit_rules.count(revoked, "token"))
    return revoked


def _record_signin(db: Db, member: Member | None, client: str) -> None:
    if member is None:
        _log(db, "sign-in-failed", NO_ORG, by=None, detail=client)
    else:
        _log(db, "sign-in", member.org, by=member_rules.member_by(member), detail=client)


def _resolve_token(db: Db, hashed: str) -> Member | None:
    row = db.execute(
        "SELECT tokens.hash AS hash, members.id AS id, members.org AS org, members.role AS role,"
        " members.label AS label FROM tokens JOIN members"
        " ON members.org = tokens.org AND members.id = tokens.member WHERE tokens.hash = ?",
        (hashed,),
    ).fetchone()
    if row is None or not member_rules.same_hash(row["hash"], hashed):
        return None
    return _member_of(row)
