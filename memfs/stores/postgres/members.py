"""The people who sign in, in the PostgreSQL store: members and the hashes of their tokens.

Rows only; the rules are :mod:`memfs.core.members`, as in the SQLite store
(:mod:`memfs.stores.sqlite.members`): a token is found by its hash through
the primary key, then compared in constant time. Every change is audited by
``_log`` in the same transaction.
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
from memfs.stores.postgres.audit import _log
from memfs.stores.postgres.rows import Conn, _all, _one, _run


def _member_of(row: tuple[Any, ...]) -> Member:
    return Member(id=row[0], org=row[1], role=row[2], label=row[3])


def _find(conn: Conn, id: str, org: str) -> Member | None:
    row = _one(
        conn, "SELECT id, org, role, label FROM members WHERE org = %s AND id = %s", (org, id)
    )
    return None if row is None else _member_of(row)


def _member(conn: Conn, id: str, org: str) -> Member:
    found = _find(conn, id, org)
    if found is None:
        raise NotFound(f"org {org!r} has no member of this id", path=id)
    return found


def _members(conn: Conn, org: str) -> list[Member]:
    rows = _all(conn, "SELECT id, org, role, label FROM members WHERE org = %s ORDER BY id", (org,))
    return [_member_of(row) for row in rows]


def _add_member(conn: Conn, member: Member, by: By | None) -> Member:
    before = _find(conn, member.id, member.org)
    detail = member_rules.member_change(before, member)
    if detail is None:
        return member
    _run(
        conn,
        "INSERT INTO members (org, id, role, label, added_at) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (org, id) DO UPDATE SET role = excluded.role, label = excluded.label",
        (member.org, member.id, member.role, member.label, datetime.now(UTC)),
    )
    action: AuditAction = "add-member" if before is None else "change-member"
    _log(conn, action, member.org, by=by, target=member.id, detail=detail)
    return member


def _drop_tokens(conn: Conn, id: str, org: str) -> int:
    return _run(conn, "DELETE FROM tokens WHERE org = %s AND member = %s", (org, id))


def _remove_member(conn: Conn, id: str, org: str, by: By | None) -> Member:
    found = _member(conn, id, org)
    revoked = _drop_tokens(conn, id, org)  # first: the tokens reference the member
    _run(conn, "DELETE FROM members WHERE org = %s AND id = %s", (org, id))
    _log(conn, "remove-member", org, by=by, target=id, detail=audit_rules.count(revoked, "token"))
    return found


def _create_token(conn: Conn, id: str, org: str, by: By | None) -> IssuedToken:
    found = _member(conn, id, org)
    token = member_rules.new_token()
    _run(
        conn,
        "INSERT INTO tokens (hash, org, member, created_at) VALUES (%s, %s, %s, %s)",
        (member_rules.token_hash(token), org, id, datetime.now(UTC)),
    )
    _log(conn, "create-token", org, by=by, target=id)
    return IssuedToken(token=token, member=found)


def _revoke_tokens(conn: Conn, id: str, org: str, by: By | None) -> int:
    _member(conn, id, org)
    revoked = _drop_tokens(conn, id, org)
    _log(conn, "revoke-tokens", org, by=by, target=id, detail=audit_rules.count(revoked, "token"))
    return revoked


def _record_signin(conn: Conn, member: Member | None, client: str) -> None:
    if member is None:
        _log(conn, "sign-in-failed", NO_ORG, by=None, detail=client)
    else:
        _log(conn, "sign-in", member.org, by=member_rules.member_by(member), detail=client)


def _resolve_token(conn: Conn, hashed: str) -> Member | None:
    row = _one(
        conn,
        "SELECT members.id, members.org, members.role, members.label, tokens.hash"
        " FROM tokens JOIN members ON members.org = tokens.org AND members.id = tokens.member"
        " WHERE tokens.hash = %s",
        (hashed,),
    )
    if row is None or not member_rules.same_hash(row[4], hashed):
        return None
    return _member_of(row)
