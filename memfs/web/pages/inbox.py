"""The Inbox page: what waits for people, and the memory to look at.

- ``GET /inbox``: the org's waiting changes (what the person said, who,
  which files; each links to its card on the Review page,
  ``/review#change-ID``), then "Memory to look at": every org space whose
  files no longer fit the note's file list (``Limits.note_file_list_bytes``,
  8,000 bytes by default), headed "No room in the note", with how many files
  the note leaves out. Both come from one ``Acting.inbox`` answer, so who
  may read it (viewers and up) and which org's it is are decided there.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from memfs.web.pages.common import SignedInPage, render


def inbox_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/inbox")
    async def inbox(page: SignedInPage) -> Response:
        found = await page.me.inbox()
        return render(
            page,
            page.request,
            "inbox.html",
            changes=found.changes,
            no_room=found.no_room,
        )

    return router


__all__ = ["inbox_router"]
