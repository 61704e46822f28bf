"""The Inbox, Session story, Carried and Life pages (and Org memory's usage) over httpx's ASGI
transport, on both managed stores.

The world is tests/story_world.py's: real loads and stores of bank_17's ``rules`` and Dana's
own memory, and the traces of four turns (s1/t1, s1/t2 with a waiting change, s2/t1, and
bank_99's x1/t1), after which ``rules`` moved on (a.md edited, b.md deleted). Members of each
role sign in as tests/test_web_pages.py's ``Site`` does. These pin each page's content, the
role matrix, that a person's memory is named to nobody but admins and opened only by an
audited "Open" (CSRF-checked), bad input as error pages, and escaping.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from memfs.core.members import Member
from memfs.core.models import ChangeSet, Limits, Provenance, SpaceRef, Trace, TraceFile
from memfs.core.story import STORY_PAGE
from memfs.stores.base import ReviewingStore
from memfs.web.app import web_app
from tests.story_world import ORG, RULES, Story, long_session, story_world
from tests.test_web_pages import BASE, Clock, Site, text_of
from tests.web_world import PEOPLE, Memory, new_store

PERSON = ["u_dana", "q.md", "p.md", "short answers", "tea"]  # Dana's id, files, contents


class StorySite(Site):
    story: Story


async def _story_site(kind: str, tmp_path: Path, **app_kw: object) -> AsyncIterator[StorySite]:
    store = new_store(kind, tmp_path)
    story = await story_world(store)
    tokens = {}
    for who, role, org in PEOPLE:
        await store.add_member(Member(id=f"u_{who}", org=org, role=role), by=None)
        tokens[who] = (await store.create_token(f"u_{who}", org, by=None)).token
    await store.revoke_tokens("u_revoked", ORG, by=None)
    clock = Clock()
    app = web_app(store, clock=clock, **app_kw)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 4711))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        site = StorySite(Memory(store, tokens, story.change, ""), client, clock)
        site.story = story
        yield site
    await store.aclose()


@pytest.fixture(params=["memory", "sqlite"])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorySite]:
    async for made in _story_site(request.param, tmp_path):
        yield made


def store_of(site: Site) -> ReviewingStore:
    return site.memory.store


async def looks(site: Site) -> list[tuple[str, str | None, str | None]]:
    """The looks inside people the audit log records: (action, actor, target)."""
    return [
        (e.action, e.actor.id if e.actor else None, e.target)
        for e in await store_of(site).audit(org=ORG)
        if e.action == "open"
    ]


def seen(html: str) -> str:
    """The visible text of a piece of a page."""
    return text_of(httpx.Response(200, text=html))


def tiles(page: httpx.Response | str) -> list[tuple[str, str]]:
    """(mark, path) of every tile on a page or a piece of one, in page order."""
    html = page if isinstance(page, str) else page.text
    found = re.findall(r'<a class="tile origin-([a-z]+)" href="[^"]*"[^>]*>([^<]*)</a>', html)
    return [(mark, path) for mark, path in found]


def section(page: httpx.Response, id: str) -> str:
    found = re.search(rf'<section[^>]* id="{re.escape(id)}">(.*?)</section>', page.text, re.S)
    assert found is not None, id
    return found.group(1)


def rows(html: str) -> list[str]:
    """The visible text of each mount's row of a turn's memory line."""
    found = re.findall(r'<tr class="mount-[a-z]+">.*?</tr>', html, re.S)
    return [seen(row) for row in found]


READS = [
    "/inbox",
    "/sessions/s1",
    "/turns/t1/carried?session=s1",
    "/turns/t2/carried",
    "/life?space=rules&path=a.md",
    "/org/rules",
]


# -- role matrix -----------------------------------------------------------------------


@pytest.mark.parametrize("url", READS)
async def test_each_story_page_without_a_session_sends_the_browser_to_login(
    site: StorySite, url: str
) -> None:
    response = await site.client.get(url)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/login?next=")


@pytest.mark.parametrize("who", ["viewer", "member", "admin"])
async def test_every_role_reads_every_story_page_and_nothing_is_audited(
    site: StorySite, who: str
) -> None:
    await site.sign_in(who)
    for url in READS:
        response = await site.client.get(url)
        assert response.status_code == 200, (who, url, response.text)
        assert "default-src 'none'" in response.headers["content-security-policy"]
    assert await looks(site) == []


async def test_a_revoked_token_reads_no_story_page(site: StorySite) -> None:
    await site.sign_in("revoked")
    response = await site.client.get("/sessions/s1")
    assert response.status_code == 303 and response.headers["location"].startswith("/login")


# -- Session story ---------------------------------------------------------------------


async def test_the_session_story_tells_each_turns_memory_line(site: StorySite) -> None:
    await site.sign_in("viewer")
    page = await site.client.get("/sessions/s1")
    assert page.status_code == 200
    first, second = section(page, "turn-t1"), section(page, "turn-t2")
    assert "keep it short" in first and "remember the cut-off" in second
    assert 'href="/turns/t1/carried?session=s1">Carried</a>' in first
    assert 'href="/turns/t2/carried?session=s1">Carried</a>' in second
    traces = await store_of(site).traces(session="s1")
    at_t1, at_t2 = (t.mounts["rules"].cursor for t in traces)
    at_me = traces[0].mounts["me"].cursor
    assert None not in (at_t1, at_t2, at_me)
    # rules as t1 carried it: three files; it opened a.md (a link to its Life). Dana's
    # mount: counts only (1 file carried, none opened, 1 saved), nobody named.
    assert rows(first) == [
        f"rules : rules 3 files · cursor {at_t1} a.md none saved",
        f"me : a person's memory · me 1 file · cursor {at_me} 0 files 1 file saved",
    ]
    assert '<a href="/life?space=rules&amp;path=a.md"><code>a.md</code></a>' in first
    # t2 opened a.md and b.md and left new.md waiting: its change is linked to Review.
    change = site.story.change
    assert rows(second) == [
        f"rules : rules 3 files · cursor {at_t2} a.md , b.md new.md waiting · change {change}"
    ]
    assert f'href="/review#change-{change}"' in second
    seen = text_of(page)
    for secret in PERSON:
        assert secret not in page.text, secret
    assert "only an admin can see" in seen


async def test_an_admin_sees_whose_mount_it_is_in_the_story_but_not_its_files(
    site: StorySite,
) -> None:
    await site.sign_in("admin")
    page = await site.client.get("/sessions/s1")
    assert "u_dana's memory · me" in text_of(page)
    assert "q.md" not in page.text and "p.md" not in page.text
    assert await looks(site) == []


async def test_the_review_page_and_a_files_trail_link_to_the_session_story(
    site: StorySite,
) -> None:
    await site.sign_in("member")
    review = await site.client.get("/review")
    assert 'href="/sessions/s1"' in review.text
    await site.decide(f"/review/{site.story.change}", {"act": "approve", "path": "new.md"})
    trail = await site.client.get("/org/rules/files/new.md")
    assert 'href="/sessions/s1"' in trail.text
    assert (await site.client.get("/sessions/s1")).status_code == 200


# -- Carried ---------------------------------------------------------------------------


async def test_carried_is_the_map_at_exactly_the_turns_snapshot_with_opened_files_marked(
    site: StorySite,
) -> None:
    await site.sign_in("viewer")
    page = await site.client.get("/turns/t1/carried", params={"session": "s1"})
    assert page.status_code == 200
    rules = section(page, "mount-rules")
    # a.md opened, b.md and c.md only carried: b.md is deleted now and a.md edited since.
    assert tiles(rules) == [
        ("opened", "a.md"),
        ("carried", "b.md"),
        ("carried", "c.md"),
    ]
    assert 'title="6 bytes · opened by this turn"' in rules  # "alpha\n", not the edit
    assert 'href="/life?space=rules&amp;path=b.md"' in rules
    assert "3 files carried" in seen(rules)
    assert "<meter" in rules and "The note's file list" in rules
    assert "keep it short" in page.text and 'href="/sessions/s1"' in page.text
    assert set(await store_of(site).files(RULES)) == {"a.md", "c.md"}


async def test_carried_marks_what_a_turn_saved(site: StorySite) -> None:
    store = store_of(site)
    loaded = await store.load(RULES, "s5")
    await store.store(
        RULES,
        ChangeSet(updated={"c.md": b"sea, saved\n"}),
        cursor=loaded.cursor,
        provenance=Provenance(session="s5", turn="t1", prompt="fix c"),
        review="none",
    )
    mount = (await store.traces(session="s2"))[0].mounts["rules"]
    await store.record_trace(
        Trace(
            session="s5",
            turn="t1",
            prompt="fix c",
            mounts={
                "rules": mount.model_copy(
                    update={"cursor": loaded.cursor, "snapshot": {}, "saved": ("c.md",)}
                )
            },
            files={"rules/c.md": TraceFile(opened=True, wrote=True)},
        )
    )
    await site.sign_in("viewer")
    page = await site.client.get("/turns/t1/carried", params={"session": "s5"})
    assert tiles(page) == [("carried", "a.md"), ("saved", "c.md")]  # b.md was deleted before


@pytest.mark.parametrize("who", ["viewer", "member"])
async def test_a_persons_carried_mount_names_nobody_and_no_file_to_non_admins(
    site: StorySite, who: str
) -> None:
    await site.sign_in(who)
    page = await site.client.get("/turns/t1/carried", params={"session": "s1"})
    me = section(page, "mount-me")
    assert "A person's memory · me" in me and "1 file carried" in me
    for secret in PERSON:
        assert secret not in page.text, secret
    assert "carried/open" not in page.text and "Open" not in text_of(page).split("Sign out")[1]
    # Their Open is refused even with a good CSRF token, and nothing is audited.
    csrf = await site.csrf("/sessions/s1")
    refused = await site.client.post("/turns/t1/carried/open?session=s1", data={"csrf": csrf})
    assert refused.status_code == 403 and "PermissionDenied" in text_of(refused)
    for secret in PERSON[1:]:
        assert secret not in refused.text
    assert await looks(site) == []


async def test_an_admin_sees_whose_carried_mount_it_is_and_opens_it_audited(
    site: StorySite,
) -> None:
    await site.sign_in("admin")
    page = await site.client.get("/turns/t1/carried", params={"session": "s1"})
    me = section(page, "mount-me")
    assert "u_dana's memory · me" in seen(me)
    assert "q.md" not in page.text
    assert 'action="/turns/t1/carried/open?session=s1"' in page.text
    assert await looks(site) == []
    opened = await site.post("/turns/t1/carried/open?session=s1", {})
    assert opened.status_code == 200
    assert ("carried", "q.md") in tiles(opened)
    assert "this look at a person's memory is in the audit log" in text_of(opened)
    assert await looks(site) == [("open", "u_admin", "u_dana")]
    log = await site.client.get("/people/audit")
    assert "open" in text_of(log) and "u_dana" in log.text


async def test_the_carried_open_form_without_or_with_a_wrong_csrf_token_is_403(
    site: StorySite,
) -> None:
    await site.sign_in("admin")
    for data in [{}, {"csrf": "wrong"}]:
        response = await site.client.post("/turns/t1/carried/open?session=s1", data=data)
        assert response.status_code == 403 and "CSRF" in text_of(response)
        assert "q.md" not in response.text
    assert await looks(site) == []


# -- Life and usage --------------------------------------------------------------------


async def test_life_shows_the_chart_the_last_open_and_the_timeline(site: StorySite) -> None:
    await site.sign_in("viewer")
    page = await site.client.get("/life", params={"space": "rules", "path": "a.md"})
    assert page.status_code == 200
    seen = text_of(page)
    assert "3 turns carried it, 2 opened it." in seen
    assert 'in conversation <a href="/sessions/s1">s1</a>' in page.text
    assert 'href="/turns/t2/carried?session=s1">t2</a>' in page.text
    (svg,) = re.findall(r"<svg.*?</svg>", page.text, re.S)
    chart = ET.fromstring(svg)
    assert chart.attrib["role"] == "img"
    assert "3 turns carried it and 2 opened it" in chart.attrib["aria-label"]
    # The page's CSP allows no inline style: the chart and the page use none.
    assert "style=" not in page.text and "<script" not in page.text
    assert "style-src 'self'" in page.headers["content-security-policy"]
    rows = re.findall(r'<tr class="event-([a-z]+)', page.text)
    assert rows == ["revision", "opened", "opened", "revision"]
    assert "from code" in seen and "edited in memfs" in seen
    assert 'href="/org/rules/files/a.md"' in page.text


async def test_life_of_an_approved_file_names_who_taught_and_approved_it(
    site: StorySite,
) -> None:
    await site.sign_in("member")
    await site.decide(f"/review/{site.story.change}", {"act": "approve", "path": "new.md"})
    page = await site.client.get("/life", params={"space": "rules", "path": "new.md"})
    seen = text_of(page)
    assert "taught in a conversation" in seen and "approved by u_member" in seen
    assert "remember the cut-off" in seen and "Never opened." in seen


async def test_the_file_page_and_the_maps_selected_file_link_its_life(site: StorySite) -> None:
    await site.sign_in("viewer")
    for url in ["/org/rules/files/a.md", "/map?space=rules&path=a.md"]:
        page = await site.client.get(url)
        assert 'href="/life?space=rules&amp;path=a.md"' in page.text, url


async def test_org_memory_says_how_often_each_file_was_opened_and_never_opened(
    site: StorySite,
) -> None:
    await store_of(site).put(RULES, ChangeSet(created={"d.md": b"d"}), provenance=Provenance())
    await site.sign_in("viewer")
    page = await site.client.get("/org/rules")
    assert page.status_code == 200
    items = [seen(li) for li in re.findall(r"<li>.*?</li>", page.text, re.S)]
    assert items == [
        "a.md 14 bytes · opened 2 times in the last 30 days",
        "c.md 4 bytes · opened 1 time in the last 30 days",
        "d.md 1 bytes · Never opened",
    ]
    assert 'href="/life?space=rules&amp;path=d.md"' in page.text


# -- Inbox -----------------------------------------------------------------------------


async def test_the_inbox_links_waiting_changes_to_review(site: StorySite) -> None:
    await site.sign_in("viewer")
    page = await site.client.get("/inbox")
    assert page.status_code == 200
    assert f'href="/review#change-{site.story.change}"' in page.text
    seen = text_of(page)
    assert "remember the cut-off" in seen and "1 file: new.md" in seen
    assert 'href="/sessions/s1"' in page.text
    assert "Nothing to look at: every space's files fit the note." in seen
    assert "theirs" not in page.text  # bank_99's memory


async def test_the_inbox_lists_spaces_with_no_room_in_the_note(tmp_path: Path) -> None:
    async for made in _story_site("memory", tmp_path, limits=Limits(note_file_list_bytes=20)):
        big = SpaceRef(layer="org", space="big", org=ORG)
        await made.memory.store.put(
            big, ChangeSet(created={f"f{i}.md": b"x" for i in range(9)}), provenance=Provenance()
        )
        await made.sign_in("member")
        page = await made.client.get("/inbox")
        no_room = section(page, "no-room")
        assert "<h3>No room in the note</h3>" in no_room
        rows = re.findall(r'<td><a href="/org/([a-z]+)">', no_room)
        assert rows == ["big", "rules"]
        assert "9 files" not in no_room  # the count column is the number alone
        assert re.search(r"big</a></td>\s*<td>9</td>", no_room)


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/sessions/%2E%2E", 400),
        ("/sessions/s%00", 400),
        (f"/sessions/{'s' * 300}", 400),
        ("/sessions/nobody", 404),
        ("/sessions/x1", 404),  # bank_99's session
        ("/turns/%2E%2E/carried", 400),
        ("/turns/t1/carried?session=%2E%2E", 400),
        ("/turns/t1/carried", 400),  # s1 and s2 both have a t1: name the session
        ("/turns/t9/carried", 404),
        ("/turns/t1/carried?session=x1", 404),
        ("/turns/t1/carried?session=nobody", 404),
        ("/life?space=rules&path=../x", 400),
        ("/life?space=rules&path=a/../../b", 400),
        ("/life?space=..&path=a.md", 400),
        ("/life?space=rules", 400),
        ("/life?path=a.md", 400),
        ("/life?space=rules&path=nothing.md", 404),
        ("/life?space=rules&path=x.md", 404),  # bank_99's rules holds x.md
    ],
)
async def test_bad_or_unknown_names_on_story_pages_are_error_pages(
    site: StorySite, url: str, status: int
) -> None:
    await site.sign_in("admin")
    response = await site.client.get(url)
    assert response.status_code == status, response.text
    assert "text/html" in response.headers["content-type"]
    assert "theirs" not in response.text and "another bank" not in response.text
    assert await looks(site) == []


async def test_opening_an_unknown_turn_is_404_and_audits_nothing(site: StorySite) -> None:
    await site.sign_in("admin")
    for url, status in [
        ("/turns/t9/carried/open?session=s1", 404),
        ("/turns/%2E%2E/carried/open?session=s1", 400),
        ("/turns/t1/carried/open?session=x1", 404),
    ]:
        assert (await site.post(url, {})).status_code == status, url
    assert await looks(site) == []


# -- escaping --------------------------------------------------------------------------


async def test_prompts_and_file_names_on_story_pages_are_escaped(site: StorySite) -> None:
    store = store_of(site)
    name = '<img src=x onerror="alert(1)">.md'
    prompt = "<script>alert(2)</script>"
    await store.put(RULES, ChangeSet(created={name: b"evil"}), provenance=Provenance())
    loaded = await store.load(RULES, "s9")
    mount = (await store.traces(session="s2"))[0].mounts["rules"]
    await store.record_trace(
        Trace(
            session="s9",
            turn="t1",
            prompt=prompt,
            mounts={
                "rules": mount.model_copy(
                    update={"cursor": loaded.cursor, "snapshot": {name: loaded.revisions[name]}}
                )
            },
            files={f"rules/{name}": TraceFile(opened=True)},
        )
    )
    await site.sign_in("viewer")
    pages = [
        await site.client.get("/sessions/s9"),
        await site.client.get("/turns/t1/carried", params={"session": "s9"}),
        await site.client.get("/life", params={"space": "rules", "path": name}),
        await site.client.get("/org/rules"),
    ]
    for page in pages:
        assert page.status_code == 200, page.text
        assert "<img" not in page.text and "<script>" not in page.text
        assert "&lt;img src=x onerror=" in page.text
    for page in pages[:2]:
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page.text


async def test_story_pages_load_only_memfs_own_files(site: StorySite) -> None:
    await site.sign_in("admin")
    pages = [await site.client.get(url) for url in READS]
    pages.append(await site.post("/turns/t1/carried/open?session=s1", {}))
    for page in pages:
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href|action)="([^"]+)"', page.text)
        assert all(s.startswith(("/", "#")) for s in sources), sources
        assert "style=" not in page.text and "<script" not in page.text


async def test_a_long_session_story_shows_its_latest_turns_and_links_to_the_earlier_ones(
    site: StorySite,
) -> None:
    ids = await long_session(store_of(site), "long", STORY_PAGE + 1)
    await site.sign_in("viewer")
    latest = await site.client.get("/sessions/long")
    assert latest.text.count('<section class="card turn"') == STORY_PAGE
    assert f'id="turn-{ids[0]}"' not in latest.text and f'id="turn-{ids[-1]}"' in latest.text
    [earlier] = re.findall(
        r'<a href="(/sessions/long\?before=[^"]+)">Earlier turns</a>', latest.text
    )
    assert earlier == f"/sessions/long?before={ids[1]}"
    assert "Latest turns" not in latest.text
    first = await site.client.get(earlier)
    assert re.findall(r'id="turn-([^"]+)"', first.text) == [ids[0]]
    assert "Earlier turns" not in first.text
    assert '<a href="/sessions/long">Latest turns</a>' in first.text
