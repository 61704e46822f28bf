"""``open_store(url)``: a store from its URL.

``memory://`` (in-process), ``folder:///abs/dir`` (plain files) and
``sqlite:///abs/path/memfs.db`` (the embedded default). Paths are absolute,
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


def open_store(url: str) -> Store:
    """Open the store ``url`` names."""
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme == "memory":
        if parts.netloc or parts.path:
            raise ConfigError("memory:// takes no path", path=url)
        from memfs.stores.memory import MemoryStore

        return MemoryStore()
    if scheme == "folder":
        root = _absolute_path(url, parts.netloc, parts.path)
        from memfs.stores.folder import FolderStore

        return FolderStore(root)
    if scheme == "sqlite":
        database = _absolute_path(url, parts.netloc, parts.path)
        from memfs.stores.sqlite import SqliteStore

        return SqliteStore(database)
    raise ConfigError(f"unknown store URL scheme; use one of {', '.join(SCHEMES)}", path=url)


__all__ = ["SCHEMES", "open_store"]
