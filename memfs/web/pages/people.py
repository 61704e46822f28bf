"""The People pages (admins): everyone with memory, opening it, forgetting it, and the audit log.

- ``GET /people``: everyone in the org whose own memory holds a file, by
  id, with their bays and sizes (no file names): per person an "Open" button
  and "Forget this person" (with a box to tick first).
- ``POST /people/{user}/open``: opens that person's memory, which the store
  records in the audit log (``open``, by the admin), and answers with their
  files per space, text shown escaped, each with a "Forget" button. Only
  this post shows a person's files; reloading the page opens (and audits) again.
- ``POST /people/{user}/files/{space}/{path}/forget``: erases that one file
  of the person (purged, audited ``forget``), then back to ``/people``.
- ``POST /people/{user}/forget`` with ``confirm=on``: erases all of the
  person's memory in the org (audited ``forget-user``) and says how many
  spaces and files went. Without the box ticked: 400, nothing erased.
- ``GET /people/audit``: the org's audit log, newest first.

Every post carries the session's CSRF secret (:func:`form_of`, checked
before anything else). Who may do any of this is
:class:`~memfs.engine.acting.Acting`'s (``people_by_name``, ``open_person``,
``forget``, ``forget_user`` and ``audit`` are the admins'; others get the
403 page); names in the address obey :mod:`memfs.core.names` (400 page). A
person with no memory in this org (another org's among them) is not listed
and cannot be opened (404).
"""

from __future__ import annotations

from collections import defaultdict

from fastapi import APIRouter
from fastapi.responses import Response

from memfs.core.errors import BadRequest, NotFound
from memfs.core.members import check_member_id
from memfs.web.api import PersonBay, PersonFile, person_bay
from memfs.web.pages.common import Page, SignedInPage, done, form_of, render


def _text(content: bytes) -> str | None:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None  # shown as "not text", with its size


async def _people(page: Page) -> dict[str, list[PersonBay]]:
    """Everyone with memory in this org, by id, each with their bays (admins only: Acting)."""
    found: dict[str, list[PersonBay]] = defaultdict(list)
    for entry in await page.me.people_by_name():
        bay = person_bay(entry)
        if bay.person is not None:
            found[bay.person].append(bay)
    return dict(sorted(found.items()))


def people_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/people")
    async def people(page: SignedInPage) -> Response:
        return render(
            page,
            page.request,
            "people.html",
            people=await _people(page),
            limit=page.me.limits.max_space_bytes,
            forgot=None,
        )

    @router.get("/people/audit")
    async def audit(page: SignedInPage, before: str | None = None) -> Response:
        shown = await page.me.audit_page(before=before)
        entries = list(reversed(shown.entries))  # newest first
        return render(
            page, page.request, "audit.html", entries=entries, older=shown.older, before=before
        )

    @router.post("/people/{user}/open")
    async def open_person(user: str, page: SignedInPage) -> Response:
        await form_of(page)
        # The name first (400), then whether this org holds memory of theirs (404).
        check_member_id(user, what="user id")
        if user not in await _people(page):
            raise NotFound("nobody of this id has memory in this org", path=user)
        opened = await page.me.open_person(user)
        spaces = [
            (
                space,
                [PersonFile(path=p, size=len(c), text=_text(c)) for p, c in sorted(files.items())],
            )
            for space, files in sorted(opened.items())
        ]
        return render(page, page.request, "person.html", user=user, spaces=spaces)

    @router.post("/people/{user}/files/{space}/{path:path}/forget")
    async def forget_file(user: str, space: str, path: str, page: SignedInPage) -> Response:
        await form_of(page)
        await page.me.forget(space, path, user=user)
        return done("/people", "person-file-forgotten")

    @router.post("/people/{user}/forget")
    async def forget_person(user: str, page: SignedInPage) -> Response:
        form = await form_of(page)
        if form.get("confirm") != "on":
            raise BadRequest("tick the box to confirm: forgetting a person cannot be undone")
        forgot = await page.me.forget_user(user)
        return render(
            page,
            page.request,
            "people.html",
            people=await _people(page),
            limit=page.me.limits.max_space_bytes,
            forgot={
                "user": user,
                "spaces": sorted(ref.space for ref in forgot.spaces),
                "files": forgot.files,
            },
        )

    return router


__all__ = ["people_router"]
