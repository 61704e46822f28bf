"""``memfs web``: the Memory tab over a store, served by hypercorn under trio, without FUSE."""

from __future__ import annotations

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from memfs.core.defaults import DEFAULT_WEB_MAX_BODY_BYTES
from memfs.core.listen import require_tls
from memfs.stores.open import open_store
from memfs.web.app import web_app


def hypercorn_config(listen: str, tls_cert: str | None, tls_key: str | None) -> Config:
    """The server's settings; a non-loopback ``listen`` without TLS is a ``ConfigError``."""
    host, port = require_tls(listen, tls_cert, tls_key)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    if tls_cert is not None and tls_key is not None:
        config.certfile = tls_cert
        config.keyfile = tls_key
    return config


def run_web(
    store_url: str,
    listen: str,
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    max_body_bytes: int = DEFAULT_WEB_MAX_BODY_BYTES,
) -> None:
    """Serve until interrupted; the address is checked before the store is opened."""
    config = hypercorn_config(listen, tls_cert, tls_key)

    async def main() -> None:
        store = open_store(store_url)
        try:
            await serve(web_app(store, max_body_bytes=max_body_bytes), config)  # type: ignore[arg-type]
        finally:
            await store.aclose()

    trio.run(main)


__all__ = ["hypercorn_config", "run_web"]
