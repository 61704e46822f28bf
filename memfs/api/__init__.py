"""ASGI apps: the daemon's control API and the app-facing handler (``my_memory``).

``my_memory`` (in :mod:`memfs.api.personal`) is imported when first asked
for: the control API's models (:mod:`memfs.api.models`), which the client and
the CLI load, must not cost them a web stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memfs.api.personal import my_memory as my_memory


def __getattr__(name: str) -> Any:
    if name == "my_memory":
        from memfs.api.personal import my_memory

        globals()["my_memory"] = my_memory
        return my_memory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
