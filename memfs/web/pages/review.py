"""The Review page: the waiting changes of the org, each with its diff, and a reviewer's moves.

``GET /review`` lists every waiting change (what the person said, who, when,
each file's rendered diff against the live file, stale files marked), with
one form per change: a checkbox per file (all ticked) and the buttons
"Approve" and "Reject", which apply to the ticked files only; "Edit" opens
``GET /review/{change}/edit?path=P``, whose form posts the reviewer's text
for that file (applied as approved). A stale file (the live file moved on
since the turn loaded it) is applied only with "over the newer live file"
ticked, and only over the live file the page showed: each form names the
change's ``version`` and ``live_version``, and a forced move whose live file
moved since is a ``Conflict``. "Changed in code" changes (a seed's) are
listed the same way. The moves are :class:`~memfs.engine.acting.Acting`'s,
so roles are checked there.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from memfs.core.errors import BadRequest, NotFound
from memfs.web.api import change_detail
from memfs.web.pages.common import (
    SignedInPage,
    done,
    field,
    fields,
    form_of,
    render,
    text_of,
)


def review_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/review")
    async def review(page: SignedInPage) -> Response:
        live: dict[str, dict[str, bytes]] = {}  # space -> its live files, read once per page
        changes = []
        for change in await page.me.waiting():
            space = change.ref.space
            if space not in live:
                live[space] = await page.me.files(space)
            changes.append(await change_detail(page.me, change, live=live[space]))
        return render(page, page.request, "review.html", changes=changes)

    @router.post("/review/{change}")
    async def decide(change: str, page: SignedInPage) -> Response:
        form = await form_of(page)
        act = field(form, "act")
        paths = fields(form, "path")
        if not paths:
            raise BadRequest("tick at least one file to approve or reject")
        # What the page showed: a change a later turn rewrote since is a Conflict.
        version = field(form, "version")
        if act == "approve":
            force = form.get("force") == "on"
            # Forced, the live files its diffs were against too: it goes over those only.
            live = field(form, "live_version") if force else None
            await page.me.approve(
                change, paths=paths, force=force, version=version, live_version=live
            )
            return done("/review", "approved")
        if act == "reject":
            await page.me.reject(change, paths=paths, version=version)
            return done("/review", "rejected")
        raise BadRequest("the form's act is neither approve nor reject")

    @router.get("/review/{change}/edit")
    async def edit_form(change: str, path: str, page: SignedInPage) -> Response:
        found = await page.me.change(change)
        if path not in found.files:
            raise NotFound("this change has no such file", path=path)
        content = found.files[path].content
        text = None if content is None else content.decode("utf-8", errors="replace")
        return render(
            page,
            page.request,
            "review_edit.html",
            change=found,
            path=path,
            text=text,
            stale=found.files[path].stale,
        )

    @router.post("/review/{change}/edit")
    async def edit(change: str, page: SignedInPage) -> Response:
        form = await form_of(page)
        path = field(form, "path")
        content = None if form.get("delete") == "on" else text_of(form, "content").encode("utf-8")
        force, version = form.get("force") == "on", field(form, "version")
        live = field(form, "live_version") if force else None
        await page.me.edit(change, {path: content}, force=force, version=version, live_version=live)
        return done("/review", "edited")

    return router


__all__ = ["review_router"]
