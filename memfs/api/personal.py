"""The app-facing handler: a person sees and forgets their own memory, from the app's backend.

``my_memory(store, authorize)`` is an ASGI app that an app mounts at any
prefix; its own root is ``/``. ``authorize(request)`` (sync or async) says who
is signed in, as ``{"user": ..., "org": ...}``, or None for nobody (401).

- ``GET /``: the person's memory in that org, every user-layer space:
  ``{"user", "org", "spaces": {space: {path: {"size", "text"}}}}``; ``text``
  is the content when it is UTF-8, else None.
- ``DELETE /?space=me&path=prefs.md``: forget that file, purging its history
  (``{"forgotten": [path]}``; 404 if the store holds nothing of it).
- ``DELETE /?all=true``: forget everything the person's memory holds in that
  org (``{"forgotten_spaces": [space, ...], "forgotten_files": n}``).

``store`` is any store that lists and forgets a person's files
(:class:`PersonalStore`): the managed stores, and the folder store. Forgetting
everything needs ``forget_user`` too; a store without it answers 422
(``NotSupported``) and forgets nothing.

Errors are problem details, as in the control API. A space name or path that
breaks the name rules (``..``, absolute) is a 400 before the store is touched.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memfs.api.control import _CatchAll, error_response, problem
from memfs.core.errors import (
    BadRequest,
    ConfigError,
    MemfsError,
    NoIdentity,
    NotFound,
    NotSupported,
)
from memfs.core.models import By, SpaceRef, Stored
from memfs.core.names import check_identity, check_path
from memfs.stores.base import PersonForgetting

Identity = Mapping[str, Any]
Authorize = Callable[[Request], Identity | Awaitable[Identity | None] | None]


class PersonalStore(Protocol):
    """What the handler needs of a store: a person's files, and forgetting one of them."""

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]: ...

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored: ...


def _listing(files: Mapping[str, bytes]) -> dict[str, dict[str, Any]]:
    listed: dict[str, dict[str, Any]] = {}
    for path, content in sorted(files.items()):
        try:
            text: str | None = content.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        listed[path] = {"size": len(content), "text": text}
    return listed


def my_memory(store: PersonalStore, authorize: Authorize) -> Starlette:
    """The handler over ``store``; ``authorize`` names the signed-in person, or None."""

    async def whoami(request: Request) -> tuple[str, str]:
        found = authorize(request)
        identity = await found if inspect.isawaitable(found) else found
        if identity is None:
            raise NoIdentity("sign in to see your memory")
        user, org = identity.get("user"), identity.get("org")
        # The app's authorize is at fault here, not the person: a 500, not a 400.
        if not isinstance(user, str) or not isinstance(org, str):
            raise ConfigError("authorize must return {'user': str, 'org': str} or None")
        try:
            return check_identity(user, what="user id"), check_identity(org, what="org id")
        except MemfsError as exc:
            raise ConfigError(f"authorize returned an invalid identity: {exc}") from None

    async def show(request: Request) -> Response:
        user, org = await whoami(request)
        spaces = await store.user_files(user, org)
        return JSONResponse(
            {
                "user": user,
                "org": org,
                "spaces": {space: _listing(files) for space, files in sorted(spaces.items())},
            }
        )

    async def forget(request: Request) -> Response:
        user, org = await whoami(request)
        query = request.query_params
        everything = query.get("all")
        if everything is not None:
            if everything != "true" or "path" in query or "space" in query:
                raise BadRequest("to forget everything, send all=true and nothing else")
            if not isinstance(store, PersonForgetting):
                raise NotSupported(
                    f"{type(store).__name__} cannot forget a whole person; "
                    "forget their files one by one (space and path)"
                )
            forgot = await store.forget_user(user, org, by=None)
            return JSONResponse(
                {
                    "forgotten_spaces": [ref.space for ref in forgot.spaces],
                    "forgotten_files": forgot.files,
                }
            )
        space, path = query.get("space"), query.get("path")
        if space is None or path is None:
            raise BadRequest("say what to forget: space and path, or all=true")
        # Both checked before the store is asked anything, so a bad name touches nothing.
        ref = SpaceRef(layer="user", org=org, user=user, space=space)
        check_path(path)
        await store.forget_file(ref, path, by=None)
        return JSONResponse({"forgotten": [path]})

    async def on_memfs_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, MemfsError)
        return error_response(exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        # Unknown paths and methods: still a problem body, so clients parse one shape.
        assert isinstance(exc, HTTPException)
        error = NotFound if exc.status_code == 404 else BadRequest
        detail = f"{exc.detail}: {request.method} {request.url.path}"
        return problem(exc.status_code, error.__name__, detail, error.exit_code)

    return Starlette(
        routes=[
            Route("/", show, methods=["GET"]),
            Route("/", forget, methods=["DELETE"]),
        ],
        exception_handlers={MemfsError: on_memfs_error, HTTPException: on_http_error},
        middleware=[Middleware(_CatchAll)],
    )


__all__ = ["Authorize", "Identity", "PersonalStore", "my_memory"]
