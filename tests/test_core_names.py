"""Name rules: spaces, path segments, whole paths, identities — at and past each limit."""

from __future__ import annotations

import errno

import pytest

from memfs.core.errors import InvalidName, NameTooLong
from memfs.core.names import (
    MAX_PATH_BYTES,
    MAX_SEGMENT_BYTES,
    MAX_SPACE_NAME_CHARS,
    check_identity,
    check_mount_path,
    check_new_name,
    check_path,
    check_space_name,
    decode_fs_name,
    has_control_character,
)


@pytest.mark.parametrize(
    "name", ["a", "lending-rules", "me", "0", "a.b_c-d", "a" * MAX_SPACE_NAME_CHARS]
)
def test_valid_space_names_are_accepted(name: str) -> None:
    assert check_space_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "A",
        "Lending",
        "-a",
        ".a",
        "_a",
        "a/b",
        "a b",
        "é",
        "a" * (MAX_SPACE_NAME_CHARS + 1),
        "a\0",
    ],
)
def test_invalid_space_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidName):
        check_space_name(name)


@pytest.mark.parametrize(
    "path", ["a.md", "dir/sub/file.txt", "über/straße.md", ".hidden", "a..b", "x" * 255]
)
def test_valid_paths_are_accepted(path: str) -> None:
    assert check_path(path) == path


@pytest.mark.parametrize(
    "path", ["", "/etc/passwd", "../up", "a/../b", "a/./b", ".", "..", "a//b", "a/", "a\0b"]
)
def test_paths_with_empty_dot_or_nul_segments_are_refused(path: str) -> None:
    with pytest.raises(InvalidName) as info:
        check_path(path)
    assert info.value.errno == errno.EINVAL


def test_segment_at_255_bytes_is_accepted_and_256_refused_counting_utf8() -> None:
    at_limit = "é" * (MAX_SEGMENT_BYTES // 2) + "a"  # 2 bytes each + 1 = 255
    assert len(at_limit.encode()) == 255
    check_path(at_limit)
    with pytest.raises(NameTooLong) as info:
        check_path(at_limit + "a")
    assert info.value.errno == errno.ENAMETOOLONG


def test_whole_path_at_1024_bytes_is_accepted_and_1025_refused() -> None:
    at_limit = "/".join(["a" * 255] * 3 + ["a" * 254, "b"])
    assert len(at_limit.encode()) == MAX_PATH_BYTES
    check_path(at_limit)
    with pytest.raises(NameTooLong):
        check_path(at_limit + "b")


def test_lone_surrogates_are_not_utf8() -> None:
    with pytest.raises(InvalidName):
        check_path("bad-\udcff.md")


def test_fs_names_that_are_not_utf8_are_refused_not_mangled() -> None:
    assert decode_fs_name("über".encode()) == "über"
    with pytest.raises(InvalidName) as info:
        decode_fs_name(b"bad-\xff")
    assert "\\xff" in str(info.value)


@pytest.mark.parametrize("value", ["", ".", "..", "a/b", "a\0", "x" * 256])
def test_identities_that_could_escape_a_folder_are_refused(value: str) -> None:
    with pytest.raises(InvalidName):
        check_identity(value, what="user id")


CONTROL = [chr(c) for c in range(0x01, 0x20)] + ["\x7f"]


@pytest.mark.parametrize("ch", CONTROL, ids=lambda ch: f"U+{ord(ch):04X}")
def test_a_new_name_with_a_control_character_is_refused_with_einval(ch: str) -> None:
    with pytest.raises(InvalidName) as info:
        check_new_name(f"a{ch}b.md", what="file name")
    assert info.value.errno == errno.EINVAL
    assert "control characters" in str(info.value)
    assert "\n" not in str(info.value)  # the refusal itself cannot forge a log line


@pytest.mark.parametrize("name", ["a.md", "über straße.md", "tab-free name", "a\u00a0b", "x" * 255])
def test_a_new_name_without_control_characters_is_accepted(name: str) -> None:
    assert check_new_name(name) == name


def test_a_stored_path_with_a_control_character_still_passes_check_path() -> None:
    # Old files keep loading, and can be edited, renamed away or deleted.
    assert check_path("notes/a\nb.md") == "notes/a\nb.md"


@pytest.mark.parametrize("value", ["s1\n", "u\x1bx", "org\x7f"])
def test_mount_paths_with_control_characters_are_refused(value: str) -> None:
    with pytest.raises(InvalidName):
        check_mount_path(value)
    # A stored id comes back from a store's rows: it must not break reading them.
    assert check_identity(value, what="user id") == value


def test_has_control_character_covers_c0_and_del_only() -> None:
    assert all(has_control_character(ch) for ch in [*CONTROL, "\0"])
    assert not has_control_character("plain é \u2028 \x85")  # not C0/DEL (the note escapes them)


def test_a_nested_mount_path_is_for_persistent_dirs_only_and_each_segment_is_a_new_name() -> None:
    assert check_mount_path("persistent/user", nested=True) == "persistent/user"
    assert check_mount_path("scratch", nested=True) == "scratch"
    with pytest.raises(InvalidName):
        check_mount_path("persistent/user")  # spaces mount at one segment
    for bad in ("a//b", "/a", "a/", "a/../b", "./a", "a/b\x07"):
        with pytest.raises(InvalidName):
            check_mount_path(bad, nested=True)


def test_a_nested_mount_path_at_and_past_the_path_limit() -> None:
    head = "/".join(["s" * 200] * 5)
    at = head + "/" + "t" * (MAX_PATH_BYTES - len(head) - 1)
    assert len(at.encode()) == MAX_PATH_BYTES
    assert check_mount_path(at, nested=True) == at
    with pytest.raises(NameTooLong):
        check_mount_path(at + "t", nested=True)
