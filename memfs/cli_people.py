"""The operator's commands for who may sign in: ``memfs people ...`` and ``memfs token ...``.

``people add|list|remove`` keep the members of an org (id, role, label) in
the store, and ``token create|revoke`` their sign-in tokens. They act on the
store directly (``--store URL``, default the embedded SQLite file in the
state dir), like the other people's commands, and print JSON.

They are operator commands: whoever can open the store file (it is 0600,
the daemon's user's, usually root) may run them, so they take no ``--as``.
The store's audit log names the operator as the actor,
``By(id="operator:<uid>", label=<login name>, role="admin")``, with the
member's id and never a token. ``token create`` prints the token once, on
stdout; the store keeps only its hash, so a lost token is revoked and made
again, never shown again.

Imports of the store and engine happen inside the commands, so ``memfs
--help`` stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from memfs.cli_manage import connection_options, key_file_option

if TYPE_CHECKING:
    from memfs.core.members import Member
    from memfs.core.models import By
    from memfs.stores.base import Members

ROLE_CHOICES = ("viewer", "member", "admin")
# memfs.core.models.DEFAULT_ORG, spelled out so registering the commands imports nothing
# (a test holds the two equal).
DEFAULT_ORG = "default"


def operator() -> By:
    """The actor of an operator command: this process's user, as an admin."""
    import pwd

    from memfs.core.models import By

    uid = os.getuid()
    try:
        name: str | None = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None  # a uid with no entry (a container's): the id says enough
    return By(id=f"operator:{uid}", label=name, role="admin")


def member_json(member: Member) -> dict[str, Any]:
    return {"id": member.id, "org": member.org, "role": member.role, "label": member.label}


def run_members(store_url: str | None, act: Callable[[Members], Any]) -> Any:
    """Run ``act`` on the store ``store_url`` names, which must keep members."""
    from memfs.cli_manage import run
    from memfs.core.errors import ConfigError
    from memfs.stores.base import Members, Store

    async def on(store: Store) -> Any:
        if not isinstance(store, Members):
            raise ConfigError(
                "this store keeps no members; people sign in to a managed store (sqlite)"
            )
        return await act(store)

    return run(store_url, on)


def _store_option(command: Any) -> Any:
    return click.option(
        "--store",
        "store_url",
        default=None,
        help="Store URL.",
        show_default="$MEMFS_STORE, else the SQLite file in $MEMFS_STATE_DIR",
    )(connection_options(key_file_option(command)))


def _org_option(command: Any) -> Any:
    return click.option("--org", default=DEFAULT_ORG, show_default=True, help="The org.")(command)


def register(main: click.Group, echo: Callable[[Any], None], guard: Callable[[], Any]) -> None:
    """Add ``people`` and ``token`` to ``main``; ``echo`` prints JSON, ``guard`` reports errors."""

    @main.group()
    def people() -> None:
        """Who may sign in to the Memory tab, per org (operator commands, audited)."""

    @people.command("add")
    @click.argument("member_id", metavar="ID")
    @click.option("--role", type=click.Choice(ROLE_CHOICES), required=True, help="Their role.")
    @click.option("--name", "label", default=None, help="A name to show (their label).")
    @_org_option
    @_store_option
    def people_add(
        member_id: str, role: str, label: str | None, org: str, store_url: str | None
    ) -> None:
        """Add a member, or change the role (and name) of the member ID of the org."""
        with guard():
            from memfs.core.members import Member, check_role

            member = Member(id=member_id, org=org, role=check_role(role), label=label)
            by = operator()
            added = run_members(store_url, lambda store: store.add_member(member, by=by))
        echo(member_json(added))

    @people.command("list")
    @_org_option
    @_store_option
    def people_list(org: str, store_url: str | None) -> None:
        """Every member of the org, by id."""
        with guard():
            found = run_members(store_url, lambda store: store.members(org))
        echo([member_json(m) for m in found])

    @people.command("remove")
    @click.argument("member_id", metavar="ID")
    @_org_option
    @_store_option
    def people_remove(member_id: str, org: str, store_url: str | None) -> None:
        """Remove a member of the org; every token of theirs stops working at once."""
        with guard():
            by = operator()
            gone = run_members(store_url, lambda store: store.remove_member(member_id, org, by=by))
        echo({**member_json(gone), "removed": True})

    @main.group()
    def token() -> None:
        """Sign-in tokens of members (operator commands, audited)."""

    @token.command("create")
    @click.argument("member_id", metavar="ID")
    @_org_option
    @_store_option
    def token_create(member_id: str, org: str, store_url: str | None) -> None:
        """Make a sign-in token for member ID and print it, once: the store keeps only a hash."""
        with guard():
            by = operator()
            issued = run_members(store_url, lambda store: store.create_token(member_id, org, by=by))
        member = issued.member
        echo({"token": issued.token, "id": member.id, "org": member.org, "role": member.role})

    @token.command("revoke")
    @click.argument("member_id", metavar="ID")
    @_org_option
    @_store_option
    def token_revoke(member_id: str, org: str, store_url: str | None) -> None:
        """Revoke every token of member ID; they stay a member (``people remove`` to end that)."""
        with guard():
            by = operator()
            revoked = run_members(
                store_url, lambda store: store.revoke_tokens(member_id, org, by=by)
            )
        echo({"id": member_id, "org": org, "revoked": revoked})


__all__ = ["operator", "register"]
