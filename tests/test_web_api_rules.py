"""The Memory tab's API: every look audited, nothing it does not know taken, no forgotten words.

Every test drives ``web_app`` over httpx's ASGI transport, as a signed-in
person with a bearer token of bank_17 (tests/web_world.py's people), over
the memory and SQLite stores, and pins a rule docs/web.md or docs/daemon.md
states (a hostile review found each broken):

- an admin's ``carried/open`` records an ``open`` entry per person's mount,
  even when the store cannot answer for the turn's cursor (``known: false``)
  and the person's file names come from the trace alone;
- an unknown query parameter is a 400 ``BadRequest``, so ``?user=`` on an
  org file's route cannot quietly act on the org file instead;
- forgetting a person takes their words (the prompts they typed, their
  label) out of what the tab shows, over the memory store as over SQLite.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from memfs.core.members import Member
from memfs.core.models import By, ChangeSet, Provenance, SpaceRef, Trace, TraceFile, TraceMount
from memfs.stores.base import ReviewingStore
from memfs.web.app import web_app
from tests.web_world import ORG, new_store

RULES = SpaceRef(layer="org", space="rules", org=ORG)
DANA_ME = SpaceRef(layer="user", space="me", org=ORG, user="u_dana")
WORDS = "DANA-typed-this-prompt"
LABEL = "Dana Quokka"


def _mount(ref: SpaceRef, cursor: str | None, **kw: object) -> TraceMount:
    return TraceMount.model_validate(
        {"ref": ref, "read_only": False, "from_last_known_copy": False, "status": "saved"}
        | {"cursor": cursor, "snapshot": {}}
        | kw
    )


class Tab:
    def __init__(self, store: ReviewingStore, client: httpx.AsyncClient, tokens: dict[str, str]):
        self.store = store
        self.client = client
        self.tokens = tokens

    async def call(self, who: str, method: str, url: str, **kw: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return await self.client.request(method, url, headers=headers, **kw)  # type: ignore[arg-type]

    async def opens(self) -> list[tuple[str | None, str | None]]:
        return [(e.space, e.target) for e in await self.store.audit(org=ORG) if e.action == "open"]


async def _tab(store: ReviewingStore) -> AsyncIterator[Tab]:
    await store.put(RULES, ChangeSet(created={"a.md": b"one\n"}), provenance=Provenance())
    await store.put(DANA_ME, ChangeSet(created={"diary.md": b"private"}), provenance=Provenance())
    tokens = {}
    for who in ("viewer", "member", "admin"):
        await store.add_member(Member(id=f"u_{who}", org=ORG, role=who), by=None)
        tokens[who] = (await store.create_token(f"u_{who}", ORG, by=None)).token
    app = web_app(store)
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 4711))
    async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
        yield Tab(store, client, tokens)
    await store.aclose()


@pytest.fixture(params=["memory", "sqlite"])
async def tab(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Tab]:
    async for made in _tab(new_store(request.param, tmp_path)):
        yield made


# -- the audit: every look inside a person is recorded ---------------------------------


async def test_opening_a_turns_person_mount_is_audited_even_when_its_cursor_is_unknown(
    tab: Tab,
) -> None:
    # A turn over Dana's memory whose cursor the store cannot answer for (a
    # restored backup, a cursor of another store): docs/web.md's ``known: false``.
    await tab.store.record_trace(
        Trace(
            session="s9",
            turn="t9",
            prompt=None,
            mounts={"me": _mount(DANA_ME, "999999", snapshot={"diary.md": "2"})},
            files={"me/diary.md": TraceFile(opened=True)},
        )
    )
    opened = await tab.call("admin", "POST", "/api/v1/turns/t9/carried/open?session=s9")
    assert opened.status_code == 200, opened.text
    [mount] = opened.json()["mounts"]
    shown = [f["path"] for f in mount["files"]]
    # The admin is shown Dana's file names (from the trace), so the look must be on record.
    assert shown == ["diary.md"] and mount["closed"] is False
    assert await tab.opens() == [("me", "u_dana")]


# -- the API refuses what it does not know ---------------------------------------------


async def test_an_unknown_query_parameter_is_400_and_a_user_on_an_org_file_forgets_nothing(
    tab: Tab,
) -> None:
    # docs/web.md, Errors: 400 BadRequest for "a missing or unknown field or query
    # parameter". Someone who means Dana's a.md must not forget the org's instead.
    answer = await tab.call("admin", "DELETE", "/api/v1/spaces/rules/files/a.md?user=u_dana")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "BadRequest"
    assert await tab.store.files(RULES) == {"a.md": b"one\n"}


# -- forgetting a person takes their words out of the tab ------------------------------


async def test_a_forgotten_authors_prompt_leaves_the_session_story_on_every_store(
    tab: Tab,
) -> None:
    # A turn over org memory only, typed by Dana (the trace's author): docs/daemon.md,
    # "A person's memory is sealed": forgetting any one of the people the prompt
    # belongs to (its author among them) destroys it. SQLite did; memory:// kept it.
    loaded = await tab.store.load(RULES, "s5")
    await tab.store.record_trace(
        Trace(
            session="s5",
            turn="t5",
            prompt=WORDS,
            author="u_dana",
            mounts={"rules": _mount(RULES, loaded.cursor)},
            files={"rules/a.md": TraceFile(opened=True)},
        )
    )
    before = await tab.call("viewer", "GET", "/api/v1/sessions/s5")
    assert before.json()["turns"][0]["prompt"] == WORDS
    assert (await tab.call("admin", "DELETE", "/api/v1/people/u_dana")).status_code == 200

    after = await tab.call("viewer", "GET", "/api/v1/sessions/s5")
    assert after.status_code == 200
    assert WORDS not in after.text
    life = await tab.call("viewer", "GET", "/api/v1/files/life?space=rules&path=a.md")
    assert WORDS not in life.text


async def test_a_forgotten_persons_words_leave_their_waiting_change_on_every_store(
    tab: Tab,
) -> None:
    # docs/daemon.md: their words in org memory (prompt, ``by`` label) of every change
    # of theirs waiting for review go when they are forgotten, and the change then
    # reads with no prompt and no label (tests/test_store_words.py pins it per store).
    loaded = await tab.store.load(RULES, "s1")
    held = await tab.store.store(
        RULES,
        ChangeSet(created={"new.md": b"cut-off 17:00\n"}),
        cursor=loaded.cursor,
        provenance=Provenance(
            session="s1", turn="t1", prompt=WORDS, person="u_dana", by=By(id="u_dana", label=LABEL)
        ),
        review="person",
    )
    assert held.change is not None
    assert WORDS in (await tab.call("viewer", "GET", "/api/v1/review")).text
    assert (await tab.call("admin", "DELETE", "/api/v1/people/u_dana")).status_code == 200

    for url in ("/api/v1/review", f"/api/v1/review/{held.change}", "/api/v1/inbox"):
        answer = await tab.call("viewer", "GET", url)
        assert answer.status_code == 200, answer.text
        assert WORDS not in answer.text and LABEL not in answer.text, url
