"""Copy mode: a turn's spaces as plain folders, loaded by copying and read back by scanning.

The working copy of every mount is written out at turn start and walked at
turn end. It costs O(space size) both ways, which is why the daemon (a FUSE
overlay) exists; copy mode needs nothing but a local disk and is what tests
and simple deployments use. All functions here block: call them through
``trio.to_thread.run_sync``.

Each file is written out with its mode and mtime (a read-only mount's lose
their write bits), every stored folder is made, empty or not, and the scan
reads each file's mode and times back with its bytes, and every folder.
A nested mount's folders on the way (``persistent/`` of ``persistent/user``)
are the session's: read-only (0555), holding only the mounts.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memfs.core.errors import MemfsError, TooLarge, Unsupported
from memfs.core.models import FILE_MODE, MODE_BITS, FileMeta, clamp_time_ns
from memfs.core.names import check_path, decode_fs_name

READ_ONLY_FILE = 0o444
READ_ONLY_DIR = 0o555


@dataclass
class Scan:
    """What a folder holds at turn end: readable files, and what could not be taken, with why."""

    files: dict[str, bytes] = field(default_factory=dict)
    refused: dict[str, MemfsError] = field(default_factory=dict)
    meta: dict[str, FileMeta] = field(default_factory=dict)  # of each file in ``files``
    folders: list[str] = field(default_factory=list)  # every folder, empty ones too


def materialize(
    folder: Path,
    files: dict[str, bytes],
    *,
    read_only: bool,
    meta: Mapping[str, FileMeta] | None = None,
    folders: Iterable[str] = (),
) -> None:
    """Write a snapshot out as a folder; read-only mounts get no write bits."""
    folder.mkdir(parents=True, exist_ok=False)
    meta = meta or {}
    for path in folders:
        (folder / path).mkdir(parents=True, exist_ok=True)
    for path, content in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        file = meta.get(path)
        # Always set: what the umask left would otherwise read back as a mode change.
        mode = FILE_MODE if file is None else file.mode
        target.chmod(mode & ~0o222 if read_only else mode)
        if file is not None and file.mtime_ns is not None:
            os.utime(target, ns=(file.mtime_ns, file.mtime_ns))
    if read_only:
        # Children first: once a directory loses its write bit nothing more goes in.
        for dirpath, _dirnames, _files in os.walk(folder, topdown=False):
            Path(dirpath).chmod(READ_ONLY_DIR)


def seal_parents(root: Path, folders: Iterable[Path]) -> None:
    """Make the folders between ``root`` and each nested mount's folder read-only (0555).

    They belong to no space (``persistent/`` of ``persistent/user``): nothing
    stored is in them, so the agent gets no write bit to add, remove or rename
    anything there. Root ignores mode bits; copy mode cannot stop root.
    """
    parents = {
        root / parent
        for folder in folders
        for parent in folder.relative_to(root).parents
        if parent != Path(".")
    }
    for parent in parents:
        parent.chmod(READ_ONLY_DIR)


def _relative(raw: bytes) -> str:
    return "/".join(decode_fs_name(part) for part in raw.split(b"/"))


def scan(folder: Path, *, max_file_bytes: int) -> Scan:
    """Walk ``folder`` and read every regular file; refuse anything memfs does not keep.

    Names are read as bytes so a name that is not UTF-8 is refused rather than
    mangled. Files over ``max_file_bytes`` are refused from their size alone,
    without reading them into memory.
    """
    result = Scan()
    root = os.fsencode(folder)
    stack: list[bytes] = [b""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as entries:
            for entry in entries:
                rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
                shown = rel.decode("utf-8", "backslashreplace")
                try:
                    path = _relative(rel)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(rel)
                        result.folders.append(check_path(path))
                        continue
                    check_path(path)
                    info = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(info.st_mode):
                        raise Unsupported(
                            "only regular files and folders are kept; symlinks, devices, "
                            "FIFOs and sockets are not",
                            path=path,
                        )
                    if info.st_size > max_file_bytes:
                        raise TooLarge(
                            f"file is {info.st_size} bytes; the limit is {max_file_bytes}",
                            path=path,
                        )
                    with open(entry.path, "rb") as fh:
                        result.files[path] = fh.read()
                    result.meta[path] = FileMeta(
                        mode=stat.S_IMODE(info.st_mode) & MODE_BITS,
                        mtime_ns=clamp_time_ns(info.st_mtime_ns),
                        ctime_ns=clamp_time_ns(info.st_ctime_ns),
                    )
                except MemfsError as exc:
                    result.refused[shown] = exc
    return result


def remove(folder: Path) -> None:
    """Remove a working copy, read-only parts included."""
    if not folder.exists():
        return
    for dirpath, _dirnames, _files in os.walk(folder):
        Path(dirpath).chmod(0o755)
    shutil.rmtree(folder)


__all__ = ["Scan", "materialize", "remove", "scan", "seal_parents"]
