"""The Memory tab's ASGI app: ``web_app(store)``, built from a list of route groups.

Each group is an ``APIRouter`` factory (:data:`ROUTE_GROUPS`): the JSON API
(:func:`memfs.web.api.api_router`) today; the server-rendered pages join the
list later. The app owns what every group shares: the store and limits (on
``app.state``), the errors as RFC 9457 problems (the control API's
``problem``/``error_response``, with ``WWW-Authenticate: Bearer`` on a 401),
the request-body bound (``max_body_bytes``, the ``web_max_body_bytes``
setting; past it 413) and the OpenAPI document at ``/api/v1/openapi.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from http import HTTPStatus

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memfs._version import __version__
from memfs.api.control import _BodyLimit, _CatchAll, _describe_validation, error_response, problem
from memfs.core.defaults import DEFAULT_WEB_MAX_BODY_BYTES
from memfs.core.errors import BadRequest, ConfigError, MemfsError, NoIdentity, NotFound
from memfs.core.models import Limits
from memfs.stores.base import ManagedStore, Store
from memfs.web.api import PREFIX, api_router

RouteGroup = Callable[[], APIRouter]
ROUTE_GROUPS: tuple[RouteGroup, ...] = (api_router,)


def _answer(exc: MemfsError) -> JSONResponse:
    response = error_response(exc)
    if isinstance(exc, NoIdentity):
        response.headers["WWW-Authenticate"] = 'Bearer realm="memfs"'
    return response


def web_app(
    store: Store,
    *,
    limits: Limits | None = None,
    max_body_bytes: int = DEFAULT_WEB_MAX_BODY_BYTES,
    groups: Sequence[RouteGroup] = ROUTE_GROUPS,
) -> FastAPI:
    """The Memory tab over ``store`` (a managed store: it keeps members and history)."""
    if not isinstance(store, ManagedStore):
        raise ConfigError("the Memory tab needs a managed store (sqlite or memory)")
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

    @app.exception_handler(MemfsError)
    async def _memfs_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MemfsError)
        return _answer(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return problem(400, BadRequest.__name__, _describe_validation(exc), BadRequest.exit_code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: Exception) -> JSONResponse:
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

    app.add_middleware(_CatchAll)
    app.add_middleware(_BodyLimit, max_bytes=max_body_bytes)  # outermost: before anything reads
    for group in groups:
        app.include_router(group())
    return app


__all__ = ["ROUTE_GROUPS", "RouteGroup", "web_app"]
