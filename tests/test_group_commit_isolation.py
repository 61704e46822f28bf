"""Group commit isolation: one batched turn's bug or odd data never sinks the others.

A SQL store commits concurrent turn ends in one transaction
(``memfs.stores.sql.files._store_batch``), each item under a savepoint. An
item whose rows cannot be built (a ``TypeError``, ``ValueError``,
``UnicodeEncodeError`` ... from the code making them) is undone alone,
logged once at ERROR with its traceback, and answered ``StoreUnavailable``:
its turn keeps its files for a later end, the others are saved. An error of
the database driver itself still fails the whole batch (the transaction or
the connection may be broken), as does a failed commit.

The fault is real code failing for one item: the function that builds a
revision's row (``rows._revision_row``) raises for one path only.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

import memfs
from memfs.core.errors import StoreUnavailable, TraceFailed
from memfs.core.models import By, ChangeSet, Provenance, SpaceRef, Stored, Trace, TraceMount
from memfs.stores.base import StoreRequest
from memfs.stores.postgres import PostgresStore
from memfs.stores.sql import files, rows
from memfs.stores.sql import store as sql_store
from memfs.stores.sql.store import SqlStore
from memfs.stores.sql.traces import _record_trace as record_trace
from tests.postgres_fixtures import SqlOpener
from tests.test_group_commit import queued, rules_desk, start

ORG = SpaceRef(layer="org", org="bank_17", space="lending-rules")
CAROL = SpaceRef(layer="user", org="bank_17", user="carol", space="me")
DANA = SpaceRef(layer="user", org="bank_17", user="dana", space="me")
POISON = "poison.md"
ITEM_FAILED = r"memfs\.stores\.sql\.files: .*undone alone"


def poison(monkeypatch: pytest.MonkeyPatch, path: str, error: Callable[[], Exception]) -> None:
    """Building the revision row of ``path`` raises ``error()``; every other row is built."""
    real = rows._revision_row

    def building(db: Any, space_id: int, revision_id: int, name: str, *a: Any, **k: Any) -> Any:
        if name == path:
            raise error()
        return real(db, space_id, revision_id, name, *a, **k)

    monkeypatch.setattr(rows, "_revision_row", building)


def odd_text() -> Exception:
    return UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")


def prov(session: str) -> Provenance:
    return Provenance(
        session=session, turn="t1", prompt="remember this", by=By(id="dana", label="Dana")
    )


def request_of(ref: SpaceRef, path: str, session: str, **kw: Any) -> StoreRequest:
    return StoreRequest(
        ref, ChangeSet(created={path: f"by {session}".encode()}), None, prov(session), **kw
    )


def trace_of(session: str, ref: SpaceRef) -> Trace:
    return Trace(
        session=session,
        turn="t1",
        prompt="remember this",
        mounts={
            "m": TraceMount(
                ref=ref,
                read_only=False,
                from_last_known_copy=False,
                snapshot={},
                status="saved",
            )
        },
        files={},
    )


def item_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR and r.name == "memfs.stores.sql.files"
    ]


@pytest.mark.error_log(ITEM_FAILED)
async def test_an_item_whose_rows_raise_a_non_store_error_fails_alone_and_answers_store_unavailable(
    sql_opener: SqlOpener, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = sql_opener()
    try:
        poison(monkeypatch, POISON, odd_text)
        traced: list[Stored] = []

        def trace(stored: Stored) -> Trace:
            traced.append(stored)
            return trace_of("s2", CAROL)

        def poisoned() -> StoreRequest:
            # A person's space: the item makes its key, its names, a folder... all undone.
            return StoreRequest(
                CAROL,
                ChangeSet(created={"fine.md": b"fine", POISON: b"x"}, folders_created=("notes",)),
                None,
                prov("s2"),
                trace=trace,
            )

        answers = await store.store_batch(
            [
                request_of(ORG, "a.md", "s1"),
                poisoned(),
                request_of(DANA, "d.md", "s3"),
            ]
        )
        assert isinstance(answers[0], Stored) and answers[0].status == "saved"
        assert isinstance(answers[2], Stored) and answers[2].status == "saved"
        failed = answers[1]
        # Retryable (the engine keeps the space), and not TraceFailed: the trace is not why.
        assert isinstance(failed, StoreUnavailable) and not isinstance(failed, TraceFailed)
        assert isinstance(failed.__cause__, UnicodeEncodeError)
        assert failed.path == "me"
        assert traced == []
        # Nothing of the poisoned item is stored; the others are.
        assert await store.files(ORG) == {"a.md": b"by s1"}
        assert await store.files(DANA) == {"d.md": b"by s3"}
        assert await store.files(CAROL) == {}
        assert await store.history(CAROL, "fine.md") == []
        assert (await store.load(CAROL, "s2")).folders == ()
        assert [t.session for t in await store.traces()] == []
        # Logged once, at ERROR, with its traceback.
        [logged] = item_failures(caplog)
        assert logged.exc_info is not None and logged.exc_info[1] is failed.__cause__
        # Retryable indeed: the same item again, once the fault is gone, is saved.
        monkeypatch.undo()
        [again] = await store.store_batch([poisoned()])
        assert isinstance(again, Stored) and again.status == "saved"
        assert await store.files(CAROL) == {"fine.md": b"fine", POISON: b"x"}
        assert [t.session for t in await store.traces()] == ["s2"]
    finally:
        await store.aclose()


@pytest.mark.error_log(ITEM_FAILED)
@pytest.mark.parametrize(
    "error", [TypeError, ValueError, KeyError, AttributeError], ids=lambda e: e.__name__
)
async def test_any_non_store_error_of_one_item_leaves_the_rest_of_its_batch_saved(
    sql_opener: SqlOpener, monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    store = sql_opener()
    try:
        poison(monkeypatch, POISON, lambda: error("one item's odd data"))
        answers = await store.store_batch(
            [
                request_of(ORG, "a.md", "s1"),
                request_of(ORG, POISON, "s2"),
                trace_of("s1", ORG),
                request_of(ORG, "c.md", "s3"),
            ]
        )
        assert isinstance(answers[0], Stored) and answers[2] is None
        assert isinstance(answers[1], StoreUnavailable)
        assert isinstance(answers[1].__cause__, error)
        assert isinstance(answers[3], Stored) and answers[3].status == "saved"
        assert await store.files(ORG) == {"a.md": b"by s1", "c.md": b"by s3"}
        assert [t.session for t in await store.traces()] == ["s1"]
    finally:
        await store.aclose()


@pytest.mark.error_log(ITEM_FAILED)
async def test_a_trace_item_that_raises_a_non_store_error_fails_alone(
    sql_opener: SqlOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sql_opener()
    try:

        def recording(db: Any, trace: Trace) -> None:
            if trace.session == "bad":
                raise ValueError("a trace the store cannot take")
            record_trace(db, trace)

        monkeypatch.setattr(files, "_record_trace", recording)  # the name _store_batch calls
        answers = await store.store_batch(
            [trace_of("bad", ORG), request_of(ORG, "a.md", "s1"), trace_of("s1", ORG)]
        )
        assert isinstance(answers[0], StoreUnavailable) and answers[0].path == "bad"
        assert isinstance(answers[1], Stored) and answers[2] is None
        assert [t.session for t in await store.traces()] == ["s1"]
    finally:
        await store.aclose()


def driver_error(store: SqlStore) -> Exception:
    """What the store's own database driver raises when the disk or the connection fails."""
    if isinstance(store, PostgresStore):
        return psycopg.OperationalError("server closed the connection unexpectedly")
    return sqlite3.OperationalError("database or disk is full")


async def test_a_driver_error_in_one_item_still_fails_the_whole_batch_and_stores_nothing(
    sql_opener: SqlOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sql_opener()
    try:
        poison(monkeypatch, POISON, lambda: driver_error(store))
        with pytest.raises(StoreUnavailable) as raised:
            await store.store_batch(
                [
                    request_of(ORG, "a.md", "s1"),
                    request_of(CAROL, POISON, "s2"),
                    request_of(DANA, "d.md", "s3"),
                ]
            )
        assert isinstance(raised.value.__cause__, sqlite3.Error | psycopg.Error)
        monkeypatch.undo()
        for ref in (ORG, CAROL, DANA):
            assert await store.files(ref) == {}
    finally:
        await store.aclose()


class Gate:
    """Holds the store's first batch before it begins, so later turn ends queue behind it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()
        real = files._store_batch

        def batch(db: Any, items: Sequence[StoreRequest | Trace]) -> Any:
            if not self.entered.is_set():
                self.entered.set()
                if not self.open.wait(10):
                    raise AssertionError("the gate was never opened")
            return real(db, items)

        monkeypatch.setattr(sql_store, "_store_batch", batch)  # the name store_batch calls

    async def wait_entered(self) -> None:
        with trio.fail_after(10):
            while not self.entered.is_set():  # noqa: ASYNC110 - a thread's event
                await trio.sleep(0.01)


@pytest.mark.error_log(ITEM_FAILED)
async def test_a_poisoned_turn_in_a_group_commit_keeps_its_files_and_the_others_are_saved(
    sql_opener: SqlOpener, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = sql_opener()
    try:
        memory = rules_desk(store, tmp_path)
        assert memory.commits is not None
        turns = {s: await start(memory, s) for s in ("s0", "s1", "s2", "s3")}
        poison(monkeypatch, "s2.md", odd_text)  # s2's turn wrote s2.md
        gate = Gate(monkeypatch)
        results: dict[str, memfs.CommitResult] = {}

        async def end(session: str) -> None:
            results[session] = await turns[session].end()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(end, "s0")
            await gate.wait_entered()  # s0's store, alone, is held before it begins
            for session in ("s1", "s2", "s3"):
                nursery.start_soon(end, session)
            await queued(memory.commits, 3)
            gate.open.set()

        # s1, s2 and s3 went in one batch, after s0's.
        assert (memory.commits.batches, memory.commits.items) == (2, 4)
        for session in ("s0", "s1", "s3"):
            assert results[session].spaces["lending-rules"].status == "saved"
        failed = results["s2"].spaces["lending-rules"]
        assert (failed.status, failed.reason, failed.kept) == ("not_saved", "store failed", True)
        assert "the files are kept" in (failed.error or "")
        files = await store.files(ORG)
        assert files == {f"s{i}.md": f"by s{i}".encode() for i in (0, 1, 3)}
        assert (turns["s2"].root / "lending-rules" / "s2.md").read_bytes() == b"by s2"

        monkeypatch.undo()  # the fault is gone: ending the kept turn again stores it
        again = await turns["s2"].end()
        assert again.spaces["lending-rules"].status == "saved"
        assert (await store.files(ORG))["s2.md"] == b"by s2"
    finally:
        await store.aclose()
