"""``open_store(url)``: a store from its URL.

``memory://`` (in-process), ``folder:///abs/dir`` (plain files),
``sqlite:///abs/path/memfs.db`` (the embedded default; a missing folder for
the file is made, 0700) and ``postgresql://user@host/db`` (the shared store;
libpq's URL form, so ``?host=/run/postgresql`` for a socket folder or
``?options=-csearch_path%3Dmemfs`` for a schema of its own). Paths are
absolute, in file-URL form. An unknown scheme, a relative path or a
PostgreSQL URL libpq cannot read is a ``ConfigError`` at start, never a
store somewhere unexpected. Nothing connects until the store is first used.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
    check_pool_size,
    check_timeout,
)
from memfs.core.errors import ConfigError
from memfs.stores.base import Store

SCHEMES = ("memory", "folder", "sqlite", "postgresql")


def _absolute_path(url: str, netloc: str, path: str) -> Path:
    if netloc:
        raise ConfigError(
            "store URLs take an absolute path after three slashes, e.g. sqlite:///var/lib/memfs/memfs.db",
            path=url,
        )
    if not path.startswith("/") or path == "/":
        raise ConfigError("store URL needs an absolute path", path=url)
    unquoted = unquote(path, errors="surrogateescape")
    try:
        unquoted.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError("a store URL's path must be valid UTF-8", path=repr(url)) from None
    return Path(unquoted)


def parse_store_url(url: str) -> tuple[str, Path | None]:
    """Check ``url`` as ``open_store`` would, without opening anything: (scheme, path).

    The path is None for ``memory://`` and ``postgresql://`` (no file of ours).

    Configuration loading calls this so a bad store URL fails at start with
    the config key named, before any file is created.
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a bracketed host left open, say: named, not the URL (a password)
        raise ConfigError(f"not a store URL: {exc}") from None
    scheme = parts.scheme
    if scheme == "memory":
        if parts.netloc or parts.path:
            raise ConfigError("memory:// takes no path", path=url)
        return scheme, None
    if scheme in ("folder", "sqlite"):
        return scheme, _absolute_path(url, parts.netloc, parts.path)
    if scheme == "postgresql":
        _check_postgres_url(url)
        return scheme, None
    raise ConfigError(f"unknown store URL scheme; use one of {', '.join(SCHEMES)}", path=url)


def _check_postgres_url(url: str) -> None:
    import psycopg

    from memfs.stores.postgres.store import redacted

    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(
            f"not a PostgreSQL URL libpq can read: {exc}", path=redacted(url)
        ) from None


def open_store(
    url: str,
    *,
    key_file: Path | None = None,
    pool_size: int = DEFAULT_STORE_POOL_SIZE,
    connect_timeout_seconds: float = DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    lock_timeout_seconds: float = DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
) -> Store:
    """Open the store ``url`` names.

    ``key_file`` is the store key file (``store_key_file``) that seals people's
    memory in a managed store (``memfs.core.sealing``); by default ``store.key``
    beside a SQLite database, and ``/var/lib/memfs/store.key`` (the daemon's
    default) for PostgreSQL, which has no folder of its own: every process on
    one database must name the same file. Memory and folder stores keep
    nothing to seal (nothing on disk; plain files by design).

    ``pool_size``, ``connect_timeout_seconds`` and ``lock_timeout_seconds`` are
    a PostgreSQL store's connection settings (``store_pool_size``, ...;
    ``memfs.core.connection``); other stores ignore them. A bad one is a
    ``ConfigError`` naming it, whatever the store.
    """
    pool_size = check_pool_size(pool_size, key="pool_size")
    connect_timeout_seconds = check_timeout(connect_timeout_seconds, key="connect_timeout_seconds")
    lock_timeout_seconds = check_timeout(lock_timeout_seconds, key="lock_timeout_seconds")
    scheme, path = parse_store_url(url)
    if scheme == "postgresql":
        from memfs.stores.postgres import PostgresStore

        return PostgresStore(
            url,
            key_file=key_file,
            pool_size=pool_size,
            connect_timeout_seconds=connect_timeout_seconds,
            lock_timeout_seconds=lock_timeout_seconds,
        )
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
    return SqliteStore(path, key_file=key_file)


__all__ = ["SCHEMES", "open_store", "parse_store_url"]
