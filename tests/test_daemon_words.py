"""Which turns' words a forget found by a look reaches (``memfsd.words``), on a memory store."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.engine.plan import Mount
from memfs.stores.memory import MemoryStore
from memfsd.words import MARK_SECONDS, WordMarks

DANA = ("default", "u_dana")
RULES = SpaceRef(layer="org", space="lending-rules")


def org_mount(cursor: str) -> Mount:
    return Mount(
        name="lending-rules", path=Path("/m/lending-rules"), space="lending-rules", layer="org",
        ref=RULES, read_only=False, commit="after-turn", from_last_known_copy=False,
        cursor=cursor, snapshot={}, sizes={}, by=None,
    )  # fmt: skip


async def test_a_mark_read_at_most_mark_seconds_before_a_start_is_that_turns(
    mock_clock: trio.testing.MockClock,
) -> None:
    # Read at 0 for one turn; she is forgotten; a turn starting MARK_SECONDS
    # later takes the mark read at 0 (its words are dropped: a forget just
    # before a start is taken for one after it), one starting later reads it
    # again (its words stay).
    store = MemoryStore()
    await store.put(RULES, ChangeSet(created={"r.md": b"r"}), provenance=Provenance())
    old = org_mount("1")  # the org space, older than any forget below
    words = WordMarks()
    await words.mark(store, ("s1", "t1"), {DANA})
    await store.forget_user("u_dana", "default", by=None)
    mock_clock.jump(MARK_SECONDS)
    await words.mark(store, ("s2", "t2"), {DANA})
    mock_clock.jump(0.001)
    await words.mark(store, ("s3", "t3"), {DANA})

    judge = words.judge(store, *DANA)
    assert await judge(("s1", "t1"), [old])  # open before the forget
    assert await judge(("s2", "t2"), [old])  # within MARK_SECONDS of the read: errs early
    assert not await judge(("s3", "t3"), [old])  # read again: started once she was back
    assert await judge(("s9", "t9"), [old])  # no mark (a restart): dated by its cursor


async def test_marks_of_turns_no_longer_open_or_held_go() -> None:
    store = MemoryStore()
    words = WordMarks()
    await words.mark(store, ("s1", "t1"), {DANA})
    await words.mark(store, ("s2", "t2"), {DANA})
    await store.forget_user("u_dana", "default", by=None)
    words.keep_only({("s2", "t2")})
    judge = words.judge(store, *DANA)
    assert await judge(("s2", "t2"), [org_mount("0")])
    assert await judge(("s1", "t1"), [org_mount("99")]) is False  # no mark: its cursor
