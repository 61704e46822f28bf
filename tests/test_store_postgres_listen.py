"""Notices of changed spaces (LISTEN/NOTIFY): one per changed space and commit, a hint only.

The daemons that share a database listen for them (tests/test_daemon_process_postgres.py);
these pin the store's side: what sends a notice, what it carries, that a
listener hears only its own schema's, and that a dropped listening
connection says so and listens again once opened.
"""

from __future__ import annotations

import os

import psycopg
import pytest
import trio

from memfs.core.errors import StoreUnavailable
from memfs.core.models import ChangeSet, SpaceRef
from memfs.stores.postgres.listen import APPLICATION_NAME, SpaceListener, SpaceNotice, parse_notice
from tests.postgres_fixtures import DATABASE, Databases
from tests.test_store_manifests import ADA, DANA, ORG, save


async def heard(listener: SpaceListener, seconds: float = 0.5) -> list[SpaceNotice]:
    return await trio.to_thread.run_sync(listener.wait, seconds)


async def test_a_write_sends_one_notice_naming_its_space_however_many_files_it_wrote(
    postgres_databases: Databases,
) -> None:
    store = postgres_databases.store()
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))  # the schema exists
    listener = store.listener()
    try:
        await trio.to_thread.run_sync(listener.open)
        files = {f"f{i}.md": b"x" for i in range(20)}
        await save(store, ORG, ChangeSet(created=files))
        notices = await heard(listener)
        assert [notice.ref for notice in notices] == [ORG]
        assert await heard(listener, 0.1) == []  # nothing changed since
    finally:
        listener.close()
        await store.aclose()


async def test_forgetting_a_person_sends_a_notice_of_their_space(
    postgres_databases: Databases,
) -> None:
    store = postgres_databases.store()
    await save(store, DANA, ChangeSet(created={"prefs.md": b"terse"}))
    listener = store.listener()
    try:
        await trio.to_thread.run_sync(listener.open)
        await store.forget_user("dana", "bank", by=ADA)
        assert DANA in [notice.ref for notice in await heard(listener)]
    finally:
        listener.close()
        await store.aclose()


async def test_a_listener_hears_only_its_own_schemas_notices(
    postgres_databases: Databases,
) -> None:
    ours, theirs = postgres_databases.store(), postgres_databases.store()
    await save(ours, ORG, ChangeSet(created={"a.md": b"a"}))
    await save(theirs, ORG, ChangeSet(created={"a.md": b"a"}))
    listener = ours.listener()
    try:
        await trio.to_thread.run_sync(listener.open)
        await save(theirs, ORG, ChangeSet(updated={"a.md": b"theirs"}))
        assert await heard(listener) == []
        await save(ours, ORG, ChangeSet(updated={"a.md": b"ours"}))
        assert [notice.ref for notice in await heard(listener)] == [ORG]
    finally:
        listener.close()
        await ours.aclose()
        await theirs.aclose()


async def test_a_terminated_listening_connection_is_unavailable_and_listens_again_when_opened(
    postgres_databases: Databases,
) -> None:
    url = postgres_databases.url()
    store = postgres_databases.open(url)
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    listener = store.listener()
    try:
        await trio.to_thread.run_sync(listener.open)
        with psycopg.connect(url, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND query ILIKE 'LISTEN%%'",
                (f"{APPLICATION_NAME}:{os.getpid()}",),
            ).fetchall()
        assert killed and all(ok for (ok,) in killed)
        with pytest.raises(StoreUnavailable, match="stopped listening"):
            await heard(listener)
        assert not listener.connected
        await trio.to_thread.run_sync(listener.open)
        await save(store, ORG, ChangeSet(updated={"a.md": b"b"}))
        assert [notice.ref for notice in await heard(listener)] == [ORG]
    finally:
        listener.close()
        await store.aclose()


async def test_a_notice_drops_a_persons_cached_manifest_and_every_load_is_still_fresh(
    postgres_databases: Databases,
) -> None:
    store = postgres_databases.store()
    other = postgres_databases.open(store.url)
    listener = store.listener()
    dana = SpaceRef(layer="user", space="me", org=ORG.org, user="dana")
    try:
        await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
        await save(store, dana, ChangeSet(created={"p.md": b"p"}))
        first = (await store.load_lean(ORG, "s1", set())).lineage
        await store.load_lean(dana, "s1", set())
        assert store._lean.files == 2
        await trio.to_thread.run_sync(listener.open)
        await save(other, ORG, ChangeSet(created={"b.md": b"b"}))
        await save(other, dana, ChangeSet(created={"q.md": b"q"}))
        store.notified(await heard(listener))
        # A person's names go at once; shared memory's manifest is refreshed
        # at the next load from the rows that moved, its lineage going on.
        assert store._lean.files == 1
        await save(other, ORG, ChangeSet(created={"c.md": b"c"}))  # no notice heard of this
        now = await store.load_lean(ORG, "s2", set())
        assert sorted(now.files) == ["a.md", "b.md", "c.md"]
        assert first is not None and now.lineage is not None
        assert now.lineage.moved_since(first.line, first.version) == frozenset({"b.md", "c.md"})
        assert sorted((await store.load_lean(dana, "s2", set())).files) == ["p.md", "q.md"]
    finally:
        listener.close()
        await other.aclose()
        await store.aclose()


@pytest.mark.parametrize(
    "payload",
    ["", "not json", "[]", '{"schema": "s1"}', '{"schema": "s1", "id": "x", "layer": "org"}'],
)
def test_a_payload_memfs_did_not_send_is_ignored(payload: str) -> None:
    assert parse_notice(payload, "s1") is None


async def test_a_listener_over_tcp_hears_notices_as_over_the_socket(
    postgres_databases: Databases,
) -> None:
    socket_url = postgres_databases.url()
    query = socket_url.split("?", 1)[1]  # the schema of its own
    tcp_url = f"{postgres_databases.server.tcp_url(DATABASE)}?{query}"
    store, other = postgres_databases.open(tcp_url), postgres_databases.open(socket_url)
    await save(store, ORG, ChangeSet(created={"a.md": b"a"}))
    listener = store.listener()
    try:
        await trio.to_thread.run_sync(listener.open)  # keepalives and tcp_user_timeout taken
        await save(other, ORG, ChangeSet(updated={"a.md": b"b"}))
        assert [notice.ref for notice in await heard(listener)] == [ORG]
    finally:
        listener.close()
        await other.aclose()
        await store.aclose()
