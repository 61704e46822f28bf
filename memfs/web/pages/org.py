"""The Org memory pages: browse each org space's files, edit, add, forget and restore; set review.

- ``GET /org``: the org's spaces, with their review mode (a form to set it,
  for admins), file count and size.
- ``GET /org/{space}``: its live files, each with how many turns opened it in
  the last 30 days (``Acting.usage``) or "Never opened", each linking to its
  Life; and a form to add one (members).
- ``GET /org/{space}/files/{path}``: the text, origin and whole trail, with
  "Restore" on every earlier revision, an edit form and "Forget" (members).
- ``POST /org/{space}/files`` (add), ``.../files/{path}/edit``,
  ``.../files/{path}/forget``, ``.../files/{path}/restore`` and
  ``POST /org/{space}/review``: each a plain form post with the session's CSRF
  secret, answered by a redirect to the page it changed.

Every act is :class:`~memfs.engine.acting.Acting`'s (roles, org, names and
audit are decided there); a space of another org reads as missing.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from memfs.core.errors import BadRequest, NotFound
from memfs.core.review import REVIEW_MODES, ReviewMode
from memfs.engine.acting import Acting
from memfs.web.api import file_view
from memfs.web.pages.common import (
    SignedInPage,
    done,
    field,
    file_url,
    form_of,
    render,
    text_of,
)

ORIGINS = {
    "conversation": "taught in a conversation",
    "code": "from code",
    "edited": "edited in memfs",
    "fix": "a fix",
}


async def _space(me: Acting, space: str) -> ReviewMode | None:
    """The review mode of ``space`` of this org; ``NotFound`` if the org has no such space."""
    spaces = await me.spaces()
    if space not in spaces:
        raise NotFound("no such space", path=space)
    return spaces[space]


def org_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/org")
    async def org(page: SignedInPage) -> Response:
        rows = []
        for name, mode in sorted((await page.me.spaces()).items()):
            files = await page.me.files(name)
            rows.append(
                {
                    "space": name,
                    "review": mode,
                    "files": len(files),
                    "bytes": sum(len(c) for c in files.values()),
                }
            )
        return render(page, page.request, "org.html", spaces=rows, modes=REVIEW_MODES)

    @router.post("/org/{space}/review")
    async def set_review(space: str, page: SignedInPage) -> Response:
        form = await form_of(page)
        await _space(page.me, space)
        mode = field(form, "mode")
        if mode not in REVIEW_MODES:
            raise BadRequest(f"review must be one of {', '.join(REVIEW_MODES)}")
        await page.me.set_review(space, mode)
        return done("/org", "review-set")

    @router.get("/org/{space}")
    async def space_page(space: str, page: SignedInPage) -> Response:
        mode = await _space(page.me, space)
        # Sizes without contents: a 10,000-file space is listed from one query.
        files = await page.me.live_origins(space)
        usage = await page.me.usage(space)
        uses = {use.path: use for use in usage.files}
        listing = [
            {"path": p, "size": live.size, "use": uses.get(p)} for p, live in sorted(files.items())
        ]
        return render(
            page,
            page.request,
            "space.html",
            space=space,
            review=mode,
            files=listing,
            usage_days=usage.days,
        )

    @router.post("/org/{space}/files")
    async def add(space: str, page: SignedInPage) -> Response:
        form = await form_of(page)
        await _space(page.me, space)
        path = field(form, "path").strip()
        await page.me.put(space, path, text_of(form, "content").encode("utf-8"))
        return done(file_url(space, path), "added")

    @router.get("/org/{space}/files/{path:path}")
    async def file_page(space: str, path: str, page: SignedInPage) -> Response:
        await _space(page.me, space)
        content = (await page.me.files(space)).get(path)
        revisions = await page.me.history(space, path)
        if content is None and not revisions:
            raise NotFound("no such file", path=f"{space}/{path}")
        # A forgotten file is still shown, with its trail: that is where it is restored.
        view = file_view(space, path, content or b"", revisions)
        return render(
            page,
            page.request,
            "file.html",
            file=view,
            forgotten=content is None,
            trail=view.trail,
            origins=ORIGINS,
            here_url=file_url(space, path),
            restore_url=file_url(space, path) + "/restore",
        )

    @router.post("/org/{space}/files/{path:path}/edit")
    async def edit(space: str, path: str, page: SignedInPage) -> Response:
        form = await form_of(page)
        await _space(page.me, space)
        await page.me.put(space, path, text_of(form, "content").encode("utf-8"))
        return done(file_url(space, path), "saved")

    @router.post("/org/{space}/files/{path:path}/forget")
    async def forget(space: str, path: str, page: SignedInPage) -> Response:
        await form_of(page)
        await _space(page.me, space)
        if path not in await page.me.files(space):
            raise NotFound("no such file", path=f"{space}/{path}")
        await page.me.forget(space, path)
        return done(file_url(space, path), "forgotten")

    @router.post("/org/{space}/files/{path:path}/restore")
    async def restore(space: str, path: str, page: SignedInPage) -> Response:
        form = await form_of(page)
        await _space(page.me, space)
        await page.me.restore(space, path, field(form, "revision"))
        return done(file_url(space, path), "restored")

    return router


__all__ = ["ORIGINS", "org_router"]
