"""Who may do what to managed memory, and how much of a person's memory each role sees.

Pure rules, no I/O: the CLI (and later the web UI) asks :func:`require`
before an act and shows people's memory through :func:`people_view`. An
actor acts in one org; :func:`require_same_org` makes anything of another
org look missing. The
store does not check roles; it records the actor of every sensitive act in
its audit log, so a caller that skips the check is still accountable.

Privacy is the point of :func:`people_view`: viewers and members learn that
a person's memory exists and how full it is, never whose it is; admins
learn whose it is, but still see no files. Files of a person's memory are
read only through the store's ``open_person``, which audits the look.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from memfs.core.errors import InvalidName, NotFound, PermissionDenied
from memfs.core.models import SpaceRef

Role = Literal["viewer", "member", "admin"]
Act = Literal[
    "read",
    "review",
    "restore",
    "forget",
    "put",
    "set-review",
    "forget-user",
    "open",
    "verify-audit",
    "manage-people",
]

ROLES: tuple[Role, ...] = get_args(Role)
ACTS: tuple[Act, ...] = get_args(Act)

# The whole policy, as data: each act and the roles allowed it. Reviewing,
# restoring, forgetting and writing (put) a file are everyday curation (members); changing
# how a space is reviewed, erasing a person, reading their memory and
# managing who signs in are rarer and weightier (admins).
ALLOWED: Mapping[str, frozenset[str]] = {
    "read": frozenset({"viewer", "member", "admin"}),
    "review": frozenset({"member", "admin"}),
    "restore": frozenset({"member", "admin"}),
    "forget": frozenset({"member", "admin"}),
    "put": frozenset({"member", "admin"}),
    "set-review": frozenset({"admin"}),
    "forget-user": frozenset({"admin"}),
    "open": frozenset({"admin"}),
    "verify-audit": frozenset({"admin"}),
    # Who may sign in, and with which role: whoever may do this may make
    # themselves anything, so it is the admins' alone.
    "manage-people": frozenset({"admin"}),
}


def allowed(role: str, act: str) -> bool:
    """Whether ``role`` may do ``act``. An unknown role may do nothing."""
    if act not in ALLOWED:
        raise InvalidName(f"unknown act; one of {', '.join(ACTS)}", path=act)
    return role in ALLOWED[act]


def require(role: str, act: str) -> None:
    """Raise ``PermissionDenied`` unless ``role`` may do ``act``.

    Takes plain strings because roles arrive from the command line and
    requests; an unknown role is denied rather than trusted, and an unknown
    act is a programming error (``InvalidName``), not a silent denial.
    """
    if not allowed(role, act):
        who = role if role in ROLES else f"unknown role {role!r}"
        needed = " or ".join(sorted(ALLOWED[act]))
        raise PermissionDenied(f"{who} may not {act}; it needs {needed}", path=act)


def require_same_org(org: str, owner: str, missing: NotFound) -> None:
    """Raise ``missing`` unless what is acted on (of org ``owner``) is of the actor's ``org``.

    Everything a person acts on belongs to one org, and an actor acts in one.
    Something of another org is reported exactly as something that does not
    exist (the caller passes the one error it gives for both), so nobody can
    learn from the answer that another org holds it.
    """
    if owner != org:
        raise missing


def people_view(role: str, spaces: Mapping[SpaceRef, int]) -> list[dict[str, Any]]:
    """What ``role`` sees of people's memory: one entry per user-layer space, never files.

    ``spaces`` maps each user-layer space to its live size in bytes (the
    store's ``people``). Each entry is ``{"space", "org", "bytes", "person"}``;
    ``person`` is the user id for admins and None for everyone else.
    """
    require(role, "read")
    reveal = role == "admin"
    entries: list[tuple[tuple[str, str, int, str], dict[str, Any]]] = []
    for ref, size in spaces.items():
        if ref.layer != "user":
            raise InvalidName("people_view takes user-layer spaces only", path=str(ref))
        person = ref.user if reveal else None
        entry = {"space": ref.space, "org": ref.org, "bytes": size, "person": person}
        # Ordered without the user id when it is hidden: an order by person
        # would hint at whose is which.
        entries.append(((ref.org, ref.space, size, person or ""), entry))
    return [entry for _, entry in sorted(entries, key=lambda pair: pair[0])]


__all__ = [
    "ACTS",
    "ALLOWED",
    "ROLES",
    "Act",
    "Role",
    "allowed",
    "people_view",
    "require",
    "require_same_org",
]
