"""Hostile POSIX attacks on a real mount: writes the agent saw succeed that the store loses.

Each test drives a real daemon with real syscalls (a Python script run by
bash in the mount, as an agent's tool would) and compares what the agent saw
succeed with what the store holds after the turn ends. Each failed on the
code its comment names, before the fix its name pins.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import trio

import memfs
from memfs.api.models import StartTurnRequest
from memfs.core.models import SpaceRef
from tests.daemon_harness import Daemon, running_daemon, sh

BODY = {"userId": "u1", "name": "U"}
SPECS = [memfs.user_memory()]
ME = SpaceRef(layer="user", space="me", user="u1")


async def start(daemon: Daemon, session: str = "s1") -> Path:
    started = await daemon.service.start_turn(StartTurnRequest(session=session, extra_body=BODY))
    return Path(started.root)


async def stored(daemon: Daemon) -> dict[str, bytes]:
    return await daemon.service.memory.store.files(ME)  # type: ignore[attr-defined,no-any-return]


def script(folder: Path, code: str) -> str:
    """``code`` written to a file outside the mount, and the command that runs it."""
    path = folder / f"agent{len(list(folder.glob('agent*.py')))}.py"
    path.write_text(textwrap.dedent(code))
    return f"python3 {path}"


async def wait_for(path: Path, text: str) -> None:
    # Outside the mount: a plain read never asks the daemon this loop serves.
    for _ in range(1000):
        if path.exists() and text in path.read_text():
            return
        await trio.sleep(0.01)
    raise AssertionError(f"{path} never said {text!r}")


# Attack: a descriptor opened with O_APPEND stops appending, as POSIX lets a
# program do: fcntl(F_SETFL) clears O_APPEND, pwritev2(RWF_NOAPPEND) writes at
# an offset despite it, and a MAP_SHARED mapping of it writes its pages back
# at their own offsets (Python's open(path, "a+b") then mmap). The kernel sends
# each WRITE with the right offset, but memfsd.overlay.Overlay.write replaces
# the offset with the file's size whenever the handle was *opened* with
# O_APPEND (Handle.append, set once in Overlay.open). So a pwrite of b"XX" at 0
# that returned 2 is stored appended at the end, and the mmap'd page is stored
# a second time after the original bytes: the store holds bytes at places the
# agent never wrote them, and not the change it made.
async def test_a_write_at_an_offset_through_a_descriptor_opened_with_o_append_lands_there(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        code = """
            import fcntl, mmap, os
            fd = os.open("cleared.md", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, b"0123456789")
            fcntl.fcntl(fd, fcntl.F_SETFL, 0)  # O_APPEND off: writes go where asked
            assert os.pwrite(fd, b"XX", 0) == 2
            os.close(fd)

            fd = os.open("noappend.md", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, b"0123456789")
            RWF_NOAPPEND = 0x20  # Linux 6.9
            try:
                assert os.pwritev(fd, [b"YY"], 0, RWF_NOAPPEND) == 2
            except OSError:  # an older kernel: write it as such a kernel would have
                os.unlink("noappend.md")
                with open("noappend.md", "wb") as again:
                    again.write(b"YY23456789")
            os.close(fd)

            with open("mapped.md", "a+b") as f:
                f.write(b"aaaaaaaaaa")
                f.flush()
                with mmap.mmap(f.fileno(), 10) as m:
                    m[0:5] = b"HELLO"
                    m.flush()  # msync: the kernel writes the page back, and says so
            """
        await sh(script(tmp_path, code), root / "me")
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].status == "saved"
        files = await stored(daemon)
        assert files["cleared.md"] == b"XX23456789"  # stored: b"0123456789XX"
        assert files["noappend.md"] == b"YY23456789"  # stored: b"0123456789YY"
        assert files["mapped.md"] == b"HELLOaaaaa"  # stored: b"aaaaaaaaaaHELLOaaaaa"


# Attack: an agent's background process writes a file through a MAP_SHARED,
# PROT_WRITE mapping (as LMDB's WRITEMAP, a numpy memmap or a Python mmap edit
# do) and keeps the mapping while the turn ends. Every process of the turn
# already sees the new bytes (another mapping, or any read, shows them: they
# are the file's page cache), but they are dirty pages in the kernel the daemon
# was never sent: the turn end (memfsd.workspace.Workspace.collect, which
# freezes the turn and reads the data files) stores the file as it was, never
# asking the kernel to write the mount's dirty pages back first (a syncfs of
# the mount before the freeze would). When the process then unmaps or exits,
# the page's WRITE is refused (the turn is gone) and nobody hears of it: the
# process exits 0, the turn said "saved", and the edit is lost.
async def test_an_mmap_write_made_before_the_turn_ends_is_stored_at_turn_end(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon)
        await sh("printf aaaaaaaaaa > m.md", root / "me")
        await daemon.service.end_turn("s1")
        root = await start(daemon)
        ready, go = tmp_path / "ready", tmp_path / "go"
        code = f"""
            import mmap, os, time
            fd = os.open("m.md", os.O_RDWR)
            m = mmap.mmap(fd, 10)
            m[0:5] = b"HELLO"
            seen = mmap.mmap(os.open("m.md", os.O_RDONLY), 10, prot=mmap.PROT_READ)
            open({str(ready)!r}, "w").write("seen " + repr(seen[:]))
            while not os.path.exists({str(go)!r}):
                time.sleep(0.01)
            m.close()  # munmap: the kernel writes the dirty page back now
            os.close(fd)
            """
        done: dict[str, int] = {}

        async def agent() -> None:
            out = await sh(script(tmp_path, code), root / "me", check=False)
            done["rc"] = out.returncode

        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent)
            await wait_for(ready, "seen")
            ended = await daemon.service.end_turn("s1")
            go.write_text("go")
        assert ready.read_text() == "seen b'HELLOaaaaa'"  # what the turn's files held
        assert done["rc"] == 0  # and the agent was told of no failure
        assert ended.spaces["me"].status == "saved"
        assert (await stored(daemon))["m.md"] == b"HELLOaaaaa"  # stored: b"aaaaaaaaaa"
