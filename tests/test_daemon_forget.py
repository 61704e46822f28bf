"""Real mounts: forgetting a person (or a file of theirs) reaches their open turns at once."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import trio

import memfs
from memfs.api.models import ForgetNotice, StartTurnRequest, TurnEnded
from memfs.core.errors import ConfigError, StoreUnavailable
from memfs.core.models import ChangeSet, Limits, Loaded, Provenance, SpaceRef, Stored, digest
from memfs.core.specs import MemorySpec
from memfs.engine.plan import Mount, TurnPlan
from memfs.engine.turns import Memory, Turn, TurnState
from memfs.engine.workspace import Fetch
from memfs.stores.base import ManagedStore, Store
from memfs.stores.folder import FolderStore
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore
from memfs.testing import FaultyStore
from memfsd.blobs import BlobCache
from memfsd.nodes import MountTree
from memfsd.overlay import Overlay
from memfsd.service import HEARD_FORGETS, DaemonService
from memfsd.workspace import OverlayWorkspace
from tests.daemon_harness import Daemon, running_daemon, sh
from tests.test_daemon_mount import SPECS as BANK_SPECS
from tests.test_daemon_mount import start

# These tests forget people of org "default": the loan desk's spaces, all in it
# (a turn belongs to one org).
SPECS = [
    BANK_SPECS[0].model_copy(update={"org": None}),
    BANK_SPECS[1].model_copy(update={"org": None}),
]

ME = SpaceRef(layer="user", space="me", user="u_dana")
SECRET = b"my diagnosis\n"
ADMIN = ("--as", "root-admin", "--role", "admin")


async def seeded(daemon: Daemon) -> SqliteStore:
    store = daemon.service.memory.store
    assert isinstance(store, SqliteStore)
    await store.put(
        ME, ChangeSet(created={"g.md": SECRET, "keep.md": b"keep\n"}), provenance=Provenance()
    )
    return store


class DanasTurn(NamedTuple):
    daemon: Daemon
    store: SqliteStore
    root: Path  # session s1's folder, Dana's turn open in it


@asynccontextmanager
async def danas_turn(tmp_path: Path) -> AsyncIterator[DanasTurn]:
    """A mounted daemon, Dana's memory seeded in its store, and her turn open in session s1."""
    async with running_daemon(tmp_path, SPECS) as daemon:
        store = await seeded(daemon)
        yield DanasTurn(daemon, store, await start(daemon, "s1"))


def desk(
    tmp_path: Path, store: Store, specs: Sequence[MemorySpec]
) -> tuple[Memory, OverlayWorkspace]:
    """The turn engine over a daemon's overlay workspace, no mount: built again, a restart."""
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    ws = OverlayWorkspace(overlay, tmp_path / "mnt", invalidate=None)
    return Memory(store, specs, workspace=ws), ws


def org_store_down() -> tuple[FaultyStore, SpaceRef]:
    """A memory store whose org spaces' stores fail (an ended turn keeps them), and the rules'."""
    store = FaultyStore(MemoryStore())
    store.fail(
        "store",
        memfs.StoreUnavailable("the org store is down"),
        when=lambda ref, *args, **kwargs: ref.layer == "org",
    )
    return store, SpaceRef(layer="org", space="lending-rules")


def restart(
    tmp_path: Path, store: Store, specs: Sequence[MemorySpec]
) -> tuple[OverlayWorkspace, Turn]:
    """A new desk that brings back the one turn written down, reattached as at start."""
    memory, ws = desk(tmp_path, store, specs)
    [record] = ws.saved_turns().records
    restored = memory.restore_turn(TurnState.model_validate(record["state"]))
    ws.reattach(restored.state(), record)
    return ws, restored


def mounts_of(overlay: Overlay, session: str = "s1") -> dict[str, MountTree]:
    """The mounts of the session's open turn."""
    turn = overlay.sessions[session].turn
    assert turn is not None
    return turn.mounts


def write_new(overlay: Overlay, mount: MountTree, name: str, content: bytes) -> None:
    """Create ``name`` at the mount's top and write ``content``, as an agent's shell would."""
    _, fh = overlay.create_open(mount.root.inode, name, 0o644, 0, 0, os.O_WRONLY)
    overlay.write(fh, 0, content)
    overlay.release(fh)


def blob(daemon: Daemon, content: bytes) -> Path:
    sha = digest(content)
    return daemon.settings.state_dir / "blobs" / sha[:2] / sha


async def manage(daemon: Daemon, *args: str) -> dict[str, object]:
    """``memfs ARGS`` as an admin would run it, against this daemon's store and socket."""
    db = daemon.settings.state_dir / "memfs.db"
    done = await trio.run_process(
        [sys.executable, "-m", "memfs.cli", *args, "--store", f"sqlite://{db}", *ADMIN],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={**os.environ, "MEMFS_SOCKET": str(daemon.settings.socket)},
    )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_forget_notice_reaches_the_persons_own_spaces_or_the_one_it_names() -> None:
    dana_me = SpaceRef(layer="user", space="me", org="bank", user="dana")
    dana_notes = SpaceRef(layer="user", space="notes", org="bank", user="dana")
    person = ForgetNotice(org="bank", user="dana")
    one_file = ForgetNotice(org="bank", user="dana", space="me", path="a.md")
    assert person.reaches(dana_me) and person.reaches(dana_notes)
    assert one_file.reaches(dana_me) and not one_file.reaches(dana_notes)
    others = [
        SpaceRef(layer="user", space="me", org="bank", user="carol"),
        SpaceRef(layer="user", space="me", org="other_bank", user="dana"),
        SpaceRef(layer="org", space="me", org="bank"),
        SpaceRef(layer="dir", space="me"),
    ]
    assert not any(person.reaches(ref) or one_file.reaches(ref) for ref in others)


async def test_forget_user_empties_the_persons_open_turn_at_once(tmp_path: Path) -> None:
    async with danas_turn(tmp_path) as (daemon, store, root):
        # Read (so the kernel caches it) and keep a descriptor open on it.
        await sh("cat me/g.md > /dev/null && printf new > me/new.md", root)
        assert await trio.to_thread.run_sync(blob(daemon, SECRET).exists)

        gone = await manage(daemon, "forget-user", "u_dana")

        assert gone["open_turns"] == {"s1": ["me"]}
        seen = await sh("cat me/g.md; ls me; cp me/g.md me/g2.md", root, check=False)
        assert SECRET not in seen.stdout
        assert b"No such file or directory" in seen.stderr
        assert not await trio.to_thread.run_sync(blob(daemon, SECRET).exists)
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert (me.status, me.reason) == ("not_saved", "forgotten")
        assert await store.user_files("u_dana", "default") == {}
        assert await store.history(ME, "g2.md") == []
        turn_dir = daemon.settings.state_dir / "sessions" / "s1" / ended.turn
        assert not await trio.to_thread.run_sync(turn_dir.exists)


async def test_forgetting_one_file_drops_it_from_the_open_turn_and_its_blob(tmp_path: Path) -> None:
    async with danas_turn(tmp_path) as (daemon, store, root):
        await sh("cat me/g.md me/keep.md > /dev/null", root)

        gone = await manage(daemon, "forget", "me", "g.md", "--user", "u_dana")

        assert gone["open_turns"] == {"s1": ["me"]}
        seen = await sh("cat me/g.md; ls me", root, check=False)
        assert SECRET not in seen.stdout
        assert seen.stdout == b"keep.md\n"
        copy = await sh("cp me/keep.md me/k2.md", root, check=False)
        assert b"Read-only file system" in copy.stderr
        assert not await trio.to_thread.run_sync(blob(daemon, SECRET).exists)
        me = (await daemon.service.end_turn("s1")).spaces["me"]
        assert me.reason == "forgotten"
        assert await store.user_files("u_dana", "default") == {"me": {"keep.md": b"keep\n"}}


async def test_a_turn_that_never_heard_of_the_forget_cannot_write_it_back(tmp_path: Path) -> None:
    async with danas_turn(tmp_path) as (daemon, store, root):
        # Straight in the store: this daemon is never told.
        await store.forget_user("u_dana", "default", by=None)
        await sh("cp me/g.md me/g2.md", root)  # the erased content, under a new name

        me = (await daemon.service.end_turn("s1")).spaces["me"]

        assert (me.status, me.reason, me.kept) == ("not_saved", "forgotten", False)
        assert me.not_saved == ["g2.md"]
        assert await store.user_files("u_dana", "default") == {}
        assert await store.history(ME, "g2.md") == []


def test_forget_without_a_daemon_still_forgets(tmp_path: Path) -> None:
    db = tmp_path / "memfs.db"

    async def put() -> None:
        store = SqliteStore(db)
        await store.put(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
        await store.aclose()

    trio.run(put)
    argv = ["forget-user", "u_dana", f"--store=sqlite://{db}", *ADMIN]
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "MEMFS_SOCKET": str(tmp_path / "nobody.sock")},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "org": "default",
        "forgotten_spaces": ["me"],
        "forgotten_files": 1,
        "open_turns": None,
    }
    assert done.stderr == ""  # no daemon is no warning


async def test_a_space_forgotten_during_a_turn_stays_dropped_after_a_restart(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    store.put_nowait(ME, ChangeSet(created={"sub/g.md": SECRET}), provenance=Provenance())

    specs = [memfs.user_memory()]
    memory, ws = desk(tmp_path, store, specs)
    turn = await memory.start_turn("s1", {"userId": "u_dana"})
    sha = digest(SECRET)
    assert sha in ws.overlay.blobs
    await store.forget_user("u_dana", "default", by=None)
    await memory.forget_in_turn(turn, "me")
    assert await ws.drop_forgotten("s1", "me", [None])
    assert sha not in ws.overlay.blobs
    assert "me" not in ws.overlay.sessions["s1"].node.kids

    ws, restored = restart(tmp_path, store, specs)
    assert "me" not in ws.overlay.sessions["s1"].node.kids
    me = (await restored.end()).spaces["me"]
    assert (me.status, me.reason) == ("not_saved", "forgotten")
    assert store.files_nowait(ME) == {}


@pytest.mark.parametrize("compacted", [False, True])
async def test_a_file_moved_where_other_files_took_its_names_is_found_by_its_forget_after_a_restart(
    tmp_path: Path, compacted: bool
) -> None:
    # g.md went a.md, then b.md, and keep.md took a.md; the daemon then
    # restarted (its journal replayed, compacted first or not). The forget
    # of g.md must still find it under b.md.
    store = MemoryStore()
    store.put_nowait(
        ME, ChangeSet(created={"g.md": SECRET, "keep.md": b"keep\n"}), provenance=Provenance()
    )
    specs = [memfs.user_memory()]
    memory, ws = desk(tmp_path, store, specs)
    await memory.start_turn("s1", {"userId": "u_dana"})
    overlay, me = ws.overlay, mounts_of(ws.overlay)["me"]
    top = me.root.inode
    for old, new in (("g.md", "a.md"), ("a.md", "b.md"), ("keep.md", "a.md")):
        overlay.rename(top, old, top, new)
    if compacted:
        overlay.compact(me.turn)
    ws.overlay.blobs.hold([digest(SECRET)])  # as another turn's hold would keep the bytes

    ws, _ = restart(tmp_path, store, specs)
    assert await ws.drop_forgotten("s1", "me", ["g.md"])
    me = mounts_of(ws.overlay)["me"]
    assert ws.overlay.node_at(me, "b.md") is None
    assert ws.overlay.node_at(me, "a.md") is not None  # keep.md's, not hers


async def test_dropping_a_file_in_a_folder_nobody_opened_keeps_it_gone(tmp_path: Path) -> None:
    overlay = Overlay(tmp_path / "state", BlobCache(tmp_path / "state" / "blobs"), Limits())
    sha = overlay.blobs.put(SECRET)
    overlay.blobs.hold([sha])
    overlay.open_session("s1")
    overlay.attach_turn(
        "s1",
        "t1",
        {"me": (False, {"a/g.md": (sha, len(SECRET), "1"), "a/k.md": (sha, len(SECRET), "2")})},
        private={"me"},
    )
    assert overlay.drop_path("s1", "me", "a/g.md")
    mount = mounts_of(overlay)["me"]
    folder = overlay.lookup(mount.root.inode, "a")
    assert [n.name for n in overlay.children(folder.inode)] == ["k.md"]
    assert mount.read_only
    assert not overlay.drop_path("s1", "me", "a/none.md")


READER = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.stdout.write(os.pread(fd, 100, 0).decode() + "|")
sys.stdout.flush()
sys.stdin.readline()  # the forget happens here
try:
    sys.stdout.write(os.pread(fd, 100, 0).decode())
except OSError as exc:
    sys.stdout.write(f"error {exc.errno}")
"""


async def test_a_descriptor_open_across_the_forget_reads_nothing_of_it(tmp_path: Path) -> None:
    async with danas_turn(tmp_path) as (daemon, _, root):
        reader = await trio.lowlevel.open_process(
            [sys.executable, "-c", READER, str(root / "me" / "g.md")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            assert reader.stdin is not None and reader.stdout is not None
            first = b""
            while not first.endswith(b"|"):
                first += await reader.stdout.receive_some()
            assert first == SECRET + b"|"  # read once: the kernel holds the page

            await manage(daemon, "forget-user", "u_dana")
            await reader.stdin.send_all(b"go\n")
            rest = b""
            while chunk := await reader.stdout.receive_some():
                rest += chunk
        finally:
            reader.kill()
            await reader.wait()
        assert SECRET not in rest, rest
        await daemon.service.end_turn("s1")


async def test_a_trace_written_after_the_forget_names_none_of_the_persons_files(
    tmp_path: Path,
) -> None:
    async with danas_turn(tmp_path) as (daemon, store, root):
        await sh("cat me/g.md > /dev/null && printf new > me/diagnosis-2.md", root)
        await sh("cat lending-rules/* > /dev/null 2>&1; true", root)

        await manage(daemon, "forget-user", "u_dana")
        ended = await daemon.service.end_turn("s1")

        assert ended.spaces["me"].reason == "forgotten"
        [trace] = await store.traces(session="s1")
        # The turn's trace is still recorded: the org's part, none of hers (a part
        # of hers would be sealed under a key made again for her).
        assert "lending-rules" in trace.mounts and "me" not in trace.mounts
        assert not [key for key in trace.files if key.startswith("me/")]
        assert "g.md" not in repr(trace) and "diagnosis-2" not in repr(trace)


async def test_a_trace_of_a_turn_the_store_refused_as_forgotten_names_none_of_its_files(
    tmp_path: Path,
) -> None:
    async with danas_turn(tmp_path) as (daemon, store, root):
        await store.forget_user("u_dana", "default", by=None)  # this daemon is never told
        await sh("cp me/g.md me/g2.md", root)

        me = (await daemon.service.end_turn("s1")).spaces["me"]

        assert (me.reason, me.not_saved) == ("forgotten", ["g2.md"])
        [trace] = await store.traces(session="s1")
        assert not [key for key in trace.files if key.startswith("me/")]
        assert "g.md" not in repr(trace) and "g2.md" not in repr(trace)


async def test_a_restart_removes_the_blobs_no_restored_turn_holds(tmp_path: Path) -> None:
    """A kill -9 between a turn start's blobs and its turn.json leaves them held by nobody."""
    store = MemoryStore()
    store.put_nowait(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
    other = b"eve's own words\n"

    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    await memory.start_turn("s1", {"userId": "u_dana"})
    # Session s2's start died here: its blob written (and one half-written), no turn.json.
    [eve] = ws.overlay.blobs.put_many([other], hold=True)
    torn = ws.overlay.blobs.path(eve).with_name(f".{eve}.x1y2.tmp")
    torn.write_bytes(other[:5])

    memory, ws = desk(tmp_path, store, [memfs.user_memory()])  # the restart
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))

    assert service.recover() == ["s1"]
    assert not ws.overlay.blobs.path(eve).exists()
    assert not torn.exists()
    assert ws.overlay.blobs.path(digest(SECRET)).read_bytes() == SECRET  # s1's turn holds it
    await memory.open_turn("s1").end()
    assert not ws.overlay.blobs.path(digest(SECRET)).exists()


def names_in(folder: Path, *names: bytes) -> list[str]:
    """Every file under ``folder`` holding any of ``names`` (raw bytes)."""
    return [
        str(path)
        for path in folder.rglob("*")
        if path.is_file() and any(name in path.read_bytes() for name in names)
    ]


async def test_after_a_forget_no_file_in_state_dir_names_the_persons_files(
    tmp_path: Path,
) -> None:
    async with danas_turn(tmp_path) as (daemon, _, root):
        await sh(
            "cat me/g.md > /dev/null && printf new > me/diagnosis-2.md && "
            "mv me/diagnosis-2.md me/diagnosis-3.md && mkdir me/oncology && "
            "printf r > lending-rules/x.md",
            root,
        )
        sessions = daemon.settings.state_dir / "sessions"
        sha = digest(SECRET).encode()

        await manage(daemon, "forget", "me", "g.md", "--user", "u_dana")

        found = await trio.to_thread.run_sync(
            names_in, sessions, b"g.md", b"diagnosis", b"oncology", sha
        )
        assert found == []
        await manage(daemon, "forget-user", "u_dana")
        assert await trio.to_thread.run_sync(names_in, sessions, b"keep.md") == []
        await sh("cat lending-rules/x.md >/dev/null && printf s > lending-rules/y.md", root)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["lending-rules"].created == ["x.md", "y.md"]


async def test_a_restart_after_a_forget_keeps_the_turns_other_work_and_no_name_of_it(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    store.put_nowait(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
    specs = [memfs.user_memory(), memfs.user_memory(space="notes", user="otherId")]

    memory, ws = desk(tmp_path, store, specs)
    turn = await memory.start_turn("s1", {"userId": "u_dana", "otherId": "u_eve"})
    overlay = ws.overlay
    write_new(overlay, mounts_of(overlay)["notes"], "eve.md", b"eve's\n")
    overlay.create(mounts_of(overlay)["me"].root.inode, "diagnosis.md", 0o644, 0, 0)
    await memory.forget_in_turn(turn, "me")
    assert await ws.drop_forgotten("s1", "me", [None])

    ws, restored = restart(tmp_path, store, specs)
    assert names_in(tmp_path / "state" / "sessions", b"g.md", b"diagnosis") == []
    ended = await restored.end()
    assert ended.spaces["me"].reason == "forgotten"
    assert ended.spaces["notes"].changes.created == {"eve.md": b"eve's\n"}


async def test_a_forget_while_the_spaces_store_runs_and_fails_keeps_nothing_of_it(
    tmp_path: Path,
) -> None:
    async with danas_turn(tmp_path) as (daemon, store, root):
        real = store.store
        entered, go = trio.Event(), trio.Event()

        async def failing(ref: SpaceRef, changes: ChangeSet, **kwargs: Any) -> Stored:
            if ref.layer == "user":
                entered.set()
                await go.wait()
                raise memfs.StoreUnavailable("the disk is full")
            return await real(ref, changes, **kwargs)

        store.store = failing  # type: ignore[method-assign]
        await sh("printf tea > me/prefs.md && printf r > lending-rules/r.md", root)
        ended: list[TurnEnded] = []

        async def end() -> None:
            ended.append(await daemon.service.end_turn("s1"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(end)
            await entered.wait()
            await manage(daemon, "forget-user", "u_dana")
            go.set()

        me = ended[0].spaces["me"]
        assert (me.status, me.reason, me.kept) == ("not_saved", "forgotten", False)
        assert ended[0].spaces["lending-rules"].status == "saved"
        assert [s.kept for s in (await daemon.service.status()).sessions] == [[]]
        sessions = daemon.settings.state_dir / "sessions"
        assert await trio.to_thread.run_sync(names_in, sessions, b"prefs.md") == []


async def test_a_person_forgotten_while_the_daemon_was_down_is_dropped_from_its_turn_at_start(
    tmp_path: Path,
) -> None:
    async with danas_turn(tmp_path) as (daemon, _, root):
        await sh("cat me/g.md > /dev/null && printf new > me/new.md", root)
        state_dir = daemon.settings.state_dir
    # The daemon is down: the forget's notice finds nobody to tell.
    store = SqliteStore(state_dir / "memfs.db")
    try:
        await store.forget_user("u_dana", "default", by=None)
    finally:
        await store.aclose()

    async with running_daemon(tmp_path, SPECS) as daemon:
        seen = await sh("cat me/g.md; ls me", root, check=False)
        assert SECRET not in seen.stdout
        assert b"No such file or directory" in seen.stderr
        assert not await trio.to_thread.run_sync(blob(daemon, SECRET).exists)
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert (me.status, me.reason) == ("not_saved", "forgotten")


async def test_a_forget_after_the_space_was_stored_leaves_no_name_in_done_json(
    tmp_path: Path,
) -> None:
    """The turn stays open (another space is kept); what it wrote down of the person goes."""
    store, rules = org_store_down()
    specs = [memfs.user_memory(), memfs.org_memory(space=rules.space, review="none")]
    memory, ws = desk(tmp_path, store, specs)
    turn = await memory.start_turn("s1", {"userId": "u_dana"})
    for name, file in (("me", "diagnosis.md"), ("lending-rules", "rule.md")):
        write_new(ws.overlay, mounts_of(ws.overlay)[name], file, b"x\n")
    ended = await turn.end()
    assert ended.spaces["me"].status == "saved"
    assert ended.spaces["lending-rules"].kept
    done_file = tmp_path / "state" / "sessions" / "s1" / "done.json"
    assert b"diagnosis" in done_file.read_bytes()

    await store.forget_user("u_dana", "default", by=None)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    applied = await service.forgotten(ForgetNotice(org="default", user="u_dana"))

    assert applied.dropped == {"s1": ["me"]}
    assert b"diagnosis" not in done_file.read_bytes()
    # It was stored, and is reported so: as a space, with none of its files.
    assert turn.done["me"].status == "saved" and turn.done["me"].changes.is_empty()


async def test_a_file_forgotten_by_another_process_is_the_only_one_a_look_at_the_store_drops(
    tmp_path: Path,
) -> None:
    # The CLI forgets in the store first and tells the daemon after: a look at
    # the store in between must drop what the notice would, not the space.
    async with danas_turn(tmp_path) as (daemon, store, root):
        await sh("cat me/g.md > /dev/null", root)
        await store.forget_file(ME, "g.md", by=None)  # nobody tells this daemon

        await daemon.service.poll_forgets()

        seen = await sh("cat me/g.md; ls me", root, check=False)
        assert SECRET not in seen.stdout and seen.stdout == b"keep.md\n"
        assert not await trio.to_thread.run_sync(blob(daemon, SECRET).exists)
        # The notice that comes after finds nothing more to drop.
        notice = ForgetNotice(org="default", user="u_dana", space="me", path="g.md")
        await daemon.service.forgotten(notice)
        assert (await sh("ls me", root)).stdout == b"keep.md\n"
        ended = await daemon.service.end_turn("s1")
        assert (ended.spaces["me"].status, ended.spaces["me"].reason) == ("not_saved", "forgotten")


def person_keys(daemon: Daemon, user: str) -> int:
    db = sqlite3.connect(daemon.settings.state_dir / "memfs.db")
    try:
        query = 'SELECT count(*) FROM person_keys WHERE "user" = ?'
        (count,) = db.execute(query, (user,)).fetchone()
    finally:
        db.close()
    return int(count)


PROMPT = "okapi-prompt: what did my oncologist say?"


async def test_a_person_forgotten_mid_turn_leaves_no_prompt_label_or_key_of_theirs(
    tmp_path: Path,
) -> None:
    # The turn teaches the org a rule in her words, and writes her own memory;
    # she is forgotten before it ends. Her prompt and name are hers: they leave
    # the turn's record at once, and the end writes none of them, anywhere.
    async with running_daemon(tmp_path, SPECS) as daemon:
        store = await seeded(daemon)
        root = await start(daemon, "s1", prompt=PROMPT)
        await sh("printf rule > lending-rules/new-rule.md && printf mine > me/n.md", root)
        assert person_keys(daemon, "u_dana") == 1

        await manage(daemon, "forget-user", "u_dana")
        record = (daemon.settings.state_dir / "sessions" / "s1" / "turn.json").read_bytes()
        assert b"okapi-prompt" not in record and b'"Dana"' not in record
        ended = await daemon.service.end_turn("s1")

        assert ended.spaces["lending-rules"].status == "saved"
        assert ended.spaces["me"].reason == "forgotten"
        [trace] = await store.traces(session="s1")
        assert trace.prompt is None and trace.author is None and "me" not in trace.mounts
        org = SpaceRef(layer="org", space="lending-rules")
        [revision] = await store.history(org, "new-rule.md")
        assert revision.provenance.prompt is None
        assert revision.provenance.by is not None and revision.provenance.by.label is None
        assert person_keys(daemon, "u_dana") == 0  # none made again for her words
        assert await store.files(org) == {"new-rule.md": b"rule"}  # the org's rule stays


async def test_a_person_forgotten_mid_turn_stays_forgotten_in_the_turn_after_a_restart(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    store.put_nowait(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
    memory, _ = desk(tmp_path, store, SPECS)
    await memory.start_turn("s1", {"userId": "u_dana", "name": "Dana"}, prompt=PROMPT)
    [forgot] = await memory.forget_person("default", "u_dana")
    assert forgot.prompt is None

    _, restored = restart(tmp_path, store, SPECS)
    assert restored.prompt is None and restored.author is None and restored.person is None
    assert "Dana" not in json.dumps(restored.extra_body)
    assert restored.plan.forgotten == {"u_dana"}


async def test_forgetting_a_person_empties_the_manual_change_sets_waiting_for_commit(
    tmp_path: Path,
) -> None:
    # Ended turns' manual change sets wait on disk for `memfs turn commit`;
    # forgetting the person takes their spaces out of them, and their words
    # out of what stays (an org space taught in her words).
    specs = [spec.model_copy(update={"commit": "manual"}) for spec in SPECS]
    async with running_daemon(tmp_path, specs) as daemon:
        store = await seeded(daemon)
        root = await start(daemon, "s1", prompt=PROMPT)
        await sh("printf rule > lending-rules/r.md && printf okapi-secret > me/okapi.md", root)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].status == "manual"
        [held] = (daemon.settings.state_dir / "sessions" / "s1" / "manual").glob("*.json")

        await manage(daemon, "forget-user", "u_dana")

        text = held.read_bytes()
        for secret in (b"okapi", b"b2thcGkt", b'"Dana"'):  # b2thcGkt: base64 of "okapi-"
            assert secret not in text, secret
        committed = await daemon.service.commit_turn("s1", ended.turn)
        assert committed.spaces["me"].reason == "forgotten"
        org = SpaceRef(layer="org", space="lending-rules")
        assert await store.files(org) == {"r.md": b"rule"}
        [revision] = await store.history(org, "r.md")
        assert revision.provenance.prompt is None
        assert person_keys(daemon, "u_dana") == 0


async def test_forgetting_a_folder_of_theirs_takes_its_name_out_of_the_open_turn(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await seeded(daemon)
        root = await start(daemon, "s0")
        await sh("mkdir me/oncology-okapi", root)
        await daemon.service.end_turn("s0")
        root = await start(daemon, "s1")
        assert b"oncology-okapi" in (await sh("ls me", root)).stdout

        await manage(daemon, "forget", "me", "oncology-okapi", "--user", "u_dana")

        assert b"okapi" not in (await sh("ls me", root)).stdout
        record = (daemon.settings.state_dir / "sessions" / "s1" / "turn.json").read_bytes()
        assert b"okapi" not in record


# Lists a folder through one descriptor, once before a line on stdin and once after.
LIST_TWICE = """
import os, sys
fd = os.open("me", os.O_RDONLY | os.O_DIRECTORY)
print(sorted(os.listdir(fd)), flush=True)
sys.stdin.readline()
print(sorted(os.listdir(fd)), flush=True)
"""


async def test_an_open_folder_handle_lists_no_forgotten_name(tmp_path: Path) -> None:
    # A listing is taken at opendir; what was forgotten since must not come back from it.
    async with danas_turn(tmp_path) as (daemon, _, root):
        lister = await trio.lowlevel.open_process(
            [sys.executable, "-c", LIST_TWICE],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert lister.stdin is not None and lister.stdout is not None
        out = lister.stdout

        async def line() -> bytes:
            got = b""
            while not got.endswith(b"\n"):
                chunk = await out.receive_some()
                assert chunk, got  # it printed its line before it exited
                got += chunk
            return got.strip()

        try:
            assert b"g.md" in await line()
            await manage(daemon, "forget-user", "u_dana")
            await lister.stdin.send_all(b"go\n")
            assert await line() == b"[]"
        finally:
            with trio.move_on_after(10):
                await lister.wait()
            lister.kill()


async def test_a_person_forgotten_elsewhere_is_not_served_from_the_last_known_copy(
    tmp_path: Path,
) -> None:
    # Her turn ended; another process forgot her (this one never heard); then
    # the store went down. Her next turn must not get her memory back from
    # what this process loaded before: it keeps none of a person's bytes.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    await store.put(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
    memory, _ = desk(tmp_path, store, [memfs.user_memory()])
    turn = await memory.start_turn("s1", {"userId": "u_dana"})
    await turn.end()
    await store.forget_user("u_dana", "default", by=None)
    store.fail("load_lean", memfs.StoreUnavailable("the database is down"))

    again = await memory.start_turn("s1", {"userId": "u_dana"})
    assert again.mounts["me"].from_last_known_copy and again.mounts["me"].snapshot == {}
    assert not any(SECRET in path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())


async def start_with_forgets_between(
    service: DaemonService,
    ws: OverlayWorkspace,
    forgets: Callable[[], Awaitable[object]],
) -> None:
    """Dana's turn starts; ``forgets`` runs once her space is loaded and before the turn is open."""
    loaded, gate = trio.Event(), trio.Event()
    real_open = ws.open

    async def open_later(plan: TurnPlan, spaces: Mapping[str, Loaded], fetch: Fetch) -> None:
        loaded.set()
        await gate.wait()
        await real_open(plan, spaces, fetch)

    ws.open = open_later  # type: ignore[method-assign,assignment]
    body = {"userId": "u_dana", "name": "Dana"}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            service.start_turn, StartTurnRequest(session="s1", extra_body=body, prompt=PROMPT)
        )
        await loaded.wait()
        await forgets()
        gate.set()


async def test_a_forget_heard_while_a_turn_of_theirs_starts_reaches_that_turn(
    tmp_path: Path,
) -> None:
    # The notice comes after the start loaded her memory and before the turn
    # is open: no poll will look (forget_poll_seconds = 0), so the start asks.
    store = FaultyStore(MemoryStore())
    store.inner.put_nowait(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))

    async def forget_her() -> None:
        await store.forget_user("u_dana", "default", by=None)
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))

    await start_with_forgets_between(service, ws, forget_her)

    [turn] = memory.open_turns()
    assert turn.done["me"].reason == "forgotten" and turn.prompt is None
    assert mounts_of(ws.overlay)["me"].snapshot == {}


async def test_a_forget_heard_while_a_turn_of_theirs_starts_reaches_it_over_a_store_that_cannot_say(
    tmp_path: Path,
) -> None:
    # The folder store keeps no record of what it forgot: the notice alone
    # must drop the space the start loaded before it, as it drops an open turn's.
    store = FolderStore(tmp_path / "folder")
    await store.store(ME, ChangeSet(created={"g.md": SECRET}), cursor=None, provenance=Provenance())
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "folder://", str(tmp_path / "state"))

    async def forget_her() -> None:
        await store.forget_user("u_dana", "default", by=None)
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))

    await start_with_forgets_between(service, ws, forget_her)

    [turn] = memory.open_turns()
    assert turn.done["me"].reason == "forgotten" and turn.prompt is None
    assert mounts_of(ws.overlay)["me"].snapshot == {}
    assert not any(SECRET in p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())


async def test_a_file_forget_heard_while_a_turn_of_theirs_starts_drops_that_file_over_a_store_that_cannot_say(  # noqa: E501
    tmp_path: Path,
) -> None:
    store = FolderStore(tmp_path / "folder")
    created = {"g.md": SECRET, "kept.md": b"kept"}
    await store.store(ME, ChangeSet(created=created), cursor=None, provenance=Provenance())
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "folder://", str(tmp_path / "state"))

    async def forget_the_file() -> None:
        await store.forget_file(ME, "g.md", by=None)
        notice = ForgetNotice(org="default", user="u_dana", space=ME.space, path="g.md")
        await service.forgotten(notice)

    await start_with_forgets_between(service, ws, forget_the_file)

    [turn] = memory.open_turns()
    assert turn.prompt == PROMPT  # a file's forget leaves her words
    assert set(mounts_of(ws.overlay)["me"].snapshot) == {"kept.md"}
    assert not any(SECRET in p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())


@pytest.mark.error_log(r"could not write down a forget in the turn of session s1")
async def test_a_forget_heard_while_a_turn_starts_that_cannot_be_written_down_leaves_the_turn_started(  # noqa: E501
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The turn is open when the start applies the forget it heard: a failed
    # write (EIO) there must not answer the start with an error over an open
    # turn (the app would retry into "already has an open turn"); the turn
    # holds the forget and the next look writes it down.
    store = MemoryStore()
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    real = ws.record
    failures = [OSError(errno.EIO, "Input/output error")]

    async def failing_once(*args: Any, **kwargs: Any) -> None:
        if kwargs.get("state") is not None and failures:
            raise failures.pop()
        await real(*args, **kwargs)

    async def forget_her() -> None:
        monkeypatch.setattr(ws, "record", failing_once)
        await store.forget_user("u_dana", "default", by=None)
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))

    await start_with_forgets_between(service, ws, forget_her)

    [turn] = memory.open_turns()
    assert turn.prompt is None
    await service.poll_forgets()  # where nothing since wrote the turn down, this does
    assert not turn.unwritten
    assert b"okapi" not in (tmp_path / "state" / "sessions" / "s1" / "turn.json").read_bytes()


async def test_forgetting_a_person_removes_the_turn_records_set_aside_as_damaged(
    tmp_path: Path,
) -> None:
    # A turn.json torn by a power cut is set aside unread; it may hold anyone's words.
    memory, ws = desk(tmp_path, MemoryStore(), [memfs.user_memory()])
    torn = tmp_path / "state" / "sessions" / "s9" / "turn.json.damaged"
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b'{"state": {"prompt": "okapi-words", "extra_body": {"name": "Da')
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))

    await service.forgotten(ForgetNotice(org="default", user="u_dana"))

    assert not torn.exists()


def scrub_fails_once(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next rewrite of a turn's records without what was forgotten fails with EIO."""
    ws = daemon.service.workspace
    assert isinstance(ws, OverlayWorkspace)
    real = ws._scrub_record
    failures = [OSError(errno.EIO, "Input/output error")]

    def failing_once(*args: Any, **kwargs: Any) -> None:
        if failures:
            raise failures.pop()
        real(*args, **kwargs)

    monkeypatch.setattr(ws, "_scrub_record", failing_once)


@pytest.mark.error_log(r"could not take what was forgotten out of the turn of session s1")
async def test_a_forget_whose_scrub_fails_for_one_turn_is_applied_and_scrubbed_at_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file leaves the mount at once; its record's rewrite (turn.json, the
    # journal) fails with EIO. The notice must not fail (the forget reached
    # every other turn), and the next look must finish the scrub: the name
    # stays in turn.json otherwise, with the space settled and never looked at again.
    async with danas_turn(tmp_path) as (daemon, store, root):
        scrub_fails_once(daemon, monkeypatch)
        await store.forget_file(ME, "g.md", by=None)
        notice = ForgetNotice(org="default", user="u_dana", space="me", path="g.md")

        applied = await daemon.service.forgotten(notice)

        assert applied.dropped == {"s1": ["me"]}
        assert b"No such file" in (await sh("cat me/g.md", root, check=False)).stderr
        record = daemon.settings.state_dir / "sessions" / "s1" / "turn.json"
        assert b"g.md" in record.read_bytes()  # the scrub that failed

        await daemon.service.poll_forgets()

        assert b"g.md" not in record.read_bytes()
        assert (await sh("cat me/keep.md", root)).stdout == b"keep\n"


@pytest.mark.error_log(r"could not take what was forgotten out of the turn of session s1")
async def test_a_forgotten_space_whose_scrub_failed_has_its_records_rewritten_once_at_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with danas_turn(tmp_path) as (daemon, store, _root):
        scrub_fails_once(daemon, monkeypatch)
        ws = daemon.service.workspace
        assert isinstance(ws, OverlayWorkspace)
        scrub = ws._scrub_record
        rewrites: list[object] = []

        def counted(*args: Any, **kwargs: Any) -> None:
            rewrites.append(args)
            scrub(*args, **kwargs)

        monkeypatch.setattr(ws, "_scrub_record", counted)
        await store.forget_user("u_dana", "default", by=None)
        await daemon.service.forgotten(ForgetNotice(org="default", user="u_dana"))
        record = daemon.settings.state_dir / "sessions" / "s1" / "turn.json"
        assert b"g.md" in record.read_bytes()  # the scrub that failed
        rewrites.clear()

        await daemon.service.poll_forgets()

        assert b"g.md" not in record.read_bytes()
        assert len(rewrites) == 1


@pytest.mark.error_log(r"could not take what was forgotten out of the turn of session s1")
async def test_a_scrub_pending_while_its_turn_ends_is_done_once_the_end_keeps_the_turn_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scrub failed; the next look comes while the turn is ending, and the
    # end then fails at the store, keeping the turn (and its records) open.
    # That look must leave the scrub for a later one, not drop it unmade.
    async with danas_turn(tmp_path) as (daemon, store, root):
        scrub_fails_once(daemon, monkeypatch)
        await store.forget_file(ME, "g.md", by=None)
        await daemon.service.forgotten(
            ForgetNotice(org="default", user="u_dana", space="me", path="g.md")
        )
        record = daemon.settings.state_dir / "sessions" / "s1" / "turn.json"
        assert b"g.md" in record.read_bytes()
        await sh("printf rule > lending-rules/new.md", root)  # her space is read-only now
        storing, go = trio.Event(), trio.Event()

        async def held_then_down(*args: Any, **kwargs: Any) -> Any:
            storing.set()
            await go.wait()
            raise StoreUnavailable("the store is down")

        monkeypatch.setattr(store, "store_batch", held_then_down)
        monkeypatch.setattr(store, "store", held_then_down)
        ended: list[Any] = []

        async def end() -> None:
            ended.append(await daemon.service.end_turn("s1"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(end)
            await storing.wait()
            await daemon.service.poll_forgets()  # while the turn is ending
            go.set()
        assert ended[0].spaces["lending-rules"].kept  # the turn stays open, its records too
        monkeypatch.undo()

        await daemon.service.poll_forgets()

        assert b"g.md" not in record.read_bytes()


async def test_forgetting_a_file_the_turn_moved_drops_it_under_its_new_name(
    tmp_path: Path,
) -> None:
    async with danas_turn(tmp_path) as (daemon, _, root):
        await sh("mv me/g.md me/renamed.md && printf more >> me/renamed.md", root)
        await sh("mkdir me/box && mv me/renamed.md me/box/again.md", root)

        await manage(daemon, "forget", "me", "g.md", "--user", "u_dana")

        assert b"again.md" not in (await sh("ls -R me", root)).stdout
        state = daemon.settings.state_dir
        assert not any(SECRET in p.read_bytes() for p in state.rglob("*") if p.is_file())


async def test_a_poll_takes_the_words_of_a_person_forgotten_elsewhere_out_of_a_turn_by_them(
    tmp_path: Path,
) -> None:
    # Only org memory is mounted; the turn is by her (her id is its `by`).
    # Another process forgets her: the poll must find her words here too.
    async with running_daemon(tmp_path, SPECS[:1]) as daemon:
        store = await seeded(daemon)
        root = await start(daemon, "s1", prompt=PROMPT)
        await sh("printf rule > lending-rules/r.md", root)
        await store.forget_user("u_dana", "default", by=None)  # nobody tells this daemon

        await daemon.service.poll_forgets()

        record = (daemon.settings.state_dir / "sessions" / "s1" / "turn.json").read_bytes()
        assert b"okapi-prompt" not in record and b'"Dana"' not in record
        await daemon.service.end_turn("s1")
        [revision] = await store.history(SpaceRef(layer="org", space="lending-rules"), "r.md")
        assert revision.provenance.prompt is None
        assert person_keys(daemon, "u_dana") == 0


async def test_a_poll_takes_a_forgotten_persons_words_out_of_a_held_org_change_set(
    tmp_path: Path,
) -> None:
    specs = [SPECS[0].model_copy(update={"commit": "manual"}), SPECS[1]]
    async with running_daemon(tmp_path, specs) as daemon:
        store = await seeded(daemon)
        root = await start(daemon, "s1", prompt=PROMPT)
        await sh("printf rule > lending-rules/r.md", root)
        ended = await daemon.service.end_turn("s1")
        [held] = (daemon.settings.state_dir / "sessions" / "s1" / "manual").glob("*.json")
        await store.forget_user("u_dana", "default", by=None)  # nobody tells this daemon

        await daemon.service.poll_forgets()

        assert b"okapi-prompt" not in held.read_bytes() and b'"Dana"' not in held.read_bytes()
        await daemon.service.commit_turn("s1", ended.turn)
        assert person_keys(daemon, "u_dana") == 0


def test_forgetting_takes_a_label_out_of_the_extra_body_wherever_it_is_nested() -> None:
    # An app's own resolver may read the name from deep in its body.
    by = memfs.By(id="u_dana", label="Dana Okapi")
    mount = Mount(
        name="me", path=Path("/m/me"), space="me", layer="user", ref=ME, read_only=False,
        commit="after-turn", from_last_known_copy=False, cursor="1", snapshot={}, sizes={}, by=by,
    )  # fmt: skip
    plan = TurnPlan(
        session="s1",
        turn="t1",
        root=Path("/m"),
        prompt=PROMPT,
        extra_body={"user": {"id": "u_dana", "name": "Dana Okapi"}, "tags": ["Dana Okapi", "x"]},
        mounts={"me": mount},
        note="",
    )
    forgot = plan.forgetting("u_dana")
    assert forgot.prompt is None and forgot.forgotten == {"u_dana"}
    assert forgot.extra_body == {"user": {"id": "u_dana"}, "tags": ["x"]}
    assert forgot.mounts["me"].by == memfs.By(id="u_dana")


async def test_a_person_forgotten_before_their_turn_starts_keeps_the_new_turns_words(
    tmp_path: Path,
) -> None:
    # Forgotten, then back for a new turn; someone else's forget is heard while
    # it starts. Only forgets heard after the start began are the new turn's.
    store = MemoryStore()
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    await store.forget_user("u_dana", "default", by=None)
    await service.forgotten(ForgetNotice(org="default", user="u_dana"))
    await start_with_forgets_between(
        service, ws, lambda: service.forgotten(ForgetNotice(org="default", user="u_eve"))
    )

    [turn] = memory.open_turns()
    assert turn.prompt == PROMPT and turn.plan.forgotten == frozenset()


@pytest.mark.parametrize("store_kind", ["memory", "folder"])
@pytest.mark.parametrize("others", [HEARD_FORGETS - 1, HEARD_FORGETS])
async def test_a_turn_starting_while_heard_people_are_forgotten_takes_the_first_ones_words_out(
    tmp_path: Path, store_kind: str, others: int
) -> None:
    # The daemon keeps the latest HEARD_FORGETS notices it heard, for
    # the turns starting meanwhile: at the limit Dana, heard first, is still
    # on that list; past it she has fallen off, and the turn must not keep her
    # words for that.
    store: MemoryStore | FolderStore = (
        MemoryStore() if store_kind == "memory" else FolderStore(tmp_path / "folder")
    )
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))

    async def forget_her_then_others() -> None:
        await store.forget_user("u_dana", "default", by=None)
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))
        for n in range(others):
            await service.forgotten(ForgetNotice(org="default", user=f"u_{n}"))

    await start_with_forgets_between(service, ws, forget_her_then_others)

    listed = [notice.user for _, notice in service.heard_forgets]
    assert len(listed) == min(1 + others, HEARD_FORGETS)
    assert ("u_dana" in listed) == (others < HEARD_FORGETS)
    [turn] = memory.open_turns()
    assert turn.prompt is None and turn.plan.forgotten == {"u_dana"}


async def test_a_poll_keeps_the_words_of_a_forgotten_persons_turn_started_after_the_forget(
    tmp_path: Path,
) -> None:
    # Her older turn is still open when another process forgets her; she comes
    # back and starts a new turn. The poll that finds the forget takes her
    # words out of the older turn only: the new one's prompt came after it.
    async with running_daemon(tmp_path, SPECS) as daemon:
        store = await seeded(daemon)
        await start(daemon, "s1", prompt=PROMPT)
        await store.forget_user("u_dana", "default", by=None)  # nobody tells this daemon
        await start(daemon, "s2", prompt="okapi-second: my new treatment plan")

        await daemon.service.poll_forgets()

        sessions = daemon.settings.state_dir / "sessions"
        assert b"okapi-prompt" not in (sessions / "s1" / "turn.json").read_bytes()
        assert b"okapi-second" in (sessions / "s2" / "turn.json").read_bytes()
        [s1, s2] = daemon.service.memory.open_turns()
        assert s1.prompt is None and s2.prompt == "okapi-second: my new treatment plan"
        assert s2.plan.forgotten == frozenset()
        await sh("printf mine > me/new.md", Path(s2.root))
        ended = await daemon.service.end_turn("s2")
        assert ended.spaces["me"].status == "saved"
        [revision] = await store.history(ME, "new.md")
        assert revision.provenance.prompt == "okapi-second: my new treatment plan"


async def test_a_turn_she_starts_after_a_forget_keeps_its_words_when_an_older_start_hears_it(
    tmp_path: Path,
) -> None:
    # Her first turn's start hears the forget; before it is open, she is back
    # and a second turn of hers starts and opens. The first start drops her
    # words from itself: the notice already reached every turn open before.
    store = MemoryStore()
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    real_open = ws.open

    async def forget_her_then_she_is_back() -> None:
        await store.forget_user("u_dana", "default", by=None)
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))
        ws.open = real_open  # type: ignore[method-assign]
        body = {"userId": "u_dana", "name": "Dana"}
        again = "okapi-second: my new treatment plan"
        await service.start_turn(StartTurnRequest(session="s2", extra_body=body, prompt=again))

    await start_with_forgets_between(service, ws, forget_her_then_she_is_back)

    first, second = memory.open_turns()
    assert first.prompt is None and first.plan.forgotten == {"u_dana"}
    assert second.prompt == "okapi-second: my new treatment plan"
    assert second.plan.forgotten == frozenset()


async def dana_starts(service: DaemonService) -> Turn:
    """Dana's turn, by her, with her prompt; the open turn of session s1."""
    body = {"userId": "u_dana", "name": "Dana", "role": "underwriter"}
    await service.start_turn(StartTurnRequest(session="s1", extra_body=body, prompt=PROMPT))
    return service.memory.open_turn("s1")


async def test_a_poll_takes_her_words_out_of_a_turn_whose_load_of_her_space_failed(
    tmp_path: Path,
) -> None:
    # Her space could not be loaded (no copy of it known): that mount has no
    # cursor, so her words are dated by the turn's other loads, never kept.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    down = StoreUnavailable("the store is down")
    store.fail("load_lean", down, times=1, when=lambda ref, *_: ref == ME)
    memory, ws = desk(tmp_path, store, SPECS)
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        turn = await dana_starts(service)
        assert turn.mounts["me"].cursor is None and turn.mounts["lending-rules"].cursor
        await store.inner.forget_user("u_dana", "default", by=None)  # nobody tells it

        await service.poll_forgets()

        assert turn.prompt is None and turn.plan.forgotten == {"u_dana"}
        assert b"okapi-prompt" not in ws.turn_file("s1").read_bytes()
    finally:
        await store.aclose()


async def test_a_poll_dates_her_words_by_the_stores_loads_not_an_apps_folder(
    tmp_path: Path,
) -> None:
    # An app's folder has a cursor of the app's own ("etag-abc"), no number
    # of the store's sequence: asking the store with it failed every look.
    async def load(ctx: object) -> tuple[dict[str, bytes], str]:
        return {}, "etag-abc"

    async def keep(ctx: object, changes: object, cursor: object) -> None:
        return None

    store = MemoryStore()
    specs = [SPECS[0], memfs.persistent_dir(path="scratch", load=load, store=keep)]
    memory, ws = desk(tmp_path, store, specs)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    turn = await dana_starts(service)
    await store.forget_user("u_dana", "default", by=None)  # nobody tells it

    await service.poll_forgets()

    assert turn.prompt is None and turn.plan.forgotten == {"u_dana"}


async def test_a_shared_stores_notice_heard_while_a_turn_by_her_starts_takes_her_words_out(
    tmp_path: Path,
) -> None:
    # Only org memory is mounted; a shared store's notice names her space,
    # not her, and comes while her turn starts: no poll will look again
    # (forget_poll_seconds = 0), so the start asks of everyone in the turn.
    store = MemoryStore()
    memory, ws = desk(tmp_path, store, SPECS[:1])
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))

    async def forget_her() -> None:
        await store.forget_user("u_dana", "default", by=None)
        await service.poll_forgets(only={ME})  # what memfsd.listen does on a notice

    await start_with_forgets_between(service, ws, forget_her)

    [turn] = memory.open_turns()
    assert turn.prompt is None and turn.plan.forgotten == {"u_dana"}
    assert b"okapi-prompt" not in ws.turn_file("s1").read_bytes()


def block_stores(store: FaultyStore) -> list[trio.Event]:
    """Stores wait until the events are set: alone, or with the trace (one space stored)."""
    return [store.block("store"), store.block("store_batch")]


async def her_store_waits(store: FaultyStore) -> None:
    """Until the turn's end has called the store for her space (the first), blocked there."""
    with trio.fail_after(10):  # the end goes through worker threads before it gets there
        while store.calls["store"] + store.calls["store_batch"] < 1:  # noqa: ASYNC110
            await trio.sleep(0.01)  # calls are counted, not signalled
    assert store.calls["store"] + store.calls["store_batch"] == 1, store.calls


async def ended_as_she_is_forgotten(
    tmp_path: Path, store: FaultyStore, specs: Sequence[MemorySpec], mine: bytes = b"mine\n"
) -> tuple[DaemonService, Turn, TurnEnded]:
    """Dana's turn writes her space and the rules and ends; she is forgotten (the daemon
    told) while the end's first store waits."""
    memory, ws = desk(tmp_path, store, specs)
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    turn = await dana_starts(service)
    write_new(ws.overlay, mounts_of(ws.overlay)["me"], "n.md", mine)
    write_new(ws.overlay, mounts_of(ws.overlay)["lending-rules"], "r.md", b"a rule\n")
    gates = block_stores(store)
    ended: list[TurnEnded] = []

    async def end() -> None:
        ended.append(await service.end_turn("s1"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(end)
        await her_store_waits(store)
        await store.inner.forget_user("u_dana", "default", by=None)
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))
        for gate in gates:
            gate.set()
    return service, turn, ended[0]


async def test_a_forget_heard_while_a_turn_ends_leaves_her_words_out_of_the_spaces_stored_after(
    tmp_path: Path,
) -> None:
    # Her space is stored first; she is forgotten (and the daemon told) while
    # that store runs. The org space, stored next, must not carry her prompt
    # or her name: they were taken out of the turn before it was stored.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    try:
        _, turn, _ = await ended_as_she_is_forgotten(tmp_path, store, [SPECS[1], SPECS[0]])
        assert turn.prompt is None
        [revision] = await store.inner.history(SpaceRef(layer="org", space="lending-rules"), "r.md")
        assert revision.provenance.prompt is None
        assert revision.provenance.by is not None and revision.provenance.by.label is None
    finally:
        await store.aclose()


async def test_a_forget_heard_while_a_turn_ends_leaves_her_words_out_of_its_held_change_set(
    tmp_path: Path,
) -> None:
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    manual = SPECS[0].model_copy(update={"commit": "manual"})
    try:
        service, _, _ = await ended_as_she_is_forgotten(tmp_path, store, [SPECS[1], manual])
        [held] = (tmp_path / "state" / "sessions" / "s1" / "manual").glob("*.json")
        assert b"okapi-prompt" not in held.read_bytes() and b'"Dana"' not in held.read_bytes()
        [hold] = service.manual.values()
        assert hold.spaces["lending-rules"].provenance.prompt is None
        assert hold.forgotten == ["u_dana"]
    finally:
        await store.aclose()


async def test_her_manual_space_that_ended_before_a_forget_heard_mid_end_is_not_held(
    tmp_path: Path,
) -> None:
    # Her own space (manual) ends first and is held; she is forgotten while
    # the org space stores. Nothing of her space may be held, or written down.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    mine = SPECS[1].model_copy(update={"commit": "manual"})
    try:
        service, _, ended = await ended_as_she_is_forgotten(
            tmp_path, store, [mine, SPECS[0]], b"her-secret\n"
        )
        assert all("me" not in hold.spaces for hold in service.manual.values())
        assert ended.spaces["me"].reason == "forgotten"
        state = tmp_path / "state"
        assert not any(b"her-secret" in p.read_bytes() for p in state.rglob("*") if p.is_file())
    finally:
        await store.aclose()


async def test_an_end_retried_after_a_failure_still_holds_the_manual_change_set(
    tmp_path: Path,
) -> None:
    # The manual space ended first; the store of the next one raised, so the
    # end failed and its hold was never made. The retry must make it.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    manual = SPECS[0].model_copy(update={"commit": "manual"})
    memory, ws = desk(tmp_path, store, [manual, SPECS[1]])
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        await dana_starts(service)
        write_new(ws.overlay, mounts_of(ws.overlay)["lending-rules"], "r.md", b"a rule\n")
        write_new(ws.overlay, mounts_of(ws.overlay)["me"], "n.md", b"mine\n")
        for method in ("store", "store_batch"):
            store.fail(method, ConfigError("boom"), times=1)
        with pytest.raises(ConfigError):
            await service.end_turn("s1")
        store.heal()

        ended = await service.end_turn("s1")

        assert ended.spaces["lending-rules"].status == "manual"
        [hold] = service.manual.values()
        assert hold.spaces["lending-rules"].changes.created == {"r.md": b"a rule\n"}
    finally:
        await store.aclose()


async def test_polls_keep_the_words_of_a_turn_over_org_memory_she_started_once_back(
    tmp_path: Path,
) -> None:
    # The org space has not changed since she was forgotten: its cursor is
    # older than the forget, and dating her turn by it dropped her prompt at
    # every look. The mark her turn noted as it started says otherwise.
    store = SqliteStore(tmp_path / "memfs.db")
    memory, ws = desk(tmp_path, store, SPECS[:1])
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        rules = SpaceRef(layer="org", space="lending-rules")
        await store.put(rules, ChangeSet(created={"r.md": b"r\n"}), provenance=Provenance())
        await store.forget_user("u_dana", "default", by=None)
        turn = await dana_starts(service)

        await service.poll_forgets()
        await service.poll_forgets()

        assert turn.prompt == PROMPT and turn.plan.forgotten == frozenset()
        await store.forget_user("u_dana", "default", by=None)  # and again, now: it goes
        await service.poll_forgets()
        assert turn.prompt is None and turn.plan.forgotten == {"u_dana"}
    finally:
        await store.aclose()


@pytest.mark.parametrize("heard", ["notice", "look"])
async def test_a_forgotten_file_is_not_served_back_from_the_last_known_copy(
    tmp_path: Path, heard: str
) -> None:
    # Dana copied one of the desk's rules into her own memory under a name of
    # her own, and had that file forgotten, while a turn of hers is open (so
    # this process keeps a last copy of her space). This daemon heard the
    # forget by a notice (the CLI, a shared store's listener), or found it at
    # a look at the store (another process made it). Then the store went
    # down: her next turn falls back to that last copy, which must not name
    # the forgotten file. Its blob is still here, as the desk's (shared
    # memory's blobs stay), so the copy's "every blob held" check passes.
    rule = b"no unsecured loan over 50k\n"
    forgotten = "letter-to-my-lawyer.md"
    desk_ref = SpaceRef(layer="org", space="desk")
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    await store.put(desk_ref, ChangeSet(created={"rule.md": rule}), provenance=Provenance())
    await store.put(ME, ChangeSet(created={forgotten: rule}), provenance=Provenance())
    specs = [memfs.org_memory(space="desk", review="none"), memfs.user_memory()]
    memory, ws = desk(tmp_path, store, specs)
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    await memory.start_turn("s1", {"userId": "u_dana"})  # stays open
    second = await memory.start_turn("s2", {"userId": "u_dana"})  # loads her space lean
    assert forgotten in second.mounts["me"].snapshot
    await second.end()

    await store.forget_file(ME, forgotten, by=None)
    if heard == "notice":
        await service.forgotten(
            ForgetNotice(org="default", user="u_dana", space=ME.space, path=forgotten)
        )
    else:
        await service.poll_forgets()
    store.fail("load_lean", memfs.StoreUnavailable("the database is down"))

    again = await memory.start_turn("s3", {"userId": "u_dana"})
    assert again.mounts["me"].from_last_known_copy
    assert forgotten not in again.mounts["me"].snapshot
    assert forgotten not in again.note


async def test_a_catch_up_after_a_lost_listening_connection_reaches_a_turn_that_was_starting(
    tmp_path: Path,
) -> None:
    # A shared store's listener lost its connection; meanwhile another host
    # forgot Dana's file, and that notice is gone. Her turn here had loaded
    # her space and was not open yet when the listener came back and caught
    # up (``memfsd.listen._catch_up``: every open turn asked about). With
    # forget_poll_seconds = 0 nothing asks again: the turn must not open
    # holding the forgotten file, as it would not after a notice heard then.
    from memfsd.listen import _catch_up

    store = SqliteStore(tmp_path / "memfs.db")
    created = {"g.md": SECRET, "keep.md": b"keep\n"}
    await store.put(ME, ChangeSet(created=created), provenance=Provenance())
    memory, ws = desk(tmp_path, store, [memfs.user_memory()])
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))

    async def forgotten_elsewhere_then_caught_up() -> None:
        await store.forget_file(ME, "g.md", by=None)  # through another host: no notice here
        await _catch_up(service)  # the listener is back and asks about every open turn

    await start_with_forgets_between(service, ws, forgotten_elsewhere_then_caught_up)

    assert len(memory.open_turns()) == 1
    assert "g.md" not in mounts_of(ws.overlay)["me"].snapshot
    assert digest(SECRET) not in ws.overlay.blobs.held()


async def test_a_forget_made_while_her_org_store_is_in_flight_leaves_her_words_out_of_the_store(
    tmp_path: Path,
) -> None:
    # Her turn writes only org memory. Its one store (with the trace) is on
    # its way to the store when the admin forgets her there, and the daemon
    # is told; the store commits after the forget. Her prompt and her label
    # must not be in the store afterwards, nor a key made again for her.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    memory, ws = desk(tmp_path, store, SPECS)
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        await dana_starts(service)
        write_new(ws.overlay, mounts_of(ws.overlay)["lending-rules"], "r.md", b"a rule\n")
        gates = block_stores(store)
        ended: list[TurnEnded] = []

        async def end() -> None:
            ended.append(await service.end_turn("s1"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(end)
            await her_store_waits(store)  # the org store, in flight
            await store.inner.forget_user("u_dana", "default", by=None)
            await service.forgotten(ForgetNotice(org="default", user="u_dana"))
            for gate in gates:
                gate.set()

        assert ended[0].spaces["lending-rules"].status == "saved"
        rules = SpaceRef(layer="org", space="lending-rules")
        [revision] = await store.inner.history(rules, "r.md")
        assert revision.provenance.prompt is None
        assert revision.provenance.by is not None and revision.provenance.by.label is None
        [trace] = await store.inner.traces(session="s1")
        assert trace.prompt is None
    finally:
        await store.aclose()
    db = sqlite3.connect(tmp_path / "memfs.db")
    try:
        keys = db.execute("SELECT COUNT(*) FROM person_keys WHERE \"user\" = 'u_dana'").fetchone()
    finally:
        db.close()
    assert keys == (0,)


async def test_forgetting_a_file_drops_it_under_its_new_name_after_another_file_took_a_name_it_passed(  # noqa: E501
    tmp_path: Path,
) -> None:
    # g.md went a.md, then b.md; keep.md then took the name a.md. The file
    # under b.md is still g.md's: the forget of g.md must take it out.
    async with danas_turn(tmp_path) as (daemon, _, root):
        await sh("mv me/g.md me/a.md && mv me/a.md me/b.md && mv me/keep.md me/a.md", root)
        await sh("printf more >> me/b.md", root)

        await manage(daemon, "forget", "me", "g.md", "--user", "u_dana")

        seen = await sh("cat me/b.md", root, check=False)
        assert SECRET not in seen.stdout
        state = daemon.settings.state_dir
        assert await trio.to_thread.run_sync(names_in, state, SECRET) == []


async def test_forgetting_a_person_leaves_nothing_of_her_saved_space_in_a_held_change_set(
    tmp_path: Path,
) -> None:
    # The rules are manual and held; her own space ended with the turn (saved
    # at once). The hold keeps every space's result for the commit's report:
    # after she is forgotten, nothing of her files may stay in it on disk.
    specs = [SPECS[0].model_copy(update={"commit": "manual"}), SPECS[1]]
    async with running_daemon(tmp_path, specs) as daemon:
        await seeded(daemon)
        root = await start(daemon, "s1", prompt=PROMPT)
        await sh("printf rule > lending-rules/r.md && printf okapi-secret > me/okapi.md", root)
        ended = await daemon.service.end_turn("s1")
        assert (ended.spaces["me"].status, ended.spaces["lending-rules"].status) == (
            "saved",
            "manual",
        )
        [held] = (daemon.settings.state_dir / "sessions" / "s1" / "manual").glob("*.json")

        await manage(daemon, "forget-user", "u_dana")

        text = held.read_bytes()
        for secret in (b"okapi", b"b2thcGkt"):  # b2thcGkt: base64 of "okapi-"
            assert secret not in text, secret
        [hold] = daemon.service.manual.values()
        assert hold.ended["me"].changes.is_empty()


async def forgotten_while_done_json_is_written(
    service: DaemonService,
    ws: OverlayWorkspace,
    store: ManagedStore,
    monkeypatch: pytest.MonkeyPatch,
) -> TurnEnded:
    """End s1; while its end writes the done.json naming diagnosis.md, forget Dana and say so.

    The notice's own record of the turn waits behind that write; the write
    goes on once it does. Returns the end's result.
    """
    import threading

    import memfsd.workspace

    real = memfsd.workspace._write_atomic
    waiting, go = threading.Event(), threading.Event()

    def held_back(target: Path, text: str, *args: Any, **kwargs: Any) -> None:
        if target.name == "done.json" and "diagnosis" in text and not waiting.is_set():
            waiting.set()
            go.wait(10)
        real(target, text, *args, **kwargs)

    monkeypatch.setattr(memfsd.workspace, "_write_atomic", held_back)
    ended: list[TurnEnded] = []

    async def end() -> None:
        ended.append(await service.end_turn("s1"))

    async def notice() -> None:
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(end)
        await trio.to_thread.run_sync(waiting.wait, 10)
        await store.forget_user("u_dana", "default", by=None)
        nursery.start_soon(notice)
        with trio.fail_after(10):  # the notice's record waits behind the end's write
            while ws._recording["s1"].statistics().tasks_waiting == 0:  # noqa: ASYNC110
                await trio.sleep(0.01)
        go.set()
    return ended[0]


async def test_a_forget_heard_while_her_stored_space_is_written_down_leaves_no_name_in_done_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rules' store fails (kept: the turn stays open); her space is stored
    # next, and the end writes that down in done.json. She is forgotten, and
    # the daemon told, while that write is on its way: the forget writes its
    # own done.json, and the end's, made before the forget, must not land over it.

    store, rules = org_store_down()
    specs = [memfs.org_memory(space=rules.space, review="none"), memfs.user_memory()]
    memory, ws = desk(tmp_path, store, specs)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    await service.start_turn(StartTurnRequest(session="s1", extra_body={"userId": "u_dana"}))
    for name, file in (("me", "diagnosis.md"), ("lending-rules", "rule.md")):
        write_new(ws.overlay, mounts_of(ws.overlay)[name], file, b"x\n")

    ended = [await forgotten_while_done_json_is_written(service, ws, store, monkeypatch)]

    assert ended[0].spaces["lending-rules"].kept
    done_file = tmp_path / "state" / "sessions" / "s1" / "done.json"
    assert b"diagnosis" not in done_file.read_bytes()


async def test_two_forgets_heard_at_once_both_hold_in_a_held_change_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Her turn ended holding the rules (in her words) and her space, both
    # manual. A notice that one file of hers was forgotten is writing the
    # hold down when the notice that she is forgotten whole comes (the
    # control API serves both at once). Her words must not come back.
    import threading

    import memfsd.workspace

    store = SqliteStore(tmp_path / "memfs.db")
    specs = [spec.model_copy(update={"commit": "manual"}) for spec in SPECS]
    memory, ws = desk(tmp_path, store, specs)
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        await store.put(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
        await dana_starts(service)
        write_new(ws.overlay, mounts_of(ws.overlay)["lending-rules"], "r.md", b"a rule\n")
        write_new(ws.overlay, mounts_of(ws.overlay)["me"], "n.md", b"mine\n")
        ended = await service.end_turn("s1")
        assert ended.spaces["me"].status == "manual"

        real = memfsd.workspace._write_atomic
        waiting, go = threading.Event(), threading.Event()

        def held_back(target: Path, text: str, *args: Any, **kwargs: Any) -> None:
            if target.parent.name == "manual" and not waiting.is_set():
                waiting.set()
                go.wait(10)
            real(target, text, *args, **kwargs)

        monkeypatch.setattr(memfsd.workspace, "_write_atomic", held_back)
        await store.forget_file(ME, "g.md", by=None)
        await store.forget_user("u_dana", "default", by=None)

        async def file_notice() -> None:
            await service.forgotten(
                ForgetNotice(org="default", user="u_dana", space="me", path="g.md")
            )

        async def person_notice() -> None:
            await service.forgotten(ForgetNotice(org="default", user="u_dana"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(file_notice)
            await trio.to_thread.run_sync(waiting.wait, 10)
            nursery.start_soon(person_notice)
            with trio.fail_after(10):  # its words are written down first, in threads
                while service._hold_writes.statistics().tasks_waiting == 0:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            go.set()

        [hold] = service.manual.values()
        assert hold.prompt is None and hold.forgotten == ["u_dana"]
        [held] = (tmp_path / "state" / "sessions" / "s1" / "manual").glob("*.json")
        assert b"okapi-prompt" not in held.read_bytes()
    finally:
        await store.aclose()


async def test_a_person_forgotten_in_the_folder_store_while_the_daemon_was_down_is_not_written_back(
    tmp_path: Path,
) -> None:
    # Her space was empty when her turn loaded it; her turn wrote a file;
    # the daemon went down and she was forgotten (people/default/u_dana/
    # removed; no daemon to tell). The turn brought back and ended must not
    # write her memory back into the store.
    store = FolderStore(tmp_path / "folder")
    specs = [memfs.user_memory()]
    memory, ws = desk(tmp_path, store, specs)
    await memory.start_turn("s1", {"userId": "u_dana"}, "okapi-prompt")
    write_new(ws.overlay, mounts_of(ws.overlay)["me"], "diagnosis.md", SECRET)
    other = ChangeSet(created={"other.md": b"x\n"})
    await store.store(ME, other, cursor=None, provenance=Provenance())
    await store.forget_user("u_dana", "default", by=None)
    # (Another of her conversations stored a file and she was forgotten: the
    # folder is gone, as it was when her turn loaded it.)

    ws, restored = restart(tmp_path, store, specs)
    service = DaemonService(restored._memory, ws, "folder://", str(tmp_path / "state"))
    await service.catch_up_forgets()
    await restored.end()

    assert await store.user_files("u_dana", "default") == {}


async def test_a_forget_heard_while_the_turns_last_record_is_written_leaves_no_done_json_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Her turn stores her one space; the end's last record (done.json, and
    # turn.json removed in the same trip) is on its way when she is forgotten
    # and the daemon told. The forget's record of the turn waits for that
    # write; the end closes the turn at once after it. Nothing of the ended
    # turn may be written after: no done.json naming her file outlives it.

    store = MemoryStore()
    specs = [memfs.user_memory()]
    memory, ws = desk(tmp_path, store, specs)
    service = DaemonService(memory, ws, "memory://", str(tmp_path / "state"))
    await service.start_turn(StartTurnRequest(session="s1", extra_body={"userId": "u_dana"}))
    write_new(ws.overlay, mounts_of(ws.overlay)["me"], "diagnosis.md", b"x\n")

    ended = [await forgotten_while_done_json_is_written(service, ws, store, monkeypatch)]

    assert ended[0].spaces["me"].status == "saved"
    session = tmp_path / "state" / "sessions" / "s1"
    assert not (session / "turn.json").exists()
    left = session / "done.json"
    assert not left.exists(), left.read_text()


async def test_a_file_of_her_saved_space_forgotten_elsewhere_leaves_nothing_of_it_in_a_held_change_set(  # noqa: E501
    tmp_path: Path,
) -> None:
    # The rules are manual and held; her own space ended with the turn (saved
    # at once), and the hold keeps its result for the commit's report. Her
    # file is forgotten by another process (her my_memory page: no notice);
    # the daemon's look for forgets must reach the hold as a notice does.
    store = SqliteStore(tmp_path / "memfs.db")
    specs = [SPECS[0].model_copy(update={"commit": "manual"}), SPECS[1]]
    memory, ws = desk(tmp_path, store, specs)
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        await dana_starts(service)
        write_new(ws.overlay, mounts_of(ws.overlay)["lending-rules"], "r.md", b"a rule\n")
        write_new(ws.overlay, mounts_of(ws.overlay)["me"], "zebra.md", b"zebra-secret")
        ended = await service.end_turn("s1")
        assert (ended.spaces["me"].status, ended.spaces["lending-rules"].status) == (
            "saved",
            "manual",
        )
        [held] = (tmp_path / "state" / "sessions" / "s1" / "manual").glob("*.json")
        assert b"zebra.md" in held.read_bytes()

        await store.forget_file(ME, "zebra.md", by=None)
        await service.poll_forgets()

        text = held.read_bytes()
        for secret in (b"zebra", b"emVicmEt"):  # emVicmEt: base64 of "zebra-"
            assert secret not in text, secret
    finally:
        await store.aclose()


async def test_her_org_words_after_a_forget_this_daemon_heard_stay_when_an_earlier_start_read_her_mark(  # noqa: E501
    tmp_path: Path,
) -> None:
    # A turn of hers started (her mark read: never forgotten), then she was
    # forgotten and the daemon told, then she is back at once with a new turn
    # over org memory. The daemon heard the forget, yet her new turn is handed
    # the mark read before it (WordMarks caches it MARK_SECONDS): the store
    # takes the forget for one after her new words and strips them.
    store = SqliteStore(tmp_path / "memfs.db")
    memory, ws = desk(tmp_path, store, SPECS[:1])
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        rules = SpaceRef(layer="org", space="lending-rules")
        await store.put(rules, ChangeSet(created={"old.md": b"r\n"}), provenance=Provenance())
        await dana_starts(service)
        await service.end_turn("s1")
        await store.forget_user("u_dana", "default", by=None)
        await service.forgotten(ForgetNotice(org="default", user="u_dana"))
        again = "okapi-second: a rule I teach once back"
        body = {"userId": "u_dana", "name": "Dana", "role": "underwriter"}
        await service.start_turn(StartTurnRequest(session="s2", extra_body=body, prompt=again))
        write_new(ws.overlay, mounts_of(ws.overlay, "s2")["lending-rules"], "r.md", b"a rule\n")
        assert memory.open_turn("s2").prompt == again  # the turn keeps them: only the store drops

        ended = await service.end_turn("s2")

        assert ended.spaces["lending-rules"].status == "saved"
        [revision] = await store.history(rules, "r.md")
        assert revision.provenance.prompt == again
        [trace] = await store.traces(session="s2")
        assert trace.prompt == again
    finally:
        await store.aclose()


async def test_a_turn_brought_back_after_a_restart_stores_no_words_of_hers_forgotten_in_flight(
    tmp_path: Path,
) -> None:
    # As test_a_forget_made_while_her_org_store_is_in_flight_leaves_her_words_out_of_the_store,
    # but the turn was brought back by a restart: it has no marks (words_since
    # None), and the store then judges nothing, so her words outlive the forget.
    inner = SqliteStore(tmp_path / "memfs.db")
    rules = SpaceRef(layer="org", space="lending-rules")
    await inner.put(rules, ChangeSet(created={"old.md": b"r\n"}), provenance=Provenance())
    store = FaultyStore(inner)
    memory, ws = desk(tmp_path, store, SPECS[:1])
    service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
    try:
        await dana_starts(service)
        write_new(ws.overlay, mounts_of(ws.overlay)["lending-rules"], "r.md", b"a rule\n")
        # The daemon restarts: the turn comes back from state_dir.
        memory, ws = desk(tmp_path, store, SPECS[:1])
        [record] = ws.saved_turns().records
        restored = memory.restore_turn(TurnState.model_validate(record["state"]))
        ws.reattach(restored.state(), record)
        service = DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))
        assert restored.prompt == PROMPT
        gates = block_stores(store)
        ended: list[TurnEnded] = []

        async def end() -> None:
            ended.append(await service.end_turn("s1"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(end)
            await her_store_waits(store)
            await inner.forget_user("u_dana", "default", by=None)
            await service.forgotten(ForgetNotice(org="default", user="u_dana"))
            for gate in gates:
                gate.set()

        assert ended[0].spaces["lending-rules"].status == "saved"
        [revision] = await inner.history(rules, "r.md")
        assert revision.provenance.prompt is None
        assert revision.provenance.by is not None and revision.provenance.by.label is None
        [trace] = await inner.traces(session="s1")
        assert trace.prompt is None
    finally:
        await store.aclose()


async def test_a_persons_last_known_copy_stays_while_a_turn_set_aside_at_start_holds_her_space(
    tmp_path: Path,
) -> None:
    # Her last copy is dropped with the last turn over her space, but a turn
    # set aside at start (left behind) still holds that space's blobs: the
    # copy stays while it does, as the look for forgets already counted it.
    store = SqliteStore(tmp_path / "memfs.db")
    try:
        await store.put(ME, ChangeSet(created={"g.md": SECRET}), provenance=Provenance())
        memory, _ = desk(tmp_path, store, [memfs.user_memory()])
        await memory.start_turn("s1", {"userId": "u_dana"})
        second = await memory.start_turn("s2", {"userId": "u_dana"})  # lean: a last copy
        memory.leave_behind("s1")
        await second.end()
        assert [ref for ref, _ in memory.last_known_people()] == [ME]
    finally:
        await store.aclose()
