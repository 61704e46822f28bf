"""The Memory tab's pages over httpx's ASGI transport: sign-in, CSRF, roles, and each page's acts.

The browser tests (tests/test_web_browser.py) drive the same pages in
chromium; these pin every rule of the forms without a browser.
"""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from memfs.core.errors import NotFound
from memfs.core.models import ChangeSet, Provenance
from memfs.core.signin import SigninLimits
from memfs.testing import FaultyStore
from memfs.web.app import web_app
from memfs.web.sessions import SessionLimits
from tests.web_world import ORG, PROMPT, RULES, Memory, new_store, org_memory, waiting

BASE = "http://memfs"


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Site:
    memory: Memory
    client: httpx.AsyncClient
    clock: Clock
    pages: dict[str, str] = field(default_factory=dict)

    async def sign_in(self, who: str, *, next: str = "") -> httpx.Response:
        form = await self.client.get("/login" + (f"?next={next}" if next else ""))
        secret = re.search(r'name="login" value="([^"]+)"', form.text)
        assert secret is not None, form.text
        token = self.memory.tokens.get(who, who)
        return await self.client.post(
            "/login",
            data={"token": token, "login": secret.group(1), "next": next or "/map"},
        )

    async def csrf(self, url: str = "/org") -> str:
        page = await self.client.get(url)
        assert page.status_code == 200, page.text
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found is not None
        return found.group(1)

    async def post(self, url: str, data: dict[str, str | list[str]]) -> httpx.Response:
        return await self.client.post(url, data={"csrf": await self.csrf(), **data})

    async def decide(self, url: str, data: dict[str, str | list[str]]) -> httpx.Response:
        """:meth:`post` to a review form, with the change's versions its page shows now."""
        change = url.split("/")[2]
        with contextlib.suppress(NotFound):  # no such change: the post says so itself
            now = await self.memory.store.get_change(change)
            data = {"version": now.version, "live_version": now.live_version, **data}
        return await self.post(url, data)


async def _site(kind: str, tmp_path: Path, **app_kw: object) -> AsyncIterator[Site]:
    store = new_store(kind, tmp_path)
    memory = await org_memory(store)
    clock = Clock()
    app = web_app(store, clock=clock, **app_kw)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 4711))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield Site(memory, client, clock)
    await store.aclose()


@pytest.fixture(params=["memory", "sqlite"])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    async for made in _site(request.param, tmp_path):
        yield made


def text_of(response: httpx.Response) -> str:
    """The page's visible text, roughly: tags dropped, entities decoded, spaces squeezed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


async def sign_in_actions(site: Site) -> list[tuple[str, str, str | None]]:
    return [
        (e.action, e.org, e.actor.id if e.actor else None)
        for e in await site.memory.store.audit()
        if e.action.startswith("sign-in")
    ]


# -- signing in ----------------------------------------------------------------------


async def test_login_page_is_a_form_with_one_field_labelled_token(site: Site) -> None:
    page = await site.client.get("/login")
    assert page.status_code == 200
    assert re.search(r'<label for="token">Token</label>', page.text)
    inputs = re.findall(r"<input[^>]*>", page.text)
    visible = [i for i in inputs if 'type="hidden"' not in i]
    assert len(visible) == 1 and 'name="token"' in visible[0]
    assert "default-src 'none'" in page.headers["content-security-policy"]


async def test_a_good_token_signs_in_with_an_httponly_samesite_strict_cookie(site: Site) -> None:
    response = await site.sign_in("member", next="/review")
    assert response.status_code == 303 and response.headers["location"] == "/review"
    cookie = next(
        v
        for k, v in response.headers.multi_items()
        if k == "set-cookie" and v.startswith("memfs_session=")
    )
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
    page = await site.client.get("/review")
    assert page.status_code == 200 and "u_member · member · bank_17" in text_of(page)
    assert await sign_in_actions(site) == [("sign-in", ORG, "u_member")]


async def test_under_tls_the_session_cookie_is_secure(tmp_path: Path) -> None:
    async for made in _site("memory", tmp_path):
        made.client.base_url = httpx.URL("https://memfs")
        response = await made.sign_in("member")
        cookie = response.headers["set-cookie"]
        assert response.status_code == 303 and "Secure" in cookie


async def test_sign_in_goes_on_only_to_a_path_of_this_site(site: Site) -> None:
    for bad in ["//evil.example/x", "https://evil.example/", "\\\\evil", "review"]:
        response = await site.sign_in("member", next=bad)
        assert response.headers["location"] == "/map", bad


async def test_a_bad_token_is_401_audited_under_no_org_and_signs_nobody_in(site: Site) -> None:
    for token in ["memfs_" + "A" * 43, "not-a-token", site.memory.tokens["revoked"]]:
        response = await site.sign_in(token)
        assert response.status_code == 401
        assert "That token is unknown or revoked." in text_of(response)
        assert "memfs_session" not in response.headers.get("set-cookie", "")
    assert await sign_in_actions(site) == [("sign-in-failed", "", None)] * 3
    assert (await site.client.get("/review")).status_code == 303


async def test_sign_in_failures_past_the_limit_are_refused_429_without_looking(
    tmp_path: Path,
) -> None:
    limits = SigninLimits(signin_failures=3, signin_window_seconds=60)
    async for made in _site("memory", tmp_path, signin=limits):
        for _ in range(2):
            assert (await made.sign_in("memfs_" + "B" * 43)).status_code == 401
        third = await made.sign_in("memfs_" + "B" * 43)  # at the limit: told to wait
        assert third.status_code == 401 and third.headers["retry-after"] == "60"
        refused = await made.sign_in("member")  # past it: even a good token is not looked at
        assert refused.status_code == 429 and refused.headers["retry-after"] == "60"
        assert "Too many failed sign-ins" in text_of(refused)
        assert await sign_in_actions(made) == [("sign-in-failed", "", None)] * 3
        made.clock.now += 60
        assert (await made.sign_in("member")).status_code == 303


async def test_other_addresses_of_one_ipv6_slash_64_share_its_sign_in_failures(
    tmp_path: Path,
) -> None:
    store = new_store("memory", tmp_path)
    memory = await org_memory(store)
    app = web_app(store, signin=SigninLimits(signin_failures=2, signin_window_seconds=60))
    bad = "memfs_" + "C" * 43
    answers = []
    for n, token in enumerate([bad, bad, memory.tokens["member"]]):
        transport = httpx.ASGITransport(app=app, client=(f"2001:db8:7:7::{n + 1}", 4711))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            site = Site(memory, client, Clock())
            answers.append((await site.sign_in(token)).status_code)
    assert answers == [401, 401, 429]
    entries = [e for e in await store.audit() if e.action == "sign-in-failed"]
    # The audit still names each address itself.
    assert [e.detail for e in entries] == ["2001:db8:7:7::1", "2001:db8:7:7::2"]
    await store.aclose()


async def test_the_login_form_without_its_own_secret_is_refused(site: Site) -> None:
    token = site.memory.tokens["member"]
    response = await site.client.post("/login", data={"token": token, "login": "forged"})
    assert response.status_code == 403
    assert (await site.client.get("/review")).status_code == 303
    assert await sign_in_actions(site) == []


async def test_a_page_without_a_session_sends_the_browser_to_login(site: Site) -> None:
    for url in ["/review", "/org", "/org/rules", "/org/rules/files/a.md"]:
        response = await site.client.get(url)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/login?next=")


async def test_logout_ends_the_session_and_its_cookie_no_longer_signs_in(site: Site) -> None:
    await site.sign_in("member")
    cookie = site.client.cookies["memfs_session"]
    response = await site.post("/logout", {})
    assert response.status_code == 303 and response.headers["location"].startswith("/login")
    site.client.cookies.set("memfs_session", cookie)
    assert (await site.client.get("/review")).status_code == 303


async def test_a_revoked_token_ends_its_browser_session_at_the_next_request(site: Site) -> None:
    await site.sign_in("member")
    assert (await site.client.get("/review")).status_code == 200
    await site.memory.store.revoke_tokens("u_member", ORG, by=None)
    assert (await site.client.get("/review")).status_code == 303


async def test_sessions_end_when_idle_and_the_oldest_goes_past_web_max_sessions(
    tmp_path: Path,
) -> None:
    limits = SessionLimits(web_session_idle_seconds=100, web_max_sessions=2)
    async for made in _site("memory", tmp_path, sessions=limits):
        await made.sign_in("member")
        made.clock.now += 99
        assert (await made.client.get("/org")).status_code == 200  # at the limit: still in
        made.clock.now += 100
        assert (await made.client.get("/org")).status_code == 303  # past it: signed out
        await made.sign_in("member")
        first = made.client.cookies["memfs_session"]
        await made.sign_in("admin")
        await made.sign_in("viewer")  # a third session: the one idle longest ends
        made.client.cookies.set("memfs_session", first)
        assert (await made.client.get("/org")).status_code == 303


# -- CSRF ------------------------------------------------------------------------------


async def test_a_form_post_without_or_with_a_wrong_csrf_token_is_403_and_changes_nothing(
    site: Site,
) -> None:
    await site.sign_in("admin")
    url = f"/review/{site.memory.change}"
    for data in [
        {"act": "approve", "path": "new.md"},
        {"act": "approve", "path": "new.md", "csrf": "wrong"},
    ]:
        response = await site.client.post(url, data=data)
        assert response.status_code == 403 and "CSRF" in text_of(response)
    for url, data in [
        ("/org/rules/files/a.md/edit", {"content": "x"}),
        ("/org/rules/files/a.md/forget", {}),
        ("/org/rules/review", {"mode": "none"}),
        ("/logout", {}),
    ]:
        assert (await site.client.post(url, data=data)).status_code == 403
    assert (await site.memory.store.get_change(site.memory.change)).state == "waiting"
    assert await site.memory.store.files(RULES) == {"a.md": b"one\n"}
    assert (await site.client.get("/org")).status_code == 200  # still signed in


# -- Review ------------------------------------------------------------------------------


async def test_a_reviewer_reads_the_diff_approves_one_file_and_rejects_the_other(
    site: Site,
) -> None:
    await site.sign_in("member")
    page = await site.client.get("/review")
    seen = text_of(page)
    assert PROMPT in seen and "new.md" in seen and "b.md" in seen
    assert "<ins>+cut-off 17:00</ins>" in page.text
    url = f"/review/{site.memory.change}"
    approved = await site.decide(url, {"act": "approve", "path": "new.md"})
    assert approved.status_code == 303 and approved.headers["location"] == "/review?done=approved"
    assert (await site.memory.store.files(RULES))["new.md"] == b"cut-off 17:00\n"
    rejected = await site.decide(url, {"act": "reject", "path": "b.md"})
    assert rejected.status_code == 303
    assert "b.md" not in await site.memory.store.files(RULES)
    assert "No change is waiting for review." in text_of(await site.client.get("/review"))
    actions = [
        (e.action, e.actor.id if e.actor else None)
        for e in await site.memory.store.audit(org=ORG)
        if e.action in ("approve", "reject")
    ]
    assert actions == [("approve", "u_member"), ("reject", "u_member")]


async def test_the_review_form_decides_only_the_change_as_its_page_showed_it(site: Site) -> None:
    # The conversation's next turn rewrote new.md after the page was shown:
    # pressing Approve on that page applied bytes the reviewer never saw.
    await site.sign_in("member")
    page = await site.client.get("/review")
    found = re.search(r'name="version" value="([^"]+)"', page.text)
    assert found is not None
    shown = found.group(1)
    await waiting(site.memory.store, RULES, {"new.md": b"never shown\n"})  # same conversation
    url = f"/review/{site.memory.change}"
    approved = await site.post(url, {"act": "approve", "path": "new.md", "version": shown})
    assert approved.status_code == 409 and "Conflict" in text_of(approved)
    assert "new.md" not in await site.memory.store.files(RULES)
    unnamed = await site.post(url, {"act": "approve", "path": "new.md"})
    assert unnamed.status_code == 400  # the page always names what it showed
    assert "new.md" not in await site.memory.store.files(RULES)


def shown_with(page: httpx.Response, action: str) -> dict[str, str]:
    """The hidden fields of the form posting to ``action`` (but the CSRF token), as shown."""
    form = re.search(rf'<form method="post" action="{action}"[^>]*>(.*?)</form>', page.text, re.S)
    assert form is not None, page.text
    hidden = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.group(1))
    return {name: html.unescape(value) for name, value in hidden if name != "csrf"}


async def test_a_forced_approval_never_overwrites_a_live_file_newer_than_the_page_showed(
    site: Site,
) -> None:
    # The page showed new.md stale over bob's live file, and the reviewer
    # ticked "over the newer live file"; carol's write went live before the
    # click. The change itself had not moved, so its version still matched,
    # and the forced approval went over carol's write, which nobody was shown.
    store = site.memory.store
    await store.put(RULES, ChangeSet(created={"new.md": b"bob's\n"}), provenance=Provenance())
    await site.sign_in("member")
    url = f"/review/{site.memory.change}"
    shown = shown_with(await site.client.get("/review"), url)
    await store.put(RULES, ChangeSet(updated={"new.md": b"carol's\n"}), provenance=Provenance())
    forced = {"act": "approve", "path": "new.md", "force": "on"}
    response = await site.post(url, {**shown, **forced})
    assert response.status_code == 409 and "Conflict" in text_of(response)
    assert (await store.files(RULES))["new.md"] == b"carol's\n"
    unnamed = {name: value for name, value in shown.items() if name != "live_version"}
    assert (await site.post(url, {**unnamed, **forced})).status_code == 400  # the page names it
    assert (await store.files(RULES))["new.md"] == b"carol's\n"
    shown = shown_with(await site.client.get("/review"), url)  # carol's write shown now
    assert (await site.post(url, {**shown, **forced})).status_code == 303
    assert (await store.files(RULES))["new.md"] == b"cut-off 17:00\n"


async def test_a_forced_edit_never_overwrites_a_live_file_newer_than_its_form_showed(
    site: Site,
) -> None:
    store = site.memory.store
    await store.put(RULES, ChangeSet(created={"new.md": b"bob's\n"}), provenance=Provenance())
    await site.sign_in("member")
    url = f"/review/{site.memory.change}/edit"
    shown = shown_with(await site.client.get(url, params={"path": "new.md"}), url)
    await store.put(RULES, ChangeSet(updated={"new.md": b"carol's\n"}), provenance=Provenance())
    response = await site.post(url, {**shown, "content": "mine\n", "force": "on"})
    assert response.status_code == 409
    assert (await store.files(RULES))["new.md"] == b"carol's\n"


async def test_the_review_page_shows_each_diff_line_on_a_line_of_its_own(site: Site) -> None:
    # Found in chromium: the rendered diff ran every line into one.
    await site.sign_in("member")
    page = await site.client.get("/review")
    shown = [
        html.unescape(re.sub(r"<[^>]+>", "", block))
        for block in re.findall(r'<pre class="diff">(.*?)</pre>', page.text, re.S)
    ]
    api = await site.client.get(
        f"/api/v1/review/{site.memory.change}",
        headers={"Authorization": f"Bearer {site.memory.tokens['member']}"},
    )
    diffs = [d["diff"] for d in sorted(api.json()["diffs"], key=lambda d: d["path"])]
    assert [line for d in diffs for line in d.splitlines()][:4] == [
        "--- /dev/null",
        "+++ b/b.md",
        "@@ -0,0 +1 @@",
        "+bee",
    ]
    assert [block.splitlines() for block in shown] == [d.splitlines() for d in diffs]


async def test_a_viewer_sees_the_review_without_buttons_and_cannot_decide(site: Site) -> None:
    await site.sign_in("viewer")
    page = await site.client.get("/review")
    assert PROMPT in text_of(page) and 'value="approve"' not in page.text
    response = await site.decide(
        f"/review/{site.memory.change}", {"act": "approve", "path": "new.md"}
    )
    assert response.status_code == 403 and "PermissionDenied" in text_of(response)
    assert (await site.memory.store.get_change(site.memory.change)).state == "waiting"


async def test_the_edit_form_applies_the_reviewers_text_with_line_breaks_as_lf(site: Site) -> None:
    await site.sign_in("member")
    change = site.memory.change
    form = await site.client.get(f"/review/{change}/edit", params={"path": "new.md"})
    assert form.status_code == 200 and ">\ncut-off 17:00\n</textarea>" in form.text
    done = await site.decide(
        f"/review/{change}/edit", {"path": "new.md", "content": "cut-off 16:00\r\nsharp\r\n"}
    )
    assert done.status_code == 303
    assert (await site.memory.store.files(RULES))["new.md"] == b"cut-off 16:00\nsharp\n"


async def test_another_orgs_change_and_bad_paths_are_error_pages(site: Site) -> None:
    await site.sign_in("member")
    other = site.memory.other_change
    assert (
        await site.client.get(f"/review/{other}/edit", params={"path": "y.md"})
    ).status_code == 404
    response = await site.decide(f"/review/{other}", {"act": "approve", "path": "y.md"})
    assert response.status_code == 404
    bad = await site.decide(f"/review/{site.memory.change}", {"act": "approve", "path": "../x"})
    assert bad.status_code == 400 and "InvalidName" in text_of(bad)
    none = await site.decide(f"/review/{site.memory.change}", {"act": "approve"})
    assert none.status_code == 400
    assert (await site.memory.store.get_change(other)).state == "waiting"
    assert (await site.memory.store.get_change(site.memory.change)).state == "waiting"


# -- Org memory --------------------------------------------------------------------------


async def test_a_member_edits_a_file_then_restores_the_earlier_revision(site: Site) -> None:
    await site.sign_in("member")
    page = await site.client.get("/org/rules/files/a.md")
    assert page.status_code == 200 and "one" in text_of(page)
    saved = await site.post("/org/rules/files/a.md/edit", {"content": "two\r\n"})
    assert saved.status_code == 303
    assert (await site.memory.store.files(RULES))["a.md"] == b"two\n"
    page = await site.client.get("/org/rules/files/a.md")
    first = re.findall(r'name="revision" value="([^"]+)"', page.text)
    assert len(first) == 1  # Restore on every earlier revision: here the one before the edit
    restored = await site.post("/org/rules/files/a.md/restore", {"revision": first[0]})
    assert restored.status_code == 303
    assert (await site.memory.store.files(RULES))["a.md"] == b"one\n"
    assert "edited in memfs" in text_of(await site.client.get("/org/rules/files/a.md"))


async def test_a_member_adds_and_forgets_a_file_and_the_forgotten_file_can_be_restored(
    site: Site,
) -> None:
    await site.sign_in("member")
    added = await site.post("/org/rules/files", {"path": "notes/c.md", "content": "see"})
    assert added.status_code == 303 and added.headers["location"].startswith(
        "/org/rules/files/notes/c.md"
    )
    assert (await site.memory.store.files(RULES))["notes/c.md"] == b"see"
    forgot = await site.post("/org/rules/files/notes/c.md/forget", {})
    assert forgot.status_code == 303
    assert "notes/c.md" not in await site.memory.store.files(RULES)
    page = await site.client.get("/org/rules/files/notes/c.md")
    assert "This file is forgotten." in text_of(page)
    (revision,) = re.findall(r'name="revision" value="([^"]+)"', page.text)
    await site.post("/org/rules/files/notes/c.md/restore", {"revision": revision})
    assert (await site.memory.store.files(RULES))["notes/c.md"] == b"see"


@pytest.mark.parametrize("path", ["../x", "a/../../b", "", "x\x00y"])
async def test_adding_a_file_under_a_bad_path_is_400_and_adds_nothing(
    site: Site, path: str
) -> None:
    await site.sign_in("member")
    response = await site.post("/org/rules/files", {"path": path, "content": "x"})
    assert response.status_code == 400
    assert await site.memory.store.files(RULES) == {"a.md": b"one\n"}


async def test_a_viewer_reads_org_memory_but_gets_no_forms_and_403_on_posts(site: Site) -> None:
    await site.sign_in("viewer")
    page = await site.client.get("/org/rules/files/a.md")
    assert page.status_code == 200 and "/edit" not in page.text and "Forget" not in page.text
    assert (await site.post("/org/rules/files/a.md/edit", {"content": "x"})).status_code == 403
    assert (
        await site.post("/org/rules/files", {"path": "c.md", "content": "x"})
    ).status_code == 403
    assert await site.memory.store.files(RULES) == {"a.md": b"one\n"}


async def test_only_an_admin_sets_a_spaces_review(site: Site) -> None:
    await site.sign_in("member")
    assert "Set review" not in (await site.client.get("/org")).text
    assert (await site.post("/org/rules/review", {"mode": "none"})).status_code == 403
    await site.sign_in("admin")
    assert (await site.post("/org/rules/review", {"mode": "after"})).status_code == 303
    assert await site.memory.store.review_mode(RULES) == "after"
    assert (await site.post("/org/rules/review", {"mode": "later"})).status_code == 400
    assert await site.memory.store.review_mode(RULES) == "after"


async def test_a_space_of_the_same_name_in_another_org_is_that_orgs_own(site: Site) -> None:
    await site.sign_in("other")
    assert (await site.client.get("/org/rules/files/a.md")).status_code == 404
    theirs = text_of(await site.client.get("/org/rules"))
    assert "x.md" in theirs and "a.md" not in theirs
    await site.sign_in("member")
    assert (await site.client.get("/org/nowhere")).status_code == 404


async def test_what_people_wrote_is_shown_escaped(site: Site) -> None:
    await site.memory.store.put(
        RULES,
        ChangeSet(created={"x.md": b"<script>alert(1)</script>"}),
        provenance=Provenance(origin="edited"),
    )
    await site.sign_in("member")
    page = await site.client.get("/org/rules/files/x.md")
    assert "<script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


async def test_every_page_loads_only_memfs_own_stylesheet(site: Site) -> None:
    await site.sign_in("admin")
    for url in ["/login", "/review", "/org", "/org/rules", "/org/rules/files/a.md"]:
        page = await site.client.get(url)
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert all(s.startswith(("/", "#")) for s in sources), (url, sources)
    css = await site.client.get("/static/memfs.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert (await site.client.get("/static/..%2Fapp.py")).status_code == 404


async def test_errors_are_pages_outside_the_api_and_problems_inside_it(site: Site) -> None:
    await site.sign_in("member")
    page = await site.client.get("/nowhere")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    api = await site.client.get("/api/v1/nowhere")
    assert api.status_code == 404
    assert api.headers["content-type"].startswith("application/problem+json")
    # The API never takes the browser's cookie: without a Bearer token it is 401.
    assert (await site.client.get("/api/v1/me")).status_code == 401


@pytest.mark.error_log(r"GET /map failed")
async def test_an_unexpected_failure_on_a_page_is_a_500_page_that_names_nothing_of_it(
    tmp_path: Path,
) -> None:
    store = new_store("memory", tmp_path)
    memory = await org_memory(store)
    secret = "RuntimeError at /var/lib/memfs/people/u_dana/me.db"
    faulty = FaultyStore(store, fail={"live_origins": RuntimeError(secret)})
    transport = httpx.ASGITransport(app=web_app(faulty), client=("192.0.2.10", 4711))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        site = Site(memory, client, Clock())
        await site.sign_in("member")
        page = await client.get("/map")
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "u_dana" not in page.text and "RuntimeError" not in page.text
    assert "server's log" in text_of(page)
    assert page.headers["cache-control"] == "no-store"
    assert "default-src 'none'" in page.headers["content-security-policy"]
    await store.aclose()


async def test_an_added_file_whose_form_name_is_not_utf8_is_refused_not_renamed(
    site: Site,
) -> None:
    # ec085c6 refuses a request *path* whose %-escapes are not UTF-8 (the API
    # stored a%FF.md as a\ufffd.md); the page "Add" takes the name from the
    # form body, which Starlette decodes with replacement the same way, so the
    # file is stored under a name nobody sent and the answer says "added".
    await site.sign_in("member")
    body = f"csrf={await site.csrf()}&path=a%FF.md&content=x"
    response = await site.client.post(
        "/org/rules/files",
        content=body.encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    renamed = [path for path in await site.memory.store.files(RULES) if "\ufffd" in path]
    assert not renamed, f"{response.status_code}: stored as {renamed}"
    assert response.status_code == 400, response.status_code


async def test_the_review_page_decides_a_change_whose_turn_also_made_a_folder(
    site: Site,
) -> None:
    # A turn under review `person` wrote notes/a.md and made the empty folder
    # drafts/: its change holds both, and its version covers the folder. The
    # page shows a checkbox per file only, so "Approve" with every box ticked
    # applies the file and leaves drafts/ waiting, a change with no files the
    # page then offers nothing to tick for ("tick at least one file" is all a
    # post gets): the reviewer cannot decide it from the Review page at all.
    store = site.memory.store
    loaded = await store.load(RULES, "s9")
    stored = await store.store(
        RULES,
        ChangeSet(created={"notes/a.md": b"x\n"}, folders_created=("drafts",)),
        cursor=loaded.cursor,
        provenance=Provenance(session="s9", turn="t1", prompt="p"),
        review="person",
    )
    assert stored.change is not None
    await site.sign_in("member")
    page = await site.client.get("/review")
    shown = re.search(
        rf'action="/review/{stored.change}".*?name="version" value="([^"]+)"(.*?)</form>',
        page.text,
        re.S,
    )
    assert shown is not None, page.text
    ticked = re.findall(r'name="path" value="([^"]+)"', shown.group(2))
    response = await site.post(
        f"/review/{stored.change}", {"act": "approve", "path": ticked, "version": shown.group(1)}
    )
    assert response.status_code == 303, response.text
    change = await store.get_change(stored.change)
    assert change.state == "approved", f"left {change.state} with {change.folders}"
