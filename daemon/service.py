"""The daemon's service: turns and sessions as the control API sees them.

Implements :class:`memfs.api.target.ControlTarget` by driving a
:class:`memfs.Memory` whose workspace is the FUSE overlay, and shapes its
results into the control API's models. On start it brings back every turn a
crash left open, exactly as it was, so ``memfs turn end`` can still commit it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field

from memfs import __version__
from memfs.api.models import (
    DaemonStatus,
    FileAccess,
    MountInfo,
    SessionClosed,
    SessionStatus,
    SpaceOutcome,
    StartTurnRequest,
    TurnEnded,
    TurnStarted,
)
from memfs.core.errors import NotFound, TurnOpen
from memfs.core.models import SpaceResult
from memfs.core.names import check_identity, check_new_name
from memfs.turns import CommitResult, Memory, TurnState
from memfsd.overlay import FileAccess as SeenAccess
from memfsd.workspace import OverlayWorkspace

log = logging.getLogger("memfsd.service")


def outcome(result: SpaceResult) -> SpaceOutcome:
    return SpaceOutcome(
        status=result.status,
        **result.changes.summary(),
        not_saved=list(result.not_saved),
        error=result.error,
        conflicts=list(result.conflicts),
        errors=dict(result.errors),
    )


def ended(result: CommitResult, files: dict[str, SeenAccess]) -> TurnEnded:
    return TurnEnded(
        session=result.session,
        turn=result.turn,
        spaces={name: outcome(space) for name, space in result.spaces.items()},
        files={path: FileAccess(**dataclasses.asdict(seen)) for path, seen in files.items()},
    )


@dataclass
class DaemonService:
    memory: Memory
    workspace: OverlayWorkspace
    store_url: str
    state_dir: str
    # Ended turns with manual mounts, until committed: (session, turn) -> result.
    manual: dict[tuple[str, str], CommitResult] = field(default_factory=dict)
    # FUSE requests served since start, by operation (the mount counts them).
    requests: Counter[str] = field(default_factory=Counter)

    def recover(self) -> list[str]:
        """Reattach every turn a crash or stop left open; returns their sessions."""
        back = []
        for record in self.workspace.saved_turns():
            state = TurnState.model_validate_json(json.dumps(record["state"]))
            try:
                turn = self.memory.restore_turn(state)
                self.workspace.reattach(turn, record)
            except Exception:
                log.exception("could not bring back the open turn of session %s", state.session)
                continue
            log.info("brought back open turn %s of session %s", state.turn, state.session)
            back.append(state.session)
        return back

    async def start_turn(self, request: StartTurnRequest) -> TurnStarted:
        # A new session is a folder name in the mount root and in state_dir.
        check_new_name(request.session, what="session id")
        owner = self.workspace.owner(request.session)
        if request.uid is not None or request.gid is not None:
            self.workspace.set_owner(request.session, request.uid, request.gid)
        try:
            turn = await self.memory.start_turn(request.session, request.extra_body, request.prompt)
        except BaseException:
            self.workspace.restore_owner(request.session, owner)
            raise
        return TurnStarted(
            session=turn.session,
            turn=turn.id,
            root=str(turn.root),
            mounts={
                name: MountInfo(
                    path=str(mount.path),
                    read_only=mount.read_only,
                    space=mount.space,
                    layer=mount.layer,
                )
                for name, mount in turn.mounts.items()
            },
            note=turn.note,
        )

    async def end_turn(self, session: str) -> TurnEnded:
        turn = self.memory.open_turn(session)
        result = await turn.end()
        if any(space.status == "manual" for space in result.spaces.values()):
            self.manual[(session, result.turn)] = result
        return ended(result, self.workspace.pop_access(session))

    async def commit_turn(self, session: str, turn: str) -> TurnEnded:
        result = self.manual.get((session, turn))
        if result is None:
            raise NotFound("no ended turn with manual mounts by that id", path=f"{session}/{turn}")
        committed = await result.commit_manual()
        del self.manual[(session, turn)]
        return ended(committed, {})

    async def close_session(self, session: str) -> SessionClosed:
        check_identity(session, what="session id")
        if session not in self.workspace.overlay.sessions:
            raise NotFound("no such session", path=session)
        try:
            self.memory.open_turn(session)
        except NotFound:
            pass
        else:
            raise TurnOpen("the session has an open turn; end it first", path=session)
        await self.workspace.close_session(session)
        for key in [key for key in self.manual if key[0] == session]:
            del self.manual[key]
        return SessionClosed(session=session)

    async def status(self) -> DaemonStatus:
        sessions = []
        for name, tree in sorted(self.workspace.overlay.sessions.items()):
            sessions.append(
                SessionStatus(
                    session=name,
                    turn=None if tree.turn is None else tree.turn.turn,
                    root=str(self.workspace.root(name)),
                    mounts=[] if tree.turn is None else sorted(tree.turn.mounts),
                    uid=tree.uid if tree.node.mode == 0o700 else None,
                    gid=tree.gid if tree.node.mode == 0o700 else None,
                )
            )
        return DaemonStatus(
            version=__version__,
            pid=os.getpid(),
            mount_root=str(self.workspace.mount_root),
            state_dir=self.state_dir,
            store=self.store_url,
            sessions=sessions,
            requests=dict(sorted(self.requests.items())),
        )


__all__ = ["DaemonService"]
