"""Hostile tests of the Memory tab and its API: each pins a promise an attack broke.

Each test is named for the behaviour it should have and says, in a comment,
what the attack is. They fail on the code they were written against.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from memfs.core.members import Member
from memfs.core.models import SpaceRef, Trace, TraceFile, now
from memfs.core.signin import SigninLimits
from memfs.stores.base import ReviewingStore
from memfs.web.app import web_app
from tests.story_world import _mount
from tests.test_web_pages import BASE, Clock, Site
from tests.web_world import RULES, new_store, org_memory

BAD = "memfs_" + "Z" * 43  # shaped like a token, resolves to nobody
TRIES = 30
LIMITS = SigninLimits(signin_failures=3, signin_window_seconds=300)
# A persistent dir's ref, as memfs.core.policy.resolve_ref makes it: no org of its own.
NOTES = SpaceRef(layer="dir", space="notes")


async def _site(kind: str, tmp_path: Path, **app_kw: object) -> AsyncIterator[Site]:
    store = new_store(kind, tmp_path)
    memory = await org_memory(store)
    app = web_app(store, clock=Clock(), **app_kw)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 4711))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield Site(memory, client, Clock())
    await store.aclose()


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    async for made in _site("memory", tmp_path):
        yield made


@pytest.fixture
async def throttled(tmp_path: Path) -> AsyncIterator[Site]:
    # SQLite: every store call is a thread hop, as on a real deployment.
    async for made in _site("sqlite", tmp_path, signin=LIMITS):
        yield made


async def tokens_looked_at(store: ReviewingStore) -> int:
    """How many bad tokens the store was asked about: each is audited ``sign-in-failed``."""
    return sum(1 for e in await store.audit() if e.action == "sign-in-failed")


# -- the sign-in throttle ---------------------------------------------------------------


async def test_concurrent_bad_bearer_tokens_past_the_throttle_are_not_looked_at(
    throttled: Site,
) -> None:
    # Attack: guess tokens through /api/v1 with many requests in flight at once.
    # memfs.web.api.member asks throttle.check, then awaits resolve_token and
    # record_signin before throttle.failed counts the failure, so every request
    # already in flight passes the check: 30 tokens are looked at, not 3.
    statuses: list[int] = []

    async def guess() -> None:
        answer = await throttled.client.get(
            "/api/v1/me", headers={"Authorization": f"Bearer {BAD}"}
        )
        statuses.append(answer.status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(TRIES):
            nursery.start_soon(guess)
    assert await tokens_looked_at(throttled.memory.store) <= LIMITS.signin_failures
    assert statuses.count(429) >= TRIES - LIMITS.signin_failures, sorted(statuses)


async def test_concurrent_login_tries_past_the_throttle_are_not_looked_at(
    throttled: Site,
) -> None:
    # Attack: the same at /login. memfs.web.pages.signin.login checks the
    # throttle, then awaits the form, resolve_token and record_signin before
    # throttle.failed: tries sent together are all looked at.
    transport = throttled.client._transport  # the same app, one client address
    statuses: list[int] = []

    async def guess() -> None:
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as browser:
            form = await browser.get("/login")
            secret = re.search(r'name="login" value="([^"]+)"', form.text)
            assert secret is not None
            answer = await browser.post("/login", data={"token": BAD, "login": secret.group(1)})
            statuses.append(answer.status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(TRIES):
            nursery.start_soon(guess)
    assert await tokens_looked_at(throttled.memory.store) <= LIMITS.signin_failures
    assert statuses.count(429) >= TRIES - LIMITS.signin_failures, sorted(statuses)


# -- form names that are not UTF-8 ---------------------------------------------------------


def renamed(files: dict[str, bytes]) -> list[str]:
    return [path for path in files if path not in ("a.md",)]


@pytest.mark.parametrize(
    "content_type",
    ["Application/X-WWW-Form-Urlencoded", " application/x-www-form-urlencoded"],
)
async def test_a_form_name_that_is_not_utf8_is_refused_however_its_content_type_is_spelled(
    site: Site, content_type: str
) -> None:
    # Attack: the fix of test_an_added_file_whose_form_name_is_not_utf8_is_refused_not_renamed
    # (memfs.web.pages.common.form_of) checks the body only when the content type
    # starts with "application/x-www-form-urlencoded" exactly; Starlette parses a
    # media type case-insensitively (and with a leading space), so "a%FF.md" is
    # still stored as "a\ufffd.md", a name nobody sent, and answered "added".
    await site.sign_in("member")
    body = f"csrf={await site.csrf()}&path=a%FF.md&content=x"
    response = await site.client.post(
        "/org/rules/files", content=body.encode(), headers={"content-type": content_type}
    )
    assert renamed(await site.memory.store.files(RULES)) == []
    assert response.status_code == 400, response.status_code


async def test_a_multipart_form_name_that_is_not_utf8_is_refused_not_renamed(site: Site) -> None:
    # Attack: post the same form as multipart/form-data. form_of checks UTF-8
    # only for urlencoded bodies; Starlette's multipart parser decodes a part
    # that is not UTF-8 as latin-1, so the bytes b"a\xff.md" are stored as the
    # file "aÿ.md", a name nobody sent.
    await site.sign_in("member")
    csrf = await site.csrf()
    response = await site.client.post(
        "/org/rules/files",
        files={"csrf": (None, csrf), "path": (None, b"a\xff.md"), "content": (None, b"x")},
    )
    assert renamed(await site.memory.store.files(RULES)) == []
    assert response.status_code == 400, response.status_code


async def test_a_form_name_sent_as_raw_utf8_bytes_is_refused_not_read_as_latin1(
    site: Site,
) -> None:
    # Attack: send the name's bytes unescaped. They are UTF-8, so the %-escape
    # check passes, but Starlette's urlencoded parser reads raw bytes as
    # latin-1: "é.md" would be stored as "Ã©.md", a name nobody sent.
    await site.sign_in("member")
    body = f"csrf={await site.csrf()}&path=é.md&content=x"
    response = await site.client.post(
        "/org/rules/files",
        content=body.encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert renamed(await site.memory.store.files(RULES)) == []
    assert response.status_code == 400, response.status_code


# -- traces of turns that mounted a persistent dir ------------------------------------------


async def test_another_orgs_turn_that_mounted_only_a_persistent_dir_is_not_the_default_orgs(
    tmp_path: Path,
) -> None:
    # Attack: a viewer of the org "default" (the org id every CLI command and
    # spec falls back to) reads the session story of bank_99's turn. A
    # persistent dir's ref carries no org of its own (memfs.core.policy.resolve_ref
    # gives it DEFAULT_ORG), and memfs.core.story.trace_org names a trace's org
    # from its mounts' refs, so a turn of any org that mounted only a persistent
    # dir is "default"'s: its prompt and the files it opened are shown to them.
    store = new_store("sqlite", tmp_path)
    await org_memory(store)
    await store.record_trace(
        Trace(
            session="x9",
            turn="t1",
            prompt="bank_99's secret plan",
            at=now(),
            mounts={"notes": _mount(NOTES, None)},
            files={"notes/plan.md": TraceFile(opened=True)},
        )
    )
    await store.add_member(Member(id="u_dee", org="default", role="viewer"), by=None)
    token = (await store.create_token("u_dee", "default", by=None)).token
    transport = httpx.ASGITransport(app=web_app(store))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        answer = await client.get(
            "/api/v1/sessions/x9", headers={"Authorization": f"Bearer {token}"}
        )
    await store.aclose()
    assert "secret plan" not in answer.text and "plan.md" not in answer.text
    assert answer.status_code == 404, answer.text


async def test_a_turn_that_mounted_an_org_space_and_a_persistent_dir_has_its_story(
    tmp_path: Path,
) -> None:
    # Not an attack, found on the way: the same trace_org makes a bank_17 turn
    # that mounted its org space and a persistent dir belong to no org (two
    # orgs among its mounts), so its session story is 404 to bank_17 while the
    # Life of the file it opened counts it and links to that story.
    store = new_store("sqlite", tmp_path)
    memory = await org_memory(store)
    loaded = await store.load(RULES, "sd")
    await store.record_trace(
        Trace(
            session="sd",
            turn="t1",
            prompt="a turn with notes",
            at=now(),
            mounts={"rules": _mount(RULES, loaded.cursor), "notes": _mount(NOTES, None)},
            files={"rules/a.md": TraceFile(opened=True), "notes/n.md": TraceFile(opened=True)},
        )
    )
    headers = {"Authorization": f"Bearer {memory.tokens['viewer']}"}
    transport = httpx.ASGITransport(app=web_app(store))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        life = await client.get("/api/v1/files/life?space=rules&path=a.md", headers=headers)
        story = await client.get("/api/v1/sessions/sd", headers=headers)
    await store.aclose()
    assert life.json()["last_session"] == "sd"
    assert story.status_code == 200, story.text
