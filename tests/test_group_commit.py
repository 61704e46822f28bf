"""Group commit: concurrent turn ends share one store transaction, each durable before its answer.

The engine side (``memfs.engine.commits``) against a memory store that takes
batches (``GroupCommitStore``): batches form while the one before commits,
no caller is answered before its batch is committed, a failed item fails
only its turn, a failed batch fails every turn in it, and none of that
loses a write (the turns keep their spaces and a second end stores them).
``store_batch_max`` caps a batch at and past it; a store without
``store_batch`` is called once per store, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

import memfs
from memfs.core.errors import StoreUnavailable, TraceFailed
from memfs.core.models import ChangeSet, Provenance, SpaceRef, Stored, Trace
from memfs.core.review import ReviewMode
from memfs.engine.commits import GroupCommit
from memfs.stores.base import GroupCommitStore, StoreRequest
from memfs.stores.memory import MemoryStore
from memfs.stores.sql.store import SqlStore
from memfs.stores.sqlite import SqliteStore
from memfsd.config import DEFAULT_STORE_BATCH_MAX, load_config
from tests.postgres_fixtures import Databases
from tests.test_turns_copy_mode import RULES, seed


class BatchingStore(MemoryStore):
    """A memory store that takes batches: each item as its own call, then "commits" them.

    ``hold`` (when set) keeps the next batch from committing until it is set
    again; ``batches`` is every committed batch's items; ``fail_sessions``
    makes those sessions' stores fail alone; ``fail_batch`` fails whole batches.
    """

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[StoreRequest | Trace]] = []
        self.hold: trio.Event | None = None
        self.started = trio.Event()
        self.fail_sessions: set[str] = set()
        self.fail_batch: Exception | None = None
        self.lone = False

    # A lone item comes through the store's own calls: recorded as a batch of one.
    async def store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
        **kwargs: Any,
    ) -> Stored:
        if self.lone:
            return await super().store(
                ref, changes, cursor=cursor, provenance=provenance, review=review, **kwargs
            )
        [answer] = await self.store_batch([StoreRequest(ref, changes, cursor, provenance, review)])
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, Stored)
        return answer

    async def record_trace(self, trace: Trace) -> None:
        if self.lone:
            await super().record_trace(trace)
            return
        [answer] = await self.store_batch([trace])
        if isinstance(answer, Exception):
            raise answer

    async def store_batch(
        self, items: Sequence[StoreRequest | Trace]
    ) -> list[Stored | Exception | None]:
        self.lone = True  # the items below reach MemoryStore's own calls
        try:
            return await self._batch(items)
        finally:
            self.lone = False

    async def _batch(
        self, items: Sequence[StoreRequest | Trace]
    ) -> list[Stored | Exception | None]:
        self.started.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_batch is not None:
            raise self.fail_batch
        answers: list[Stored | Exception | None] = []
        for item in items:
            if isinstance(item, Trace):
                await self.record_trace(item)
                answers.append(None)
            elif item.provenance.session in self.fail_sessions:
                answers.append(StoreUnavailable("disk I/O error", path=item.ref.space))
            else:
                stored = await self.store(
                    item.ref,
                    item.changes,
                    cursor=item.cursor,
                    provenance=item.provenance,
                    review=item.review,
                )
                if item.trace is not None and stored.status != "conflict":
                    await self.record_trace(item.trace(stored))  # the store's own trace
                answers.append(stored)
        self.batches.append(list(items))
        return answers


def rules_desk(store: memfs.Store, tmp_path: Path) -> memfs.Memory:
    spec = memfs.org_memory(space="lending-rules", org="bankId", review="none")
    return memfs.Memory(store, [spec], workdir=tmp_path / "work")


BODY = {"userId": "u1", "bankId": "bank_17"}


async def start(memory: memfs.Memory, session: str) -> memfs.Turn:
    turn = await memory.start_turn(session, BODY)
    (turn.root / "lending-rules" / f"{session}.md").write_bytes(f"by {session}".encode())
    return turn


async def queued(commits: GroupCommit | None, n: int) -> None:
    """Until ``n`` items wait for the next batch (turn ends scan their copies in threads first)."""
    assert commits is not None
    with trio.fail_after(10):
        while commits.queued < n:  # noqa: ASYNC110 - the queue has no event to wait on
            await trio.sleep(0.01)


def stores_in(batch: list[StoreRequest | Trace]) -> list[str]:
    return [item.provenance.session or "" for item in batch if isinstance(item, StoreRequest)]


def test_a_batching_store_is_a_group_commit_store_and_a_plain_one_is_not(tmp_path: Path) -> None:
    assert isinstance(BatchingStore(), GroupCommitStore)
    assert not isinstance(MemoryStore(), GroupCommitStore)
    assert rules_desk(MemoryStore(), tmp_path).commits is None
    assert rules_desk(BatchingStore(), tmp_path).commits is not None
    spec = memfs.org_memory(space="lending-rules", org="bankId")
    capped = memfs.Memory(BatchingStore(), [spec], workdir=tmp_path, store_batch_max=5).commits
    assert capped is not None and capped.max_items == 5


async def test_turn_ends_arriving_while_a_batch_commits_share_the_next_and_answer_after_it(
    tmp_path: Path,
) -> None:
    store = BatchingStore()
    seed(store, RULES, {"a.md": b"a"})
    memory = rules_desk(store, tmp_path)
    sessions = [f"s{i}" for i in range(6)]
    turns = {s: await start(memory, s) for s in sessions}
    store.hold = trio.Event()
    answered: dict[str, int] = {}  # session -> batches committed when its end answered

    async def end(session: str) -> None:
        result = await turns[session].end()
        assert result.spaces["lending-rules"].status == "saved"
        answered[session] = len(store.batches)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(end, "s0")
        await store.started.wait()  # s0's store is alone in the first batch, held
        for session in sessions[1:]:
            nursery.start_soon(end, session)
        await queued(memory.commits, len(sessions) - 1)
        assert answered == {}  # nobody is answered before its batch commits
        hold, store.hold = store.hold, None
        hold.set()

    assert stores_in(store.batches[0]) == ["s0"]
    # The five that came while it committed went together, in one batch.
    assert sorted(stores_in(store.batches[1])) == sessions[1:]
    # Each answered only once the batch holding its store had committed.
    for session in sessions:
        [at] = [n for n, batch in enumerate(store.batches, 1) if session in stores_in(batch)]
        assert answered[session] >= at
    # The traces went with their stores (a turn with one store commits once), once per turn.
    assert sorted(trace.session for trace in await store.traces()) == sessions
    assert not [item for batch in store.batches for item in batch if isinstance(item, Trace)]
    files = await store.files(RULES)
    assert {f"{s}.md" for s in sessions} <= files.keys()
    assert len(store.batches) < 2 * len(sessions)  # fewer commits than stores and traces


async def test_a_failed_item_fails_only_its_turn_which_keeps_its_files_and_stores_them_again(
    tmp_path: Path,
) -> None:
    store = BatchingStore()
    seed(store, RULES, {"a.md": b"a"})
    memory = rules_desk(store, tmp_path)
    turns = {s: await start(memory, s) for s in ("s1", "s2", "s3")}
    store.fail_sessions = {"s2"}
    store.hold = trio.Event()
    results: dict[str, memfs.CommitResult] = {}

    async def end(session: str) -> None:
        results[session] = await turns[session].end()

    async with trio.open_nursery() as nursery:
        for session in turns:
            nursery.start_soon(end, session)
        await queued(memory.commits, len(turns) - 1)  # one is in the held batch
        hold, store.hold = store.hold, None
        hold.set()

    assert any(len(stores_in(batch)) > 1 for batch in store.batches)  # they did share
    failed = results["s2"].spaces["lending-rules"]
    assert (failed.status, failed.reason, failed.kept) == ("not_saved", "store failed", True)
    assert "disk I/O error" in (failed.error or "")
    for session in ("s1", "s3"):
        assert results[session].spaces["lending-rules"].status == "saved"
    files = await store.files(RULES)
    assert "s2.md" not in files
    assert (turns["s2"].root / "lending-rules" / "s2.md").read_bytes() == b"by s2"

    store.fail_sessions = set()
    again = await turns["s2"].end()

    assert again.spaces["lending-rules"].status == "saved"
    assert (await store.files(RULES))["s2.md"] == b"by s2"


async def test_a_failed_batch_commit_fails_every_turn_in_it_and_loses_nothing(
    tmp_path: Path,
) -> None:
    store = BatchingStore()
    seed(store, RULES, {"a.md": b"a"})
    memory = rules_desk(store, tmp_path)
    turns = {s: await start(memory, s) for s in ("s1", "s2", "s3")}
    store.fail_batch = StoreUnavailable("database is locked")
    results: dict[str, memfs.CommitResult] = {}

    async def end(session: str) -> None:
        results[session] = await turns[session].end()

    async with trio.open_nursery() as nursery:
        for session in turns:
            nursery.start_soon(end, session)

    for session in turns:
        space = results[session].spaces["lending-rules"]
        assert (space.status, space.kept) == ("not_saved", True)
        assert "database is locked" in (space.error or "")
    assert store.batches == []  # nothing was committed
    assert (await store.files(RULES)).keys() == {"a.md"}

    store.fail_batch = None
    for session, turn in turns.items():
        assert (await turn.end()).spaces["lending-rules"].status == "saved"
        assert (await store.files(RULES))[f"{session}.md"] == f"by {session}".encode()


async def queued_batches(max_items: int, waiting: int) -> list[int]:
    """Batch sizes when ``waiting`` stores queue behind a held first one, at ``max_items``."""
    store = BatchingStore()
    commits = GroupCommit(store, max_items=max_items)
    store.hold = trio.Event()

    async def one(n: int) -> None:
        ref = SpaceRef(layer="org", space=f"space-{n}", org="bank_17")
        stored = await commits.store_changes(
            ref,
            ChangeSet(created={"a.md": b"a"}),
            cursor=None,
            provenance=Provenance(session=f"s{n}", turn="t"),
        )
        assert stored.status == "saved"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, 0)
        await store.started.wait()
        for n in range(1, waiting + 1):
            nursery.start_soon(one, n)
        await queued(commits, waiting)
        hold, store.hold = store.hold, None
        hold.set()
    assert (commits.batches, commits.items) == (len(store.batches), waiting + 1)
    return [len(batch) for batch in store.batches]


async def test_store_batch_max_takes_that_many_at_once_and_the_rest_in_the_next_batch() -> None:
    assert await queued_batches(max_items=3, waiting=3) == [1, 3]  # at the cap: one batch
    assert await queued_batches(max_items=3, waiting=4) == [1, 3, 1]  # past it: one more
    assert await queued_batches(max_items=1, waiting=2) == [1, 1, 1]  # 1: one at a time


def test_a_batch_holds_at_least_one_item() -> None:
    with pytest.raises(ValueError, match="at least one"):
        GroupCommit(BatchingStore(), max_items=0)


def test_store_batch_max_defaults_to_32_and_below_1_is_a_config_error(tmp_path: Path) -> None:
    assert load_config(None, env={}).store_batch_max == DEFAULT_STORE_BATCH_MAX == 32
    config = tmp_path / "memfs.toml"
    config.write_text("store_batch_max = 1\n")
    assert load_config(config, env={}).store_batch_max == 1
    config.write_text("store_batch_max = 0\n")
    with pytest.raises(memfs.ConfigError, match="store_batch_max"):
        load_config(config, env={})


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_concurrent_turn_ends_on_a_sql_store_share_commits_and_every_one_is_saved(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The SQL stores take batches (one transaction, one commit): ten turn ends
    # at once are answered in fewer commits than items, and every file is there.
    if kind == "sqlite":
        store: SqlStore = SqliteStore(tmp_path / "memfs.db")
    else:
        databases: Databases = request.getfixturevalue("postgres_databases")
        store = databases.store()
    try:
        memory = rules_desk(store, tmp_path)
        assert memory.commits is not None
        turns = [await start(memory, f"s{i}") for i in range(10)]
        async with trio.open_nursery() as nursery:
            for turn in turns:
                nursery.start_soon(turn.end)
        assert memory.commits.items == 10  # ten stores, each with its turn's trace
        assert memory.commits.batches < memory.commits.items
        ref = SpaceRef(layer="org", space="lending-rules", org="bank_17")
        assert await store.files(ref) == {f"s{i}.md": f"by s{i}".encode() for i in range(10)}
        assert len(await store.traces()) == 10
    finally:
        await store.aclose()


async def test_a_turn_alone_whose_one_space_is_stored_commits_its_store_and_trace_once(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "memfs.db")
    try:
        memory = memfs.Memory(
            store,
            [
                memfs.org_memory(space="lending-rules", org="bankId", review="none"),
                memfs.user_memory(org="bankId"),
            ],
            workdir=tmp_path / "work",
        )
        assert memory.commits is not None
        turn = await start(memory, "s1")  # writes to the org space only
        result = await turn.end()
        assert result.spaces["lending-rules"].status == "saved"
        assert list(result.spaces) == ["lending-rules", "me"]  # in the specs' order
        assert (memory.commits.batches, memory.commits.items) == (1, 1)
        [trace] = await store.traces(session="s1")
        assert trace.mounts["lending-rules"].saved == ("s1.md",)
        assert trace.mounts["me"].saved == ()
        # Two spaces stored: each its own commit, then the trace its own.
        both = await memory.start_turn("s2", BODY)
        (both.root / "lending-rules" / "s2.md").write_bytes(b"org")
        (both.root / "me" / "mine.md").write_bytes(b"mine")
        await both.end()
        assert (memory.commits.batches, memory.commits.items) == (4, 4)
        assert len(await store.traces(session="s2")) == 1
    finally:
        await store.aclose()


class TraceFailingStore(BatchingStore):
    """Its first trace recorded with a store fails (the store undone with it)."""

    failed = False

    async def _batch(
        self, items: Sequence[StoreRequest | Trace]
    ) -> list[Stored | Exception | None]:
        if not self.failed and any(
            isinstance(item, StoreRequest) and item.trace is not None for item in items
        ):
            self.failed = True
            return [TraceFailed("the trace's insert failed") for _ in items]
        return await super()._batch(items)


async def test_a_trace_that_fails_with_its_store_is_stored_without_it_then_traced_alone(
    tmp_path: Path,
) -> None:
    store = TraceFailingStore()
    seed(store, RULES, {"a.md": b"a"})
    reported: list[tuple[str, str]] = []
    memory = memfs.Memory(
        store,
        [memfs.org_memory(space="lending-rules", org="bankId", review="none")],
        workdir=tmp_path / "work",
        on_error=lambda exc, space: reported.append((space, str(exc))),
    )
    result = await (await start(memory, "s1")).end()
    assert result.spaces["lending-rules"].status == "saved"
    assert (await store.files(RULES))["s1.md"] == b"by s1"
    assert [trace.session for trace in await store.traces()] == ["s1"]
    assert reported == [("trace", "the trace's insert failed")]
