"""The daemon's control API: HTTP/JSON routes over a ``ControlTarget``.

This module owns the routes, their OpenAPI document and the one place where
errors become HTTP: a ``MemfsError`` becomes its ``http_status`` with a
``Problem`` body, a request the API cannot read (a JSON body that repeats a
key among them: ``JsonRoute``) becomes a 400 ``BadRequest`` problem, and
anything unexpected becomes a 500 problem, logged once with its traceback.
The target (the daemon's service) never sees a request that did not validate.

A request body over ``max_body_bytes`` (the daemon's ``control_max_body_bytes``)
is answered 413 ``TooLarge``: at once when its ``Content-Length`` says so, or
as soon as what arrived passes the limit, so the API never holds more than
the limit of any body, however much a client sends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote_to_bytes

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from memfs._version import __version__
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
from memfs.api.target import ControlTarget
from memfs.core.defaults import DEFAULT_MAX_BODY_BYTES
from memfs.core.errors import (
    BadRequest,
    InvalidName,
    MemfsError,
    NotFound,
    TooLarge,
    sole_memfs_error,
)
from memfs.core.json_input import UnreadableJson, loads

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

# Declared on every route so the OpenAPI document describes the error body
# the API really sends. Naming "4XX" also stops FastAPI from documenting its
# default 422 validation error, which this API never returns.
_PROBLEMS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": Problem, "description": "The request failed; `error` names the memfs error."},
    "5XX": {"model": Problem, "description": "The daemon or its store failed."},
}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def problem(status: int, error: str, detail: str, exit_code: int) -> JSONResponse:
    """A problem-details response; ``title`` repeats the error class, as the CLI shows it."""
    body = Problem(title=error, status=status, detail=detail, error=error, exit_code=exit_code)
    return JSONResponse(
        body.model_dump(mode="json"), status_code=status, media_type=PROBLEM_MEDIA_TYPE
    )


def error_response(exc: MemfsError) -> JSONResponse:
    return problem(exc.http_status, type(exc).__name__, str(exc), exc.exit_code)


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error", "")
            parts.append(f"the request body is not valid JSON ({reason})")
            continue
        where = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request is not valid"


Internal = Callable[[Scope, Exception], Response]
"""How an app answers what escaped its routes (after it is logged): scope and error in."""


def _internal_problem(scope: Scope, exc: Exception) -> Response:
    # The control socket is the operator's own (mode 0600): the error's text helps there.
    return problem(500, "InternalError", f"{type(exc).__name__}: {exc}", 1)


class _CatchAll:
    """Turn what escapes the routes into a 500 problem, logged once.

    Starlette's own ``Exception`` handler re-raises after answering, so the
    server would log the same error a second time and test transports would
    raise it; this middleware answers and stops there.
    """

    def __init__(self, app: ASGIApp, internal: Internal | None = None) -> None:
        self.app = app
        self.internal = internal or _internal_problem

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            memfs_error = sole_memfs_error(exc)
            response: Response
            if memfs_error is not None:
                response = error_response(memfs_error)
            else:
                log.exception("control API: %s %s failed", scope["method"], scope["path"])
                response = self.internal(scope, exc)
            if started:  # too late to answer; the connection is dropped
                raise
            await response(scope, receive, send)


class _BodyLimit:
    """Read each request body whole, up to ``max_bytes``; past that answer 413 and read no more.

    The routes then get the body in one message, already bounded; a body over
    the limit never reaches them (nor the target).
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: str) -> JSONResponse:
        detail = f"the request body is {size}; the control API takes at most {self.max_bytes}"
        return error_response(TooLarge(detail))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            declared = value.isdigit() and name.lower() == b"content-length" and int(value)
            if declared and declared > self.max_bytes:
                await self._too_large(f"{declared} bytes")(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was complete
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(f"over {self.max_bytes} bytes")(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: bytes | None = b"".join(chunks)

        async def replay() -> Message:
            nonlocal body
            if body is None:
                return await receive()
            message: Message = {"type": "http.request", "body": body, "more_body": False}
            body = None
            return message

        await self.app(scope, replay, send)


class _JsonBody(Request):
    """A request whose JSON body is read by :func:`memfs.core.json_input.loads`."""

    async def json(self) -> Any:
        body = await self.body()
        try:
            return loads(body)
        except UnreadableJson as exc:
            # FastAPI answers a JSONDecodeError as a body it cannot read (a 400
            # saying why) and any other error as a bare 400 that says nothing.
            raise json.JSONDecodeError(str(exc), body.decode("utf-8", "replace"), 0) from exc


class JsonRoute(APIRoute):
    """A route that reads its JSON body with ``_JsonBody``: a repeated key is a 400, never
    last-wins. The control API's routes are these (``serve_problems``), and so are the
    Memory tab's API's (its router's ``route_class``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def read_json_strictly(request: Request) -> Response:
            return await handler(_JsonBody(request.scope, request.receive))

        return read_json_strictly


class _PathNames:
    """400 ``InvalidName`` for a request path that is not UTF-8 or holds a line break.

    Starlette decodes a path with replacement, so ``a%FF.md`` reached a route
    as ``a\ufffd.md``, another name (a put stored the file under it), and
    its ``path`` convertor matches no line break, so a name holding one was
    a 404. Any other control character reaches the route, whose names are
    checked by ``memfs.core.names`` (and a page answers with a page).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = _bad_path(scope.get("raw_path") or scope["path"].encode("utf-8", "replace"))
            if why is not None:
                refused = error_response(InvalidName(f"the request path {why}"))
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def unescaped_text(raw: bytes) -> str | None:
    """``raw`` (%-escaped, as a request path or form body is sent) as text; None if its
    bytes are not UTF-8, which Starlette would read with replacement, as other text."""
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _bad_path(raw: bytes) -> str | None:
    """Why the path ``raw`` (as sent, %-escaped) names nothing memfs holds; None if it may."""
    path = unescaped_text(raw)
    if path is None:
        return "is not valid UTF-8"
    if "\n" in path or "\r" in path:
        return "holds a line break"
    return None


def serve_problems(
    app: FastAPI,
    *,
    max_body_bytes: int,
    answer: Callable[[MemfsError], JSONResponse] = error_response,
    internal: Internal | None = None,
) -> None:
    """Make every error of ``app`` an RFC 9457 problem, and bound its request bodies.

    A ``MemfsError`` is ``answer``-ed (its class, status and exit code); bad
    fields are 400; unknown routes and methods still get a problem body, so
    clients parse one shape; a body past ``max_body_bytes`` is 413; a JSON
    body that repeats a key is 400 on routes made on ``app`` afterwards
    (``JsonRoute``; an ``APIRouter`` included later names it itself); anything
    else is a 500 problem (``_CatchAll``), or whatever ``internal`` answers
    for it (an app served to a network says nothing of the error's text).
    """

    @app.exception_handler(MemfsError)
    async def _memfs_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MemfsError)
        return answer(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return problem(400, BadRequest.__name__, _describe_validation(exc), BadRequest.exit_code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: Exception) -> JSONResponse:
        # Unknown routes and methods: still a problem body, so clients parse one shape.
        assert isinstance(exc, StarletteHTTPException)
        status = exc.status_code
        if status == 404:
            error, exit_code = NotFound.__name__, NotFound.exit_code
        elif status < 500:
            error, exit_code = BadRequest.__name__, BadRequest.exit_code
        else:
            error, exit_code = MemfsError.__name__, MemfsError.exit_code
        detail = f"{HTTPStatus(status).phrase}: {request.method} {request.url.path}"
        return problem(status, error, detail, exit_code)

    app.router.route_class = JsonRoute  # routes made on ``app`` from here on
    app.add_middleware(_CatchAll, internal=internal)
    app.add_middleware(_PathNames)
    app.add_middleware(_BodyLimit, max_bytes=max_body_bytes)  # outermost: before anything reads


def control_app(target: ControlTarget, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The control API, driving ``target``; request bodies over ``max_body_bytes`` get 413."""
    app = FastAPI(
        title="memfs control API",
        version=__version__,
        description=(
            "Start and end agent turns on the memfs daemon. Served over a Unix socket "
            "(`<state_dir>/memfs.sock`, mode 0600). Errors are RFC 9457 problem details "
            "whose `error` names the memfs error class."
        ),
        docs_url=None,  # no browser on a Unix socket; /openapi.json is the document
        redoc_url=None,
    )

    serve_problems(app, max_body_bytes=max_body_bytes)

    @app.post(
        "/turns",
        status_code=201,
        response_model=TurnStarted,
        responses=_PROBLEMS,
        summary="Start a session's next turn and mount its spaces",
    )
    async def start_turn(request: StartTurnRequest) -> TurnStarted:
        return await target.start_turn(request)

    @app.post(
        "/sessions/{session}/turn/end",
        response_model=TurnEnded,
        responses=_PROBLEMS,
        summary="End the session's open turn and commit its changes",
    )
    async def end_turn(session: str) -> TurnEnded:
        return await target.end_turn(session)

    @app.post(
        "/sessions/{session}/turn/discard",
        response_model=TurnEnded,
        responses=_PROBLEMS,
        summary="Drop what the session's open turn holds unsaved (kept spaces) and end it",
    )
    async def discard_turn(session: str) -> TurnEnded:
        return await target.discard_turn(session)

    @app.get(
        "/sessions/{session}/kept",
        response_model=KeptTurn,
        responses=_PROBLEMS,
        summary="The spaces a failed store kept: their files, with the revision each started from",
    )
    async def kept(session: str) -> KeptTurn:
        return await target.kept(session)

    @app.get(
        "/sessions/{session}/kept/{name}/{path:path}",
        response_class=Response,
        responses={
            **_PROBLEMS,
            200: {"content": {"application/octet-stream": {}}, "description": "The bytes."},
        },
        summary="The content a kept space holds at one path (404 for a deletion)",
    )
    async def kept_file(session: str, name: str, path: str) -> Response:
        content = await target.kept_file(session, name, path)
        return Response(content, media_type="application/octet-stream")

    @app.post(
        "/forgotten",
        response_model=ForgetApplied,
        responses=_PROBLEMS,
        summary="A store forgot a person or a file of theirs: open turns drop it at once",
    )
    async def forgotten(notice: ForgetNotice) -> ForgetApplied:
        return await target.forgotten(notice)

    @app.post(
        "/sessions/{session}/turns/{turn}/commit",
        response_model=TurnEnded,
        responses=_PROBLEMS,
        summary="Commit an ended turn's changes to manual-commit spaces",
    )
    async def commit_turn(session: str, turn: str) -> TurnEnded:
        return await target.commit_turn(session, turn)

    @app.delete(
        "/sessions/{session}",
        response_model=SessionClosed,
        responses=_PROBLEMS,
        summary="Close a session: its directory disappears from the mount",
    )
    async def close_session(session: str) -> SessionClosed:
        return await target.close_session(session)

    @app.get(
        "/status",
        response_model=DaemonStatus,
        responses=_PROBLEMS,
        summary="The daemon, its store and its open sessions",
    )
    async def status() -> DaemonStatus:
        return await target.status()

    return app


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "PROBLEM_MEDIA_TYPE",
    "JsonRoute",
    "control_app",
    "error_response",
    "problem",
]
