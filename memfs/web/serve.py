"""Serving the Memory tab with hypercorn under trio: ``memfs web`` and the daemon's ``web_listen``.

One owner for both doors. :func:`bind_web` checks the address and the TLS
files and binds the listening socket *before* anything else starts, so a
port already in use, a non-loopback address without TLS or a certificate
that does not load is a ``ConfigError`` naming the key (``web_listen``,
``web_tls_cert``), not a traceback from a running server and not a mount
left behind. :func:`serve_web` then serves an app on the bound socket until
cancelled or until its ``shutdown_trigger`` returns. ``memfs web`` runs
that without FUSE (:func:`run_web`); the daemon runs it in its nursery.
"""

from __future__ import annotations

import errno
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import trio
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
)
from memfs.core.defaults import DEFAULT_WEB_MAX_BODY_BYTES, DEFAULT_WEB_READ_TIMEOUT_SECONDS
from memfs.core.errors import ConfigError
from memfs.core.listen import require_tls
from memfs.stores.open import open_store
from memfs.stores.sql.store import SqlStore
from memfs.web.app import web_app


def hypercorn_config(
    listen: str,
    tls_cert: str | None,
    tls_key: str | None,
    *,
    read_timeout_seconds: float = DEFAULT_WEB_READ_TIMEOUT_SECONDS,
) -> Config:
    """The server's settings; a non-loopback ``listen`` without TLS is a ``ConfigError``.

    A connection silent for ``read_timeout_seconds`` while the server waits to
    read from it is closed (``web_read_timeout_seconds``); hypercorn's own
    default waits for ever, so a client that sent a request's headers and no
    body held its connection for good. Headers themselves must arrive within
    hypercorn's ``keep_alive_timeout`` (5 s).
    """
    if not read_timeout_seconds > 0:
        raise ConfigError(f"web_read_timeout_seconds must be > 0, not {read_timeout_seconds!r}")
    host, port = require_tls(listen, tls_cert, tls_key)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    # hypercorn types it an int, but hands it to trio.fail_after, which takes any number.
    config.read_timeout = read_timeout_seconds  # type: ignore[assignment]
    if tls_cert is not None and tls_key is not None:
        config.certfile = tls_cert
        config.keyfile = tls_key
    return config


@dataclass
class BoundWeb:
    """A listening socket for the Memory tab, not yet served; :meth:`close` if it never is."""

    listen: str
    config: Config
    sockets: Sockets

    @property
    def url(self) -> str:
        """Where a browser reaches it: ``http://`` or ``https://`` and the bound address."""
        scheme = "https" if self.config.ssl_enabled else "http"
        return f"{scheme}://{self.listen}"

    def close(self) -> None:
        for sock in (*self.sockets.secure_sockets, *self.sockets.insecure_sockets):
            sock.close()


def bind_web(
    listen: str,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    *,
    read_timeout_seconds: float = DEFAULT_WEB_READ_TIMEOUT_SECONDS,
) -> BoundWeb:
    """Check ``listen`` and the TLS files, and bind and listen on the address now.

    Every failure is a ``ConfigError`` naming the key: ``web_listen`` for a
    malformed address, one in use or one this host cannot bind, and
    ``web_tls_cert``/``web_tls_key`` for a missing TLS file (on anything but
    loopback) or one that does not load.
    """
    config = hypercorn_config(listen, tls_cert, tls_key, read_timeout_seconds=read_timeout_seconds)
    if config.ssl_enabled:
        try:
            config.create_ssl_context()  # what serving will load: fail now, by name
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"web_tls_cert {tls_cert!r} and web_tls_key {tls_key!r}: cannot load them as a "
                f"PEM certificate and its private key: {getattr(exc, 'strerror', None) or exc}"
            ) from exc
    try:
        sockets = config.create_sockets()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = "that port is already in use (another memfs daemon or `memfs web`?)"
        elif exc.errno == errno.EACCES:
            why = "this user may not bind that port"
        else:
            why = exc.strerror or str(exc)
        raise ConfigError(
            f"web_listen {listen!r}: cannot listen there: {why}; choose another "
            'address, or web_listen = "" to serve no Memory tab'
        ) from exc
    except (UnicodeError, ValueError) as exc:  # a host name that cannot be looked up as given
        raise ConfigError(f"web_listen {listen!r}: cannot listen there: {exc}") from exc
    bound = BoundWeb(listen, config, sockets)
    try:
        for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
            sock.listen(config.backlog)
    except OSError as exc:
        bound.close()
        raise ConfigError(f"web_listen {listen!r}: cannot listen there: {exc}") from exc
    return bound


async def serve_web(
    app: object,
    bound: BoundWeb,
    *,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``bound`` until ``shutdown_trigger`` returns; the socket is closed.

    ``hypercorn.trio.serve`` binds its own sockets; this is what it runs,
    given the socket already bound by :func:`bind_web`. Once the trigger
    returns, requests in flight get ``graceful_timeout`` (3 s) to finish.
    """
    try:
        await worker_serve(
            wrap_app(app, bound.config.wsgi_max_body_size, "asgi"),  # type: ignore[arg-type]
            bound.config,
            sockets=bound.sockets,
            shutdown_trigger=shutdown_trigger,
            task_status=task_status,
        )
    finally:
        bound.close()


def run_web(
    store_url: str,
    listen: str,
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    max_body_bytes: int = DEFAULT_WEB_MAX_BODY_BYTES,
    read_timeout_seconds: float = DEFAULT_WEB_READ_TIMEOUT_SECONDS,
    key_file: Path | None = None,
    pool_size: int = DEFAULT_STORE_POOL_SIZE,
    connect_timeout_seconds: float = DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    lock_timeout_seconds: float = DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
) -> None:
    """Serve until interrupted; the address is checked and bound before the store is opened.

    ``key_file``: the store key file (the daemons' ``store_key_file``).
    ``pool_size``, ``connect_timeout_seconds``, ``lock_timeout_seconds``: a
    ``postgresql://`` store's connections, as ``open_store`` takes them.
    """
    bound = bind_web(listen, tls_cert, tls_key, read_timeout_seconds=read_timeout_seconds)

    async def main() -> None:
        store = open_store(
            store_url,
            key_file=key_file,
            pool_size=pool_size,
            connect_timeout_seconds=connect_timeout_seconds,
            lock_timeout_seconds=lock_timeout_seconds,
        )
        try:
            # A wrong store key stops the start, naming the file (as a daemon's does).
            if isinstance(store, SqlStore):
                await store.check_at_start()
            await serve_web(web_app(store, max_body_bytes=max_body_bytes), bound)
        finally:
            await store.aclose()

    try:
        trio.run(main)
    finally:
        bound.close()


__all__ = ["BoundWeb", "bind_web", "hypercorn_config", "run_web", "serve_web"]
