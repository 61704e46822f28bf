"""The people who sign in: members of an org, their roles, and the sign-in tokens' format.

Pure rules, no I/O. A member is one person who may sign in to the Memory tab
(or call its API): an id unique within an org (the same id in two orgs is
two people), a role (:data:`memfs.core.roles.Role`) and an optional label to
show. Members are kept by the managed stores (``memfs.stores.base.Members``);
a person's role and org come only from there, never from a request.

A sign-in token, owned here::

    token = "memfs_" + base64url(32 random bytes), unpadded   (49 characters)
    kept  = sha256(token as UTF-8).hexdigest()                 (token_hash)

The store keeps only ``token_hash`` and shows the token once, when it is
made. A plain (unkeyed, unsalted) SHA-256 is enough because the token is
256 bits from the operating system's random source: nobody can guess one, so
a stolen store cannot be searched for tokens the way a stolen table of
password hashes can, and a key would only add a second secret to keep. The
prefix makes a token recognisable where it must not be (a log, a paste) and
lets anything that is not a token be refused without a lookup.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from pydantic import field_validator

from memfs.core.errors import InvalidName
from memfs.core.models import By, Frozen
from memfs.core.names import check_identity, has_control_character
from memfs.core.roles import ROLES, Role

TOKEN_PREFIX = "memfs_"
TOKEN_BYTES = 32  # 256 bits
MAX_LABEL_BYTES = 200
# base64url of 32 bytes without padding is 43 characters of this alphabet.
_TOKEN = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]{43}")


def check_member_id(value: str, *, what: str = "member id") -> str:
    """An org or member id: a name as :func:`check_identity` allows, and no control characters.

    A new id, like a new file name, may not hold a control character: it is
    shown in lists, terminals and the audit log.
    """
    check_identity(value, what=what)
    if has_control_character(value):
        raise InvalidName(f"a {what} may not contain control characters", path=repr(value))
    return value


def check_label(value: str) -> str:
    """A member's label (a name to show): 1-200 bytes of UTF-8, not blank, no control characters.

    Unlike an id it may hold spaces and ``/`` ("Ada Lovelace", "Risk / Ops"):
    it never becomes a file or folder name.
    """
    if not isinstance(value, str):
        raise InvalidName("a member's label must be a string", path=repr(value))
    if not value.strip():
        raise InvalidName("a member's label may not be empty", path=repr(value))
    if has_control_character(value):
        raise InvalidName("a member's label may not contain control characters", path=repr(value))
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidName("a member's label is not valid UTF-8", path=repr(value)) from None
    if size > MAX_LABEL_BYTES:
        raise InvalidName(
            f"a member's label is {size} bytes; at most {MAX_LABEL_BYTES} are allowed",
            path=value[:40],
        )
    return value


def check_role(value: str) -> Role:
    """``value`` as a role, or ``InvalidName`` naming the roles there are."""
    for role in ROLES:
        if value == role:
            return role
    raise InvalidName(f"unknown role; one of {', '.join(ROLES)}", path=str(value))


class Member(Frozen):
    """One person who may sign in: who they are in which org, and what they may do."""

    id: str
    org: str
    role: Role
    label: str | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_member_id(value)

    @field_validator("org")
    @classmethod
    def _org(cls, value: str) -> str:
        return check_member_id(value, what="org id")

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: object) -> Role:
        return check_role(str(value))

    @field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        return None if value is None else check_label(value)


class IssuedToken(Frozen):
    """A token just made for ``member``: the one time its secret is seen."""

    token: str
    member: Member

    def __repr__(self) -> str:
        # Never the secret, wherever an object is printed (a traceback, a log line).
        return f"IssuedToken(member={self.member!r}, token='{TOKEN_PREFIX}...')"

    __str__ = __repr__


def new_token() -> str:
    """A fresh sign-in token: the prefix and 256 bits from ``secrets``."""
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def looks_like_token(token: object) -> bool:
    """Whether ``token`` has the shape of a memfs token (nothing else can resolve)."""
    return isinstance(token, str) and _TOKEN.fullmatch(token) is not None


def token_hash(token: str) -> str:
    """What a store keeps of ``token``: its SHA-256, hex (see the module header)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def same_hash(kept: str, presented: str) -> bool:
    """Compare two token hashes in constant time, so the time taken says nothing of either."""
    return hmac.compare_digest(kept.encode("ascii"), presented.encode("ascii"))


def member_by(member: Member) -> By:
    """How ``member`` is named in the audit: id and role, never the label (``member_change``)."""
    return By(id=member.id, role=member.role)


def member_change(before: Member | None, after: Member) -> str | None:
    """The audit ``detail`` of adding or changing a member; None if nothing changes.

    Names the role (and the role it had), and that the label changed, never
    the label itself: a name to show is the person's, the log outlives them.
    """
    if before is None:
        return f"role {after.role}"
    parts = []
    if before.role != after.role:
        parts.append(f"role {before.role} -> {after.role}")
    if before.label != after.label:
        parts.append("label changed")
    return ", ".join(parts) or None


__all__ = [
    "MAX_LABEL_BYTES",
    "TOKEN_BYTES",
    "TOKEN_PREFIX",
    "IssuedToken",
    "Member",
    "check_label",
    "check_member_id",
    "check_role",
    "looks_like_token",
    "member_by",
    "member_change",
    "new_token",
    "same_hash",
    "token_hash",
]
