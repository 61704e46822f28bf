"""``memfs.Client``: the daemon's control API from Python, over its Unix socket.

A small synchronous client (the CLI is one of its users). Answers come back
as the models of :mod:`memfs.api.models`; a problem answer is raised again
as the memfs error the daemon raised, so ``except memfs.NotFound`` works
across the socket; a daemon that is not there is ``memfs.DaemonUnavailable``.
"""

from __future__ import annotations

import http.client
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from memfs.api.models import (
    DaemonStatus,
    ForgetApplied,
    ForgetNotice,
    KeptTurn,
    Problem,
    SessionClosed,
    StartTurnRequest,
    TurnEnded,
    TurnStarted,
)
from memfs.core import errors
from memfs.core.defaults import DEFAULT_STATE_DIR, SOCKET_NAME
from memfs.core.errors import BadRequest, DaemonUnavailable, MemfsError
from memfs.unix_http import Answer, UnixHTTP, Unreachable

DEFAULT_TIMEOUT = 60.0  # starting or ending a turn loads or stores whole spaces

M = TypeVar("M", bound=BaseModel)


def default_socket(env: Mapping[str, str] = os.environ) -> Path:
    """``$MEMFS_SOCKET``, else ``memfs.sock`` in ``$MEMFS_STATE_DIR`` (default /var/lib/memfs)."""
    if env.get("MEMFS_SOCKET"):
        return Path(env["MEMFS_SOCKET"])
    return Path(env.get("MEMFS_STATE_DIR") or DEFAULT_STATE_DIR) / SOCKET_NAME


def error_from_problem(problem: Problem) -> MemfsError:
    """The memfs error a problem answer names; ``MemfsError`` if this memfs has no such class."""
    cls = getattr(errors, problem.error, None)
    if not (isinstance(cls, type) and issubclass(cls, MemfsError)):
        cls = MemfsError
    return cls(problem.detail)


def _unavailable(path: Path, exc: BaseException) -> DaemonUnavailable:
    """What a request that failed on the socket tells the caller, by how it failed."""
    cause = exc.cause if isinstance(exc, Unreachable) else exc
    if isinstance(cause, PermissionError):
        message = "no permission to use the memfs control socket (mode 0600: run as its owner)"
    elif isinstance(cause, TimeoutError):
        message = "the memfs daemon did not answer in time on its control socket"
    elif isinstance(exc, Unreachable):
        message = "the memfs daemon is not running (nothing listens on its control socket)"
    else:
        message = f"the memfs daemon broke off the request ({str(exc) or type(exc).__name__})"
    return DaemonUnavailable(message, path=str(path))


class Client:
    """The control API of the daemon listening on ``socket``."""

    def __init__(
        self, socket: str | Path | None = None, *, timeout: float | None = DEFAULT_TIMEOUT
    ) -> None:
        self.socket = default_socket() if socket is None else Path(socket)
        self._http = UnixHTTP(self.socket, timeout=timeout)

    def start_turn(
        self,
        session: str,
        extra_body: Mapping[str, Any] | None = None,
        prompt: str | None = None,
        uid: int | None = None,
        gid: int | None = None,
    ) -> TurnStarted:
        """Mount the session's spaces for its next turn.

        The values are checked as the daemon checks them (ids in range, text
        valid UTF-8); a bad one raises ``BadRequest`` and nothing is sent.
        """
        try:
            request = StartTurnRequest(
                session=session, extra_body=dict(extra_body or {}), prompt=prompt, uid=uid, gid=gid
            )
        except ValidationError as exc:
            raise BadRequest(
                "; ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
                )
            ) from None
        return self._call(
            TurnStarted, "POST", "/turns", request.model_dump_json(exclude_none=True).encode()
        )

    def end_turn(self, session: str) -> TurnEnded:
        """End the session's open turn: commit its changes and report what it did."""
        return self._call(TurnEnded, "POST", f"/sessions/{_segment(session)}/turn/end")

    def discard_turn(self, session: str) -> TurnEnded:
        """Drop what the session's open turn holds unsaved (its kept spaces) and end it."""
        return self._call(TurnEnded, "POST", f"/sessions/{_segment(session)}/turn/discard")

    def kept(self, session: str) -> KeptTurn:
        """The spaces a failed store kept: each changed path, what it did, its base revision."""
        return self._call(KeptTurn, "GET", f"/sessions/{_segment(session)}/kept")

    def kept_file(self, session: str, name: str, path: str) -> bytes:
        """The content a kept space holds at ``path`` (``NotFound`` for a deletion)."""
        url = f"/sessions/{_segment(session)}/kept/{_segment(name)}/{quote(path, safe='/')}"
        return self._request("GET", url).content

    def forgotten(
        self, org: str, user: str, *, space: str | None = None, path: str | None = None
    ) -> ForgetApplied:
        """Tell the daemon a store forgot a person (or one file): open turns drop it."""
        notice = ForgetNotice(org=org, user=user, space=space, path=path)
        return self._call(ForgetApplied, "POST", "/forgotten", notice.model_dump_json().encode())

    def commit_turn(self, session: str, turn: str) -> TurnEnded:
        """Commit what an ended turn left waiting in ``manual`` spaces."""
        return self._call(
            TurnEnded, "POST", f"/sessions/{_segment(session)}/turns/{_segment(turn)}/commit"
        )

    def close_session(self, session: str) -> SessionClosed:
        """Close the session; its directory leaves the mount."""
        return self._call(SessionClosed, "DELETE", f"/sessions/{_segment(session)}")

    def status(self) -> DaemonStatus:
        """The daemon and its open sessions."""
        return self._call(DaemonStatus, "GET", "/status")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, model: type[M], method: str, url: str, body: bytes | None = None) -> M:
        return model.model_validate_json(self._request(method, url, body).content)

    def _request(self, method: str, url: str, body: bytes | None = None) -> Answer:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            answer = self._http.request(method, url, body, headers)
        except (OSError, http.client.HTTPException) as exc:
            raise _unavailable(self.socket, exc) from exc
        if answer.ok:
            return answer
        try:
            problem = Problem.model_validate_json(answer.content)
        except ValidationError:
            # Not our API answering (or a proxy in between): say what came back.
            text = answer.content.decode("utf-8", "replace").strip()[:200]
            raise MemfsError(
                f"the control socket answered {answer.status} without a problem body: {text!r}"
            ) from None
        raise error_from_problem(problem)


def _segment(value: str) -> str:
    # Ids are checked by the daemon; quoting keeps a bad one from changing the route.
    return quote(value, safe="")


__all__ = ["DEFAULT_STATE_DIR", "Client", "default_socket", "error_from_problem"]
