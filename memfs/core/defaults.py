"""Defaults and bounds that the daemon, ``memfs.Client`` and the CLI share.

Plain values with no imports, so the ``memfs`` command can build its options
(and answer ``--help``) without loading the client or the control API.
"""

from __future__ import annotations

# Where the daemon keeps its state, and the control socket's name in it.
DEFAULT_STATE_DIR = "/var/lib/memfs"
SOCKET_NAME = "memfs.sock"

# uid_t and gid_t are 32 bits, and (uid_t)-1 means "leave unchanged" to chown.
MAX_ID = 2**32 - 2
# Far past any identity an app sends, well below what pydantic will serialise.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # a turn start's identity and prompt: far below this

# The Memory tab's API (web_max_body_bytes): a file's content (max_file_bytes,
# 1 MiB) as JSON, escaped at worst, fits.
DEFAULT_WEB_MAX_BODY_BYTES = 8 * 1024 * 1024
# How long the Memory tab waits for the next bytes of a request it is reading
# (web_read_timeout_seconds) before it hangs up: a client that goes silent
# mid-request must not hold a connection, and a descriptor, for ever.
DEFAULT_WEB_READ_TIMEOUT_SECONDS = 30.0
# Where `memfs web` (and later the daemon's web_listen) serves by default.
DEFAULT_WEB_LISTEN = "127.0.0.1:8330"

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_STATE_DIR",
    "DEFAULT_WEB_LISTEN",
    "DEFAULT_WEB_MAX_BODY_BYTES",
    "DEFAULT_WEB_READ_TIMEOUT_SECONDS",
    "MAX_ID",
    "SOCKET_NAME",
]
