"""The Memory tab's server-rendered pages, one router per page group, and the one stylesheet.

Every page works as plain HTML forms without JavaScript; nothing a page
loads comes from anywhere but memfs (``/static/...``). What the pages share
(sign-in, CSRF, rendering, errors as pages) is :mod:`memfs.web.pages.common`.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

from memfs.web.pages.common import SECURITY_HEADERS, install_page_errors
from memfs.web.pages.inbox import inbox_router
from memfs.web.pages.map import map_router
from memfs.web.pages.org import org_router
from memfs.web.pages.people import people_router
from memfs.web.pages.review import review_router
from memfs.web.pages.signin import signin_router
from memfs.web.pages.story import story_router

# The only files served under /static: a fixed list, so no path reaches the disk.
STATIC: dict[str, str] = {"memfs.css": "text/css; charset=utf-8"}


def static_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    bodies = {name: (files("memfs.web") / "static" / name).read_bytes() for name in STATIC}

    @router.get("/static/{name}")
    async def static(name: str) -> Response:
        if name not in STATIC:
            raise HTTPException(404)
        headers = {**SECURITY_HEADERS, "Cache-Control": "max-age=3600"}
        return Response(bodies[name], media_type=STATIC[name], headers=headers)

    return router


def pages_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    groups = (
        signin_router,
        review_router,
        org_router,
        map_router,
        people_router,
        inbox_router,
        story_router,
        static_router,
    )
    for group in groups:
        router.include_router(group())
    return router


__all__ = ["STATIC", "install_page_errors", "pages_router"]
