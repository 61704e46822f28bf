"""The store key file (``store_key_file``): read it, or make it once, atomically.

The key's format and rules are ``memfs.core.sealing``. A missing file is made
with a fresh random key, 0600: the key is written to a private temporary file
in the same folder, synced, then hard-linked to the path, which fails if the
path exists. So two daemons starting at once on one path agree on one key
(the loser reads the winner's), and nobody ever reads half a key file. A file
that exists is never rewritten: a key that does not fit the store is refused
at open (``ConfigError``), never replaced.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from memfs.core import sealing
from memfs.core.errors import ConfigError
from memfs.private import make_private_dirs

KEY_FILE_NAME = "store.key"


def default_key_file(state_dir: Path) -> Path:
    """Where a daemon's store key lives unless ``store_key_file`` says otherwise."""
    return state_dir / KEY_FILE_NAME


def _read(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"store_key_file cannot be read: {exc.strerror}", path=str(path)
        ) from None
    return sealing.parse_store_key(data, path=str(path))


def load_store_key(path: Path) -> bytes:
    """The store key in ``path``, made there first (0600, atomically) if the file is missing."""
    path = Path(os.path.abspath(path))
    if path.exists() or path.is_symlink():
        return _read(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{sealing.new_key().hex()[:8]}.tmp")
    try:
        # Inside the try: a folder that cannot be made (a full disk, a file in
        # the way) is the same clear error as a key that cannot be written.
        make_private_dirs(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise ConfigError(
            f"store_key_file cannot be created: {exc.strerror}", path=str(path)
        ) from None
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, sealing.format_store_key(sealing.new_key()))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: its key is the store's
        else:
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except OSError as exc:
        raise ConfigError(
            f"store_key_file cannot be created: {exc.strerror}", path=str(path)
        ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return _read(path)
