"""The Memory map and People pages over httpx's ASGI transport, on both managed stores.

The world is tests/web_world.py's: org bank_17 with the space ``rules``,
Dana's own memory (``u_dana``, space ``me``, ``p.md``) and members of each
role. These pin each page's role matrix, the anonymity of people's bays,
that a person's files are shown only by an audited "Open", that forgetting
changes the store and is audited, CSRF on every form, bad input and escaping.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from memfs.core.audit import AUDIT_PAGE
from memfs.core.models import By, ChangeSet, Limits, Provenance, SpaceRef
from memfs.core.note import file_list
from memfs.stores.base import ManagedStore
from memfs.stores.memory import MemoryStore
from memfs.web.app import web_app
from memfs.web.pages.map import space_bay
from tests.test_web_pages import BASE, Clock, Site, _site, text_of
from tests.web_world import DANA_ME, ORG, RULES, org_memory

SEED = Provenance(origin="code")
FIX = Provenance(origin="fix")


@pytest.fixture(params=["memory", "sqlite"])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    async for made in _site(request.param, tmp_path):
        yield made


async def actions(site: Site, *names: str) -> list[tuple[str, str | None, str | None]]:
    """(action, actor, target) of this org's audit entries of the actions ``names``."""
    return [
        (e.action, e.actor.id if e.actor else None, e.target)
        for e in await site.memory.store.audit(org=ORG)
        if e.action in names
    ]


def tiles(page: httpx.Response) -> list[tuple[str, str]]:
    """(origin, path) of every tile on a map page, in page order."""
    found = re.findall(r'<a class="tile origin-([a-z]+)" href="[^"]*"[^>]*>([^<]*)</a>', page.text)
    return [(origin, path) for origin, path in found]


# -- Memory map ------------------------------------------------------------------------


async def test_home_sends_a_signed_in_browser_to_the_map(site: Site) -> None:
    await site.sign_in("viewer", next="/")
    home = await site.client.get("/")
    assert home.status_code == 303 and home.headers["location"] == "/map"


async def test_the_map_without_a_session_sends_the_browser_to_login(site: Site) -> None:
    response = await site.client.get("/map", params={"space": "rules", "path": "a.md"})
    assert response.status_code == 303 and response.headers["location"] == "/login?next=%2Fmap"


@pytest.mark.parametrize(
    ("who", "restores"), [("viewer", False), ("member", True), ("admin", True)]
)
async def test_every_role_reads_the_map_and_only_members_and_admins_get_restore(
    site: Site, who: str, restores: bool
) -> None:
    await site.memory.store.put(RULES, ChangeSet(updated={"a.md": b"2"}), provenance=FIX)
    await site.sign_in(who)
    assert tiles(await site.client.get("/map")) == [("fix", "a.md")]
    page = await site.client.get("/map", params={"space": "rules", "path": "a.md"})
    assert page.status_code == 200 and '<pre class="text">2</pre>' in page.text
    assert ('name="revision"' in page.text) is restores
    assert ("Restore" in page.text) is restores


async def test_each_org_space_is_a_bay_of_tiles_marked_by_their_latest_revisions_origin(
    site: Site,
) -> None:
    store = site.memory.store
    await store.put(RULES, ChangeSet(created={"seed.md": b"from code"}), provenance=SEED)
    await store.put(RULES, ChangeSet(created={"fixed.md": b"f"}), provenance=FIX)
    await store.put(RULES, ChangeSet(updated={"seed.md": b"s"}), provenance=FIX)  # latest wins
    await site.sign_in("member")
    await site.post("/org/rules/files", {"path": "hand.md", "content": "typed"})
    page = await site.client.get("/map")
    assert page.status_code == 200
    assert tiles(page) == [
        ("conversation", "a.md"),
        ("fix", "fixed.md"),
        ("edited", "hand.md"),
        ("fix", "seed.md"),
    ]
    assert 'href="/map?space=rules&amp;path=seed.md#file"' in page.text
    seen = text_of(page)
    assert "4 files · 11 bytes · review person" in seen
    files = {"a.md": 4, "fixed.md": 1, "hand.md": 5, "seed.md": 1}
    used = sum(len(line.encode()) + 1 for line in file_list("rules", files, 8000)[0])
    assert f"The note's file list: {used} of 8,000 bytes" in seen
    assert f'<meter min="0" max="8000" value="{used}"' in page.text
    assert "No room in the note" not in seen
    # The waiting change's files are not live, so they are no tiles.
    assert "new.md" not in page.text and "b.md" not in page.text


async def test_a_bay_past_the_note_budget_says_no_room_and_how_many_files_it_left_out(
    tmp_path: Path,
) -> None:
    async for made in _site("memory", tmp_path, limits=Limits(note_file_list_bytes=60)):
        files = {f"f{i}.md": b"x" for i in range(5)}
        await made.memory.store.put(RULES, ChangeSet(created=files), provenance=SEED)
        sizes = {"a.md": 4} | {path: 1 for path in files}
        lines, left_out = file_list("rules", sizes, 60)
        assert left_out > 0
        await made.sign_in("viewer")
        seen = text_of(await made.client.get("/map"))
        used = sum(len(line.encode()) + 1 for line in lines)
        assert f"{used} of 60 bytes · No room in the note : {left_out} files left out" in seen


async def test_viewers_and_members_see_how_full_a_persons_bay_is_never_whose_or_its_files(
    site: Site,
) -> None:
    for who in ["viewer", "member"]:
        await site.sign_in(who)
        page = await site.client.get("/map")
        assert page.status_code == 200
        assert "A person's memory · me" in text_of(page)
        assert '<meter min="0" max="67108864" value="4"' in page.text
        for secret in ["u_dana", "p.md", "pref", "/people"]:
            assert secret not in page.text, (who, secret)
    assert await actions(site, "open") == []


async def test_an_admin_sees_whose_bay_it_is_but_its_files_stay_closed(site: Site) -> None:
    await site.sign_in("admin")
    page = await site.client.get("/map")
    assert "u_dana · me" in text_of(page)
    assert 'href="/people#person-u_dana"' in page.text
    assert "p.md" not in page.text and "pref" not in page.text
    assert await actions(site, "open") == []


async def test_a_selected_tile_shows_the_text_and_trail_and_restore_brings_back_a_revision(
    site: Site,
) -> None:
    await site.sign_in("member")
    await site.post("/org/rules/files/a.md/edit", {"content": "two\n"})
    page = await site.client.get("/map", params={"space": "rules", "path": "a.md"})
    assert page.status_code == 200
    assert '<pre class="text">two\n</pre>' in page.text
    assert 'aria-current="true">a.md</a>' in page.text
    assert "edited in memfs" in text_of(page) and "taught in a conversation" in text_of(page)
    (earlier,) = re.findall(r'name="revision" value="([^"]+)"', page.text)
    assert 'action="/org/rules/files/a.md/restore"' in page.text
    restored = await site.client.post(
        "/org/rules/files/a.md/restore", data={"csrf": await site.csrf("/map"), "revision": earlier}
    )
    assert restored.status_code == 303
    assert (await site.memory.store.files(RULES))["a.md"] == b"one\n"
    assert await actions(site, "restore") == [("restore", "u_member", "a.md")]


async def test_the_maps_restore_form_without_its_csrf_token_is_403_and_restores_nothing(
    site: Site,
) -> None:
    await site.memory.store.put(RULES, ChangeSet(updated={"a.md": b"2"}), provenance=FIX)
    await site.sign_in("member")
    page = await site.client.get("/map", params={"space": "rules", "path": "a.md"})
    (earlier,) = re.findall(r'name="revision" value="([^"]+)"', page.text)
    for data in [{"revision": earlier}, {"revision": earlier, "csrf": "wrong"}]:
        response = await site.client.post("/org/rules/files/a.md/restore", data=data)
        assert response.status_code == 403 and "CSRF" in text_of(response)
    assert (await site.memory.store.files(RULES))["a.md"] == b"2"
    assert await actions(site, "restore") == []


async def test_a_forgotten_file_selected_on_the_map_shows_its_trail_to_restore_it(
    site: Site,
) -> None:
    await site.sign_in("member")
    await site.post("/org/rules/files/a.md/forget", {})
    page = await site.client.get("/map", params={"space": "rules", "path": "a.md"})
    assert page.status_code == 200 and "This file is forgotten." in text_of(page)
    assert re.findall(r'name="revision" value="([^"]+)"', page.text)
    assert ("conversation", "a.md") not in tiles(page)


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"space": "rules", "path": "../x"}, 400),
        ({"space": "rules", "path": "a/../../b"}, 400),
        ({"space": "..", "path": "a.md"}, 400),
        ({"space": "rules"}, 400),
        ({"path": "a.md"}, 400),
        ({"space": "nowhere", "path": "a.md"}, 404),
        ({"space": "rules", "path": "x.md"}, 404),  # bank_99's rules holds x.md, not ours
        ({"space": "rules", "path": "missing.md"}, 404),
    ],
)
async def test_a_bad_or_foreign_file_on_the_map_is_an_error_page(
    site: Site, query: dict[str, str], status: int
) -> None:
    await site.sign_in("member")
    response = await site.client.get("/map", params=query)
    assert response.status_code == status
    assert "text/html" in response.headers["content-type"] and "secret" not in response.text


async def test_file_names_and_contents_on_the_map_are_escaped(site: Site) -> None:
    name = '<img src=x onerror="alert(1)">.md'
    await site.memory.store.put(
        RULES, ChangeSet(created={name: b"<script>alert(2)</script>"}), provenance=FIX
    )
    await site.sign_in("member")
    page = await site.client.get("/map", params={"space": "rules", "path": name})
    assert page.status_code == 200
    assert "<img" not in page.text and "<script>" not in page.text
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;.md" in page.text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page.text


async def test_another_orgs_map_holds_only_its_own_spaces(site: Site) -> None:
    await site.sign_in("other")
    page = await site.client.get("/map")
    assert tiles(page) == [("conversation", "x.md")]
    assert "a.md" not in page.text and "A person's memory" not in text_of(page)


async def test_the_map_of_a_ten_thousand_file_space_has_every_tile(tmp_path: Path) -> None:
    store = MemoryStore()
    memory = await org_memory(store)
    big = SpaceRef(layer="org", space="big", org=ORG)
    files = {f"d{i % 10}/f{i:05}.md": b"x" * (i % 7) for i in range(10_000)}
    await store.put(big, ChangeSet(created=files), provenance=SEED)
    app = web_app(store, clock=Clock())
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 4711))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        made = Site(memory, client, Clock())
        await made.sign_in("viewer")
        page = await client.get("/map")
    assert page.status_code == 200
    shown = tiles(page)
    assert len(shown) == 10_001  # rules' a.md and big's 10,000
    assert shown[:10_000] == [("code", path) for path in sorted(files)]
    _, left_out = file_list("big", {p: len(c) for p, c in files.items()}, 8000)
    assert f"No room in the note : {left_out} files left out" in text_of(page)
    assert "10000 files · " in text_of(page)


def test_a_bay_is_shaped_from_a_plain_mapping_so_any_snapshot_can_feed_it() -> None:
    snapshot = {"b.md": (3, "fix"), "a.md": (10, "code"), "c.md": (1, "fix")}
    bay = space_bay(
        "rules", snapshot, budget=8000, selected="b.md", link=lambda s, p: f"/turns/t1/{s}/{p}"
    )
    assert [(t.path, t.size, t.origin, t.href, t.selected) for t in bay.tiles] == [
        ("a.md", 10, "code", "/turns/t1/rules/a.md", False),
        ("b.md", 3, "fix", "/turns/t1/rules/b.md", True),
        ("c.md", 1, "fix", "/turns/t1/rules/c.md", False),
    ]
    assert (bay.files, bay.bytes, bay.origins) == (3, 14, (("code", 1), ("fix", 2)))
    assert bay.note.fits and bay.note.budget == 8000


# -- People ----------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["viewer", "member"])
async def test_people_and_the_audit_log_are_403_pages_for_non_admins(site: Site, who: str) -> None:
    await site.sign_in(who)
    (nav,) = re.findall(r"<nav>(.*?)</nav>", (await site.client.get("/map")).text, re.S)
    assert 'href="/map"' in nav and 'href="/people"' not in nav
    for url in ["/people", "/people/audit"]:
        response = await site.client.get(url)
        assert response.status_code == 403 and "PermissionDenied" in text_of(response)
        assert "u_dana" not in response.text
    csrf = await site.csrf("/map")
    for url, data in [
        ("/people/u_dana/open", {}),
        ("/people/u_dana/files/me/p.md/forget", {}),
        ("/people/u_dana/forget", {"confirm": "on"}),
    ]:
        response = await site.client.post(url, data={"csrf": csrf, **data})
        assert response.status_code == 403, url
        assert "pref" not in response.text
    assert await site.memory.store.user_files("u_dana", ORG) == {"me": {"p.md": b"pref"}}
    assert await actions(site, "open", "forget", "forget-user") == []


async def test_an_admin_sees_everyone_with_memory_and_their_bays_but_no_files(site: Site) -> None:
    await site.memory.store.put(
        SpaceRef(layer="user", space="drafts", org=ORG, user="u_dana"),
        ChangeSet(created={"d.md": b"draft!"}),
        provenance=Provenance(),
    )
    await site.sign_in("admin")
    page = await site.client.get("/people")
    assert page.status_code == 200
    assert 'id="person-u_dana"' in page.text
    assert re.search(r"<td>drafts</td><td>6</td>.*<td>me</td><td>4</td>", page.text, re.S)
    assert 'action="/people/u_dana/open"' in page.text and "Forget this person" in page.text
    for closed in ["p.md", "d.md", "pref", "draft!"]:
        assert closed not in page.text
    assert await actions(site, "open") == []


async def test_open_is_audited_and_only_then_are_the_persons_files_shown(site: Site) -> None:
    await site.sign_in("admin")
    opened = await site.post("/people/u_dana/open", {})
    assert opened.status_code == 200
    assert '<pre class="text">pref</pre>' in opened.text and "<code>p.md</code>" in opened.text
    assert 'action="/people/u_dana/files/me/p.md/forget"' in opened.text
    assert await actions(site, "open") == [("open", "u_admin", "u_dana")]
    log = await site.client.get("/people/audit")
    assert log.status_code == 200
    rows = re.findall(r"<tr>\s*<td>[^<]*</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>", log.text)
    assert rows[0] == ("u_admin (admin)", "open")  # newest first
    entries = await site.memory.store.audit(org=ORG)
    assert [action for _, action in rows] == [e.action for e in reversed(entries)]


async def test_forgetting_a_persons_file_purges_it_and_is_audited(site: Site) -> None:
    await site.memory.store.put(
        DANA_ME, ChangeSet(created={"q.md": b"keep"}), provenance=Provenance()
    )
    await site.sign_in("admin")
    await site.post("/people/u_dana/open", {})
    response = await site.post("/people/u_dana/files/me/p.md/forget", {})
    assert response.status_code == 303
    assert response.headers["location"] == "/people?done=person-file-forgotten"
    store = site.memory.store
    assert await store.user_files("u_dana", ORG) == {"me": {"q.md": b"keep"}}
    assert await store.history(DANA_ME, "p.md") == []
    assert [(a, who) for a, who, _ in await actions(site, "forget")] == [("forget", "u_admin")]
    assert "That file of the person is forgotten." in text_of(
        await site.client.get(response.headers["location"])
    )


async def test_forget_this_person_needs_the_box_ticked_then_says_what_went(site: Site) -> None:
    await site.sign_in("admin")
    unticked = await site.post("/people/u_dana/forget", {})
    assert unticked.status_code == 400 and "tick the box" in text_of(unticked)
    assert await site.memory.store.people(ORG) == {DANA_ME: 4}
    forgot = await site.post("/people/u_dana/forget", {"confirm": "on"})
    assert forgot.status_code == 200
    assert "Forgot u_dana : 1 space (me), 1 file." in text_of(forgot)
    assert 'id="person-u_dana"' not in forgot.text
    assert await site.memory.store.people(ORG) == {}
    assert await site.memory.store.user_files("u_dana", ORG) == {}
    assert await actions(site, "forget-user") == [("forget-user", "u_admin", "u_dana")]


async def test_every_people_form_without_or_with_a_wrong_csrf_token_is_403(site: Site) -> None:
    await site.sign_in("admin")
    for csrf in [None, "wrong"]:
        for url, data in [
            ("/people/u_dana/open", {}),
            ("/people/u_dana/files/me/p.md/forget", {}),
            ("/people/u_dana/forget", {"confirm": "on"}),
        ]:
            sent = data if csrf is None else {**data, "csrf": csrf}
            response = await site.client.post(url, data=sent)
            assert response.status_code == 403 and "CSRF" in text_of(response), url
            assert "pref" not in response.text
    assert await site.memory.store.user_files("u_dana", ORG) == {"me": {"p.md": b"pref"}}
    assert await actions(site, "open", "forget", "forget-user") == []


@pytest.mark.parametrize(
    "url",
    [
        "/people/%2E%2E/open",
        "/people/u%01dana/open",
        f"/people/{'u' * 300}/open",
        "/people/%2E%2E/forget",
        "/people/u%01dana/forget",
        "/people/u_dana/files/me/%2E%2E/forget",
        "/people/u_dana/files/me/a/%2E%2E/%2E%2E/p.md/forget",
        "/people/u_dana/files/%2E%2E/p.md/forget",
        "/people/%2E%2E/files/me/p.md/forget",
    ],
)
async def test_bad_names_in_a_people_form_are_400_pages_and_change_nothing(
    site: Site, url: str
) -> None:
    await site.sign_in("admin")
    response = await site.post(url, {"confirm": "on"})
    assert response.status_code == 400, response.text
    assert "InvalidName" in text_of(response) or "NameTooLong" in text_of(response)
    assert await site.memory.store.user_files("u_dana", ORG) == {"me": {"p.md": b"pref"}}
    assert await actions(site, "open", "forget", "forget-user") == []


async def test_another_orgs_person_is_absent_and_cannot_be_opened_or_forgotten(
    site: Site,
) -> None:
    theirs = SpaceRef(layer="user", space="me", org="bank_99", user="u_zed")
    await site.memory.store.put(
        theirs, ChangeSet(created={"z.md": b"zed"}), provenance=Provenance()
    )
    await site.sign_in("admin")
    assert "u_zed" not in (await site.client.get("/people")).text
    assert (await site.post("/people/u_zed/open", {})).status_code == 404
    assert (await site.post("/people/u_zed/files/me/z.md/forget", {})).status_code == 404
    gone = await site.post("/people/u_zed/forget", {"confirm": "on"})
    assert gone.status_code == 200 and "Forgot u_zed : 0 spaces, 0 files." in text_of(gone)
    assert await site.memory.store.user_files("u_zed", "bank_99") == {"me": {"z.md": b"zed"}}
    assert await actions(site, "open") == []


async def test_a_persons_file_names_and_contents_are_shown_escaped(site: Site) -> None:
    name = "<b>x</b>.md"
    await site.memory.store.put(
        DANA_ME, ChangeSet(created={name: b"<script>alert(1)</script>"}), provenance=Provenance()
    )
    await site.sign_in("admin")
    opened = await site.post("/people/u_dana/open", {})
    assert "<b>" not in opened.text and "<script>" not in opened.text
    assert "<code>&lt;b&gt;x&lt;/b&gt;.md</code>" in opened.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in opened.text
    assert 'action="/people/u_dana/files/me/%3Cb%3Ex%3C/b%3E.md/forget"' in opened.text


async def test_the_map_and_people_pages_load_only_memfs_own_files(site: Site) -> None:
    await site.sign_in("admin")
    pages = [
        await site.client.get("/map", params={"space": "rules", "path": "a.md"}),
        await site.client.get("/people"),
        await site.client.get("/people/audit"),
        await site.post("/people/u_dana/open", {}),
    ]
    for page in pages:
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href|action)="([^"]+)"', page.text)
        assert all(s.startswith(("/", "#")) for s in sources), sources
        assert "default-src 'none'" in page.headers["content-security-policy"]


async def test_the_audit_page_shows_audit_page_entries_and_links_to_the_older_ones(
    site: Site,
) -> None:
    store = site.memory.store
    assert isinstance(store, ManagedStore)
    for _ in range(AUDIT_PAGE + 1):
        await store.open_person("u_dana", ORG, by=By(id="u_admin", role="admin"))
    await site.sign_in("admin")
    whole = await store.audit(org=ORG)
    assert len(whole) < 2 * AUDIT_PAGE  # two pages

    def rows(html: str) -> list[str]:
        return re.findall(r"<tr>\s*<td>[^<]*</td>\s*<td>[^<]*</td>\s*<td>([^<]*)</td>", html)

    newest = await site.client.get("/people/audit")
    assert rows(newest.text) == [e.action for e in reversed(whole[-AUDIT_PAGE:])]
    [older] = re.findall(r'<a href="(/people/audit\?before=[^"]+)">Older entries</a>', newest.text)
    assert older == f"/people/audit?before={whole[-AUDIT_PAGE].id}"
    assert "Newest entries" not in newest.text
    rest = await site.client.get(older)
    assert rows(rest.text) == [e.action for e in reversed(whole[:-AUDIT_PAGE])]
    assert "Older entries" not in rest.text
    assert '<a href="/people/audit">Newest entries</a>' in rest.text
