"""Real mounts: what a filesystem keeps across turns (modes, mtimes, folders) comes back.

Each test runs real commands in one turn, ends it, and checks the next turn
sees what a disk would: a ``chmod +x`` script is still executable, an mtime
set by ``touch -d`` or rsync is still there (``stat -c %Y``), an empty folder
stays until ``rmdir``, and a git repository made, committed and ``git gc``-ed
in one turn works in the next, where a read-only ``git status`` leaves no
change set, even under review ``person``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import memfs
from memfs.api.models import SpaceOutcome, StartTurnRequest, TurnEnded
from tests.daemon_harness import Daemon, running_daemon, sh

DANA = {"userId": "u_dana", "name": "Dana", "bankId": "bank_17", "role": "underwriter"}

SPECS = [
    memfs.org_memory(
        space="shared",
        org="bankId",
        description="Shared notes, reviewed by a person.",
        review="person",
    ),
    memfs.user_memory(org="bankId"),
]


async def start(daemon: Daemon, session: str = "s1", body: dict[str, Any] = DANA) -> Path:
    started = await daemon.service.start_turn(StartTurnRequest(session=session, extra_body=body))
    return Path(started.root)


async def turn(daemon: Daemon, script: str, session: str = "s1") -> tuple[TurnEnded, str]:
    """One whole turn: start, run ``script`` in the session's root, end; and what it printed."""
    root = await start(daemon, session)
    done = await sh(script, root)
    return await daemon.service.end_turn(session), done.stdout.decode()


def unchanged(space: SpaceOutcome) -> bool:
    return not (
        space.created
        or space.updated
        or space.deleted
        or space.folders_created
        or space.folders_deleted
    )


async def test_chmod_x_script_runs_in_the_next_turn(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "printf '#!/bin/sh\\necho ran\\n' > me/run.sh && chmod +x me/run.sh")
        _, out = await turn(daemon, "stat -c %a me/run.sh && ./me/run.sh")
        assert out.split() == ["755", "ran"]


async def test_a_chmod_alone_is_an_update_of_that_file(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo x > me/a.sh")
        ended, _ = await turn(daemon, "chmod 700 me/a.sh")
        assert ended.spaces["me"].updated == ["a.sh"]
        _, out = await turn(daemon, "stat -c %a me/a.sh")
        assert out.strip() == "700"


async def test_mtimes_come_back_so_rsync_sends_nothing_the_second_time(tmp_path: Path) -> None:
    # scripts/setup.sh installs rsync; a missing one is a broken setup, not a skip.
    assert shutil.which("rsync") is not None, (
        "rsync is not installed (scripts/setup.sh installs it)"
    )
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.md").write_bytes(b"a\n")
    (src / "sub" / "b.md").write_bytes(b"b\n")
    async with running_daemon(tmp_path, SPECS) as daemon:
        first, _ = await turn(
            daemon, f"touch -d '2001-02-03 04:05:06' {src}/a.md && rsync -a {src}/ me/copy/"
        )
        assert first.spaces["me"].created == ["copy/a.md", "copy/sub/b.md"]
        # -i itemizes what rsync would send: nothing, since sizes and mtimes match.
        ended, out = await turn(
            daemon, f"stat -c %Y me/copy/a.md && rsync -ai {src}/ me/copy/ | grep -c '^>f' || true"
        )
        mtime, sent = out.split()
        assert int(mtime) == int((src / "a.md").stat().st_mtime)
        assert sent == "0"
        assert unchanged(ended.spaces["me"])


async def test_cp_p_keeps_the_mtime_it_copied_into_the_next_turn(tmp_path: Path) -> None:
    src = tmp_path / "a.md"
    src.write_bytes(b"a\n")
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, f"touch -d '2001-02-03 04:05:06.5' {src} && cp -p {src} me/a.md")
        _, out = await turn(daemon, "stat -c '%Y %y' me/a.md")
        seconds, _, rest = out.partition(" ")
        assert int(seconds) == int(src.stat().st_mtime)
        assert "04:05:06.500000000" in rest


async def test_a_touch_alone_is_no_change_and_the_mtime_of_the_last_change_comes_back(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "echo x > me/a.md && touch -d '2010-01-01 00:00:00' me/a.md")
        _, first = await turn(daemon, "stat -c %Y me/a.md")
        ended, _ = await turn(daemon, "touch me/a.md")
        assert unchanged(ended.spaces["me"])
        _, again = await turn(daemon, "stat -c %Y me/a.md")
        assert first == again


async def test_an_empty_folder_is_kept_until_removed(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        made, _ = await turn(daemon, "mkdir -p me/empty/deeper && mkdir me/other")
        assert made.spaces["me"].folders_created == ["empty", "empty/deeper", "other"]
        ended, out = await turn(daemon, "find me -type d | sort && rmdir me/empty/deeper")
        assert out.split() == ["me", "me/empty", "me/empty/deeper", "me/other"]
        assert ended.spaces["me"].folders_deleted == ["empty/deeper"]
        _, out = await turn(daemon, "find me -type d | sort")
        assert out.split() == ["me", "me/empty", "me/other"]


async def test_a_folder_outlives_its_last_file(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        await turn(daemon, "mkdir me/d && echo x > me/d/only.md")
        await turn(daemon, "rm me/d/only.md")
        _, out = await turn(daemon, "test -d me/d && echo kept")
        assert out.strip() == "kept"


GIT = "git -c user.name=A -c user.email=a@example.com -c init.defaultBranch=main"


@pytest.mark.parametrize("space", ["me", "shared"])
async def test_a_git_repository_made_in_one_turn_works_in_the_next(
    tmp_path: Path, space: str
) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    async with running_daemon(tmp_path, SPECS) as daemon:
        first, _ = await turn(
            daemon,
            f"cd {space} && {GIT} init -q repo && cd repo && printf 'one\\n' > a.md"
            f" && printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh"
            f" && {GIT} add . && {GIT} commit -qm first && {GIT} gc -q && {GIT} status",
        )
        status = "waiting" if space == "shared" else "saved"
        assert first.spaces[space].status == status
        assert "repo/.git/refs/tags" in first.spaces[space].folders_created
        ended, out = await turn(
            daemon,
            f"cd {space}/repo && {GIT} log --format=%s && {GIT} status --porcelain"
            f" && {GIT} fsck 2>/dev/null && echo fsck-ok",
        )
        assert out.split() == ["first", "fsck-ok"]
        # A read-only git status rewrites nothing that matters: no change at all.
        assert unchanged(ended.spaces[space]), ended.spaces[space]
        # And the next turn can commit on top of it.
        _, out = await turn(
            daemon,
            f"cd {space}/repo && echo two >> a.md && {GIT} commit -qam second"
            f" && {GIT} log --format=%s",
        )
        assert out.split() == ["second", "first"]
