"""A person's memory sealed in the SQLite store, and the store key file that opens it.

Checked on the raw bytes of the database file: a person's contents, prompts
and labels are never in it in the clear, a store opened with another key is
refused at open, and forgetting a person deletes their key with their rows.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memfs.core import sealing
from memfs.core.errors import ConfigError
from memfs.core.models import (
    By,
    ChangeSet,
    Provenance,
    SpaceRef,
    Stored,
    Trace,
    TraceFile,
    TraceMount,
    digest,
)
from memfs.core.sealing import SealBroken
from memfs.stores.keyfile import load_store_key
from memfs.stores.open import open_store
from memfs.stores.sqlite import SqliteStore
from tests.test_store_sqlite import _file_bytes, raw, save, schema_at

ORG = SpaceRef(layer="org", space="lending-rules", org="bank-1")
DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
CAROL = SpaceRef(layer="user", space="me", org="bank-1", user="carol")
SAID = Provenance(
    session="s1",
    turn="t1",
    prompt="kestrel-44a1: remember my diagnosis",
    by=By(id="dana", label="heron-label-9c2e", role="underwriter"),
    at=datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC),
)


async def test_a_persons_content_prompt_and_label_are_never_in_the_file_in_the_clear(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    loaded = await store.load(DANA, "s1")
    await store.store(
        DANA, ChangeSet(created={"a.md": b"marmot-31f0"}), cursor=loaded.cursor, provenance=SAID
    )
    await save(store, ORG, ChangeSet(created={"rules.md": b"org-rule-visible"}))
    assert await store.files(DANA) == {"a.md": b"marmot-31f0"}
    [revision] = await store.history(DANA, "a.md")
    assert revision.provenance.prompt == SAID.prompt
    assert revision.provenance.by == SAID.by
    while_open = _file_bytes(path)
    await store.aclose()
    for seen in (while_open, _file_bytes(path)):
        for secret in (b"marmot-31f0", b"kestrel-44a1", b"heron-label-9c2e"):
            assert secret not in seen, secret
    # The org's memory is not a person's: forgetting never reaches it, so it is not sealed.
    assert b"org-rule-visible" in _file_bytes(path)
    with raw(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM person_keys").fetchone()[0] == 1
        (wrapped,) = conn.execute("SELECT wrapped FROM person_keys").fetchone()
    assert load_store_key(store.key_file) not in _file_bytes(path)
    assert len(wrapped) == 1 + sealing.NONCE_BYTES + 32 + 16


async def test_forget_user_deletes_the_persons_key_with_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={"a.md": b"dana's"}))
    await save(store, CAROL, ChangeSet(created={"c.md": b"carol's"}))
    with raw(path) as conn:
        (wrapped,) = conn.execute(
            "SELECT wrapped FROM person_keys WHERE \"user\" = 'dana'"
        ).fetchone()
    await store.forget_user("dana", "bank-1", by=None)
    with raw(path) as conn:
        users = [row[0] for row in conn.execute('SELECT "user" FROM person_keys')]
    assert users == ["carol"]
    assert bytes(wrapped) not in _file_bytes(path)
    assert await store.files(CAROL) == {"c.md": b"carol's"}
    # Their memory starts again under a new key, never the forgotten one.
    await save(store, DANA, ChangeSet(created={"new.md": b"again"}))
    with raw(path) as conn:
        (again,) = conn.execute(
            "SELECT wrapped FROM person_keys WHERE \"user\" = 'dana'"
        ).fetchone()
    key = load_store_key(store.key_file)
    assert sealing.unwrap_person_key(key, "bank-1", "dana", bytes(again)) != (
        sealing.unwrap_person_key(key, "bank-1", "dana", bytes(wrapped))
    )
    await store.aclose()


async def test_a_sealed_row_moved_to_another_person_does_not_open(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    await save(store, DANA, ChangeSet(created={"a.md": b"dana's secret"}))
    await save(store, CAROL, ChangeSet(created={"a.md": b"carol's"}))
    await store.aclose()
    with raw(path) as conn:
        rows = conn.execute("SELECT id, content FROM revisions ORDER BY id").fetchall()
        conn.execute("UPDATE revisions SET content = ? WHERE id = ?", (rows[0][1], rows[1][0]))
    store = SqliteStore(path)
    with pytest.raises(SealBroken):
        await store.files(CAROL)
    assert await store.files(DANA) == {"a.md": b"dana's secret"}
    await store.aclose()


def test_a_missing_key_file_is_made_0600_with_a_fresh_key(tmp_path: Path) -> None:
    os.umask(0o022)
    first = load_store_key(tmp_path / "keys" / "store.key")
    info = (tmp_path / "keys" / "store.key").stat()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert len(first) == sealing.KEY_BYTES
    assert load_store_key(tmp_path / "keys" / "store.key") == first  # never made twice
    assert load_store_key(tmp_path / "other.key") != first
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == ["store.key"]


async def test_a_store_opened_with_another_key_is_refused_at_open_naming_store_key_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path, key_file=tmp_path / "right.key")
    await save(store, DANA, ChangeSet(created={"a.md": b"dana's"}))
    await store.aclose()
    before = _file_bytes(path)
    wrong = SqliteStore(path, key_file=tmp_path / "wrong.key")
    with pytest.raises(ConfigError, match="store_key_file") as caught:
        await wrong.files(DANA)
    assert caught.value.path == str(tmp_path / "wrong.key")
    with pytest.raises(ConfigError, match="store_key_file"):
        wrong.migrate()
    await wrong.aclose()
    assert _file_bytes(path) == before  # refused before anything was written
    right = open_store(f"sqlite://{path}", key_file=tmp_path / "right.key")
    assert isinstance(right, SqliteStore)
    assert await right.files(DANA) == {"a.md": b"dana's"}
    await right.aclose()


def test_a_key_file_that_holds_no_key_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "store.key").write_text("not a key\n")
    with pytest.raises(ConfigError, match="store_key_file") as caught:
        SqliteStore(tmp_path / "memfs.db")
    assert caught.value.path == str(tmp_path / "store.key")
    assert not (tmp_path / "memfs.db").exists()


async def test_migration_from_v10_seals_a_persons_rows_written_in_the_clear(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    schema_at(path, 10)
    with raw(path) as conn:
        conn.execute("BEGIN IMMEDIATE")
        for space_id, layer, user, space in [(1, "user", "dana", "me"), (2, "org", "", "rules")]:
            conn.execute(
                'INSERT INTO spaces (id, layer, org, "user", space) VALUES (?, ?, ?, ?, ?)',
                (space_id, layer, "bank-1", user, space),
            )
        for revision_id, space_id, file, content, prompt, label in [
            (1, 1, "a.md", b"lynx-old-7d2b", "puffin-prompt-5e0a", "puffin-label"),
            (2, 2, "r.md", b"org-rule-old", "an org prompt", "an org label"),
        ]:
            conn.execute("INSERT INTO clock DEFAULT VALUES")
            conn.execute(
                "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin,"
                " prompt, by_id, by_label, created_at, mode, mtime_ns, ctime_ns)"
                " VALUES (?, ?, ?, ?, ?, ?, 'conversation', ?, 'dana', ?,"
                " '2025-01-01T00:00:00+00:00', 420, 0, 0)",
                (
                    revision_id,
                    space_id,
                    file,
                    content,
                    digest(content),
                    len(content),
                    prompt,
                    label,
                ),
            )
            conn.execute(
                "INSERT INTO live (space_id, path, revision_id) VALUES (?, ?, ?)",
                (space_id, file, revision_id),
            )
        conn.execute("DELETE FROM clock")
        conn.execute("COMMIT")
    assert b"lynx-old-7d2b" in _file_bytes(path)

    store = SqliteStore(path)
    dana = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
    rules = SpaceRef(layer="org", space="rules", org="bank-1")
    assert await store.files(dana) == {"a.md": b"lynx-old-7d2b"}
    [revision] = await store.history(dana, "a.md")
    assert revision.provenance.prompt == "puffin-prompt-5e0a"
    assert revision.provenance.by == By(id="dana", label="puffin-label")
    assert await store.files(rules) == {"r.md": b"org-rule-old"}
    await save(store, dana, ChangeSet(updated={"a.md": b"new"}))
    await store.aclose()
    after = _file_bytes(path)
    for secret in (b"lynx-old-7d2b", b"puffin-prompt-5e0a", b"puffin-label"):
        assert secret not in after, secret
    assert b"org-rule-old" in after  # an org's content is the org's, in the clear
    assert b"an org prompt" not in after  # its author's words are sealed under their key
    with raw(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT sealed FROM revisions ORDER BY id").fetchall() == [
            (1,),
            (2,),  # the org's revision: only its author's words are sealed
            (1,),
        ]


def test_two_stores_on_one_file_open_with_one_key_file(tmp_path: Path) -> None:
    path = tmp_path / "memfs.db"
    SqliteStore(path).migrate()
    SqliteStore(path, key_file=tmp_path / "store.key").migrate()  # the default, named
    with sqlite3.connect(path) as conn:
        (check,) = conn.execute("SELECT value FROM store_key_check").fetchone()
    assert check == sealing.key_check(load_store_key(tmp_path / "store.key"))


async def test_migration_from_v11_seals_a_persons_file_names_turn_records_and_traces(
    tmp_path: Path,
) -> None:
    # Schema 11 sealed contents; paths, turn records and traces were kept in the clear.
    path = tmp_path / "memfs.db"
    schema_at(path, 11)
    dana = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
    rules = SpaceRef(layer="org", space="rules", org="bank-1")
    name, folder, prompt = "tapir-diagnosis-3f9e.md", "margay-notes-61c4", "kiwi-prompt-0d7a"
    stored = Stored(status="saved", revisions={name: "1"}, cursor="1")
    trace = Trace(
        session="s1",
        turn="t1",
        prompt=prompt,
        mounts={
            "me": TraceMount(
                ref=dana, read_only=False, from_last_known_copy=False, snapshot={}, status="saved"
            ),
            "rules": TraceMount(
                ref=rules, read_only=True, from_last_known_copy=False, snapshot={}, status="saved"
            ),
        },
        files={f"me/{name}": TraceFile(wrote=True), "rules/heron.md": TraceFile(read="2")},
    )
    with raw(path) as conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO spaces (id, layer, org, \"user\", space) VALUES (1, 'user', 'bank-1',"
            " 'dana', 'me')"
        )
        conn.execute("INSERT INTO clock DEFAULT VALUES")
        conn.execute(
            "INSERT INTO revisions (id, space_id, path, content, sha256, size, origin, session,"
            " turn, prompt, created_at, mode, mtime_ns, ctime_ns)"
            " VALUES (1, 1, ?, ?, ?, ?, 'conversation', 's1', 't1', ?,"
            " '2025-01-01T00:00:00+00:00', 420, 0, 0)",
            (name, b"dugong-old", digest(b"dugong-old"), len(b"dugong-old"), prompt),
        )
        conn.execute("INSERT INTO live (space_id, path, revision_id) VALUES (1, ?, 1)", (name,))
        conn.execute("INSERT INTO folders (space_id, path) VALUES (1, ?)", (folder,))
        conn.execute(
            "INSERT INTO stored_turns (space_id, session, turn, changes, stored)"
            " VALUES (1, 's1', 't1', 'fp', ?)",
            (stored.model_dump_json(),),
        )
        conn.execute(
            "INSERT INTO traces (session, turn, at, data) VALUES ('s1', 't1', ?, ?)",
            ("2025-01-01T00:00:00+00:00", trace.model_dump_json()),
        )
        conn.execute("DELETE FROM clock")
        conn.execute("COMMIT")
    assert name.encode() in _file_bytes(path)

    store = SqliteStore(path)
    try:
        assert await store.files(dana) == {name: b"dugong-old"}
        assert (await store.load(dana, "s1")).folders == (folder,)
        [kept] = await store.traces()
        assert kept == trace
        again = ChangeSet(created={name: b"dugong-old"})
        provenance = Provenance(origin="conversation", session="s1", turn="t1")
        with pytest.MonkeyPatch.context() as patch:
            # The turn record opens: a repeated turn end is answered from it.
            patch.setattr(ChangeSet, "fingerprint", lambda self: "fp")
            assert await store.store(dana, again, cursor="1", provenance=provenance) == stored
    finally:
        await store.aclose()
    after = _file_bytes(path)
    for secret in (name.encode(), folder.encode(), prompt.encode(), b"dugong-old"):
        assert secret not in after, secret
    assert b"heron.md" in after  # the org's part of the trace is the org's record
    with raw(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT sealing FROM store_key_check").fetchone() == (2,)
