"""``open_store(url)``: a store from its URL.

``memory://`` (in-process), ``folder:///abs/dir`` (plain files) and
``sqlite:///abs/path/memfs.db`` (the embedded default; a missing folder for
the file is made, 0700). Paths are absolute,
in file-URL form. An unknown scheme or a relative path is a ``ConfigError``
at start, never a store somewhere unexpected.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from memfs.core.errors import ConfigError
from memfs.stores.base import Store

SCHEMES = ("memory", "folder", "sqlite")


def _absolute_path(url: str, netloc: str, path: str) -> Path:
    if netloc:
        raise ConfigError(
            "store URLs take an absolute path after three slashes, e.g. sqlite:///var/lib/memfs/memfs.db",
            path=url,
        )
    if not path.startswith("/") or path == "/":
        raise ConfigError("store URL needs an absolute path", path=url)
    return Path(unquote(path))


def parse_store_url(url: str) -> tuple[str, Path | None]:
    """Check ``url`` as ``open_store`` would, without opening anything: (scheme, path).

    Configuration loading calls this so a bad store URL fails at start with
    the config key named, before any file is created.
    """
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme == "memory":
        if parts.netloc or parts.path:
            raise ConfigError("memory:// takes no path", path=url)
        return scheme, None
    if scheme in ("folder", "sqlite"):
        return scheme, _absolute_path(url, parts.netloc, parts.path)
    raise ConfigError(f"unknown store URL scheme; use one of {', '.join(SCHEMES)}", path=url)


def open_store(url: str) -> Store:
    """Open the store ``url`` names."""
    scheme, path = parse_store_url(url)
    if path is None:
        from memfs.stores.memory import MemoryStore

        return MemoryStore()
    if scheme == "folder":
        from memfs.stores.folder import FolderStore

        return FolderStore(path)
    from memfs.private import make_private_dirs
    from memfs.stores.sqlite import SqliteStore

    # A fresh machine has no folder for the file yet: it is made here, 0700
    # like state_dir (the file is memory), as SQLite makes the file itself.
    make_private_dirs(path.parent)
    return SqliteStore(path)


__all__ = ["SCHEMES", "open_store", "parse_store_url"]
