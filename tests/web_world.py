"""One org's memory for the Memory tab's tests: spaces, Dana's waiting change, members and tokens.

Org ``bank_17`` has the space ``rules`` (``a.md`` live), Dana's own memory
(``me/p.md``) and a change of Dana's conversation ``s1`` waiting on
``rules`` (``new.md``, ``b.md``); org ``bank_99`` has its own ``rules`` and
a waiting change. Members: ``u_viewer``, ``u_member``, ``u_admin`` of
bank_17, ``u_revoked`` (an admin whose tokens are revoked) and ``u_other``
(bank_99's admin), each with a token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memfs.core.members import Member
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.core.roles import Role
from memfs.stores.base import ReviewingStore
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore

ORG = "bank_17"
RULES = SpaceRef(layer="org", space="rules", org=ORG)
OTHER_RULES = SpaceRef(layer="org", space="rules", org="bank_99")
DANA_ME = SpaceRef(layer="user", space="me", org=ORG, user="u_dana")
PROMPT = "remember the cut-off"
PEOPLE: list[tuple[str, Role, str]] = [
    ("viewer", "viewer", ORG),
    ("member", "member", ORG),
    ("admin", "admin", ORG),
    ("revoked", "admin", ORG),
    ("other", "admin", "bank_99"),
]


@dataclass
class Memory:
    store: ReviewingStore
    tokens: dict[str, str]  # by the names of PEOPLE
    change: str  # Dana's, on bank_17's rules
    other_change: str  # bank_99's


async def waiting(store: ReviewingStore, ref: SpaceRef, files: dict[str, bytes]) -> str:
    loaded = await store.load(ref, "s1")
    stored = await store.store(
        ref,
        ChangeSet(created=files),
        cursor=loaded.cursor,
        provenance=Provenance(session="s1", turn="t1", prompt=PROMPT),
        review="person",
    )
    assert stored.change is not None
    return stored.change


def new_store(kind: str, tmp_path: Path) -> ReviewingStore:
    return MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "memfs.db")


async def org_memory(store: ReviewingStore) -> Memory:
    await store.put(RULES, ChangeSet(created={"a.md": b"one\n"}), provenance=Provenance())
    await store.put(DANA_ME, ChangeSet(created={"p.md": b"pref"}), provenance=Provenance())
    await store.put(OTHER_RULES, ChangeSet(created={"x.md": b"secret"}), provenance=Provenance())
    change = await waiting(store, RULES, {"new.md": b"cut-off 17:00\n", "b.md": b"bee\n"})
    other_change = await waiting(store, OTHER_RULES, {"y.md": b"theirs"})
    return Memory(store, await add_people(store), change, other_change)


async def add_people(store: ReviewingStore) -> dict[str, str]:
    """The members of :data:`PEOPLE`, each with a token (``u_revoked``'s revoked), by name."""
    tokens = {}
    for who, role, org in PEOPLE:
        await store.add_member(Member(id=f"u_{who}", org=org, role=role), by=None)
        tokens[who] = (await store.create_token(f"u_{who}", org, by=None)).token
    await store.revoke_tokens("u_revoked", ORG, by=None)
    return tokens
