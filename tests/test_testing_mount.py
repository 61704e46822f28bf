"""``memfs.testing.mounted_daemon``: an app's integration test against a real mount."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import memfs
import memfs.testing
import memfs.testing.mount as mount
from memfs.core.specs import Spec
from tests.daemon_harness import require_fuse, sh

SPECS: list[Spec] = [
    memfs.org_memory(space="desk-rules", description="The desk's rules.", review="none"),
    memfs.user_memory(user="userId", label="name", description="Your own notes."),
]
DANA = {"userId": "u_dana", "name": "Dana"}


@pytest.fixture
def memfs_specs() -> list[Spec]:
    return SPECS


async def test_mounted_daemon_runs_a_turn_for_the_apps_specs_and_unmounts(tmp_path: Path) -> None:
    require_fuse()
    async with memfs.testing.mounted_daemon(SPECS, tmp_path) as daemon:
        assert daemon.mount_root == tmp_path / "mnt"
        # Never stat the mount from this loop: it is the loop that answers.
        assert await trio.to_thread.run_sync(os.path.ismount, daemon.mount_root)
        turn = await daemon.call(daemon.client.start_turn, "s1", DANA)
        assert set(turn.mounts) == {"desk-rules", "me"}
        await sh("echo 'Short.' > me/style.md && echo 'rule 1' > desk-rules/r.md", Path(turn.root))
        ended = await daemon.call(daemon.client.end_turn, "s1")
        assert ended.spaces["me"].status == "saved"
        assert ended.spaces["desk-rules"].created == ["r.md"]
        assert "me/style.md" in ended.files
        # The live daemon is open to inspection too.
        assert (await daemon.service.status()).mount_root == str(daemon.mount_root)
    assert not os.path.ismount(tmp_path / "mnt")
    assert not (tmp_path / "state" / "memfs.sock").exists()


async def test_mounted_daemon_unmounts_when_the_test_body_fails(tmp_path: Path) -> None:
    require_fuse()
    with pytest.raises(RuntimeError, match="the app's test failed"):
        async with memfs.testing.mounted_daemon(SPECS, tmp_path) as daemon:
            await daemon.call(daemon.client.start_turn, "s1", DANA)
            raise RuntimeError("the app's test failed")
    assert not os.path.ismount(tmp_path / "mnt")


async def test_mounted_daemon_without_a_directory_leaves_no_temporary_folder() -> None:
    require_fuse()
    async with memfs.testing.mounted_daemon(SPECS) as daemon:
        base = daemon.mount_root.parent
        assert base.name.startswith("memfs-test-")
    assert not base.exists()


async def test_the_plugins_memfs_daemon_fixture_runs_the_apps_specs(
    memfs_daemon: mount.MountedDaemon,
) -> None:
    require_fuse()
    turn = await memfs_daemon.call(memfs_daemon.client.start_turn, "s1", DANA)
    assert set(turn.mounts) == {"desk-rules", "me"}
    await memfs_daemon.call(memfs_daemon.client.end_turn, "s1")
    await memfs_daemon.call(memfs_daemon.client.close_session, "s1")
    status = await memfs_daemon.call(memfs_daemon.client.status)
    assert status.sessions == []


async def test_missing_fusermount3_is_a_clear_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("memfs.testing.mount.shutil.which", lambda name: None)
    with pytest.raises(memfs.testing.FuseUnavailable, match="fusermount3 missing"):
        async with memfs.testing.mounted_daemon(SPECS):
            pass  # pragma: no cover


@pytest.mark.parametrize(("ci", "outcome"), [(None, "1 skipped"), ("true", "1 error")])
def test_memfs_daemon_fixture_skips_where_fuse_is_missing_but_fails_under_ci(
    tmp_path: Path, ci: str | None, outcome: str
) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n")
    (tmp_path / "test_app.py").write_text(
        "import pytest, memfs, memfs.testing.pytest_plugin as plugin\n"
        "plugin.fuse_missing = lambda: 'FUSE is not available here: /dev/fuse missing'\n"
        "@pytest.fixture\n"
        "def memfs_specs():\n"
        "    return [memfs.user_memory()]\n"
        "async def test_app(memfs_daemon):\n"
        "    raise AssertionError('never reached')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_app.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert outcome in done.stdout, done.stdout + done.stderr
    assert "/dev/fuse missing" in done.stdout


def test_under_ci_reads_the_ci_variable_as_ci_systems_set_it() -> None:
    assert mount.under_ci({"CI": "true"}) and mount.under_ci({"CI": "1"})
    assert not mount.under_ci({}) and not mount.under_ci({"CI": "false"})
    assert not mount.under_ci({"CI": "0"})


async def test_the_helper_waits_for_nothing_it_leaves_running() -> None:
    # The daemon's nursery lives inside the block: after it, no task is left.
    require_fuse()
    async with memfs.testing.mounted_daemon(SPECS):
        pass
    root = trio.lowlevel.current_root_task()
    assert root is not None
    assert len(root.child_nurseries[0].child_tasks) <= 1
