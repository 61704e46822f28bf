"""Turns with traces over an org space and a person's memory, for the story, carried and Life.

The traces are the shape the daemon records (only what a turn opened or
changed in ``snapshot``, the cursor for every mount); the tests build them
from real loads and stores, so cursors and revisions are the store's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from memfs.core.models import (
    ChangeSet,
    Provenance,
    SpaceRef,
    Trace,
    TraceFile,
    TraceMount,
    now,
)
from memfs.stores.base import ReviewingStore

ORG = "bank_17"
RULES = SpaceRef(layer="org", space="rules", org=ORG)
OTHER_RULES = SpaceRef(layer="org", space="rules", org="bank_99")
DANA_ME = SpaceRef(layer="user", space="me", org=ORG, user="u_dana")


@dataclass
class Story:
    """What the world holds: the turns, and what they carried when they ran."""

    at: datetime
    change: str  # s1/t2's waiting change in rules
    carried_t1: dict[str, str]  # rules as s1/t1 carried it: path -> revision
    carried_me_t1: dict[str, str]  # Dana's me as s1/t1 carried it


def _mount(ref: SpaceRef, cursor: str | None, **kw: object) -> TraceMount:
    return TraceMount.model_validate(
        {"ref": ref, "read_only": False, "from_last_known_copy": False, "status": "saved"}
        | {"cursor": cursor, "snapshot": {}}
        | kw
    )


async def story_world(store: ReviewingStore) -> Story:
    """Three files of rules and Dana's own memory, then four turns, then the space moves on.

    The rules came from code three days ago.
    s1/t1 (two days ago): opened a.md, wrote Dana's p.md.
    s1/t2 (now): opened a.md and b.md, left new.md waiting for review.
    s2/t1 (now, another session reusing the turn id t1): opened c.md.
    x1/t1 (another org's session, same turn id): their own rules.
    Then a.md is edited and b.md deleted, so the present differs from what was carried.
    """
    at = now()
    files = {"a.md": b"alpha\n", "b.md": b"bee\n", "c.md": b"sea\n"}
    code = Provenance(origin="code", at=at - timedelta(days=3))
    await store.put(RULES, ChangeSet(created=files), provenance=code)
    await store.put(DANA_ME, ChangeSet(created={"q.md": b"tea"}), provenance=Provenance())
    await store.put(OTHER_RULES, ChangeSet(created={"x.md": b"theirs"}), provenance=Provenance())

    rules = await store.load(RULES, "s1")
    me = await store.load(DANA_ME, "s1")
    stored_me = await store.store(
        DANA_ME,
        ChangeSet(created={"p.md": b"short answers"}),
        cursor=me.cursor,
        provenance=Provenance(session="s1", turn="t1", prompt="keep it short"),
    )
    await store.record_trace(
        Trace(
            session="s1",
            turn="t1",
            prompt="keep it short",
            at=at - timedelta(days=2),
            mounts={
                "rules": _mount(RULES, rules.cursor, snapshot={"a.md": rules.revisions["a.md"]}),
                "me": _mount(DANA_ME, me.cursor, saved=("p.md",)),
            },
            files={
                "rules/a.md": TraceFile(read=rules.revisions["a.md"], opened=True),
                "me/p.md": TraceFile(created=True, wrote=True),
            },
        )
    )
    assert stored_me.status == "saved"

    rules2 = await store.load(RULES, "s1")
    waiting = await store.store(
        RULES,
        ChangeSet(created={"new.md": b"cut-off 17:00\n"}),
        cursor=rules2.cursor,
        provenance=Provenance(session="s1", turn="t2", prompt="remember the cut-off"),
        review="person",
    )
    assert waiting.change is not None
    await store.record_trace(
        Trace(
            session="s1",
            turn="t2",
            prompt="remember the cut-off",
            at=now(),
            mounts={
                "rules": _mount(
                    RULES,
                    rules2.cursor,
                    snapshot={p: rules2.revisions[p] for p in ("a.md", "b.md")},
                    status="waiting",
                    saved=("new.md",),
                    change=waiting.change,
                ),
            },
            files={
                "rules/a.md": TraceFile(read=rules2.revisions["a.md"], opened=True),
                "rules/b.md": TraceFile(opened=True),
                "rules/new.md": TraceFile(created=True, wrote=True),
            },
        )
    )
    rules3 = await store.load(RULES, "s2")
    await store.record_trace(
        Trace(
            session="s2",
            turn="t1",
            prompt="what about c?",
            at=now(),
            mounts={
                "rules": _mount(RULES, rules3.cursor, snapshot={"c.md": rules3.revisions["c.md"]})
            },
            files={"rules/c.md": TraceFile(opened=True)},
        )
    )
    theirs = await store.load(OTHER_RULES, "x1")
    await store.record_trace(
        Trace(
            session="x1",
            turn="t1",
            prompt="another bank's turn",
            at=now(),
            mounts={"rules": _mount(OTHER_RULES, theirs.cursor)},
            files={"rules/x.md": TraceFile(opened=True)},
        )
    )
    await store.put(
        RULES,
        ChangeSet(updated={"a.md": b"alpha, edited\n"}, deleted=("b.md",)),
        provenance=Provenance(origin="edited"),
    )
    return Story(
        at=at,
        change=waiting.change,
        carried_t1=dict(rules.revisions),
        carried_me_t1=dict(me.revisions),
    )


async def long_session(store: ReviewingStore, session: str, turns: int) -> list[str]:
    """``turns`` turns of ``session`` over the rules, each its own trace; their ids, in order."""
    loaded = await store.load(RULES, session)
    ids = [f"t{n:04}" for n in range(turns)]
    for turn in ids:
        await store.record_trace(
            Trace(
                session=session,
                turn=turn,
                prompt=f"turn {turn}",
                at=now(),
                mounts={"rules": _mount(RULES, loaded.cursor)},
                files={},
            )
        )
    return ids
