"""Differential: the same commands on a native directory and on a mount give the same tree,
and the turn's change set is exactly the difference from the snapshot."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import trio

import memfs
from memfs.api.models import StartTurnRequest
from memfs.core.diff import diff
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


async def test_same_commands_native_and_mounted_give_the_same_tree_and_change_set(
    tmp_path: Path,
) -> None:
    native = tmp_path / "native"
    native.mkdir()
    await sh(SEED, native)
    before = await trio.to_thread.run_sync(tree, native)
    async with running_daemon(tmp_path, [memfs.user_memory()]) as daemon:
        seed = await daemon.service.start_turn(StartTurnRequest(session="seed", extra_body=BODY))
        await sh(SEED, Path(seed.mounts["me"].path))
        await daemon.service.end_turn("seed")

        started = await daemon.service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
        mounted = Path(started.mounts["me"].path)
        assert await trio.to_thread.run_sync(tree, mounted) == before
        await sh(SCRIPT, native)
        await sh(SCRIPT, mounted)
        after_native = await trio.to_thread.run_sync(tree, native)
        assert await trio.to_thread.run_sync(tree, mounted) == after_native
        assert await trio.to_thread.run_sync(dirs, mounted) == await trio.to_thread.run_sync(
            dirs, native
        )
        ended = await daemon.service.end_turn("s1")

    expected = diff(before, after_native)
    me = ended.spaces["me"]
    assert (me.created, me.updated, me.deleted) == (
        sorted(expected.created),
        sorted(expected.updated),
        sorted(expected.deleted),
    )
    assert "notes/same.md" not in me.updated
    assert "notes/keep.md" not in me.updated
    assert "scratch.md" not in me.created
    shutil.rmtree(native)
