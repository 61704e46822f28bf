"""Where the Memory tab listens, and when it must speak TLS.

Pure rules, no I/O. A listen address is ``HOST:PORT`` (``[V6]:PORT`` for an
IPv6 address). Serving on anything but loopback sends sign-in tokens and
people's memory over a network, so it needs a certificate and key
(``web_tls_cert`` and ``web_tls_key``); without them the server does not
start. Loopback is ``localhost`` or an address in 127.0.0.0/8 or ``::1``.
"""

from __future__ import annotations

import ipaddress

from memfs.core.errors import ConfigError


def parse_listen(listen: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` or ``[V6]:PORT``; ``ConfigError`` if it is neither."""
    host, sep, port = listen.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"web_listen must be HOST:PORT (port 1-65535), not {listen!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def require_tls(listen: str, tls_cert: str | None, tls_key: str | None) -> tuple[str, int]:
    """``parse_listen``, refusing a non-loopback address without both TLS files."""
    host, port = parse_listen(listen)
    if (tls_cert is None) != (tls_key is None):
        raise ConfigError("web_tls_cert and web_tls_key go together: give both or neither")
    if not is_loopback(host) and tls_cert is None:
        raise ConfigError(
            f"web_listen {listen!r} is not loopback: serving the Memory tab there needs "
            "web_tls_cert and web_tls_key (memfs daemon --web-tls-cert/--web-tls-key, "
            "memfs web --tls-cert/--tls-key), or listen on 127.0.0.1"
        )
    return host, port


__all__ = ["is_loopback", "parse_listen", "require_tls"]
