"""POSIX semantics on a real mount, driven by real shell commands.

What a conformance suite checks and real tools rely on: ENAMETOOLONG for long
names, folder moves that would break the path limit refused at once, chgrp
to one's own groups, mode 0, folder times on rm/rmdir, descriptors whose name
is gone, RENAME_EXCHANGE, df, and the refusals (links, FIFOs, devices,
sockets, fallocate) with their errnos.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import memfs
from memfs.api.models import StartTurnRequest
from tests.daemon_harness import Daemon, require_root, running_daemon, sh

BODY = {"userId": "u1", "name": "U", "orgId": "acme"}
SPECS = [
    memfs.org_memory(space="team", org="orgId", review="none"),
    memfs.user_memory(org="orgId"),
]
LONG = "n" * 256
# Four 200-byte folders and a file: "top/" + 4 * 201 + "f" is 809 bytes.
DEEP = "top/" + "/".join(c * 200 for c in "abcd") + "/f"

# renameat2(RENAME_EXCHANGE) as a tool would call it (coreutils 9.1 has no mv --exchange).
EXCHANGE = """python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    sys.exit(os.strerror(ctypes.get_errno()))
' """


async def start(daemon: Daemon, session: str = "s1", **kw: Any) -> Path:
    started = await daemon.service.start_turn(
        StartTurnRequest(session=session, extra_body=BODY, **kw)
    )
    return Path(started.root)


@asynccontextmanager
async def shared_base() -> AsyncIterator[Path]:
    """A tmp dir other users can pass through (pytest's are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="memfs-posix-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_user(uid: int, script: str, groups: str = "") -> str:
    """``script`` run by bash as ``uid`` (its own group ``uid``), in ``groups`` besides."""
    keep = f"--groups={groups}" if groups else "--clear-groups"
    quoted = script.replace("'", "'\\''")
    return f"setpriv --reuid={uid} --regid={uid} {keep} bash -c '{quoted}'"


async def test_mv_of_a_folder_past_the_path_limit_fails_at_once_and_the_turn_saves(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        await sh(
            f"mkdir -p $(dirname {DEEP}) && echo deep > {DEEP} && echo kept > kept.md", root / "me"
        )
        # 219 + 806 = 1025 bytes for the file under it: refused, nothing moved.
        out = await sh(f"mv top {'x' * 219}", root / "me", check=False)
        assert out.returncode != 0 and b"File name too long" in out.stderr
        await sh(f"test -f {DEEP} && test ! -e {'x' * 219}", root / "me")
        # 218 bytes puts it at exactly 1024: allowed.
        await sh(f"mv top {'x' * 218} && mv {'x' * 218} top", root / "me")
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert me.status == "saved"
        assert me.created == sorted([DEEP, "kept.md"])


async def test_every_command_given_a_256_byte_name_says_file_name_too_long(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        await sh("echo f > f.md && mkdir d", root / "me")
        commands = [
            f"cat {LONG}",
            f"stat {LONG}",
            f"touch {LONG}",
            f"echo x > {LONG}",
            f"mkdir {LONG}",
            f"mkfifo {LONG}",
            f"mknod {LONG} c 1 3",
            f"ln -s f.md {LONG}",
            f"ln f.md {LONG}",
            f"mv f.md {LONG}",
            f"mv {LONG} f.md",
            f"rm {LONG}",
            f"rmdir {LONG}",
        ]
        for command in commands:
            out = await sh(command, root / "me", check=False)
            assert out.returncode != 0, command
            assert b"File name too long" in out.stderr, (command, out.stderr)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].created == ["f.md"]


async def test_the_owner_chgrps_to_a_group_it_is_in_but_not_to_another_and_never_chowns(
    tmp_path: Path,
) -> None:
    require_root("to act as other users")
    async with shared_base() as base, running_daemon(base, SPECS) as daemon:
        root = await start(daemon, uid=42000, gid=42000)
        me = root / "me"
        mine = as_user(
            42000,
            f"echo x > {me}/f.md && chmod 6755 {me}/f.md && chgrp 42001 {me}/f.md",
            groups="42001",
        )
        await sh(mine, base)
        out = await sh(f"stat -c %a {me}/f.md", base)
        assert out.stdout.strip() == b"755"  # setuid and setgid cleared, as by any chown
        out = await sh(as_user(42000, f"chgrp 42002 {me}/f.md", groups="42001"), base, check=False)
        assert out.returncode != 0 and b"Operation not permitted" in out.stderr
        out = await sh(as_user(42000, f"chown 42003 {me}/f.md", groups="42001"), base, check=False)
        assert out.returncode != 0 and b"Operation not permitted" in out.stderr
        out = await sh(f"stat -c %u:%g {me}/f.md", base)
        assert out.stdout.strip() == b"42000:42001"
        # The session's folders are the owner's: chgrp of a folder of its own works too.
        await sh(as_user(42000, f"mkdir {me}/d && chgrp 42001 {me}/d", groups="42001"), base)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].created == ["f.md"]


async def test_mode_zero_at_create_and_mkdir_is_kept(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        script = """set -e
python3 -c '
import os
os.umask(0)
os.close(os.open("zero", os.O_CREAT | os.O_WRONLY, 0))
os.mkdir("zero-dir", 0)
'
stat -c %a zero zero-dir"""
        out = await sh(script, root / "me")
        assert out.stdout.split() == [b"0", b"0"]
        await daemon.service.end_turn("s1")


async def test_rm_and_rmdir_change_the_folders_mtime_and_ctime(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        script = """
mkdir d && echo f > d/f && mkdir d/sub
touch -d @1000000000 d && before=$(stat -c %z d)
rm d/f
echo "$(stat -c %Y d) $([ "$(stat -c %z d)" != "$before" ] && echo changed)"
touch -d @1000000000 d && before=$(stat -c %z d)
rmdir d/sub
echo "$(stat -c %Y d) $([ "$(stat -c %z d)" != "$before" ] && echo changed)"
"""
        out = await sh(script, root / "me")
        lines = out.stdout.decode().splitlines()
        assert len(lines) == 2
        for line in lines:
            mtime, ctime = line.split()
            assert int(mtime) != 1000000000 and ctime == "changed"
        await daemon.service.end_turn("s1")


async def test_a_descriptor_whose_name_was_unlinked_or_renamed_over_takes_every_change(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        await sh("echo 'the old rules' > rules.md", root / "me")
        await daemon.service.end_turn("s1")
        root = await start(daemon)
        script = """set -e
python3 -c '
import os
for gone in ("unlink", "rename over"):
    fd = os.open("rules.md", os.O_RDWR)
    if gone == "unlink":
        os.unlink("rules.md")
        with open("rules.md", "w") as again:
            again.write("the old rules\\n")
    else:
        with open("new.md", "w") as new:
            new.write("the new rules\\n")
        os.rename("new.md", "rules.md")
    os.write(fd, b"THE")
    os.ftruncate(fd, 5)
    os.fchmod(fd, 0o600)
    os.fchown(fd, 42000, 42001)
    os.utime(fd, ns=(7_000_000_000, 9_000_000_000))
    info = os.fstat(fd)
    os.lseek(fd, 0, 0)
    print(gone, os.read(fd, 100), oct(info.st_mode & 0o7777), info.st_uid, info.st_gid,
          info.st_mtime_ns, info.st_nlink, info.st_size)
    os.close(fd)
'
cat rules.md"""
        out = await sh(script, root / "me")
        lines = out.stdout.decode().splitlines()
        assert lines == [
            "unlink b'THE o' 0o600 42000 42001 9000000000 0 5",
            "rename over b'THE o' 0o600 42000 42001 9000000000 0 5",
            "the new rules",
        ]
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert me.status == "saved"
        assert me.updated == ["rules.md"] and me.created == [] and me.deleted == []


async def test_renameat2_exchange_swaps_two_files_and_a_folder_and_the_turn_saves_both(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        await sh("echo A > a.md && mkdir -p notes && echo N > notes/n.md", root / "me")
        await daemon.service.end_turn("s1")
        root = await start(daemon)
        await sh("echo B > b.md", root / "me")
        await sh(EXCHANGE + "a.md b.md", root / "me")
        await sh(EXCHANGE + "notes a.md", root / "me")
        out = await sh("cat notes b.md a.md/n.md", root / "me")
        assert out.stdout == b"B\nA\nN\n"
        out = await sh(EXCHANGE + "a.md a.md/n.md", root / "me", check=False)
        assert b"Invalid argument" in out.stderr
        out = await sh(EXCHANGE + "b.md missing", root / "me", check=False)
        assert b"No such file or directory" in out.stderr
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert me.status == "saved"
        assert (me.created, me.updated, me.deleted) == (
            ["a.md/n.md", "b.md", "notes"],
            [],
            ["a.md", "notes/n.md"],
        )
        root = await start(daemon)
        out = await sh("cat notes b.md a.md/n.md", root / "me")
        assert out.stdout == b"B\nA\nN\n"
        await daemon.service.end_turn("s1")


async def test_df_shows_each_spaces_use_against_its_limits(tmp_path: Path) -> None:
    limits = memfs.Limits(max_space_bytes=64 * 4096, max_files=20, max_file_bytes=64 * 4096)
    async with running_daemon(tmp_path, SPECS, limits=limits) as daemon:
        root = await start(daemon)
        await sh("head -c 65536 /dev/zero > a && : > b", root / "me")
        out = await sh("df -B4096 --output=size,used,avail,pcent,itotal,iused .", root / "me")
        assert out.stdout.split()[-6:] == [b"64", b"16", b"48", b"25%", b"20", b"2"]
        out = await sh("df --output=pcent,iused .", root / "team")
        assert out.stdout.split()[-2:] == [b"0%", b"0"]
        # Filled to the limit, df says so, and a write gets ENOSPC as df foretold.
        await sh(f"head -c {64 * 4096 - 65536} /dev/zero > c", root / "me")
        out = await sh("df --output=avail,pcent . && echo x >> c", root / "me", check=False)
        assert out.stdout.split()[-2:] == [b"0", b"100%"]
        assert b"No space left on device" in out.stderr
        # Outside any space (the session folder), the fullest space stands in.
        out = await sh("df --output=pcent .", root)
        assert out.stdout.split()[-1] == b"100%"
        await daemon.service.end_turn("s1")


async def test_links_fifos_devices_and_sockets_are_refused_with_eperm(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        await sh("echo f > f.md", root / "me")
        for command in (
            "ln -s f.md link",
            "ln -s /etc/passwd link",
            "ln f.md hard",
            "mkfifo fifo",
            "mknod dev c 1 3",
            "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'",
        ):
            out = await sh(command, root / "me", check=False)
            assert out.returncode != 0, command
            assert b"Operation not permitted" in out.stderr, (command, out.stderr)
        out = await sh("ls", root / "me")
        assert out.stdout == b"f.md\n"
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].created == ["f.md"]


async def test_fallocate_is_eopnotsupp_and_posix_fallocate_works_through_glibc(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        out = await sh("fallocate -l 8192 big", root / "me", check=False)
        assert out.returncode != 0 and b"Operation not supported" in out.stderr
        script = """set -e
python3 -c '
import os
fd = os.open("reserved", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"head")
os.posix_fallocate(fd, 0, 10000)
os.close(fd)
'
stat -c %s reserved && head -c 4 reserved"""
        out = await sh(script, root / "me")
        assert out.stdout == b"10000\nhead"
        ended = await daemon.service.end_turn("s1")
        me = ended.spaces["me"]
        assert me.status == "saved" and "reserved" in me.created


async def test_df_shows_an_agent_only_its_own_sessions_use(tmp_path: Path) -> None:
    require_root("to act as other users")
    limits = memfs.Limits(max_space_bytes=16 * 4096, max_files=20, max_file_bytes=16 * 4096)
    async with shared_base() as base, running_daemon(base, SPECS, limits=limits) as daemon:
        mine = await start(daemon, "mine", uid=42000, gid=42000)
        theirs = await start(daemon, "theirs", uid=42001, gid=42001)
        await sh(as_user(42001, f"head -c {16 * 4096} /dev/zero > {theirs}/me/full"), base)
        await sh(as_user(42000, f"head -c {4 * 4096} /dev/zero > {mine}/me/quarter"), base)
        # From outside the mount, and from the mount root: the other agent's
        # full space is not this agent's to see (nor to be told about).
        for where in (base, daemon.mount_root):
            out = await sh(
                as_user(42000, f"cd {where} && df --output=pcent {daemon.mount_root}"), base
            )
            assert out.stdout.split()[-1] == b"25%", where
        out = await sh(as_user(42001, f"cd {theirs}/me && df --output=pcent ."), base)
        assert out.stdout.split()[-1] == b"100%"
        await daemon.service.end_turn("mine")
        await daemon.service.end_turn("theirs")
