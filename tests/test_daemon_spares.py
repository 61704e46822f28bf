"""The spare files and turn folders an ended turn leaves, emptied and used again (memfsd.spares)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memfs.core.models import Limits
from memfsd.blobs import BlobCache
from memfsd.overlay import Overlay
from memfsd.spares import SPARE_DIR, Spares


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


def test_a_turn_folder_taken_in_comes_back_holding_only_an_empty_data_folder_and_journal(
    tmp_path: Path,
) -> None:
    spares = Spares(tmp_path)
    folder = turn_folder(tmp_path / "sessions" / "s1" / "t-1")
    inode = folder.stat().st_ino
    spares.take_turn_folder(folder)
    assert not folder.exists()
    assert held_bytes(tmp_path) == []
    assert len(spares) == 1 + 4  # the folder, and its two data files and two marks as files
    again = tmp_path / "sessions" / "s2" / "t-2"
    spares.turn_folder(again)  # s2's folder is made on the way
    assert again.stat().st_ino == inode
    assert sorted(p.name for p in again.iterdir()) == ["data", "journal"]
    assert list((again / "data").iterdir()) == []
    assert (again / "journal").read_bytes() == b""
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
    spares.take_turn_folder(turn_folder(tmp_path / "t-old"))
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


def test_turn_folders_taken_in_past_max_folders_are_removed_whole(tmp_path: Path) -> None:
    spares = Spares(tmp_path, max_files=0, max_folders=1)
    spares.take_turn_folder(turn_folder(tmp_path / "t-1"))  # at the limit: kept
    spares.take_turn_folder(turn_folder(tmp_path / "t-2"))  # past it: removed
    assert len(spares) == 1
    assert [p.name for p in (tmp_path / SPARE_DIR).iterdir()] == ["0"]
    assert not (tmp_path / "t-1").exists() and not (tmp_path / "t-2").exists()
    assert held_bytes(tmp_path) == []


def test_a_folder_that_is_not_a_turns_is_removed_not_kept(tmp_path: Path) -> None:
    # A start cut short before its journal was made.
    spares = Spares(tmp_path)
    folder = written(tmp_path / "t-1" / "data" / "1", b"x").parent.parent
    spares.take_turn_folder(folder)
    assert not folder.exists()
    assert len(spares) == 1  # its data file, emptied; not the folder
    assert [p for p in (tmp_path / SPARE_DIR).iterdir() if p.is_dir()] == []


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


def test_an_overlay_hands_an_ended_turns_data_file_to_the_next_turn_empty(
    tmp_path: Path,
) -> None:
    overlay = Overlay(tmp_path, BlobCache(tmp_path / "blobs"), Limits())
    folder = turn_folder(tmp_path / "sessions" / "s1" / "t-1")
    inodes = {os.stat(folder / name).st_ino for name in ("data/1", "data/2", "ending", "durable")}
    overlay.remove_turn_dir(folder)
    assert not folder.exists()
    assert held_bytes(tmp_path) == []
    new = tmp_path / "sessions" / "s2" / "t-2"
    overlay.spares.turn_folder(new)
    overlay.spares.file(new / "data" / "1")
    assert os.stat(new / "data" / "1").st_ino in inodes
    assert (new / "data" / "1").read_bytes() == b""
