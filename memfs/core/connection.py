"""A shared store's connection settings: their names, defaults, bounds and check.

Three settings, each a daemon config key (``memfsd.config``), a ``MEMFS_*``
variable, a flag of ``memfs daemon`` and of every ``memfs`` command that
opens a store, and a keyword of ``memfs.open_store``:

    store_pool_size                connections one process keeps to the
                                   database, at most (a whole number, 1 or more)
    store_connect_timeout_seconds  how long a call waits to connect, or for a
                                   free pooled connection (seconds, more than 0)
    store_lock_timeout_seconds     how long a write waits for the store's write
                                   lock (seconds, more than 0)

They matter to ``postgresql://`` stores only; any other store accepts and
ignores them, but a bad value is refused whatever the store, so a setting
that would break a later switch to PostgreSQL fails now. Both timeouts are
at most ``MAX_STORE_TIMEOUT_SECONDS``: PostgreSQL keeps ``lock_timeout`` in
milliseconds in a 32-bit integer, and a larger one would fail every write.
"""

from __future__ import annotations

import math

from memfs.core.errors import ConfigError

DEFAULT_STORE_POOL_SIZE = 8
DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS = 5.0
DEFAULT_STORE_LOCK_TIMEOUT_SECONDS = 5.0
# 2**31 - 1 milliseconds, PostgreSQL's largest lock_timeout, in whole seconds.
MAX_STORE_TIMEOUT_SECONDS = 2_147_483

# Each setting's config key and the variable that sets it.
STORE_CONNECTION_ENV = {
    "store_pool_size": "MEMFS_STORE_POOL_SIZE",
    "store_connect_timeout_seconds": "MEMFS_STORE_CONNECT_TIMEOUT_SECONDS",
    "store_lock_timeout_seconds": "MEMFS_STORE_LOCK_TIMEOUT_SECONDS",
}


def pool_size_problem(value: object) -> str | None:
    """Why ``value`` cannot be a pool size (``store_pool_size``); None when it can.

    A string (as the environment gives) is read as a whole number.
    """
    if isinstance(value, bool):
        return "must be a whole number, not true or false"
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return f"must be a whole number, not {value!r}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        return "must be a whole number"
    if value < 1:
        return f"must be at least 1 (one connection), not {value}"
    return None


def timeout_problem(value: object) -> str | None:
    """Why ``value`` cannot be a store timeout in seconds; None when it can.

    A string (as the environment gives) is read as a number.
    """
    if isinstance(value, bool):
        return "must be a number of seconds, not true or false"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return f"must be a number of seconds, not {value!r}"
    if not isinstance(value, int | float):
        return "must be a number of seconds"
    if not math.isfinite(value):
        return "must be a finite number of seconds"
    if value <= 0:
        return f"must be more than 0 seconds, not {value:g}"
    if value > MAX_STORE_TIMEOUT_SECONDS:
        return f"must be at most {MAX_STORE_TIMEOUT_SECONDS} seconds, not {value:g}"
    return None


def check_pool_size(value: object, *, key: str = "store_pool_size") -> int:
    """``value`` as a pool size; a ``ConfigError`` naming ``key`` otherwise."""
    problem = pool_size_problem(value)
    if problem is not None:
        raise ConfigError(f"{key}: {problem}")
    assert isinstance(value, int | float | str)  # pool_size_problem said so
    return int(value)


def check_timeout(value: object, *, key: str) -> float:
    """``value`` as a store timeout in seconds; a ``ConfigError`` naming ``key`` otherwise."""
    problem = timeout_problem(value)
    if problem is not None:
        raise ConfigError(f"{key}: {problem}")
    assert isinstance(value, int | float | str)  # timeout_problem said so
    return float(value)


__all__ = [
    "DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS",
    "DEFAULT_STORE_LOCK_TIMEOUT_SECONDS",
    "DEFAULT_STORE_POOL_SIZE",
    "MAX_STORE_TIMEOUT_SECONDS",
    "STORE_CONNECTION_ENV",
    "check_pool_size",
    "check_timeout",
    "pool_size_problem",
    "timeout_problem",
]
