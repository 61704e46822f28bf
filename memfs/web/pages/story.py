"""What turns carried and did, as pages: the session story, a turn's carried memory, Life.

- ``GET /sessions/{session}``: the session story, each turn's memory line:
  its prompt and time, and per mount what it carried (how many files, as of
  which cursor), which files it opened, what it saved or left waiting (a
  link to the change on the Review page) and its status; each turn has a
  "Carried" link. A person's mount names no file, and whose it is only to
  admins: ``Acting.session_story`` shapes it so.
- ``GET /turns/{turn}/carried?session=S``: the Memory map at exactly that
  turn's snapshot (``Acting.carried``): one bay per mount, shaped by
  :func:`memfs.web.pages.map.space_bay` and drawn by the map's own bay
  template, each tile marked by what the turn did with the file (saved,
  opened, from the conversation's waiting change, or only carried). A
  person's mount is a count only; an admin may press "Open"
  (``POST /turns/{turn}/carried/open?session=S``, CSRF-checked), which
  shows its files and is audited (``open``) by ``Acting.carried(open=True)``.
  Only that post shows them: reloading it opens (and audits) again.
- ``GET /life?space=S&path=P``: one org file's Life: the chart of turns
  that carried it and that opened it per day (:func:`memfs.web.chart.life_chart`,
  inline SVG with presentation attributes only, so it passes the page's
  ``style-src 'self'``), when it was last opened and in which conversation,
  and its timeline from taught and approved to every turn that opened it.

Tiles on the carried map are marked by what the turn did, not by origin. A
turn's snapshot names revisions (as of its cursor), and a revision's origin
is in that file's history: one store query per file, 10,000 for a big
space, for a page that exists to say what the turn saw. What the turn did
with each file is in the answer already, so that is what the colours say;
the origin of any file is a click away (its Life, whose timeline is its
trail).

Names in the address (session, turn, space, path) are checked by ``Acting``
first (400 page); a session or turn of another org reads as missing (404).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import Response
from markupsafe import Markup

from memfs.core.story import Carried, CarriedFile, CarriedMount
from memfs.web.chart import life_chart
from memfs.web.pages.common import Page, SignedInPage, file_url, form_of, render
from memfs.web.pages.map import SpaceBay, space_bay
from memfs.web.pages.org import ORIGINS

# What a tile on the carried map says the turn did with the file, strongest first.
MARKS = {
    "saved": "saved by this turn",
    "opened": "opened by this turn",
    "waiting": "of the conversation's waiting change",
    "carried": "carried, not opened",
}


def life_url(space: str, path: str) -> str:
    return f"/life?space={quote(space, safe='')}&path={quote(path, safe='')}"


def mark(file: CarriedFile) -> str:
    """The one mark a carried file's tile shows (``MARKS``): what the turn did with it."""
    if file.saved:
        return "saved"
    if file.opened:
        return "opened"
    return "waiting" if file.waiting else "carried"


@dataclass(frozen=True)
class CarriedBay:
    """One mount of the turn: what ``Acting.carried`` says, and its bay unless it is closed."""

    mount: CarriedMount
    bay: SpaceBay | None


def _org_link(space: str, path: str) -> str:
    return life_url(space, path)


def _no_link(space: str, path: str) -> str:
    # A person's file has no page of its own (its text is on People, after "Open"),
    # nor has a file of a persistent folder (the store keeps no history of it).
    return "#"


def carried_bays(carried: Carried, *, budget: int) -> list[CarriedBay]:
    bays = []
    for mount in carried.mounts:
        bay = None
        if not mount.closed:
            files = {f.path: (f.size or 0, mark(f)) for f in mount.files}
            link = _org_link if mount.layer == "org" else _no_link
            bay = space_bay(mount.space, files, budget=budget, link=link)
        bays.append(CarriedBay(mount=mount, bay=bay))
    return bays


def _carried_page(page: Page, carried: Carried, *, opened: bool) -> Response:
    return render(
        page,
        page.request,
        "carried.html",
        carried=carried,
        mounts=carried_bays(carried, budget=page.me.limits.note_file_list_bytes),
        origins=MARKS,
        opened=opened,
        closed=any(m.closed for m in carried.mounts),
        query=f"session={quote(carried.session, safe='')}",
    )


def story_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/sessions/{session}")
    async def session_story(
        session: str, page: SignedInPage, before: str | None = None
    ) -> Response:
        story = await page.me.session_story(session, before=before)
        return render(
            page, page.request, "session.html", story=story, life_url=life_url, before=before
        )

    @router.get("/turns/{turn}/carried")
    async def carried(turn: str, page: SignedInPage, session: str | None = None) -> Response:
        return _carried_page(page, await page.me.carried(turn, session=session), opened=False)

    @router.post("/turns/{turn}/carried/open")
    async def carried_open(turn: str, page: SignedInPage, session: str | None = None) -> Response:
        await form_of(page)
        found = await page.me.carried(turn, session=session, open=True)
        return _carried_page(page, found, opened=True)

    @router.get("/life")
    async def life(space: str, path: str, page: SignedInPage) -> Response:
        found = await page.me.life(space, path)
        return render(
            page,
            page.request,
            "life.html",
            life=found,
            chart=Markup(life_chart(found.days, title=path)),  # escaped inside life_chart
            origins=ORIGINS,
            file_page=file_url(space, path),
        )

    return router


__all__ = ["MARKS", "CarriedBay", "carried_bays", "life_url", "mark", "story_router"]
