"""Differential: the same commands on a native directory and on a mount give the same tree,
and the turn's change set is exactly the difference from the snapshot.

Modes and folders are part of the tree and of the difference; the next turn
brings the same tree back, with the modes and with the mtimes files had when
they last changed (a ``touch`` alone is no change), and ends with none.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import trio

import memfs
from memfs.api.models import StartTurnRequest
from memfs.core.diff import diff
from memfs.core.models import FileMeta
from tests.daemon_harness import running_daemon, sh

BODY = {"userId": "u1", "name": "U"}

SEED = """
mkdir -p notes/old deep/a/b
printf 'one\\ntwo\\nthree\\n' > notes/list.md
echo keep > notes/keep.md
echo same > notes/same.md
echo stale > notes/old/stale.md
echo deep > deep/a/b/c.md
printf '\\x00\\x01\\xff binary' > blob.bin
"""

SCRIPT = """
set -e
echo four >> notes/list.md
sed -i 's/two/TWO/' notes/list.md
echo same > notes/same.md
touch notes/keep.md
mv notes/old notes/archive
rm notes/archive/stale.md
mkdir -p new/x/y && printf 'made\\n' > new/x/y/made.md
cp notes/list.md new/copy.md
mv deep/a renamed-a
echo tmp > scratch.md && rm scratch.md
truncate -s 3 blob.bin
mkdir emptydir
python3 -c "open('ü-ñ.md','w').write('unicode name\\n')"
chmod +x new/copy.md
chmod 600 notes/keep.md
touch -d '2001-02-03 04:05:06.25' new/x/y/made.md
touch -d '2002-01-01' notes/same.md
mkdir -p gone/inner && rmdir gone/inner
rm renamed-a/b/c.md
"""


def tree(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            out[str(full.relative_to(root))] = full.read_bytes()
    return out


def dirs(root: Path) -> set[str]:
    return {str(Path(d).relative_to(root)) for d, _, _ in os.walk(root)} - {"."}


def stats(root: Path) -> dict[str, tuple[int, int]]:
    """Each file's (permission bits, mtime in ns)."""
    out = {}
    for path in tree(root):
        info = os.stat(root / path)
        out[path] = (stat.S_IMODE(info.st_mode), info.st_mtime_ns)
    return out


def modes(found: dict[str, tuple[int, int]]) -> dict[str, FileMeta]:
    return {path: FileMeta(mode=mode) for path, (mode, _) in found.items()}


async def test_same_commands_native_and_mounted_give_the_same_tree_and_change_set(
    tmp_path: Path,
) -> None:
    native = tmp_path / "native"
    native.mkdir()
    await sh(SEED, native)
    before = await trio.to_thread.run_sync(tree, native)
    folders_before = await trio.to_thread.run_sync(dirs, native)
    async with running_daemon(tmp_path, [memfs.user_memory()]) as daemon:
        seed = await daemon.service.start_turn(StartTurnRequest(session="seed", extra_body=BODY))
        await sh(SEED, Path(seed.mounts["me"].path))
        await daemon.service.end_turn("seed")

        started = await daemon.service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
        mounted = Path(started.mounts["me"].path)
        assert await trio.to_thread.run_sync(tree, mounted) == before
        assert await trio.to_thread.run_sync(dirs, mounted) == folders_before
        at_start = await trio.to_thread.run_sync(stats, mounted)
        assert modes(at_start) == modes(await trio.to_thread.run_sync(stats, native))
        await sh(SCRIPT, native)
        await sh(SCRIPT, mounted)
        after_native = await trio.to_thread.run_sync(tree, native)
        folders_after = await trio.to_thread.run_sync(dirs, native)
        native_stats = await trio.to_thread.run_sync(stats, native)
        assert await trio.to_thread.run_sync(tree, mounted) == after_native
        assert await trio.to_thread.run_sync(dirs, mounted) == folders_after
        at_end = await trio.to_thread.run_sync(stats, mounted)
        assert modes(at_end) == modes(native_stats)
        ended = await daemon.service.end_turn("s1")

        # Across the turn boundary: the same tree, folders and modes again.
        again = await daemon.service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
        mounted = Path(again.mounts["me"].path)
        assert await trio.to_thread.run_sync(tree, mounted) == after_native
        assert await trio.to_thread.run_sync(dirs, mounted) == folders_after
        next_turn = await trio.to_thread.run_sync(stats, mounted)
        quiet = (await daemon.service.end_turn("s1")).spaces["me"]

    expected = diff(
        before,
        after_native,
        base_meta=modes(at_start),
        meta=modes(native_stats),
        base_folders=folders_before,
        folders=folders_after,
    )
    me = ended.spaces["me"]
    assert (me.created, me.updated, me.deleted) == (
        sorted(expected.created),
        sorted(expected.updated),
        sorted(expected.deleted),
    )
    assert (me.folders_created, me.folders_deleted) == (
        sorted(expected.folders_created),
        sorted(expected.folders_deleted),
    )
    assert "notes/same.md" not in me.updated
    assert "notes/keep.md" in me.updated  # its mode changed, its bytes did not
    assert "scratch.md" not in me.created
    assert "emptydir" in me.folders_created and "gone" in me.folders_created
    assert modes(next_turn) == modes(native_stats)
    # A time set by the agent comes back to the nanosecond; a touch alone is no change.
    assert next_turn["new/x/y/made.md"][1] == native_stats["new/x/y/made.md"][1]
    assert next_turn["notes/same.md"][1] == at_start["notes/same.md"][1]
    changed = {*expected.created, *expected.updated}
    assert next_turn == {p: at_end[p] if p in changed else at_start[p] for p in next_turn}
    assert (quiet.created, quiet.updated, quiet.deleted) == ([], [], [])
    assert (quiet.folders_created, quiet.folders_deleted) == ([], [])
    shutil.rmtree(native)
