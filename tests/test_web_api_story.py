"""The story endpoints of /api/v1 over httpx's ASGI transport: session story, carried, Life,
usage and inbox, through the whole role matrix and bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.core.names import MAX_SEGMENT_BYTES
from memfs.core.story import MAX_STORY_PAGE, MAX_USAGE_DAYS
from memfs.stores.base import ReviewingStore
from memfs.web.app import web_app
from tests.story_world import ORG, Story, long_session, story_world
from tests.test_web_api import assert_problem
from tests.web_world import add_people, new_store


@dataclass
class World:
    store: ReviewingStore
    client: httpx.AsyncClient
    tokens: dict[str, str]
    story: Story

    async def get(self, url: str, who: str | None, **kw: Any) -> httpx.Response:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
        return await self.client.get(url, headers=headers, **kw)

    async def post(self, url: str, who: str | None, **kw: Any) -> httpx.Response:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
        return await self.client.post(url, headers=headers, **kw)


@pytest.fixture(params=["memory", "sqlite"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    store = new_store(request.param, tmp_path)
    story = await story_world(store)
    tokens = await add_people(store)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=web_app(store)), base_url="http://memfs"
    ) as client:
        yield World(store, client, tokens, story)
    await store.aclose()


async def looks(store: ReviewingStore) -> list[tuple[str, str | None]]:
    return [(e.action, e.target) for e in await store.audit(org=ORG) if e.action == "open"]


READS = [
    "/api/v1/sessions/s1",
    "/api/v1/turns/t2/carried",
    "/api/v1/turns/t1/carried?session=s1",
    "/api/v1/files/life?space=rules&path=a.md",
    "/api/v1/spaces/rules/usage",
    "/api/v1/inbox",
]


@pytest.mark.parametrize("url", READS)
async def test_every_story_read_is_for_viewers_and_up_and_401_without_a_live_token(
    world: World, url: str
) -> None:
    for who in ("viewer", "member", "admin"):
        response = await world.get(url, who)
        assert response.status_code == 200, (who, response.text)
    for nobody in (None, "revoked"):
        problem = assert_problem(await world.get(url, nobody), 401, "NoIdentity")
        assert problem["detail"]
    assert await looks(world.store) == []


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/sessions/s1",
        "/api/v1/turns/t2/carried",
        "/api/v1/turns/t1/carried?session=s1",
        "/api/v1/files/life?space=rules&path=a.md",
    ],
)
async def test_another_orgs_admin_gets_404_for_this_orgs_story(world: World, url: str) -> None:
    assert_problem(await world.get(url, "other"), 404, "NotFound")


async def test_another_org_sees_only_its_own_usage_and_inbox(world: World) -> None:
    usage = (await world.get("/api/v1/spaces/rules/usage", "other")).json()
    assert [f["path"] for f in usage["files"]] == ["x.md"]
    inbox = (await world.get("/api/v1/inbox", "other")).json()
    assert inbox == {"changes": [], "no_room": []}


async def test_usage_over_max_usage_days_is_200_and_one_day_more_is_400(world: World) -> None:
    url = "/api/v1/spaces/rules/usage"
    widest = await world.get(f"{url}?days={MAX_USAGE_DAYS}", "viewer")
    assert widest.status_code == 200, widest.text
    assert widest.json()["days"] == MAX_USAGE_DAYS
    assert (await world.get(f"{url}?days=1", "viewer")).json()["days"] == 1
    assert_problem(await world.get(f"{url}?days={MAX_USAGE_DAYS + 1}", "viewer"), 400, "BadRequest")


async def test_the_session_story_hides_a_persons_memory_from_non_admins(world: World) -> None:
    story = (await world.get("/api/v1/sessions/s1", "viewer")).json()
    first, second = story["turns"]
    rules, me = first["mounts"]
    assert (rules["opened"], rules["carried"], rules["cursor"] is not None) == (["a.md"], 3, True)
    assert me["user"] is None and me["closed"] and me["opened"] == [] and me["saved"] == []
    assert me["saved_count"] == 1
    assert second["mounts"][0]["change"] == world.story.change
    assert second["mounts"][0]["status"] == "waiting"
    admin = (await world.get("/api/v1/sessions/s1", "admin")).json()
    assert admin["turns"][0]["mounts"][1]["user"] == "u_dana"
    assert admin["turns"][0]["mounts"][1]["saved"] == []
    assert "p.md" not in (await world.get("/api/v1/sessions/s1", "admin")).text


async def test_carried_shows_the_space_as_of_the_turn_and_a_persons_files_only_opened(
    world: World,
) -> None:
    carried = (await world.get("/api/v1/turns/t1/carried?session=s1", "admin")).json()
    rules, me = carried["mounts"]
    assert {f["path"]: f["revision"] for f in rules["files"]} == world.story.carried_t1
    assert [f["path"] for f in rules["files"] if f["opened"]] == ["a.md"]
    assert (me["closed"], me["files"], me["count"]) == (True, [], 1)
    url = "/api/v1/turns/t1/carried/open?session=s1"
    for who in ("viewer", "member"):
        assert_problem(await world.post(url, who), 403, "PermissionDenied")
    assert_problem(await world.post(url, None), 401, "NoIdentity")
    assert_problem(await world.post(url, "other"), 404, "NotFound")
    assert await looks(world.store) == []
    opened = (await world.post(url, "admin")).json()
    me = opened["mounts"][1]
    assert (me["closed"], me["user"]) == (False, "u_dana")
    assert [f["path"] for f in me["files"]] == ["q.md"]
    assert await looks(world.store) == [("open", "u_dana")]


async def test_life_answers_days_last_open_and_timeline(world: World) -> None:
    life = (await world.get("/api/v1/files/life?space=rules&path=a.md", "viewer")).json()
    assert (life["carried_turns"], life["opened_turns"]) == (3, 2)
    assert (life["last_session"], life["last_turn"]) == ("s1", "t2")
    assert [d["opened"] for d in life["days"]] == [1, 1]
    assert [e["kind"] for e in life["timeline"]] == ["revision", "opened", "opened", "revision"]


@pytest.mark.parametrize(
    ("url", "status", "error"),
    [
        ("/api/v1/sessions/%2E%2E", 400, "InvalidName"),
        ("/api/v1/sessions/%2E", 400, "InvalidName"),
        ("/api/v1/sessions/" + "a" * 300, 400, "NameTooLong"),
        ("/api/v1/sessions/nobody", 404, "NotFound"),
        ("/api/v1/sessions/x1", 404, "NotFound"),  # another org's session
        ("/api/v1/turns/%2E%2E/carried", 400, "InvalidName"),
        ("/api/v1/turns/t1/carried?session=..", 400, "InvalidName"),
        ("/api/v1/turns/t1/carried", 400, "BadRequest"),  # t1 is in s1 and in s2
        ("/api/v1/turns/t9/carried", 404, "NotFound"),
        ("/api/v1/turns/t2/carried?session=s2", 404, "NotFound"),
        ("/api/v1/files/life?space=..&path=a.md", 400, "InvalidName"),
        ("/api/v1/files/life?space=rules&path=../a.md", 400, "InvalidName"),
        ("/api/v1/files/life?space=rules&path=a.md/", 400, "InvalidName"),
        ("/api/v1/files/life?space=rules", 400, "BadRequest"),
        ("/api/v1/files/life?space=rules&path=none.md", 404, "NotFound"),
        ("/api/v1/spaces/nope/usage", 404, "NotFound"),
        ("/api/v1/spaces/%2E%2E/usage", 400, "InvalidName"),
        ("/api/v1/spaces/rules/usage?days=0", 400, "BadRequest"),
        ("/api/v1/spaces/rules/usage?days=367", 400, "BadRequest"),
        ("/api/v1/spaces/rules/usage?days=x", 400, "BadRequest"),
    ],
)
async def test_bad_story_input_is_a_problem_with_the_right_status_and_changes_nothing(
    world: World, url: str, status: int, error: str
) -> None:
    before = await world.store.audit()
    assert_problem(await world.get(url, "admin"), status, error)
    assert await world.store.audit() == before


async def test_the_inbox_lists_waiting_changes_and_no_room_in_the_note(world: World) -> None:
    inbox = (await world.get("/api/v1/inbox", "viewer")).json()
    assert [c["id"] for c in inbox["changes"]] == [world.story.change]
    assert inbox["changes"][0]["prompt"] == "remember the cut-off"
    assert inbox["no_room"] == []  # three small files fit
    big = SpaceRef(layer="org", space="big", org=ORG)
    many = {f"f{i:04}.md": b"x" for i in range(400)}
    await world.store.put(big, ChangeSet(created=many), provenance=Provenance())
    [crowded] = (await world.get("/api/v1/inbox", "viewer")).json()["no_room"]
    assert (crowded["space"], crowded["files"], crowded["budget"]) == ("big", 400, 8_000)
    assert crowded["left_out"] > 0 and crowded["bytes"] > 8_000


async def test_the_story_endpoints_are_in_the_openapi_document(world: World) -> None:
    doc = (await world.client.get("/api/v1/openapi.json")).json()
    assert {
        "/api/v1/sessions/{session}",
        "/api/v1/turns/{turn}/carried",
        "/api/v1/turns/{turn}/carried/open",
        "/api/v1/files/life",
        "/api/v1/spaces/{space}/usage",
        "/api/v1/inbox",
    } <= set(doc["paths"])
    assert {"SessionStory", "Carried", "FileLife", "SpaceUsage", "InboxView"} <= set(
        doc["components"]["schemas"]
    )


async def test_a_story_page_of_max_story_page_turns_is_read_and_past_it_or_its_before_is_400(
    world: World,
) -> None:
    ids = await long_session(world.store, "long", 3)
    at = await world.get("/api/v1/sessions/long", "viewer", params={"limit": MAX_STORY_PAGE})
    assert at.status_code == 200, at.text
    assert [t["turn"] for t in at.json()["turns"]] == ids and at.json()["earlier"] is None
    some = (await world.get("/api/v1/sessions/long", "viewer", params={"limit": 2})).json()
    assert ([t["turn"] for t in some["turns"]], some["earlier"]) == (ids[1:], ids[1])
    for params in (
        {"limit": MAX_STORY_PAGE + 1},
        {"limit": 0},
        {"before": "x" * (MAX_SEGMENT_BYTES + 1)},
        {"before": "x" * MAX_SEGMENT_BYTES},  # no turn of this session
    ):
        past = await world.get("/api/v1/sessions/long", "viewer", params=params)
        assert_problem(past, 400, "BadRequest")
