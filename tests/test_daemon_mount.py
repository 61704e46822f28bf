"""Real mounts: the daemon serves turns as directories; real commands change them."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import memfs
from memfs.api.models import StartTurnRequest, TurnEnded
from memfs.core.models import digest
from memfs.stores.base import ReviewingStore
from tests.daemon_harness import Daemon, running_daemon, sh

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}
CAROL = {"userId": "u_carol", "name": "Carol", "bankId": "bank_17", "role": "officer"}

SPECS = [
    memfs.org_memory(
        space="lending-rules",
        org="bankId",
        description="The bank's lending rules.",
        can_write=lambda eb: eb.get("role") == "underwriter",
        by=lambda eb: {"id": eb["userId"], "label": eb["name"]},
        review="none",  # these tests are about the filesystem; review has its own
    ),
    memfs.user_memory(org="bankId"),  # a turn belongs to one org
]


async def start(daemon: Daemon, session: str, body: dict[str, Any] = DANA, **kw: Any) -> Path:
    started = await daemon.service.start_turn(
        StartTurnRequest(session=session, extra_body=body, **kw)
    )
    return Path(started.root)


async def turn(
    daemon: Daemon, script: str, session: str = "s1", body: dict[str, Any] = DANA
) -> TurnEnded:
    """One whole turn: start, run ``script`` in the session's root, end."""
    root = await start(daemon, session, body)
    await sh(script, root)
    return await daemon.service.end_turn(session)


async def files_of(daemon: Daemon, session: str = "check") -> dict[str, bytes]:
    """Every file a fresh turn sees, read through the mount in a thread."""
    root = await start(daemon, session)

    def read() -> dict[str, bytes]:
        out = {}
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                full = Path(dirpath) / name
                out[str(full.relative_to(root))] = full.read_bytes()
        return out

    try:
        return await trio.to_thread.run_sync(read)
    finally:
        await daemon.service.end_turn(session)


async def test_echo_append_and_printf_create_files_that_later_turns_see(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        ended = await turn(
            daemon,
            "echo hello >> me/prefs.md && echo again >> me/prefs.md && "
            "printf 'rule 1\\n' > lending-rules/rules.md",
        )
        assert ended.spaces["me"].status == "saved"
        assert ended.spaces["me"].created == ["prefs.md"]
        assert ended.spaces["lending-rules"].created == ["rules.md"]
        assert await files_of(daemon) == {
            "me/prefs.md": b"hello\nagain\n",
            "lending-rules/rules.md": b"rule 1\n",
        }


async def test_sed_in_place_is_an_update_and_leaves_no_temp_file(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "printf 'min score 600\\nkeep\\n' > lending-rules/rules.md")
        ended = await turn(
            daemon, "sed -i 's/600/620/' lending-rules/rules.md && ls -A lending-rules"
        )
        rules = ended.spaces["lending-rules"]
        assert (rules.created, rules.updated, rules.deleted) == ([], ["rules.md"], [])
        seen = ended.files["lending-rules/rules.md"]
        assert seen.wrote and not seen.deleted and seen.renamed_from is not None
        assert (await files_of(daemon))["lending-rules/rules.md"] == b"min score 620\nkeep\n"


async def test_cp_mv_rm_mkdir_touch_truncate_behave_as_on_a_disk(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(
            daemon,
            "mkdir -p me/a/b && echo one > me/a/b/one.md && echo two > me/a/two.md "
            "&& echo gone > me/gone.md",
        )
        ended = await turn(
            daemon,
            "set -e; cp -r me/a me/copy; mv me/a me/moved; mv me/moved/two.md me/top.md; "
            "rm me/gone.md; touch me/empty.md; echo 12345 > me/t.md; truncate -s 2 me/t.md; "
            "mkdir -p me/x/y/z; rm -rf me/x; test ! -e me/a",
        )
        me = ended.spaces["me"]
        assert sorted(me.created) == [
            "copy/b/one.md",
            "copy/two.md",
            "empty.md",
            "moved/b/one.md",
            "t.md",
            "top.md",
        ]
        assert sorted(me.deleted) == ["a/b/one.md", "a/two.md", "gone.md"]
        assert me.updated == []
        assert await files_of(daemon) == {
            "me/copy/b/one.md": b"one\n",
            "me/copy/two.md": b"two\n",
            "me/moved/b/one.md": b"one\n",
            "me/top.md": b"two\n",
            "me/empty.md": b"",
            "me/t.md": b"12",
        }


async def test_tar_extract_and_git_commit_inside_a_space(tmp_path: Path) -> None:
    archive = tmp_path / "notes.tar"
    src = tmp_path / "src"
    (src / "notes").mkdir(parents=True)
    (src / "notes" / "a.md").write_text("alpha\n")
    (src / "notes" / "b.md").write_text("beta\n")
    await sh(f"tar cf {archive} -C {src} notes", tmp_path)
    async with running_daemon(tmp_path, SPECS) as daemon:
        ended = await turn(
            daemon,
            f"set -e; cd me; tar xf {archive}; git init -q; git add -A; "
            "git -c user.email=a@b -c user.name=agent commit -q -m notes; "
            "git log --oneline | wc -l",
        )
        created = ended.spaces["me"].created
        assert "notes/a.md" in created and "notes/b.md" in created
        assert any(path.startswith(".git/objects/") for path in created)
        files = await files_of(daemon)
        assert files["me/notes/b.md"] == b"beta\n"


async def test_python_atomic_save_with_os_replace_and_a_synced_folder(tmp_path: Path) -> None:
    script = (
        "python3 - <<'PY'\n"
        "import os\n"
        "with open('me/prefs.md.tmp', 'w') as fh:\n"
        "    fh.write('saved atomically\\n'); fh.flush(); os.fsync(fh.fileno())\n"
        "os.replace('me/prefs.md.tmp', 'me/prefs.md')\n"
        "folder = os.open('me', os.O_RDONLY | os.O_DIRECTORY)\n"
        "os.fsync(folder); os.close(folder)\n"
        "PY\n"
        "sync me/prefs.md"  # coreutils: an fsync through a read-only descriptor
    )
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo old > me/prefs.md")
        ended = await turn(daemon, script)
        assert ended.spaces["me"].updated == ["prefs.md"]
        assert ended.spaces["me"].created == []
        assert (await files_of(daemon))["me/prefs.md"] == b"saved atomically\n"


async def test_read_only_mount_rejects_every_write_with_erofs(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "mkdir lending-rules/d && echo rule > lending-rules/d/rules.md")
        root = await start(daemon, "carol", CAROL)
        rules = root / "lending-rules"
        target = rules / "d" / "rules.md"

        def attempts() -> dict[str, int]:
            codes: dict[str, int] = {}
            tries: dict[str, Callable[[], object]] = {
                "open for writing": lambda: os.close(os.open(target, os.O_RDWR)),
                "append": lambda: os.close(os.open(target, os.O_WRONLY | os.O_APPEND)),
                "create": lambda: os.close(os.open(rules / "new.md", os.O_CREAT | os.O_EXCL)),
                "truncate": lambda: os.truncate(target, 0),
                "rename": lambda: os.rename(target, rules / "moved.md"),
                "unlink": lambda: os.unlink(target),
                "mkdir": lambda: os.mkdir(rules / "newdir"),
                "rmdir": lambda: os.rmdir(rules / "d"),
                "chmod": lambda: os.chmod(target, 0o600),
                "utimes": lambda: os.utime(target, (1, 1)),
            }
            for name, attempt in tries.items():
                try:
                    attempt()
                    codes[name] = 0
                except OSError as exc:
                    codes[name] = exc.errno or 0
            return codes

        codes = await trio.to_thread.run_sync(attempts)
        assert codes == dict.fromkeys(codes, errno.EROFS)
        out = await sh("sed -i s/rule/weakened/ lending-rules/d/rules.md", root, check=False)
        assert out.returncode != 0
        assert b"Read-only file system" in out.stderr
        ended = await daemon.service.end_turn("carol")
        assert ended.spaces["lending-rules"].status == "skipped"
        assert ended.spaces["lending-rules"].updated == []
        assert (await files_of(daemon))["lending-rules/d/rules.md"] == b"rule\n"


async def test_reads_are_logged_with_the_exact_revision(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo rule > lending-rules/rules.md && echo x > lending-rules/other.md")
        started = await daemon.service.start_turn(StartTurnRequest(session="s1", extra_body=DANA))
        mount = daemon.service.memory.open_turn("s1").mounts["lending-rules"]
        await sh("cat lending-rules/rules.md > /dev/null && echo n > me/new.md", Path(started.root))
        ended = await daemon.service.end_turn("s1")
        seen = ended.files
        assert seen["lending-rules/rules.md"].read == mount.snapshot["rules.md"]
        assert seen["lending-rules/rules.md"].opened
        assert not seen["lending-rules/rules.md"].wrote
        assert "lending-rules/other.md" not in seen
        assert seen["me/new.md"].created and seen["me/new.md"].wrote
        assert seen["me/new.md"].read is None


async def test_limits_hold_inside_the_mount(tmp_path: Path) -> None:
    limits = memfs.Limits(max_file_bytes=1000, max_files=3, max_space_bytes=1500)
    async with running_daemon(tmp_path, SPECS, limits=limits) as daemon:
        root = await start(daemon, "s1")
        me = root / "me"

        def attempts() -> dict[str, Any]:
            out: dict[str, Any] = {}
            (me / "at-limit.md").write_bytes(b"x" * 1000)
            try:
                (me / "past-limit.md").write_bytes(b"x" * 1001)
            except OSError as exc:
                out["file"] = exc.errno
            try:
                (me / "fills.md").write_bytes(b"x" * 600)
            except OSError as exc:
                out["space"] = exc.errno
            try:
                (me / "fourth.md").write_bytes(b"")
            except OSError as exc:
                out["count"] = exc.errno
            for name, bad in (("nul", "a\udcffb"), ("long", "n" * 256)):
                try:
                    (me / bad).write_bytes(b"")
                except (OSError, UnicodeEncodeError) as exc:
                    out[name] = getattr(exc, "errno", "unicode")
            return out

        out = await trio.to_thread.run_sync(attempts)
        assert out["file"] == errno.EFBIG
        assert out["space"] == errno.ENOSPC
        assert out["count"] == errno.ENOSPC
        assert out["long"] == errno.ENAMETOOLONG
        ended = await daemon.service.end_turn("s1")
        assert "at-limit.md" in ended.spaces["me"].created
        assert ended.spaces["me"].status == "saved"


async def test_non_utf8_names_are_refused_with_einval(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")

        def attempt() -> int:
            try:
                fd = os.open(
                    os.path.join(os.fsencode(root / "me"), b"bad-\xff"), os.O_CREAT | os.O_WRONLY
                )
                os.close(fd)
            except OSError as exc:
                return exc.errno or 0
            return 0

        assert await trio.to_thread.run_sync(attempt) == errno.EINVAL
        await daemon.service.end_turn("s1")


async def test_symlinks_hard_links_fifos_and_xattrs_get_a_clear_errno(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        me = root / "me"

        def attempts() -> dict[str, int]:
            (me / "f.md").write_text("f")
            tries: dict[str, Callable[[], object]] = {
                "symlink": lambda: os.symlink("f.md", me / "link"),
                "hardlink": lambda: os.link(me / "f.md", me / "hard"),
                "fifo": lambda: os.mkfifo(me / "fifo"),
                "device": lambda: os.mknod(me / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3)),
                "setxattr": lambda: os.setxattr(me / "f.md", "user.k", b"v"),
            }
            codes = {}
            for name, attempt in tries.items():
                try:
                    attempt()
                    codes[name] = 0
                except OSError as exc:
                    codes[name] = exc.errno or 0
            return codes

        codes = await trio.to_thread.run_sync(attempts)
        assert codes["symlink"] == errno.EPERM
        assert codes["hardlink"] == errno.EPERM
        assert codes["fifo"] == errno.EPERM
        assert codes["device"] == errno.EPERM
        assert codes["setxattr"] == errno.EOPNOTSUPP
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].created == ["f.md"]


async def test_sessions_are_isolated_and_a_closed_session_is_gone(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        one = await start(daemon, "one")
        two = await start(daemon, "two")
        await sh("echo draft > lending-rules/draft.md", one)
        out = await sh("ls lending-rules", two)
        assert out.stdout == b""
        await daemon.service.end_turn("one")
        await daemon.service.end_turn("two")
        listing = await trio.to_thread.run_sync(os.listdir, daemon.mount_root)
        assert sorted(listing) == ["one", "two"]
        await daemon.service.close_session("one")
        gone = await trio.to_thread.run_sync(lambda: (daemon.mount_root / "one").exists())
        assert not gone
        listing = await trio.to_thread.run_sync(os.listdir, daemon.mount_root)
        assert "one" not in listing and "two" in listing


async def test_session_directory_can_belong_to_a_unix_user(tmp_path: Path) -> None:
    # pytest's tmp dirs are private to root; other users must reach the mount.
    base = Path(tempfile.mkdtemp(prefix="memfs-uid-", dir="/tmp"))
    base.chmod(0o755)
    async with running_daemon(base, SPECS) as daemon:
        root = await start(daemon, "s1", uid=4242, gid=4343)
        info = await trio.to_thread.run_sync(os.stat, root)
        assert (info.st_uid, info.st_gid) == (4242, 4343)
        assert stat.S_IMODE(info.st_mode) == 0o700
        if os.geteuid() == 0:
            # Another user is kept out by the kernel (default_permissions).
            out = await sh(
                f"setpriv --reuid=4444 --regid=4444 --clear-groups ls {root}", tmp_path, check=False
            )
            assert out.returncode != 0 and b"Permission denied" in out.stderr
            out = await sh(
                "setpriv --reuid=4242 --regid=4343 --clear-groups "
                f"sh -c 'echo mine > {root}/me/p.md'",
                tmp_path,
                check=False,
            )
            assert out.returncode == 0, out.stderr
        ended = await daemon.service.end_turn("s1")
        if os.geteuid() == 0:
            assert ended.spaces["me"].created == ["p.md"]
    shutil.rmtree(base, ignore_errors=True)


async def test_concurrent_writers_in_two_sessions_on_one_space(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        one = await start(daemon, "one")
        two = await start(daemon, "two")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                sh, "for i in $(seq 50); do echo $i >> lending-rules/a.md; done", one
            )
            nursery.start_soon(
                sh, "for i in $(seq 50); do echo $i >> lending-rules/b.md; done", two
            )
        first = await daemon.service.end_turn("one")
        second = await daemon.service.end_turn("two")
        assert first.spaces["lending-rules"].status == "saved"
        assert second.spaces["lending-rules"].status == "saved"  # other files never block
        files = await files_of(daemon)
        expected = "".join(f"{i}\n" for i in range(1, 51)).encode()
        assert files["lending-rules/a.md"] == files["lending-rules/b.md"] == expected


async def test_same_file_in_two_sessions_conflicts_and_loses_nothing(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo v1 > lending-rules/a.md")
        one = await start(daemon, "one")
        two = await start(daemon, "two")
        await sh("echo from-one > lending-rules/a.md", one)
        await sh("echo from-two > lending-rules/a.md", two)
        assert (await daemon.service.end_turn("one")).spaces["lending-rules"].status == "saved"
        late = (await daemon.service.end_turn("two")).spaces["lending-rules"]
        assert late.status == "not_saved"
        assert late.conflicts == ["a.md"]
        assert late.updated == ["a.md"]
        assert (await files_of(daemon))["lending-rules/a.md"] == b"from-one\n"


@pytest.mark.error_log(r"memfsd\.fs: unexpected error in FUSE handler read")
async def test_a_fault_in_a_handler_is_eio_and_the_mount_lives_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1")
        await sh("echo ok > me/a.md", root)
        overlay = daemon.service.workspace.overlay
        real = overlay.read

        def broken(fh: int, offset: int, size: int) -> bytes:
            raise RuntimeError("injected fault")

        monkeypatch.setattr(overlay, "read", broken)
        out = await sh("cat me/a.md", root, check=False)
        assert out.returncode != 0
        assert b"Input/output error" in out.stderr
        assert "injected fault" in caplog.text
        monkeypatch.setattr(overlay, "read", real)
        out = await sh("echo more >> me/a.md && cat me/a.md", root)
        assert out.stdout == b"ok\nmore\n"
        await daemon.service.end_turn("s1")


async def test_a_seed_changed_while_the_daemon_runs_waits_as_changed_in_code(
    tmp_path: Path,
) -> None:
    seed = tmp_path / "repo" / "rules"
    seed.mkdir(parents=True)
    (seed / "income.md").write_text("two years\n")
    specs = [memfs.org_memory(space="rules", seed=seed)]
    async with running_daemon(tmp_path, specs) as daemon:
        root = await start(daemon, "s1")
        out = await sh("cat rules/income.md", root)
        assert out.stdout == b"two years\n"
        await daemon.service.end_turn("s1")
        (seed / "income.md").write_text("three years\n")
        store = daemon.service.memory.store
        assert isinstance(store, ReviewingStore)
        with trio.fail_after(20):
            while not await store.list_changes():  # noqa: ASYNC110 - polling the store is the test
                await trio.sleep(0.1)
        [change] = await store.list_changes()
        assert change.provenance.prompt == "Changed in code"
        assert change.files["income.md"].content == b"three years\n"


async def test_two_conversations_editing_one_org_file_through_the_mount_both_wait(
    tmp_path: Path,
) -> None:
    specs = [memfs.org_memory(space="rules"), memfs.user_memory()]  # review "person"
    async with running_daemon(tmp_path, specs) as daemon:
        store = daemon.service.memory.store
        assert isinstance(store, ReviewingStore)
        await store.put(
            memfs.SpaceRef(layer="org", space="rules"),
            memfs.ChangeSet(created={"a.md": b"v1\n"}),
            provenance=memfs.Provenance(origin="code"),
        )
        one = await start(daemon, "one")
        two = await start(daemon, "two")
        await sh("echo from-one > rules/a.md", one)
        await sh("echo from-two > rules/a.md", two)
        assert (await daemon.service.end_turn("one")).spaces["rules"].status == "waiting"
        assert (await daemon.service.end_turn("two")).spaces["rules"].status == "waiting"
        first, second = await store.list_changes()
        assert (first.session, first.stale_paths) == ("one", ())
        assert (second.session, second.stale_paths) == ("two", ("a.md",))
        # The conversation sees what it saved; another sees only what was approved.
        again = await start(daemon, "one")
        assert (await sh("cat rules/a.md", again)).stdout == b"from-one\n"
        await daemon.service.end_turn("one")
        other = await start(daemon, "three")
        assert (await sh("cat rules/a.md", other)).stdout == b"v1\n"
        await daemon.service.end_turn("three")
        await store.decide(first.id, "approve", by=memfs.By(id="ada"))
        fresh = await start(daemon, "four")
        assert (await sh("cat rules/a.md", fresh)).stdout == b"from-one\n"
        await daemon.service.end_turn("four")


async def test_a_file_read_through_the_mount_is_in_the_stored_trace_with_its_revision(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo rule > lending-rules/rules.md")
        root = await start(daemon, "s2")
        mount = daemon.service.memory.open_turn("s2").mounts["lending-rules"]
        await sh("cat lending-rules/rules.md > /dev/null", root)
        await daemon.service.end_turn("s2")
        store = daemon.service.memory.store
        assert isinstance(store, memfs.ManagedStore)
        [trace] = await store.traces(session="s2")
        seen = trace.files["lending-rules/rules.md"]
        assert (
            seen.read
            == mount.snapshot["rules.md"]
            == trace.mounts["lending-rules"].snapshot["rules.md"]
        )
        assert seen.opened and not seen.wrote
        assert trace.mounts["lending-rules"].status == "saved"


async def test_a_persons_blobs_leave_the_cache_when_their_last_turn_ends(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo 'my secret' > me/prefs.md && echo 'rule' > lending-rules/r.md")
        blobs = daemon.settings.state_dir / "blobs"
        secret, rule = (digest(b) for b in (b"my secret\n", b"rule\n"))

        def cached(sha: str) -> bool:
            return (blobs / sha[:2] / sha).exists()

        await start(daemon, "a")
        await start(daemon, "b")  # the same person in a second conversation
        assert cached(secret) and cached(rule)
        await daemon.service.end_turn("a")
        assert cached(secret), "still held by the other conversation's turn"
        await daemon.service.end_turn("b")
        assert not cached(secret)
        assert cached(rule), "shared memory stays cached for the next turn"


async def test_status_counts_the_fuse_requests_a_workload_cost(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo rule > lending-rules/r.md")
        before = (await daemon.service.status()).requests
        await turn(daemon, "cat lending-rules/r.md lending-rules/r.md > /dev/null", session="s2")
        after = (await daemon.service.status()).requests
        assert after["open"] - before.get("open", 0) == 2
        assert after["release"] - before.get("release", 0) == 2
        assert after.get("flush", 0) <= 1  # answered ENOSYS once, then never sent again


async def test_a_nested_persistent_dir_mounts_below_read_only_folders_the_agent_cannot_change(
    tmp_path: Path,
) -> None:
    saved: list[memfs.ChangeSet] = []

    async def load(ctx: memfs.TurnContext) -> dict[str, str]:
        return {"notes.md": "kept by the app\n"}

    async def store(ctx: memfs.TurnContext, changes: memfs.ChangeSet, cursor: str | None) -> None:
        saved.append(changes)

    nested = memfs.persistent_dir(path="persistent/user", load=load, store=store)
    async with running_daemon(tmp_path, [*SPECS, nested]) as daemon:
        root = await start(daemon, "s1")
        listed = await sh("ls persistent && cat persistent/user/notes.md", root)
        assert listed.stdout == b"user\nkept by the app\n"
        assert (
            stat.S_IMODE((await trio.to_thread.run_sync(os.stat, root / "persistent")).st_mode)
            == 0o555
        )
        for hostile in [
            "rmdir persistent/user",
            "mv persistent/user persistent/other",
            "mv persistent elsewhere",
            "touch persistent/stray.md",
            "mkdir persistent/more",
            "chmod 777 persistent",
        ]:
            refused = await sh(hostile, root, check=False)
            assert refused.returncode != 0, hostile
        await sh("echo mine >> persistent/user/new.md && echo hi > me/prefs.md", root)
        assert (await sh("ls persistent persistent/user", root)).stdout == (
            b"persistent:\nuser\n\npersistent/user:\nnew.md\nnotes.md\n"
        )
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["persistent/user"].status == "saved"
        assert ended.spaces["persistent/user"].created == ["new.md"]
        assert ended.spaces["me"].created == ["prefs.md"]
        [changes] = saved
        assert changes.created == {"new.md": b"mine\n"}
        assert not changes.deleted
        # The next turn of the session gets the folders anew; the old ones are gone.
        again = await start(daemon, "s1")
        assert (await sh("ls persistent/user", again)).stdout == b"notes.md\n"
        # rm -rf empties the writable mount, as at the top level, and the folders stay.
        assert (await sh("rm -rf persistent", again, check=False)).returncode != 0
        assert (await sh("ls persistent persistent/user", again)).stdout == (
            b"persistent:\nuser\n\npersistent/user:\n"
        )
        assert (await daemon.service.end_turn("s1")).spaces["persistent/user"].deleted == [
            "notes.md"
        ]
