"""A person's memory sealed in PostgreSQL: no copy the server keeps holds it readable.

Forgetting reaches every copy PostgreSQL keeps: heap pages, the WAL, a dump taken before.

A row deleted in PostgreSQL lives on in its heap pages until they are reused,
in the WAL, on replicas and in backups. So a person's memory is never written
in readable form at all (``memfs.stores.sql.sealed``): these tests read the
server's files and a ``pg_dump`` as raw bytes, on a server of their own so
the bytes are only this store's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memfs.core.errors import ConfigError
from memfs.core.models import (
    By,
    ChangeSet,
    Provenance,
    SpaceRef,
    Trace,
    TraceFile,
    TraceMount,
    digest,
)
from memfs.stores.postgres import PostgresStore, schema
from memfs.testing.postgres import ThrowawayPostgres, postgres_bindir, throwaway_postgres

DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
RULES = SpaceRef(layer="org", space="rules", org="bank-1")
# Each marker is unique, so finding it anywhere can only mean this store wrote it.
NAME = "okapi-diagnosis-5c1e.md"
CONTENT = b"narwhal-condition-93ab: the person's own words"
PROMPT = "remember that my loan is quetzal-7d42"
LABEL = "Dana Tapir-0b6f"
FOLDER = "axolotl-drafts-2e90"
ORG_CONTENT = b"heron-org-rule-41fa: the org's own, kept in the clear"
SECRETS = (NAME.encode(), CONTENT, PROMPT.encode(), LABEL.encode(), FOLDER.encode())


@pytest.fixture(scope="module")
def server(postgres_server: ThrowawayPostgres) -> Iterator[ThrowawayPostgres]:
    """A server of this module's own: its data folder holds only what these tests wrote."""
    bindir = postgres_bindir()
    assert bindir is not None  # postgres_server skipped or failed the run otherwise
    with throwaway_postgres(bindir) as own:
        yield own


def readable(blob: bytes, secret: bytes) -> bool:
    """Whether ``secret`` is in ``blob`` as itself or as a dump writes bytea (hex)."""
    return secret in blob or secret.hex().encode() in blob


def raw_bytes(folder: Path) -> bytes:
    """Every file under ``folder`` (heap pages, the WAL, everything), concatenated."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def checkpoint(url: str) -> None:
    # Dirty pages to the heap files, so the scan sees the tables and not only the WAL.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")


async def remember(store: PostgresStore) -> None:
    """Dana teaches her agent: a file, a folder, a turn record and a trace, all hers."""
    said = Provenance(
        origin="conversation", session="s1", turn="t1", prompt=PROMPT, by=By(id="dana", label=LABEL)
    )
    await store.put(RULES, ChangeSet(created={"rules.md": ORG_CONTENT}), provenance=Provenance())
    loaded = await store.load(DANA, "s1")
    stored = await store.store(
        DANA,
        ChangeSet(created={NAME: CONTENT}, folders_created=(FOLDER,)),
        cursor=loaded.cursor,
        provenance=said,
    )
    assert stored.status == "saved"
    await store.record_trace(
        Trace(
            session="s1",
            turn="t1",
            prompt=PROMPT,
            mounts={
                "me": TraceMount(
                    ref=DANA,
                    read_only=False,
                    from_last_known_copy=False,
                    snapshot={NAME: stored.revisions[NAME]},
                    status="saved",
                    saved=(NAME,),
                ),
                "rules": TraceMount(
                    ref=RULES,
                    read_only=True,
                    from_last_known_copy=False,
                    snapshot={},
                    status="saved",
                ),
            },
            files={f"me/{NAME}": TraceFile(wrote=True), "rules/rules.md": TraceFile(read="1")},
        )
    )


async def test_a_persons_memory_is_in_no_file_of_the_server_and_no_dump_before_or_after_forget(
    server: ThrowawayPostgres, tmp_path: Path
) -> None:
    url = server.new_database()
    store = PostgresStore(url, key_file=tmp_path / "store.key")
    try:
        await remember(store)
        # Through the store, all of it reads back.
        assert await store.files(DANA) == {NAME: CONTENT}
        assert (await store.load(DANA, "s1")).folders == (FOLDER,)
        [revision] = await store.history(DANA, NAME)
        assert (revision.provenance.prompt, revision.provenance.by) == (
            PROMPT,
            By(id="dana", label=LABEL),
        )
        [trace] = await store.traces()
        assert trace.prompt == PROMPT and set(trace.mounts) == {"me", "rules"}

        # A backup taken now: a plain-SQL dump, every row as text.
        dump = tmp_path / "before.sql"
        subprocess.run(
            [str(server.bindir / "pg_dump"), "--file", str(dump), url], check=True, timeout=60
        )
        checkpoint(url)
        before = raw_bytes(server.data)
        # The scans see what is kept in the clear.
        assert readable(before, ORG_CONTENT) and readable(dump.read_bytes(), ORG_CONTENT)
        for secret in SECRETS:
            assert not readable(before, secret), secret
            assert not readable(dump.read_bytes(), secret), secret

        forgot = await store.forget_user("dana", "bank-1", by=None)
        assert forgot.spaces == (DANA,)
        assert await store.files(DANA) == {}
        [trace] = await store.traces()
        assert trace.prompt is None and set(trace.mounts) == {"rules"}
    finally:
        await store.aclose()

    # The dump from before, restored after the forget into a database of its own.
    restored = server.new_database()
    subprocess.run(
        [str(server.bindir / "psql"), "--quiet", "--file", str(dump), restored],
        check=True,
        timeout=60,
        capture_output=True,
    )
    checkpoint(url)
    checkpoint(restored)
    after = raw_bytes(server.data)
    assert after.count(ORG_CONTENT) >= 2  # the store's copy and the restored one
    for secret in SECRETS:
        assert not readable(after, secret), secret


async def test_a_second_store_on_the_database_with_another_key_is_refused_naming_the_key_file(
    server: ThrowawayPostgres, tmp_path: Path
) -> None:
    url = server.new_database()
    ours = PostgresStore(url, key_file=tmp_path / "a.key")
    theirs = PostgresStore(url, key_file=tmp_path / "b.key")
    try:
        await ours.put(RULES, ChangeSet(created={"r.md": b"r"}), provenance=Provenance())
        with pytest.raises(ConfigError, match="store_key_file") as refused:
            await theirs.files(RULES)
        assert str(tmp_path / "b.key") in str(refused.value)
        assert await ours.files(RULES) == {"r.md": b"r"}  # the store itself is untouched
    finally:
        await ours.aclose()
        await theirs.aclose()


def older_memfs_database(
    url: str, name: str, content: bytes, *, prompt: str | None = None, label: str | None = None
) -> None:
    """Make ``url`` a database as memfs left it before sealing: Dana's ``name`` in the clear."""
    before_sealing = schema.MIGRATIONS[: schema.MIGRATIONS.index(schema._SEALING)]
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(schema._BOOKKEEPING)
        for number, step in enumerate(before_sealing, start=1):
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO memfs_migrations (version, name) VALUES (%s, %s)", (number, step.name)
            )
        conn.execute(
            'INSERT INTO spaces (layer, org, "user", space)'
            " VALUES ('user', 'bank-1', 'dana', 'me')"
        )
        conn.execute(
            "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin, prompt,"
            " by_id, by_label, created_at) SELECT nextval('clock'), id, %s, %s, %s, %s,"
            " 'conversation', %s, 'dana', %s, now() FROM spaces",
            (name, content, digest(content), len(content), prompt, label),
        )
        conn.execute(
            "INSERT INTO live (space_id, path, revision_id)"
            " SELECT space_id, path, id FROM revisions"
        )


async def test_a_database_an_older_memfs_kept_in_the_clear_is_sealed_at_the_first_open(
    server: ThrowawayPostgres, tmp_path: Path
) -> None:
    url = server.new_database()
    older_memfs_database(url, NAME, CONTENT, prompt=PROMPT, label=LABEL)
    checkpoint(url)
    assert CONTENT in raw_bytes(server.data)  # what an older memfs left readable

    store = PostgresStore(url, key_file=tmp_path / "store.key")
    try:
        assert await store.files(DANA) == {NAME: CONTENT}
        [revision] = await store.history(DANA, NAME)
        assert revision.provenance.prompt == PROMPT
        assert revision.provenance.by == By(id="dana", label=LABEL)
    finally:
        await store.aclose()
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT path, content, prompt, by_label FROM revisions").fetchall()
    [(path, content, prompt, label)] = rows
    assert path != NAME and path.startswith("~")
    for kept, secret in ((content, CONTENT), (prompt, PROMPT.encode()), (label, LABEL.encode())):
        assert secret not in bytes(kept)
