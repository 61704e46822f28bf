"""The Memory tab's ASGI app: ``web_app(store)``, built from a list of route groups.

Each group is an ``APIRouter`` factory (:data:`ROUTE_GROUPS`): the JSON API
(:func:`memfs.web.api.api_router`) and the server-rendered pages
(:func:`memfs.web.pages.pages_router`). The app owns what every group
shares, on ``app.state``: the store and limits, the browser sessions
(:class:`memfs.web.sessions.SessionTable`) and the sign-in throttle
(:class:`memfs.core.signin.SigninThrottle`), both in memory and bounded by
their settings; the errors (RFC 9457 problems under ``/api/v1``, the control
API's ``problem``/``error_response`` with ``WWW-Authenticate: Bearer`` on a
401; error pages elsewhere; what escapes a route is logged and answered
500 without its text, :func:`memfs.web.pages.common.internal_error`); the
request-body bound (``max_body_bytes``, the ``web_max_body_bytes`` setting;
past it 413) and the OpenAPI document at
``/api/v1/openapi.json``. Every answer, the JSON API's and its errors (a 413,
a 500) among them, carries the pages' security headers
(:data:`memfs.web.pages.common.SECURITY_HEADERS`) unless it set its own:
nothing of a person's memory is kept by a browser's or a proxy's cache
(``Cache-Control: no-store``), sniffed into another type, or framed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memfs._version import __version__
from memfs.api.control import error_response, serve_problems
from memfs.core.defaults import DEFAULT_WEB_MAX_BODY_BYTES
from memfs.core.errors import ConfigError, MemfsError, NoIdentity, SigninThrottled
from memfs.core.models import Limits
from memfs.core.signin import SigninLimits, SigninThrottle
from memfs.stores.base import ManagedStore, Store
from memfs.web.api import PREFIX, api_router
from memfs.web.pages import install_page_errors, pages_router
from memfs.web.pages.common import SECURITY_HEADERS, internal_error
from memfs.web.sessions import SessionLimits, SessionTable
from memfs.web.signin_gate import ClientGate

RouteGroup = Callable[[], APIRouter]
ROUTE_GROUPS: tuple[RouteGroup, ...] = (api_router, pages_router)


def _answer(exc: MemfsError) -> JSONResponse:
    response = error_response(exc)
    if isinstance(exc, SigninThrottled):
        response.headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, NoIdentity):
        response.headers["WWW-Authenticate"] = 'Bearer realm="memfs"'
    return response


class _SecurityHeaders:
    """Add ``SECURITY_HEADERS`` to every answer that did not set them itself (outermost)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def web_app(
    store: Store,
    *,
    limits: Limits | None = None,
    max_body_bytes: int = DEFAULT_WEB_MAX_BODY_BYTES,
    groups: Sequence[RouteGroup] = ROUTE_GROUPS,
    sessions: SessionLimits | None = None,
    signin: SigninLimits | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """The Memory tab over ``store`` (a managed store: it keeps members and history)."""
    if not isinstance(store, ManagedStore):
        raise ConfigError("the Memory tab needs a managed store (sqlite, postgresql or memory)")
    app = FastAPI(
        title="memfs Memory tab API",
        version=__version__,
        description=(
            "Review, browse, edit and forget memory as a signed-in person. "
            "Send `Authorization: Bearer TOKEN` (`memfs token create`). Errors are RFC 9457 "
            "problem details whose `error` names the memfs error class."
        ),
        openapi_url=f"{PREFIX}/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.memfs_store = store
    app.state.memfs_limits = limits or Limits()
    app.state.memfs_sessions = SessionTable(sessions, clock=clock)
    app.state.memfs_throttle = SigninThrottle(signin, clock=clock)
    app.state.memfs_signin_gate = ClientGate()

    serve_problems(app, max_body_bytes=max_body_bytes, answer=_answer, internal=internal_error)
    install_page_errors(app)
    app.add_middleware(_SecurityHeaders)  # added last: outermost, so it sees every answer
    for group in groups:
        app.include_router(group())
    return app


__all__ = ["ROUTE_GROUPS", "RouteGroup", "web_app"]
