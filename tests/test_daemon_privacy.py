"""Privacy on disk and on the mount: another local user reads nothing of anyone's memory.

Hostile users are numeric ids dropped to with ``setpriv`` (41000-41099). The
tests work in a folder under /tmp that other users can enter (pytest's own
tmp folders are private to root, which would hide every mistake).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import trio

import memfs
from memfs.api.models import StartTurnRequest
from memfs.core.errors import ConfigError, Exists
from memfs.core.models import ChangeSet, Limits, Provenance, SpaceRef
from memfs.core.specs import as_spec
from memfs.engine.seeds import SeedRecord
from memfs.private import secure_state_dir
from memfs.stores.folder import FolderStore
from memfsd.blobs import BlobCache
from memfsd.main import Settings, serve
from memfsd.overlay import Overlay
from tests.daemon_harness import Daemon, require_fuse, require_root, running_daemon, sh
from tests.test_daemon_mount import DANA, SPECS, start

OTHER = 41001  # a local user who is not the daemon's
OWNER = 41010  # the agent a session belongs to
THIRD = 41011  # another agent

F = TypeVar("F", bound=Callable[..., Awaitable[None]])


def as_root(test: F) -> F:
    """The test drops to other users: it needs root (under CI, not having it fails)."""

    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> None:
        require_root("dropping to other users")
        await test(*args, **kwargs)

    return cast(F, run)


@pytest.fixture
def public() -> Iterator[Path]:
    """A folder every user can enter, as /var/lib or /srv are."""
    path = Path(tempfile.mkdtemp(prefix="memfs-priv-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    subprocess.run(["fusermount3", "-u", "-z", str(path / "mnt")], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def run_as(uid: int, *argv: str, gid: int | None = None) -> subprocess.CompletedProcess[bytes]:
    gid = uid if gid is None else gid
    return subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *argv],
        capture_output=True,
        timeout=30,
        check=False,
    )


def refused_read(uid: int, path: Path) -> bool:
    """True if ``uid`` gets EACCES reading ``path`` (the file exists: root can read it)."""
    assert path.exists(), path
    done = run_as(uid, "cat", str(path))
    return done.returncode != 0 and b"Permission denied" in done.stderr


def modes_under(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            full = Path(dirpath) / name
            found[str(full.relative_to(root))] = stat.S_IMODE(full.lstat().st_mode)
    return found


def assert_private(root: Path) -> None:
    """Every folder under ``root`` is 0700 and every file 0600."""
    wrong = {}
    for rel, mode in modes_under(root).items():
        full = root / rel
        want = 0o700 if full.is_dir() and not full.is_symlink() else 0o600
        if mode != want:
            wrong[rel] = oct(mode)
    assert wrong == {}


def open_up_folders(root: Path) -> None:
    """Let anyone pass through every folder, so only the files' own modes stand in the way."""
    for dirpath, _dirs, _files in os.walk(root):
        os.chmod(dirpath, 0o711)


@as_root
async def test_state_dir_files_are_0600_and_another_user_reads_none_of_them(
    public: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_daemon(public, SPECS) as daemon:
        state = daemon.settings.state_dir
        await start(daemon, "s1", DANA, prompt="what is my secret?")
        await sh("echo the secret > me/a.md", public / "mnt" / "s1")
        await daemon.service.end_turn("s1")
        # The next turn loads a.md into a blob and writes b.md to a data file.
        root = await start(daemon, "s1", DANA, prompt="and another?")
        await sh("cat me/a.md >/dev/null && echo another secret > me/b.md", root)
        [blob] = [p for p in (state / "blobs").rglob("*") if p.is_file()]
        [data] = [p for p in (state / "sessions").rglob("data/*") if p.is_file()]
        readable = [
            state / "memfs.db",
            state / "memfs.db-wal",
            state / "sessions" / "s1" / "turn.json",
            blob,
            data,
        ]
        assert all(refused_read(OTHER, path) for path in readable)
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert_private(state)

        # done.json exists while a turn ends: look at it just before it is removed.
        # (A final record removes it in its own trip: kept until close here.)
        seen: dict[str, Any] = {}
        workspace = daemon.service.workspace
        real_close, real_record = workspace.close, workspace.record

        async def record_not_final(*args: Any, final: bool = False) -> None:
            await real_record(*args)

        async def close_and_look(session: str) -> None:
            done = state / "sessions" / session / "done.json"
            seen["done"] = json.loads(done.read_text())
            seen["mode"] = stat.S_IMODE(done.stat().st_mode)
            seen["refused"] = await trio.to_thread.run_sync(refused_read, OTHER, done)
            await real_close(session)

        monkeypatch.setattr(workspace, "close", close_and_look)
        monkeypatch.setattr(workspace, "record", record_not_final)
        await daemon.service.end_turn("s1")
        assert "me" in seen["done"]["done"]
        assert seen["mode"] == 0o600 and seen["refused"]

        # With every folder opened up, the files' own modes still refuse.
        await start(daemon, "s1", DANA)
        await sh("echo third > me/c.md", public / "mnt" / "s1")
        open_up_folders(state)
        [data] = [p for p in (state / "sessions").rglob("data/*") if p.is_file()]
        for path in [state / "memfs.db", state / "memfs.db-wal", state / "memfs.db-shm",
                     state / "sessions" / "s1" / "turn.json", blob, data]:  # fmt: skip
            assert refused_read(OTHER, path), path
        await daemon.service.end_turn("s1")


async def test_state_dir_made_by_the_daemon_is_0700_and_a_wider_one_is_narrowed(
    public: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fresh = public / "made" / "state"
    secure_state_dir(fresh)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    assert stat.S_IMODE(fresh.parent.stat().st_mode) != 0o700  # the folders above stay usable
    for mode in (0o755, 0o777, 0o750, 0o500):
        wide = public / f"wide-{mode:o}"
        wide.mkdir()
        wide.chmod(mode)
        secure_state_dir(wide)
        assert stat.S_IMODE(wide.stat().st_mode) == 0o700
    assert "narrowed it to 0700" in caplog.text


async def test_the_daemon_narrows_an_open_state_dir_at_start(public: Path) -> None:
    state = public / "state"
    state.mkdir()
    state.chmod(0o755)
    async with running_daemon(public, SPECS) as daemon:
        assert stat.S_IMODE(daemon.settings.state_dir.stat().st_mode) == 0o700


@as_root
async def test_a_state_dir_another_user_owns_stops_the_start_naming_it(public: Path) -> None:
    require_fuse()
    state = public / "state"
    state.mkdir(mode=0o700)
    os.chown(state, OTHER, OTHER)
    settings = Settings(
        mount_root=public / "mnt",
        state_dir=state,
        store=f"sqlite://{state}/memfs.db",
        specs=[as_spec(spec) for spec in SPECS],
        limits=Limits(),
        socket=state / "memfs.sock",
    )
    with pytest.raises(ConfigError) as caught, trio.fail_after(30):
        await serve(settings)
    message = str(caught.value)
    assert str(state) in message and f"belongs to uid {OTHER}" in message
    assert not (public / "mnt").exists()  # refused before mounting anything
    assert list(state.iterdir()) == []  # and before writing anything there


def test_a_state_dir_that_is_a_file_is_refused(public: Path) -> None:
    (public / "state").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        secure_state_dir(public / "state")


@as_root
async def test_the_sqlite_store_opened_outside_the_daemon_is_0600(public: Path) -> None:
    db = public / "elsewhere.db"
    store = memfs.open_store(f"sqlite://{db}")
    try:
        ref = SpaceRef(layer="user", space="me", user="u_dana")
        provenance = Provenance(prompt="a private prompt")
        await store.store(ref, ChangeSet(created={"a.md": b"secret"}), cursor=None,
                          provenance=provenance)  # fmt: skip
        for suffix in ("", "-wal", "-shm"):
            path = db.with_name(db.name + suffix)
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, suffix
            assert refused_read(OTHER, path), suffix
    finally:
        await store.aclose()


async def test_an_old_world_readable_database_is_narrowed_when_opened(public: Path) -> None:
    db = public / "old.db"
    store = memfs.open_store(f"sqlite://{db}")
    await store.load(SpaceRef(layer="org", space="r"), "s")
    await store.aclose()
    db.chmod(0o644)
    store = memfs.open_store(f"sqlite://{db}")
    try:
        await store.load(SpaceRef(layer="org", space="r"), "s")
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
    finally:
        await store.aclose()


@as_root
async def test_the_folder_store_writes_0700_folders_and_0600_files(public: Path) -> None:
    store = FolderStore(public / "memory")
    for ref in (
        SpaceRef(layer="org", org="bank", space="rules"),
        SpaceRef(layer="user", org="bank", user="dana", space="me"),
    ):
        stored = await store.store(
            ref,
            ChangeSet(created={"deep/down/a.md": b"secret", "b.md": b"also"}),
            cursor=None,
            provenance=Provenance(),
        )
        assert stored.status == "saved"
    assert_private(public / "memory")
    files = [p for p in (public / "memory").rglob("*") if p.is_file()]
    assert len(files) >= 4
    assert all(refused_read(OTHER, path) for path in files)
    open_up_folders(public / "memory")
    assert all(refused_read(OTHER, path) for path in files)


async def test_the_seed_record_is_0600(public: Path) -> None:
    record = SeedRecord(public / "state" / "seeds.json")
    old_umask = os.umask(0o022)
    try:
        await record.put(SpaceRef(layer="org", space="rules"), {"a.md": "sha"})
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((public / "state" / "seeds.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((public / "state").stat().st_mode) == 0o700


def test_the_daemon_process_runs_with_umask_077(public: Path) -> None:
    require_fuse()
    from tests.test_daemon_process import DaemonProcess

    daemon = DaemonProcess(public)
    try:
        status = Path(f"/proc/{daemon.proc.pid}/status").read_text()
        assert "Umask:\t0077" in status
    finally:
        assert daemon.stop() == 0


# -- session directories and the mount root --------------------------------------


async def start_as(daemon: Daemon, session: str, **kw: Any) -> Path:
    started = await daemon.service.start_turn(
        StartTurnRequest(session=session, extra_body=DANA, **kw)
    )
    return Path(started.root)


@as_root
async def test_a_session_given_an_owner_later_is_0700_and_theirs(public: Path) -> None:
    async with running_daemon(public, SPECS) as daemon:
        mnt = daemon.mount_root
        await start_as(daemon, "s1")  # no --uid: root's, 0755
        await daemon.service.end_turn("s1")
        # Someone may already be standing in it, holding its old attributes.
        lurker = await trio.lowlevel.open_process(
            ["setpriv", f"--reuid={THIRD}", f"--regid={THIRD}", "--clear-groups", "sh", "-c",
             'cd "$0" && echo in && read go && ls me', str(mnt / "s1")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert lurker.stdin is not None and lurker.stdout is not None
        assert await lurker.stdout.receive_some() == b"in\n"  # it stands in the old directory
        root = await start_as(daemon, "s1", uid=OWNER, gid=OWNER)
        # Before anyone looks the session up again (which would refresh what the
        # kernel holds), the lurker tries the new turn's folder from where it stands.
        await lurker.stdin.send_all(b"go\n")
        code = await lurker.wait()
        assert code != 0  # the old directory it stands in holds nothing of the new turn
        assert await lurker.stdout.receive_some() == b""
        info = await trio.to_thread.run_sync(os.stat, root)
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (OWNER, OWNER, 0o700)
        wrote = await trio.to_thread.run_sync(
            lambda: run_as(OWNER, "sh", "-c", f"echo mine > {root}/me/secret.md")
        )
        assert wrote.returncode == 0, wrote.stderr
        for argv in (["ls", str(root)], ["cat", str(root / "me" / "secret.md")]):
            done = await trio.to_thread.run_sync(functools.partial(run_as, THIRD, *argv))
            assert done.returncode != 0 and b"Permission denied" in done.stderr, argv
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].created == ["secret.md"]


@as_root
async def test_the_mount_root_is_0711_agents_reach_their_own_session_but_list_none(
    public: Path,
) -> None:
    async with running_daemon(public, SPECS) as daemon:
        mnt = daemon.mount_root
        mine = await start_as(daemon, "mine", uid=OWNER, gid=OWNER)
        await start_as(daemon, "theirs", uid=THIRD, gid=THIRD)
        info = await trio.to_thread.run_sync(os.stat, mnt)
        assert stat.S_IMODE(info.st_mode) == 0o711
        listing = await trio.to_thread.run_sync(run_as, OWNER, "ls", str(mnt))
        assert listing.returncode != 0 and b"Permission denied" in listing.stderr
        assert b"theirs" not in listing.stdout
        reach = await trio.to_thread.run_sync(
            lambda: run_as(OWNER, "sh", "-c", f"echo ok > {mine}/me/n.md && ls {mine}")
        )
        assert reach.returncode == 0, reach.stderr
        assert sorted(reach.stdout.split()) == [b"lending-rules", b"me"]
        other = await trio.to_thread.run_sync(run_as, OWNER, "ls", str(mnt / "theirs"))
        assert other.returncode != 0 and b"Permission denied" in other.stderr
        # root (the daemon's user) still lists every session
        assert sorted(await trio.to_thread.run_sync(os.listdir, mnt)) == ["mine", "theirs"]
        await daemon.service.end_turn("mine")
        await daemon.service.end_turn("theirs")


async def test_a_failed_turn_start_leaves_the_sessions_owner_as_it_was(public: Path) -> None:
    async with running_daemon(public, SPECS) as daemon:
        with pytest.raises(memfs.NoIdentity):
            await daemon.service.start_turn(
                StartTurnRequest(session="s1", extra_body={}, uid=OWNER, gid=OWNER)
            )
        root = await start_as(daemon, "s1")
        info = await trio.to_thread.run_sync(os.stat, root)
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o755)
        await daemon.service.end_turn("s1")


# -- the same rules at the overlay, without a mount --------------------------------


def test_overlay_root_is_0711_and_a_late_owner_makes_a_new_0700_session_node(
    tmp_path: Path,
) -> None:
    overlay = Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits())
    assert overlay.root.mode == 0o711
    first = overlay.open_session("s1")
    old = first.node
    assert (old.mode, old.uid, old.gid) == (0o755, 0, 0)
    overlay.attach_turn("s1", "t1", {"me": (False, {})})
    with pytest.raises(Exists):  # never while a turn is attached
        overlay.open_session("s1", OWNER, OWNER)
    overlay.detach_turn("s1")
    overlay.stale_names.clear()
    again = overlay.open_session("s1", OWNER, OWNER)
    assert again is first
    node = again.node
    assert node is not old and node.inode != old.inode and not old.attached
    assert (node.mode, node.uid, node.gid) == (0o700, OWNER, OWNER)
    assert (again.uid, again.gid) == (OWNER, OWNER)
    assert overlay.root.kids["s1"] is node
    assert overlay.stale_names == [(1, "s1")]  # the kernel drops the old name
    # The same owner again changes nothing; mounts of the next turn are theirs.
    assert overlay.open_session("s1", OWNER, None).node is node
    state = overlay.attach_turn("s1", "t2", {"me": (False, {})})
    assert (state.mounts["me"].root.uid, state.mounts["me"].root.gid) == (OWNER, OWNER)
    # Only the gid changing is a change of owner too.
    overlay.detach_turn("s1")
    assert overlay.open_session("s1", None, THIRD).node.gid == THIRD


def test_the_overlay_makes_turn_folders_0700_and_data_files_0600(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        state_dir = tmp_path / "state"
        overlay = Overlay(state_dir, BlobCache(state_dir / "blobs"), Limits())
        overlay.open_session("s1")
        overlay.attach_turn("s1", "t1", {"me": (False, {})})
        mount = overlay.sessions["s1"].turn.mounts["me"]  # type: ignore[union-attr]
        overlay.create(mount.root.inode, "a.md", 0o644, 0, 0)
        overlay.blobs.put(b"a blob")
    finally:
        os.umask(old_umask)
    modes = modes_under(state_dir)
    del modes["."]  # made by the test
    assert modes and all(
        mode == (0o700 if (state_dir / rel).is_dir() else 0o600) for rel, mode in modes.items()
    ), modes


async def test_under_the_daemons_umask_the_mount_root_and_folders_above_stay_reachable(
    public: Path,
) -> None:
    # The daemon's process runs with umask 0o077; a plain mkdir -p would make
    # the mount root's parents (and state_dir's, which may be the same) 0700.
    base = public / "srv" / "memfs"
    old_umask = os.umask(0o077)
    try:
        async with running_daemon(base, SPECS) as daemon:
            for folder in (public / "srv", base):
                assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
            assert stat.S_IMODE(daemon.settings.state_dir.stat().st_mode) == 0o700
            await start_as(daemon, "s1", uid=OWNER, gid=OWNER)
            if os.geteuid() == 0:
                done = await trio.to_thread.run_sync(
                    lambda: run_as(OWNER, "sh", "-c", f"echo hi > {base}/mnt/s1/me/a.md")
                )
                assert done.returncode == 0, done.stderr
            await daemon.service.end_turn("s1")
    finally:
        os.umask(old_umask)


async def test_a_turn_recorded_with_an_impossible_owner_comes_back_roots_and_private(
    public: Path,
) -> None:
    async with running_daemon(public, SPECS) as daemon:
        await start_as(daemon, "s1", uid=OWNER, gid=OWNER)
        await sh("echo kept > me/k.md", daemon.mount_root / "s1", check=False)
    # As a memfs before the range check could have written it.
    turn_file = public / "state" / "sessions" / "s1" / "turn.json"
    head, _, rest = turn_file.read_text().partition("\n")
    record = json.loads(head)
    record["uid"], record["gid"] = 2**32, 2**32 + 5
    turn_file.write_text(json.dumps(record) + "\n" + rest)
    async with running_daemon(public, SPECS) as daemon:
        listing = await trio.to_thread.run_sync(os.listdir, daemon.mount_root)  # no EIO
        assert listing == ["s1"]
        info = await trio.to_thread.run_sync(os.stat, daemon.mount_root / "s1")
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, 0o700)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].status == "saved"


def test_a_name_the_kernel_would_not_drop_is_not_written_to_the_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # At start the kernel answers ENOSYS to invalidations; the names are a
    # person's file names, and a log (journald) is beyond any forget's reach.
    import errno

    import pyfuse3

    from memfsd.fs import invalidate_names

    def refuse(parent: int, name: bytes) -> None:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(pyfuse3, "invalidate_entry", refuse)
    with caplog.at_level("WARNING", logger="memfsd.fs"):
        invalidate_names([(4, "diagnosis-okapi.md"), (4, "other.md")])
    assert caplog.records, "the failure is still logged"
    assert "okapi" not in caplog.text and "other.md" not in caplog.text
    assert "4" in caplog.text  # the folder's inode says where
