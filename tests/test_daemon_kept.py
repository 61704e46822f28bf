"""Real mounts: a store that fails at turn end loses nothing; the kept files wait for a retry."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

import memfs
from memfs.core.models import ChangeSet, Limits, Provenance, SpaceRef, Stored
from memfs.engine.turns import Memory, TurnState
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore
from memfsd.blobs import BlobCache
from memfsd.overlay import Overlay
from memfsd.workspace import OverlayWorkspace
from tests.daemon_harness import Daemon, running_daemon, sh
from tests.test_daemon_mount import SPECS, start

ME = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")  # DANA in SPECS
LONE = SpaceRef(layer="user", space="me", user="u_dana")  # a user_memory() of org default
RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")


def client(daemon: Daemon) -> memfs.Client:
    return memfs.Client(daemon.settings.socket)


async def call(daemon: Daemon, method: str, *args: Any) -> Any:
    """One control-API call over the daemon's real socket (in a thread: the loop serves it)."""

    def run() -> Any:
        with client(daemon) as c:
            return getattr(c, method)(*args)

    return await trio.to_thread.run_sync(run)


async def history(daemon: Daemon, ref: SpaceRef, path: str) -> int:
    store = SqliteStore(daemon.settings.state_dir / "memfs.db")
    try:
        return len(await store.history(ref, path))
    finally:
        await store.aclose()


async def test_a_locked_store_keeps_every_write_and_turn_end_again_stores_exactly_them(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        await sh(
            "printf tea > me/prefs.md && mkdir me/notes && printf n > me/notes/a.md && "
            "printf r > lending-rules/rules.md",
            root,
        )
        # Another process holds SQLite's write lock for the whole turn end.
        locker = sqlite3.connect(daemon.settings.state_dir / "memfs.db", isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        try:
            first = await daemon.service.end_turn("s1")
            for name in ("me", "lending-rules"):
                space = first.spaces[name]
                assert (space.status, space.reason, space.kept) == (
                    "not_saved",
                    "store failed",
                    True,
                )
                assert "locked" in (space.error or "")
            assert first.spaces["me"].bases == {"notes/a.md": None, "prefs.md": None}
            # The frozen mount still serves the kept files, and takes no change.
            seen = await sh("cat me/prefs.md me/notes/a.md", root)
            assert seen.stdout == b"tean"
            refused = await sh("echo more >> me/prefs.md", root, check=False)
            assert b"Read-only file system" in refused.stderr
            kept = await call(daemon, "kept", "s1")
            assert {p: f.change for p, f in kept.spaces["me"].files.items()} == {
                "notes/a.md": "created",
                "prefs.md": "created",
            }
            assert await call(daemon, "kept_file", "s1", "me", "notes/a.md") == b"n"
            status = await daemon.service.status()
            assert [s.kept for s in status.sessions] == [["lending-rules", "me"]]
            with pytest.raises(memfs.TurnOpen, match="kept spaces"):
                await start(daemon, "s1")
        finally:
            locker.execute("ROLLBACK")
            locker.close()

        again = await call(daemon, "end_turn", "s1")

        assert {n: s.status for n, s in again.spaces.items()} == {
            "me": "saved",
            "lending-rules": "saved",
        }
        assert again.spaces["me"].created == ["notes/a.md", "prefs.md"]
        assert await history(daemon, ME, "prefs.md") == 1
        assert await history(daemon, RULES, "rules.md") == 1
        root = await start(daemon, "s1")
        assert (await sh("cat me/prefs.md", root)).stdout == b"tea"
        await daemon.service.end_turn("s1")


async def test_a_conflict_keeps_the_other_files_to_merge_and_discard_drops_them(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "seed")
        await sh("printf v1 > lending-rules/shared.md", root)
        await daemon.service.end_turn("seed")
        base = (await daemon.service.memory.store.load(RULES, "x")).revisions["shared.md"]
        first, second = await start(daemon, "s1"), await start(daemon, "s2")
        await sh("printf s1 > lending-rules/shared.md", first)
        await sh("printf s2 > lending-rules/shared.md; printf mine > lending-rules/own.md", second)
        assert (await daemon.service.end_turn("s1")).spaces["lending-rules"].status == "saved"

        lost = (await call(daemon, "end_turn", "s2")).spaces["lending-rules"]

        assert (lost.status, lost.reason, lost.kept) == ("not_saved", "conflict", True)
        assert lost.conflicts == ["shared.md"]
        assert lost.bases == {"own.md": None, "shared.md": base}
        assert await call(daemon, "kept_file", "s2", "lending-rules", "own.md") == b"mine"
        assert await call(daemon, "kept_file", "s2", "lending-rules", "shared.md") == b"s2"
        with pytest.raises(memfs.NotFound):
            await call(daemon, "kept_file", "s2", "lending-rules", "never.md")

        dropped = await call(daemon, "discard_turn", "s2")

        assert dropped.spaces["lending-rules"].reason == "discarded"
        assert dropped.spaces["lending-rules"].not_saved == ["own.md", "shared.md"]
        assert not await trio.to_thread.run_sync((second / "lending-rules").exists)
        assert await history(daemon, RULES, "own.md") == 0
        with pytest.raises(memfs.NotFound):
            await call(daemon, "kept", "s2")
        await start(daemon, "s2")
        await daemon.service.end_turn("s2")


async def test_a_removed_folder_store_keeps_the_turn_until_it_is_back(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    async with running_daemon(tmp_path, SPECS, store=f"folder://{folder}") as daemon:
        root = await start(daemon, "s1")
        await sh("printf tea > me/prefs.md", root)
        shutil.move(folder, tmp_path / "away")
        (tmp_path / "store").write_text("not a folder")  # nothing can be made there

        first = await daemon.service.end_turn("s1")

        assert first.spaces["me"].kept and first.spaces["me"].status == "not_saved"
        (tmp_path / "store").unlink()
        shutil.move(tmp_path / "away", folder)
        again = await daemon.service.end_turn("s1")
        assert again.spaces["me"].status == "saved"
        assert (folder / "people" / "bank_17" / "u_dana" / "me" / "prefs.md").read_bytes() == (
            b"tea"
        )


async def test_a_store_that_fails_only_once_stores_once_when_retried(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        store = daemon.service.memory.store
        assert isinstance(store, SqliteStore)
        real = store.store
        failures = [memfs.StoreUnavailable("the disk is full")]

        async def flaky(ref: SpaceRef, changes: ChangeSet, **kwargs: Any) -> Stored:
            if failures and ref.layer == "user":
                raise failures.pop()
            return await real(ref, changes, **kwargs)

        store.store = flaky  # type: ignore[method-assign]
        root = await start(daemon, "s1")
        await sh("printf tea > me/prefs.md && printf r > lending-rules/r.md", root)
        first = await daemon.service.end_turn("s1")
        assert first.spaces["lending-rules"].status == "saved"
        assert first.spaces["me"].reason == "store failed"
        again = await daemon.service.end_turn("s1")
        assert again.spaces["me"].status == "saved"
        assert again.spaces["lending-rules"].status == "saved"
        assert await history(daemon, RULES, "r.md") == 1
        traces = await store.traces(session="s1")
        assert len(traces) == 1
        assert traces[0].mounts["me"].status == "saved"


async def test_a_path_over_the_limit_from_an_old_journal_is_named_and_the_rest_commits(
    tmp_path: Path,
) -> None:
    """Whatever reached the journal (a memfs before the rename check), one path cannot sink it."""

    def desk() -> tuple[Memory, OverlayWorkspace, MemoryStore]:
        overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
        ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
        return Memory(store, [memfs.user_memory()], workspace=ws), ws, store

    store = MemoryStore()
    store.put_nowait(LONE, ChangeSet(created={"old.md": b"o"}), provenance=Provenance())
    memory, ws, _ = desk()
    turn = await memory.start_turn("s1", {"userId": "u_dana"})
    long_path = "/".join(["d" * 200] * 6) + "/x.md"  # 1,211 bytes
    tree = ws.overlay.sessions["s1"].turn
    assert tree is not None
    records = [
        {"o": "f", "m": "me", "p": long_path, "d": 1},
        {"o": "f", "m": "me", "p": "ok.md", "d": 2},
        {"o": "w", "m": "me", "p": "ok.md"},
    ]
    (tree.dir / "data" / "1").write_bytes(b"too deep")
    (tree.dir / "data" / "2").write_bytes(b"fine")
    with open(tree.dir / "journal", "a") as journal:
        journal.writelines(json.dumps(r) + "\n" for r in records)
    os_turn = turn.id
    # A restart: a new daemon reads the turn back from disk.
    memory, ws, _ = desk()
    [record] = ws.saved_turns().records
    restored = memory.restore_turn(TurnState.model_validate(record["state"]))
    ws.reattach(restored.state(), record)
    assert restored.id == os_turn

    result = (await restored.end()).spaces["me"]

    assert result.status == "saved"
    # The file and the one folder of its path past the limit; the folders
    # above them are ordinary folders of the space.
    too_deep = long_path.rsplit("/", 1)[0]  # 1,205 bytes
    assert result.not_saved == (too_deep, long_path)
    assert "1024" in result.errors[long_path] and "1024" in result.errors[too_deep]
    assert store.files_nowait(LONE) == {"old.md": b"o", "ok.md": b"fine"}


async def test_a_file_read_while_the_turn_is_kept_is_in_the_turns_record(
    tmp_path: Path,
) -> None:
    # A kept turn's mount still serves its files: what the agent reads there
    # is the turn's reading too, and the end that finally stores it says so.
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        await sh("printf diary > me/diary.md", root)
        await daemon.service.end_turn("s1")
        root = await start(daemon, "s1")
        await sh("printf tea > me/prefs.md", root)
        locker = sqlite3.connect(daemon.settings.state_dir / "memfs.db", isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        try:
            first = await daemon.service.end_turn("s1")
            assert first.spaces["me"].kept
            assert "me/diary.md" not in first.files
            assert (await sh("cat me/diary.md", root)).stdout == b"diary"
        finally:
            locker.execute("ROLLBACK")
            locker.close()

        again = await daemon.service.end_turn("s1")

        assert again.spaces["me"].status == "saved"
        assert again.files["me/diary.md"].opened
