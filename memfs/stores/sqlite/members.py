"""The people who sign in, in the SQLite store: members and the hashes of their tokens.

Rows only; the rules (what a member may be called, a token's format and
hash, what an audit entry says) are :mod:`memfs.core.members`. A token is
found by its hash through the primary key; what decides is then a
constant-time compare of the kept hash with the presented one. (The index
seek itself is not constant-time, but it walks SHA-256 digests of tokens
nobody can choose a preimage for, so its timing says nothing usable.)
Revoking deletes the row; with ``secure_delete`` on, the hash is zeroed in
the file too. Every change is audited by ``_log`` in the same transaction.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from memfs.core import audit as audit_rules
from memfs.core import members as member_rules
from memfs.core.errors import NotFound
from memfs.core.members import IssuedToken, Member
from memfs.core.models import AuditAction, By
from memfs.core.signin import NO_ORG
from memfs.stores.sqlite.audit import _log
from memfs.stores.sqlite.rows import _timestamp


def _member_of(row: sqlite3.Row) -> Member:
    return Member(id=row["id"], org=row["org"], role=row["role"], label=row["label"])


def _find(conn: sqlite3.Connection, id: str, org: str) -> Member | None:
    row = conn.execute(
        "SELECT id, org, role, label FROM members WHERE org = ? AND id = ?", (org, id)
    ).fetchone()
    return None if row is None else _member_of(row)


def _member(conn: sqlite3.Connection, id: str, org: str) -> Member:
    found = _find(conn, id, org)
    if found is None:
        raise NotFound(f"org {org!r} has no member of this id", path=id)
    return found


def _members(conn: sqlite3.Connection, org: str) -> list[Member]:
    rows = conn.execute(
        "SELECT id, org, role, label FROM members WHERE org = ? ORDER BY id", (org,)
    ).fetchall()
    return [_member_of(row) for row in rows]


def _add_member(conn: sqlite3.Connection, member: Member, by: By | None) -> Member:
    before = _find(conn, member.id, member.org)
    detail = member_rules.member_change(before, member)
    if detail is None:
        return member
    conn.execute(
        "INSERT INTO members (org, id, role, label, added_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (org, id) DO UPDATE SET role = excluded.role, label = excluded.label",
        (member.org, member.id, member.role, member.label, _timestamp(datetime.now(UTC))),
    )
    action: AuditAction = "add-member" if before is None else "change-member"
    _log(conn, action, member.org, by=by, target=member.id, detail=detail)
    return member


def _drop_tokens(conn: sqlite3.Connection, id: str, org: str) -> int:
    return conn.execute("DELETE FROM tokens WHERE org = ? AND member = ?", (org, id)).rowcount


def _remove_member(conn: sqlite3.Connection, id: str, org: str, by: By | None) -> Member:
    found = _member(conn, id, org)
    revoked = _drop_tokens(conn, id, org)  # first: the tokens reference the member
    conn.execute("DELETE FROM members WHERE org = ? AND id = ?", (org, id))
    detail = audit_rules.count(revoked, "token")
    _log(conn, "remove-member", org, by=by, target=id, detail=detail)
    return found


def _create_token(conn: sqlite3.Connection, id: str, org: str, by: By | None) -> IssuedToken:
    found = _member(conn, id, org)
    token = member_rules.new_token()
    conn.execute(
        "INSERT INTO tokens (hash, org, member, created_at) VALUES (?, ?, ?, ?)",
        (member_rules.token_hash(token), org, id, _timestamp(datetime.now(UTC))),
    )
    _log(conn, "create-token", org, by=by, target=id)
    return IssuedToken(token=token, member=found)


def _revoke_tokens(conn: sqlite3.Connection, id: str, org: str, by: By | None) -> int:
    _member(conn, id, org)
    revoked = _drop_tokens(conn, id, org)
    _log(conn, "revoke-tokens", org, by=by, target=id, detail=audit_rules.count(revoked, "token"))
    return revoked


def _record_signin(conn: sqlite3.Connection, member: Member | None, client: str) -> None:
    if member is None:
        _log(conn, "sign-in-failed", NO_ORG, by=None, detail=client)
    else:
        _log(conn, "sign-in", member.org, by=member_rules.member_by(member), detail=client)


def _resolve_token(conn: sqlite3.Connection, hashed: str) -> Member | None:
    row = conn.execute(
        "SELECT tokens.hash AS hash, members.id AS id, members.org AS org, members.role AS role,"
        " members.label AS label FROM tokens JOIN members"
        " ON members.org = tokens.org AND members.id = tokens.member WHERE tokens.hash = ?",
        (hashed,),
    ).fetchone()
    if row is None or not member_rules.same_hash(row["hash"], hashed):
        return None
    return _member_of(row)
