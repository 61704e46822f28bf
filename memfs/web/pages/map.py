"""The Memory map: each org space a bay of file tiles, each person's memory a bay without files.

- ``GET /map`` (``/`` sends the browser here): every org space of the org is a
  bay with a bar of how much of the note's file list it takes
  (``Limits.note_file_list_bytes``, 8,000 bytes by default; past it "No room
  in the note" and how many files it leaves out), and every live file a tile
  marked by the origin of its latest revision (taught in a conversation, from
  code, edited in memfs, a fix). Each person's own memory is a bay of its
  size against ``Limits.max_space_bytes``: whose it is only for admins (with
  a link to People, where "Open" is), never its files, for anyone.
- ``GET /map?space=S&path=P`` (a tile's plain link): the same map, with that
  file's text and whole trail, "Restore" on every earlier revision (the Org
  memory page's restore form, so roles and audit are the same).

The rendering takes values, not the store: :func:`space_bay` shapes a bay
from a plain mapping path -> (size, origin), and :func:`map_page` renders
bays, person bays and an optional selected file. ``GET /map`` feeds them the
live files (one ``live_origins`` answer per space, no contents); the same two
functions show any other set of files, a turn's snapshot as of its cursor
among them, with a heading that says which.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from memfs.core.errors import BadRequest, NotFound
from memfs.web.api import FileView, NoteUse, PersonBay, file_view, note_use, person_bay
from memfs.web.pages.common import Page, SignedInPage, file_url, render
from memfs.web.pages.org import ORIGINS

MapFiles = Mapping[str, tuple[int, str]]
"""The files a bay shows: path -> (size in bytes, origin of the revision shown)."""


def tile_url(space: str, path: str) -> str:
    """The map with the file ``path`` of ``space`` selected (a tile's link)."""
    # quote, not urlencode: this runs once per tile, 10,000 times for a big space.
    return f"/map?space={quote(space, safe='')}&path={quote(path, safe='/')}#file"


class Tile(NamedTuple):
    """One file on the map (a named tuple: a big space makes 10,000)."""

    path: str
    size: int
    origin: str
    href: str
    selected: bool


@dataclass(frozen=True)
class SpaceBay:
    """One org space on the map: its size, its note use, its tiles in path order."""

    space: str
    review: str | None
    files: int
    bytes: int
    note: NoteUse
    origins: tuple[tuple[str, int], ...]  # (origin, how many tiles), in ``ORIGINS`` order
    tiles: tuple[Tile, ...]


@dataclass(frozen=True)
class SelectedFile:
    """The file a tile's link selected: its view (text and trail) and whether it is forgotten."""

    view: FileView
    forgotten: bool


def space_bay(
    space: str,
    files: MapFiles,
    *,
    budget: int,
    review: str | None = None,
    selected: str | None = None,
    link: Callable[[str, str], str] = tile_url,
) -> SpaceBay:
    """A bay for ``space`` over ``files``; ``selected`` is the path whose tile is marked."""
    paths = sorted(files)
    counts = Counter(origin for _, origin in files.values())
    order = [o for o in ORIGINS if o in counts] + sorted(set(counts) - set(ORIGINS))
    return SpaceBay(
        space=space,
        review=review,
        files=len(paths),
        bytes=sum(size for size, _ in files.values()),
        note=note_use(space, {path: files[path][0] for path in paths}, budget),
        origins=tuple((origin, counts[origin]) for origin in order),
        tiles=tuple(
            Tile(
                path=path,
                size=files[path][0],
                origin=files[path][1],
                href=link(space, path),
                selected=path == selected,
            )
            for path in paths
        ),
    )


def map_page(
    page: Page,
    bays: list[SpaceBay],
    people: list[PersonBay],
    *,
    person_limit: int,
    selected: SelectedFile | None = None,
    title: str = "Memory map",
    subtitle: str | None = None,
) -> HTMLResponse:
    """The map page over these bays; ``selected`` adds the file panel with its trail.

    ``people`` are person bays as ``Acting.people`` shows them to this viewer
    (``person`` None unless an admin), each measured against ``person_limit``.
    """
    context: dict[str, Any] = {}
    if selected is not None:
        view = selected.view
        context = {
            "file": view,
            "forgotten": selected.forgotten,
            "trail": view.trail,
            "restore_url": file_url(view.space, view.path) + "/restore",
            "file_page": file_url(view.space, view.path),
        }
    return render(
        page,
        page.request,
        "map.html",
        title=title,
        subtitle=subtitle,
        bays=bays,
        people=people,
        person_limit=person_limit,
        origins=ORIGINS,
        **context,
    )


async def _selected(page: Page, space: str, path: str) -> SelectedFile:
    revisions = await page.me.history(space, path)  # checks both names first
    if space not in await page.me.spaces():
        raise NotFound("no such space", path=space)
    content = (await page.me.files(space)).get(path)
    if content is None and not revisions:
        raise NotFound("no such file", path=f"{space}/{path}")
    # A forgotten file keeps its trail, and that is where it is restored.
    return SelectedFile(file_view(space, path, content or b"", revisions), content is None)


def map_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/map")
    async def memory_map(
        page: SignedInPage, space: str | None = None, path: str | None = None
    ) -> Response:
        if (space is None) != (path is None):
            raise BadRequest("a file on the map is named by both space and path")
        selected = None if space is None or path is None else await _selected(page, space, path)
        limits = page.me.limits
        bays = []
        for name, mode in sorted((await page.me.spaces()).items()):
            bays.append(
                space_bay(
                    name,
                    await page.me.live_origins(name),
                    budget=limits.note_file_list_bytes,
                    review=mode,
                    selected=path if name == space else None,
                )
            )
        people = [person_bay(entry) for entry in await page.me.people()]
        return map_page(page, bays, people, person_limit=limits.max_space_bytes, selected=selected)

    return router


__all__ = [
    "MapFiles",
    "SelectedFile",
    "SpaceBay",
    "Tile",
    "map_page",
    "map_router",
    "space_bay",
    "tile_url",
]
