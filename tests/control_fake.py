"""A stand-in for the daemon's service: a ``ControlTarget`` that records its calls.

It offers every method of the protocol (so the type checker takes it where
the daemon's service goes); its turns never fail to store, so nothing is kept.

Shared by the control API tests and the CLI tests, so both pin the API and
the client without a FUSE mount.
"""

from __future__ import annotations

from typing import Any

from memfs._version import __version__
from memfs.api.models import (
    DaemonStatus,
    FileAccess,
    ForgetApplied,
    ForgetNotice,
    KeptTurn,
    MountInfo,
    SessionClosed,
    SessionStatus,
    SpaceOutcome,
    StartTurnRequest,
    TurnEnded,
    TurnStarted,
)
from memfs.core.defaults import DEFAULT_STATE_DIR
from memfs.core.errors import NotFound, TurnOpen

ROOT = "/mnt/memfs"


class FakeTarget:
    """Sessions in a dict; ``fail_with`` makes the next call raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.open_turns: dict[str, str] = {}
        self.fail_with: BaseException | None = None
        self._count = 0

    def _enter(self, name: str, arg: Any) -> None:
        self.calls.append((name, arg))
        if self.fail_with is not None:
            exc, self.fail_with = self.fail_with, None
            raise exc

    async def start_turn(self, request: StartTurnRequest) -> TurnStarted:
        self._enter("start_turn", request)
        if request.session in self.open_turns:
            raise TurnOpen("this session already has an open turn", path=request.session)
        self._count += 1
        turn = f"t-{self._count}"
        self.open_turns[request.session] = turn
        root = f"{ROOT}/{request.session}"
        writer = request.extra_body.get("role") == "underwriter"
        return TurnStarted(
            session=request.session,
            turn=turn,
            root=root,
            mounts={
                "lending-rules": MountInfo(
                    path=f"{root}/lending-rules",
                    read_only=not writer,
                    space="lending-rules",
                    layer="org",
                ),
                "me": MountInfo(path=f"{root}/me", read_only=False, space="me", layer="user"),
            },
            note="lending-rules/: The bank's lending rules.\nme/: Your own preferences.\n",
        )

    async def end_turn(self, session: str) -> TurnEnded:
        self._enter("end_turn", session)
        turn = self.open_turns.pop(session, None)
        if turn is None:
            raise NotFound("no open turn in this session", path=session)
        return TurnEnded(
            session=session,
            turn=turn,
            spaces={
                "me": SpaceOutcome(status="saved", created=["style.md"]),
                "lending-rules": SpaceOutcome(status="skipped"),
            },
            files={
                "me/style.md": FileAccess(wrote=True, created=True),
                "lending-rules/income.md": FileAccess(read="r-7", opened=True),
            },
        )

    async def commit_turn(self, session: str, turn: str) -> TurnEnded:
        self._enter("commit_turn", (session, turn))
        return TurnEnded(
            session=session, turn=turn, spaces={"me": SpaceOutcome(status="saved")}, files={}
        )

    async def close_session(self, session: str) -> SessionClosed:
        self._enter("close_session", session)
        self.open_turns.pop(session, None)
        return SessionClosed(session=session)

    async def status(self) -> DaemonStatus:
        self._enter("status", None)
        return DaemonStatus(
            version=__version__,
            pid=4242,
            mount_root=ROOT,
            state_dir=DEFAULT_STATE_DIR,
            store=f"sqlite://{DEFAULT_STATE_DIR}/memfs.db",
            sessions=[
                SessionStatus(session=s, turn=t, root=f"{ROOT}/{s}", mounts=["lending-rules", "me"])
                for s, t in sorted(self.open_turns.items())
            ],
        )

    async def discard_turn(self, session: str) -> TurnEnded:
        self._enter("discard_turn", session)
        turn = self.open_turns.pop(session, None)
        if turn is None:
            raise NotFound("no open turn in this session", path=session)
        return TurnEnded(session=session, turn=turn, spaces={}, files={})

    async def kept(self, session: str) -> KeptTurn:
        # The fake's turns never fail to store, so nothing is ever kept.
        self._enter("kept", session)
        raise NotFound("no kept spaces in this session", path=session)

    async def kept_file(self, session: str, name: str, path: str) -> bytes:
        self._enter("kept_file", (session, name, path))
        raise NotFound("no kept spaces in this session", path=session)

    async def forgotten(self, notice: ForgetNotice) -> ForgetApplied:
        self._enter("forgotten", notice)
        return ForgetApplied()
