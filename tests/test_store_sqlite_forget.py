"""Forgetting leaves nothing of a person in the SQLite file: checked on the raw bytes.

Real turns (``memfs.Memory`` over a ``SqliteStore``) write a person's files
and leave their traces; then their files are forgotten one by one and the
person as a whole, and the database file and its write-ahead log are read
byte for byte: the file names, contents and prompts are nowhere, while the
org's own memory and the audit's record of the acts stay.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import memfs
from memfs.core.models import By, ChangeSet, Provenance, SpaceRef
from memfs.stores.sqlite import SqliteStore

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17"}
CAROL = {"userId": "u_carol", "name": "Carol", "bankId": "bank_17"}
RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")
DANA_ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
ADMIN = By(id="root", role="admin")

FIRST_NAME = "zq-first-diagnosis-name.md"
FIRST_CONTENT = b"zq-first-secret-content"
LATER_NAME = "zq-later-note-name.md"
LATER_CONTENT = b"zq-later-secret-content"
PROMPTS = ("zq-prompt-one-typed-by-dana", "zq-prompt-two-typed-by-dana")


def on_disk(db: Path) -> bytes:
    """Every byte memfs left of the database: the file, its -wal and -shm."""
    found = b""
    for suffix in ("", "-wal", "-shm"):
        part = db.with_name(db.name + suffix)
        if part.exists():
            found += part.read_bytes()
    return found


async def dana_turns(db: Path) -> None:
    store = SqliteStore(db)
    try:
        await store.put(
            RULES, ChangeSet(created={"rules.md": b"org rule"}), provenance=Provenance()
        )
        memory = memfs.Memory(
            store,
            [
                memfs.org_memory(space="lending-rules", org="bankId"),
                memfs.user_memory(org="bankId"),
            ],
            workdir=db.parent / "work",
        )
        turn = await memory.start_turn("s1", DANA, prompt=PROMPTS[0])
        (turn.root / "me" / FIRST_NAME).write_bytes(FIRST_CONTENT)
        (turn.root / "me" / LATER_NAME).write_bytes(LATER_CONTENT + b" v1")
        assert (turn.root / "lending-rules" / "rules.md").read_bytes() == b"org rule"
        await turn.end()
        turn = await memory.start_turn("s1", DANA, prompt=PROMPTS[1])
        (turn.root / "me" / LATER_NAME).write_bytes(LATER_CONTENT + b" v2")
        await turn.end()
        turn = await memory.start_turn("s2", CAROL, prompt="carol's own prompt")
        (turn.root / "me" / "carol.md").write_bytes(b"carol's file")
        await turn.end()
        # secure_delete is on for the store's connection before anything is forgotten.
        (secure,) = store._run(
            lambda conn: conn.execute("PRAGMA secure_delete").fetchone(), write=False
        )
        assert secure == 1
    finally:
        await store.aclose()


async def test_after_forgetting_a_persons_files_and_then_the_person_no_byte_of_them_is_left(
    tmp_path: Path,
) -> None:
    db = tmp_path / "memfs.db"
    await dana_turns(db)
    before = on_disk(db)
    secrets = [FIRST_NAME, LATER_NAME, *PROMPTS]
    # Sealed under the person's key: their file names, prompts and contents are
    # never in the file in the clear, before any forget.
    for secret in secrets:
        assert secret.encode() not in before, secret
    assert FIRST_CONTENT not in before and LATER_CONTENT not in before

    store = SqliteStore(db)
    admin = memfs.act_as(store, "root", "admin", org="bank_17")
    # One file first, as a person forgetting one thing: its name and content go at once.
    await admin.forget("me", FIRST_NAME, user="u_dana")
    after_one = on_disk(db)
    assert FIRST_NAME.encode() not in after_one
    assert FIRST_CONTENT not in after_one
    # The rest of the person is still there, through the store.
    assert await store.files(DANA_ME) == {LATER_NAME: LATER_CONTENT + b" v2"}

    await admin.forget_user("u_dana")
    await store.aclose()
    gone = on_disk(db)
    for secret in secrets:
        assert secret.encode() not in gone, secret
    assert FIRST_CONTENT not in gone and LATER_CONTENT not in gone

    # What stays: others' memory, the org's, the turns' ids and the audit of the acts.
    store = SqliteStore(db)
    try:
        assert await store.files(RULES) == {"rules.md": b"org rule"}
        assert b"carol's own prompt" not in gone  # her part of her trace: sealed under her key
        traces = await store.traces()
        assert [(t.session, t.prompt) for t in traces] == [
            ("s1", None),
            ("s1", None),
            ("s2", "carol's own prompt"),
        ]
        assert all("me" not in t.mounts for t in traces[:2])
        assert [(e.action, e.space, e.target, e.detail) for e in await store.audit()] == [
            ("forget", "me", "u_dana", "1 file"),
            ("forget-user", None, "u_dana", "1 space"),
        ]
        assert (await store.verify_audit()).entries == 2
    finally:
        await store.aclose()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
