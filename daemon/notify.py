"""systemd's readiness and watchdog protocol (sd_notify), without libsystemd.

The daemon sends ``READY=1`` once mounted and ``WATCHDOG=1`` every
``watchdog_interval()`` seconds. Without systemd (no ``$NOTIFY_SOCKET``)
every call is a no-op that returns False, so the daemon runs the same by hand.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


def notify(message: str, env: Mapping[str, str] = os.environ) -> bool:
    """Send ``message`` (e.g. ``"READY=1"``) to systemd; True if it was sent."""
    address = env.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):  # an abstract socket: a leading NUL instead of a file
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            # Never block the trio loop on a full queue; a lost ping is logged, not fatal.
            sock.setblocking(False)
            sock.sendto(message.encode(), address)
    except OSError as exc:
        log.warning("sd_notify %r to %r failed: %s", message, env["NOTIFY_SOCKET"], exc)
        return False
    return True


def watchdog_interval(env: Mapping[str, str] = os.environ) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings: half systemd's ``WatchdogSec=``, or None if off."""
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
        pid = env.get("WATCHDOG_PID")
        if pid and int(pid) != os.getpid():  # the setting is for another process
            return None
    except ValueError:
        return None
    return usec / 2_000_000 if usec > 0 else None


__all__ = ["notify", "watchdog_interval"]
