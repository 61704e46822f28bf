"""The spare files and turn folders an ended turn leaves, emptied and used again (memfsd.spares)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import trio

from memfs.core.models import Limits
from memfsd import workspace as workspace_module
from memfsd.blobs import BlobCache
from memfsd.overlay import Overlay
from memfsd.spares import SPARE_DIR, Spares
from memfsd.workspace import MARKS
from tests.overlay_helpers import source_of, turn_of
from tests.test_daemon_workspace import BODY, workspace


def written(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def turn_folder(at: Path) -> Path:
    """A turn's folder as an end leaves it: journal, data files, its marks."""
    written(at / "journal", b'{"o":"w","m":"me","p":"secret-plans.md"}\n')
    written(at / "data" / "1", b"the plans of another session\n")
    written(at / "data" / "2", b"more of them\n")
    written(at / "ending", b"")
    written(at / "durable", b"")
    return at


def held_bytes(state: Path) -> list[Path]:
    """Every file under the spare folder that still holds a byte."""
    return [p for p in (state / SPARE_DIR).rglob("*") if p.is_file() and p.stat().st_size]


def test_a_file_taken_in_leaves_its_name_at_once_and_comes_back_empty_as_the_same_inode(
    tmp_path: Path,
) -> None:
    spares = Spares(tmp_path)
    old = written(tmp_path / "s1" / "done.json", b'{"prompt": "her words"}')
    inode = old.stat().st_ino
    spares.take_file(old)
    assert not old.exists()
    assert held_bytes(tmp_path) == []  # nothing she wrote waits in a spare
    new = tmp_path / "s2" / "data-1"
    new.parent.mkdir()
    spares.file(new)
    assert new.stat().st_ino == inode
    assert new.read_bytes() == b""
    assert stat.S_IMODE(new.stat().st_mode) == 0o600
    assert len(spares) == 0


def test_a_file_with_no_spare_left_is_made_new_and_empty(tmp_path: Path) -> None:
    spares = Spares(tmp_path)
    spares.file(tmp_path / "fresh")
    assert (tmp_path / "fresh").read_bytes() == b""
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o600
    # Whatever was there is replaced by an empty file, as a spare's rename would.
    written(tmp_path / "old", b"left over")
    spares.file(tmp_path / "old")
    assert (tmp_path / "old").read_bytes() == b""


def test_a_turn_folder_taken_in_comes_back_with_an_empty_data_folder_and_a_new_journal(
    tmp_path: Path,
) -> None:
    spares = Spares(tmp_path)
    folder = turn_folder(tmp_path / "sessions" / "s1" / "t-1")
    inode, journal = folder.stat().st_ino, (folder / "journal").stat().st_ino
    spares.take_turn_folder(folder, MARKS)
    assert not folder.exists()
    assert held_bytes(tmp_path) == []
    assert len(spares) == 1 + 2  # the folder, and its two marks as files
    again = tmp_path / "sessions" / "s2" / "t-2"
    spares.turn_folder(again)  # s2's folder is made on the way
    assert again.stat().st_ino == inode
    assert sorted(p.name for p in again.iterdir()) == ["data", "journal"]
    assert list((again / "data").iterdir()) == []
    assert (again / "journal").read_bytes() == b""
    assert (again / "journal").stat().st_ino != journal  # a reader may still hold the old one
    assert stat.S_IMODE(again.stat().st_mode) == 0o700


def test_a_turn_folder_with_no_spare_left_is_made_new(tmp_path: Path) -> None:
    spares = Spares(tmp_path)
    spares.turn_folder(tmp_path / "sessions" / "s1" / "t-1")
    made = tmp_path / "sessions" / "s1" / "t-1"
    assert sorted(p.name for p in made.iterdir()) == ["data", "journal"]
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE((made / "journal").stat().st_mode) == 0o600


def test_a_turn_folder_already_there_is_kept_as_it_is_and_the_spare_stays(
    tmp_path: Path,
) -> None:
    spares = Spares(tmp_path)
    spares.take_turn_folder(turn_folder(tmp_path / "t-old"), MARKS)
    there = written(tmp_path / "t-again" / "journal", b"a start tried again\n").parent
    (there / "data").mkdir()
    before = len(spares)
    spares.turn_folder(there)
    assert (there / "journal").read_bytes() == b"a start tried again\n"
    assert len(spares) == before


def test_a_spare_is_not_lost_to_a_path_whose_folder_is_gone(tmp_path: Path) -> None:
    spares = Spares(tmp_path)
    spares.take_file(written(tmp_path / "a", b"x"))
    with pytest.raises(FileNotFoundError):
        spares.file(tmp_path / "gone" / "data-1")
    assert len(spares) == 1


@pytest.mark.parametrize("kept", [0, 1, 2])
def test_files_taken_in_past_max_files_are_removed_not_kept(tmp_path: Path, kept: int) -> None:
    spares = Spares(tmp_path, max_files=2)
    for name in ("a", "b", "c")[: kept + 1]:
        spares.take_file(written(tmp_path / name, b"x"))
    assert len(spares) == min(kept + 1, 2)  # at the limit: kept; past it: removed
    on_disk = list((tmp_path / SPARE_DIR).iterdir())
    assert len(on_disk) == min(kept + 1, 2)
    assert not any((tmp_path / name).exists() for name in ("a", "b", "c"))


def test_two_files_taken_in_at_once_never_keep_more_than_max_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two worker threads take a file in at once: the other's comes in while
    # this one is being emptied, and takes the last place.
    spares = Spares(tmp_path, max_files=1)
    truncate = os.truncate
    other = written(tmp_path / "b", b"y")

    def meanwhile(path: object, length: int) -> None:
        if other.exists():
            spares.take_file(other)
        truncate(path, length)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "truncate", meanwhile)
    spares.take_file(written(tmp_path / "a", b"x"))
    monkeypatch.undo()
    assert len(spares) == 1
    assert len(list((tmp_path / SPARE_DIR).iterdir())) == 1


def test_turn_folders_taken_in_past_max_folders_are_removed_whole(tmp_path: Path) -> None:
    spares = Spares(tmp_path, max_files=0, max_folders=1)
    spares.take_turn_folder(turn_folder(tmp_path / "t-1"), MARKS)  # at the limit: kept
    spares.take_turn_folder(turn_folder(tmp_path / "t-2"), MARKS)  # past it: removed
    assert len(spares) == 1
    assert [p.is_dir() for p in (tmp_path / SPARE_DIR).iterdir()] == [True]
    assert not (tmp_path / "t-1").exists() and not (tmp_path / "t-2").exists()
    assert held_bytes(tmp_path) == []


def test_a_folder_that_is_not_a_turns_is_removed_not_kept(tmp_path: Path) -> None:
    # A start cut short before its data folder was made.
    spares = Spares(tmp_path)
    folder = written(tmp_path / "t-1" / "journal", b"{}\n").parent
    spares.take_turn_folder(folder, MARKS)
    assert not folder.exists()
    assert len(spares) == 0
    assert held_bytes(tmp_path) == []


def test_a_start_removes_what_an_earlier_run_left_in_the_spare_folder(tmp_path: Path) -> None:
    # A crash between moving a turn's folder aside and emptying it leaves its
    # content there; nothing reads it, and the next start removes it.
    written(tmp_path / SPARE_DIR / "7" / "data" / "1", b"the plans of another session\n")
    spares = Spares(tmp_path)
    assert not (tmp_path / SPARE_DIR).exists()
    assert len(spares) == 0


def test_a_spare_an_earlier_start_removed_is_passed_over(tmp_path: Path) -> None:
    # Two overlays on one state_dir (a restart in tests): the second empties
    # the folder under the first, whose next spare is then made new.
    first = Spares(tmp_path)
    first.take_file(written(tmp_path / "a", b"x"))
    Spares(tmp_path)
    first.file(tmp_path / "b")
    assert (tmp_path / "b").read_bytes() == b""
    assert len(first) == 0


def test_an_ended_turns_data_files_and_journal_are_unlinked_never_handed_out_again(
    tmp_path: Path,
) -> None:
    # Worker threads read them by path while a turn ends or is shown: a read
    # whose open came first must keep that turn's bytes, whatever comes next.
    overlay = Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits())
    folder = turn_folder(tmp_path / "sessions" / "s1" / "t-1")
    names = ("data/1", "data/2", "journal")
    before = {name: (folder / name).read_bytes() for name in names}
    readers = {name: os.open(folder / name, os.O_RDONLY) for name in names}
    try:
        overlay.remove_turn_dir(folder, MARKS)
        assert not folder.exists()
        assert held_bytes(tmp_path) == []
        new = tmp_path / "sessions" / "s2" / "t-2"
        overlay.spares.turn_folder(new)
        made = [new / "journal"]
        for n in range(1, 6):
            overlay.spares.file(new / "data" / str(n))
            made.append(new / "data" / str(n))
        for path in made:
            path.write_bytes(b"s2's own " * 16)
        assert {name: os.pread(fd, 4096, 0) for name, fd in readers.items()} == before
    finally:
        for fd in readers.values():
            os.close(fd)


# -- review of memfsd.spares: what a failing disk and a reader in flight leave -------


@pytest.mark.parametrize("kind", ["turn folder", "record"])
def test_a_file_whose_emptying_fails_leaves_none_of_what_it_held_in_the_spare_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The disk fails the truncate (EIO; ENOSPC on a copy-on-write filesystem)
    # after the file was moved in: the folder it came from is removed (or the
    # error goes up), but the file itself stays in spare/<n>, whole, until the
    # next start. A forget never looks there, and the daemon may run for weeks.
    spares = Spares(tmp_path)
    truncate = os.truncate

    def eio(path: object, length: int) -> None:
        if Path(str(path)).parent == tmp_path / SPARE_DIR:
            raise OSError(5, "Input/output error")
        truncate(path, length)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "truncate", eio)
    if kind == "turn folder":
        spares.take_turn_folder(turn_folder(tmp_path / "sessions" / "s1" / "t-1"), MARKS)
    else:
        record = written(tmp_path / "sessions" / "s1" / "turn.json", b'{"prompt": "her words"}')
        spares.take_file(record)  # removed all the same: unlinked, not kept
        assert not record.exists()  # its name went: the turn is over
    monkeypatch.undo()
    assert held_bytes(tmp_path) == []


def test_a_start_drops_a_never_synced_turn_on_a_disk_with_no_inode_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a reboot a turn.json never made durable is removed. That was an
    # unlink, which a full disk never refuses; it is now a move into spare/,
    # which a start removed, and making it again needs an inode: ENOSPC went
    # out of saved_turns, and the daemon did not start.
    async def start() -> None:
        memory, _ = workspace(tmp_path)
        await memory.start_turn("s1", BODY)

    trio.run(start)
    monkeypatch.setattr(workspace_module, "boot_id", lambda: "a-later-boot")
    _, ws = workspace(tmp_path)

    def full(path: object, mode: int = 0o777) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "mkdir", full)
    assert ws.saved_turns() == ([], [])
    monkeypatch.undo()
    assert not ws.turn_file("s1").exists()


def test_a_reader_of_an_ended_turns_data_file_never_reads_another_sessions_bytes(
    tmp_path: Path,
) -> None:
    # ``memfs turn kept --file`` (DaemonService.kept_file) reads the kept
    # turn's data files by path in a worker thread (OverlayWorkspace.collect),
    # and nothing keeps a ``discard`` of the same turn from running meanwhile:
    # its folder goes in another worker thread, the trio thread hands the
    # emptied data files to other sessions' new files. A read whose open came
    # before the folder went saw the ended turn's bytes (an unlinked file
    # keeps them); a recycled inode shows it what another session wrote since.
    async def run() -> None:
        memory, ws = workspace(tmp_path)
        overlay = ws.overlay
        await memory.start_turn("s1", BODY)
        mine = turn_of(overlay, "s1").mounts["me"]
        _, fh = overlay.create_open(mine.root.inode, "notes.md", 0o644, 0, 0, os.O_WRONLY)
        overlay.write(fh, 0, b"s1's own notes, read back by its operator\n")
        overlay.release(fh)
        reading = os.open(source_of(overlay, mine, "notes.md"), os.O_RDONLY)  # the read in flight
        try:
            await memory.discard_turn("s1")
            body = {**BODY, "userId": "u2"}
            await memory.start_turn("s2", body)
            theirs = turn_of(overlay, "s2").mounts["me"]
            for n in range(12):  # enough new files to use every spare s1 left
                _, fh = overlay.create_open(
                    theirs.root.inode, f"secret-{n}.md", 0o644, 0, 0, os.O_WRONLY
                )
                overlay.write(fh, 0, b"u2's secret " * 8)
                overlay.release(fh)
            seen = os.pread(reading, 4096, 0)
        finally:
            os.close(reading)
        assert b"u2's secret" not in seen

    trio.run(run)
