"""What the control API drives: the daemon's service, as a protocol.

``memfs.api`` must not import the daemon (imports point down), so the control
app is written against this protocol and the daemon passes itself in.
"""

from __future__ import annotations

from typing import Protocol

from memfs.api.models import (
    DaemonStatus,
    ForgetApplied,
    ForgetNotice,
    KeptTurn,
    SessionClosed,
    StartTurnRequest,
    TurnEnded,
    TurnStarted,
)


class ControlTarget(Protocol):
    async def start_turn(self, request: StartTurnRequest) -> TurnStarted: ...

    async def end_turn(self, session: str) -> TurnEnded: ...

    async def commit_turn(self, session: str, turn: str) -> TurnEnded: ...

    async def close_session(self, session: str) -> SessionClosed: ...

    async def status(self) -> DaemonStatus: ...

    async def discard_turn(self, session: str) -> TurnEnded: ...

    async def kept(self, session: str) -> KeptTurn: ...

    async def kept_file(self, session: str, name: str, path: str) -> bytes: ...

    async def forgotten(self, notice: ForgetNotice) -> ForgetApplied: ...


__all__ = ["ControlTarget"]
