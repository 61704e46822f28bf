"""For tests that drive the overlay and ``MemfsOperations`` directly, with no mount.

``Ctx`` is a request context as pyfuse3 would pass one: a subclass of
``pyfuse3.RequestContext`` (whose fields only pyfuse3 sets), so the
operations get the type they declare: who asks (uid, gid, pid) and their
umask. ``turn_of``, ``source_of`` and ``node_of`` look at what a test just
made: each fails the test, by an assert, where the overlay would answer None.
"""

from __future__ import annotations

from pathlib import Path

import pyfuse3

from memfsd.nodes import MountTree, Node, TurnTree
from memfsd.overlay import Overlay


class Ctx(pyfuse3.RequestContext):
    def __init__(self, *, uid: int, gid: int, pid: int = 1, umask: int = 0o022) -> None:
        self._who = (uid, gid, pid, umask)

    @property
    def uid(self) -> int:
        return self._who[0]

    @property
    def gid(self) -> int:
        return self._who[1]

    @property
    def pid(self) -> int:
        return self._who[2]

    @property
    def umask(self) -> int:
        return self._who[3]

    def __repr__(self) -> str:
        uid, gid, pid, umask = self._who
        return f"Ctx(uid={uid}, gid={gid}, pid={pid}, umask={umask:#o})"


def turn_of(overlay: Overlay, session: str = "s1") -> TurnTree:
    """The session's open turn."""
    turn = overlay.sessions[session].turn
    assert turn is not None, f"session {session} has no open turn"
    return turn


def source_of(overlay: Overlay, mount: MountTree, path: str) -> Path:
    """The file on disk holding what ``path`` holds now in ``mount``."""
    source = overlay.source(mount, path)
    assert source is not None, f"nothing at {path}"
    return source


def node_of(overlay: Overlay, mount: MountTree, path: str) -> Node:
    """The node at ``path`` in ``mount`` now."""
    node = overlay.node_at(mount, path)
    assert node is not None, f"nothing at {path}"
    return node


__all__ = ["Ctx", "node_of", "source_of", "turn_of"]
