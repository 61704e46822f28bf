"""The Memory tab's JSON API over httpx's ASGI transport: sign-in, the role matrix, bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.core.audit import AUDIT_PAGE, MAX_AUDIT_PAGE
from memfs.core.members import Member
from memfs.core.models import By
from memfs.core.names import MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MAX_SPACE_NAME_CHARS
from memfs.core.signin import MAX_CLIENT_KEY, SigninLimits
from memfs.stores.base import ManagedStore, ReviewingStore
from memfs.stores.memory import MemoryStore
from memfs.testing import FaultyStore
from memfs.web.api import MAX_ENTRY_ID_CHARS
from memfs.web.app import web_app
from tests.web_world import DANA_ME, ORG, RULES, new_store, org_memory

LIMIT = 64 * 1024


@dataclass
class World:
    store: ReviewingStore
    client: httpx.AsyncClient
    tokens: dict[str, str]  # viewer, member, admin, revoked, other (another org's admin)
    change: str
    other_change: str

    def auth(self, who: str | None) -> dict[str, str]:
        return {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}

    async def call(
        self, method: str, url: str, who: str | None, body: Any = None, **kw: Any
    ) -> httpx.Response:
        if body is not None:
            kw["json"] = body
        return await self.client.request(method, url, headers=self.auth(who), **kw)


@pytest.fixture(params=["memory", "sqlite"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    made = await org_memory(new_store(request.param, tmp_path))
    store, tokens, change, other_change = made.store, made.tokens, made.change, made.other_change
    # The role matrix sends a revoked token to every endpoint from one address:
    # the sign-in throttle (tested on its own below) must not stop it halfway.
    app = web_app(store, max_body_bytes=LIMIT, signin=SigninLimits(signin_failures=1000))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://memfs"
    ) as client:
        yield World(store, client, tokens, change, other_change)
    await store.aclose()


async def audit_actions(store: ReviewingStore) -> list[tuple[str, str | None]]:
    return [
        (e.action, e.actor.id if e.actor else None)
        for e in await store.audit(org=ORG)
        if e.action not in ("add-member", "create-token", "revoke-tokens")
    ]


def assert_problem(response: httpx.Response, status: int, error: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["error"] == error and body["title"] == error
    assert body["type"] and body["detail"]
    return body


# -- sign-in --------------------------------------------------------------------


async def test_me_answers_who_the_token_signs_in_as_from_the_store(world: World) -> None:
    response = await world.call("GET", "/api/v1/me", "member")
    assert response.status_code == 200
    assert response.json() == {"id": "u_member", "org": ORG, "role": "member", "label": None}


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Basic dTpw", "Bearer not-a-token", "Bearer memfs_" + "A" * 43],
)
async def test_no_or_unknown_token_is_401_with_www_authenticate_bearer(
    world: World, header: str | None
) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = await world.client.get("/api/v1/me", headers=headers)
    assert_problem(response, 401, "NoIdentity")
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_revoked_token_is_401_at_once(world: World) -> None:
    assert_problem(await world.call("GET", "/api/v1/spaces", "revoked"), 401, "NoIdentity")
    assert (await world.call("GET", "/api/v1/me", "member")).status_code == 200
    await world.store.revoke_tokens("u_member", ORG, by=None)
    assert_problem(await world.call("GET", "/api/v1/me", "member"), 401, "NoIdentity")


async def test_a_role_changed_or_member_removed_applies_to_the_next_request(world: World) -> None:
    put = ("PUT", "/api/v1/spaces/rules/files/c.md", "member", {"content": "c"})
    await world.store.add_member(Member(id="u_member", org=ORG, role="viewer"), by=None)
    assert_problem(await world.call(*put), 403, "PermissionDenied")
    await world.store.remove_member("u_member", ORG, by=None)
    assert_problem(await world.call(*put), 401, "NoIdentity")
    assert "c.md" not in await world.store.files(RULES)


# -- the role matrix ---------------------------------------------------------------

# (method, url, body, the least role allowed); the urls name this org's things.
READ, MEMBER, ADMIN = "viewer", "member", "admin"
RANK = {"viewer": 0, "member": 1, "admin": 2}


def endpoints(change: str) -> list[tuple[str, str, Any, str]]:
    return [
        ("GET", "/api/v1/me", None, READ),
        ("GET", "/api/v1/spaces", None, READ),
        ("GET", "/api/v1/spaces/rules/files", None, READ),
        ("GET", "/api/v1/spaces/rules/files/a.md", None, READ),
        ("GET", "/api/v1/review", None, READ),
        ("GET", f"/api/v1/review/{change}", None, READ),
        ("PUT", "/api/v1/spaces/rules/files/c.md", {"content": "see"}, MEMBER),
        ("DELETE", "/api/v1/spaces/rules/files/a.md", None, MEMBER),
        ("POST", f"/api/v1/review/{change}/approve", {"paths": ["new.md"]}, MEMBER),
        ("POST", f"/api/v1/review/{change}/reject", {"paths": ["b.md"]}, MEMBER),
        ("PUT", "/api/v1/spaces/rules/review", {"mode": "after"}, ADMIN),
        ("GET", "/api/v1/people", None, ADMIN),
        ("POST", "/api/v1/people/u_dana/open", None, ADMIN),
        ("GET", "/api/v1/audit", None, ADMIN),
        ("DELETE", "/api/v1/people/u_dana/files/me/p.md", None, ADMIN),
        ("DELETE", "/api/v1/people/u_dana", None, ADMIN),
    ]


@pytest.mark.parametrize("who", ["viewer", "member", "admin"])
async def test_role_matrix_each_role_may_exactly_what_acting_allows(world: World, who: str) -> None:
    for method, url, body, least in endpoints(world.change):
        response = await world.call(method, url, who, body)
        if RANK[who] >= RANK[least]:
            assert response.status_code == 200, (method, url, response.text)
        else:
            assert_problem(response, 403, "PermissionDenied")


@pytest.mark.parametrize("who", [None, "revoked"])
async def test_role_matrix_no_token_or_revoked_is_401_everywhere_and_nothing_changes(
    world: World, who: str | None
) -> None:
    before = await world.store.files(RULES)
    for method, url, body, _ in endpoints(world.change):
        assert_problem(await world.call(method, url, who, body), 401, "NoIdentity")
    assert await world.store.files(RULES) == before
    assert (await world.store.get_change(world.change)).state == "waiting"
    assert await audit_actions(world.store) == []


async def test_another_orgs_admin_sees_404_like_missing_and_changes_nothing(world: World) -> None:
    missing = "0" * len(world.change)
    for suffix, method, body in [
        ("", "GET", None),
        ("/approve", "POST", None),
        ("/reject", "POST", None),
        ("/edit", "POST", {"path": "new.md", "content": "x"}),
    ]:
        foreign = await world.call(method, f"/api/v1/review/{world.change}{suffix}", "other", body)
        absent = await world.call(method, f"/api/v1/review/{missing}{suffix}", "other", body)
        # The same body but for the id the caller sent, echoed back.
        said = assert_problem(foreign, 404, "NotFound")
        said["detail"] = said["detail"].replace(world.change, missing)
        assert said == assert_problem(absent, 404, "NotFound")
    for url in ["/api/v1/spaces/rules/files/a.md", "/api/v1/spaces/nothing/files/a.md"]:
        assert_problem(await world.call("GET", url, "other"), 404, "NotFound")
    # Their own org's space of the same name holds only their file.
    listed = await world.call("GET", "/api/v1/spaces/rules/files", "other")
    assert [f["path"] for f in listed.json()["files"]] == ["x.md"]
    assert (await world.call("GET", "/api/v1/review", "other")).json()["changes"][0]["id"] == (
        world.other_change
    )
    assert (await world.call("GET", "/api/v1/people", "other")).json() == []
    assert_problem(
        await world.call("DELETE", "/api/v1/spaces/rules/files/a.md", "other"), 404, "NotFound"
    )
    assert (await world.store.get_change(world.change)).state == "waiting"
    assert await world.store.files(RULES) == {"a.md": b"one\n"}
    assert await audit_actions(world.store) == []


# -- what each endpoint answers ---------------------------------------------------------


async def test_spaces_lists_review_mode_counts_note_use_and_anonymous_bays(world: World) -> None:
    await world.store.set_review(RULES, "person", by=None)
    body = (await world.call("GET", "/api/v1/spaces", "viewer")).json()
    assert body["org"] == ORG
    [rules] = body["spaces"]
    assert rules["space"] == "rules" and rules["review"] == "person"
    assert rules["files"] == 1 and rules["bytes"] == 4
    assert rules["note"]["budget"] == 8000 and rules["note"]["fits"] is True
    assert 0 < rules["note"]["bytes"] < 8000
    assert body["people"] == [{"space": "me", "bytes": 4, "person": None}]
    admin = (await world.call("GET", "/api/v1/spaces", "admin")).json()
    assert admin["people"] == [{"space": "me", "bytes": 4, "person": "u_dana"}]


async def test_a_file_shows_text_origin_and_trail_and_restore_brings_back_a_revision(
    world: World,
) -> None:
    put = await world.call("PUT", "/api/v1/spaces/rules/files/a.md", "member", {"content": "two\n"})
    assert put.status_code == 200 and put.json()["status"] == "saved"
    body = (await world.call("GET", "/api/v1/spaces/rules/files/a.md", "viewer")).json()
    assert body["text"] == "two\n" and body["origin"] == "edited"
    first, second = body["trail"]
    assert second["by"]["id"] == "u_member" and second["origin"] == "edited"
    restored = await world.call(
        "POST",
        "/api/v1/spaces/rules/files/a.md/restore",
        "member",
        {"revision": first["revision"]},
    )
    assert restored.status_code == 200, restored.text
    assert (await world.store.files(RULES))["a.md"] == b"one\n"
    assert await audit_actions(world.store) == [("put", "u_member"), ("restore", "u_member")]


async def test_delete_forgets_a_file_kept_in_history_and_audited(world: World) -> None:
    response = await world.call("DELETE", "/api/v1/spaces/rules/files/a.md", "member")
    assert response.status_code == 200
    assert "a.md" not in await world.store.files(RULES)
    assert [r.deleted for r in await world.store.history(RULES, "a.md")] == [False, True]
    assert await audit_actions(world.store) == [("forget", "u_member")]
    assert_problem(
        await world.call("DELETE", "/api/v1/spaces/rules/files/a.md", "member"), 404, "NotFound"
    )


async def test_review_lists_shows_a_diff_and_approves_one_file_rejects_the_other(
    world: World,
) -> None:
    listed = (await world.call("GET", "/api/v1/review", "viewer")).json()["changes"]
    [change] = listed
    assert change["prompt"] == "remember the cut-off" and change["stale"] == []
    assert [f["path"] for f in change["files"]] == ["b.md", "new.md"]
    shown = (await world.call("GET", f"/api/v1/review/{world.change}", "viewer")).json()
    diffs = {d["path"]: d["diff"] for d in shown["diffs"]}
    assert "+cut-off 17:00\n" in diffs["new.md"] and diffs["new.md"].startswith("--- /dev/null")
    ok = await world.call(
        "POST", f"/api/v1/review/{world.change}/approve", "member", {"paths": ["new.md"]}
    )
    assert ok.status_code == 200, ok.text
    rejected = await world.call(
        "POST", f"/api/v1/review/{world.change}/reject", "member", {"paths": ["b.md"]}
    )
    assert rejected.status_code == 200, rejected.text
    assert await world.store.files(RULES) == {"a.md": b"one\n", "new.md": b"cut-off 17:00\n"}
    assert await audit_actions(world.store) == [("approve", "u_member"), ("reject", "u_member")]


async def test_a_reviewers_edit_goes_live_as_edited(world: World) -> None:
    edited = await world.call(
        "POST",
        f"/api/v1/review/{world.change}/edit",
        "member",
        {"path": "new.md", "content": "cut-off 16:00\n"},
    )
    assert edited.status_code == 200, edited.text
    assert (await world.store.files(RULES))["new.md"] == b"cut-off 16:00\n"
    assert ("edit", "u_member") in await audit_actions(world.store)


async def test_admin_sets_review_opens_a_person_forgets_them_all_audited(world: World) -> None:
    mode = await world.call("PUT", "/api/v1/spaces/rules/review", "admin", {"mode": "none"})
    assert mode.json() == {"space": "rules", "mode": "none"}
    assert await world.store.review_mode(RULES) == "none"
    people = (await world.call("GET", "/api/v1/people", "admin")).json()
    assert people == [{"space": "me", "bytes": 4, "person": "u_dana"}]
    opened = (await world.call("POST", "/api/v1/people/u_dana/open", "admin")).json()
    assert opened == {
        "user": "u_dana",
        "spaces": {"me": [{"path": "p.md", "size": 4, "text": "pref"}]},
    }
    gone = (await world.call("DELETE", "/api/v1/people/u_dana", "admin")).json()
    assert gone == {"user": "u_dana", "spaces": ["me"], "files": 1}
    actions = [a for a, _ in await audit_actions(world.store)]
    assert actions == ["set-review", "open", "forget-user"]
    entries = (await world.call("GET", "/api/v1/audit", "admin")).json()["entries"]
    assert [e["action"] for e in entries if e["action"] in actions] == actions


async def test_admin_forgets_one_file_of_a_person(world: World) -> None:
    response = await world.call("DELETE", "/api/v1/people/u_dana/files/me/p.md", "admin")
    assert response.status_code == 200, response.text
    assert await world.store.files(DANA_ME) == {}
    assert await audit_actions(world.store) == [("forget", "u_admin")]


# -- bad input: a problem, and nothing changed -----------------------------------------


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "error"),
    [
        ("PUT", "/api/v1/spaces/rules/files/..%2Fescape.md", {"content": "x"}, 400, "InvalidName"),
        ("PUT", "/api/v1/spaces/rules/files/a/%2E%2E/b.md", {"content": "x"}, 400, "InvalidName"),
        ("PUT", "/api/v1/spaces/rules/files/a//b.md", {"content": "x"}, 400, "InvalidName"),
        ("PUT", "/api/v1/spaces/rules/files/bad%01name", {"content": "x"}, 400, "InvalidName"),
        ("PUT", "/api/v1/spaces/Rules!/files/a.md", {"content": "x"}, 400, "InvalidName"),
        ("PUT", "/api/v1/spaces/rules/files/a.md", {"content": 3}, 400, "BadRequest"),
        ("PUT", "/api/v1/spaces/rules/files/a.md", {"text": "x"}, 400, "BadRequest"),
        ("PUT", "/api/v1/spaces/rules/files/a.md", None, 400, "BadRequest"),
        ("PUT", "/api/v1/spaces/rules/review", {"mode": "sometimes"}, 400, "BadRequest"),
        ("POST", "/api/v1/review/nope/approve", {}, 404, "NotFound"),
        ("POST", "/api/v1/review/CHANGE/approve", {"paths": ["../x"]}, 400, "InvalidName"),
        (
            "POST",
            "/api/v1/review/CHANGE/edit",
            {"path": "/abs", "content": "x"},
            400,
            "InvalidName",
        ),
        ("GET", "/api/v1/review/nope", None, 404, "NotFound"),
        ("POST", "/api/v1/spaces/rules/files/a.md/restore", {"revision": "nope"}, 404, "NotFound"),
        ("DELETE", "/api/v1/people/bad%01id", None, 400, "InvalidName"),
        ("DELETE", "/api/v1/people/u_dana/files/me/%2E%2E", None, 400, "InvalidName"),
        ("GET", "/api/v1/nothing-here", None, 404, "NotFound"),
    ],
)
async def test_bad_input_is_a_problem_and_changes_nothing(
    world: World, method: str, url: str, body: Any, status: int, error: str
) -> None:
    url = url.replace("CHANGE", world.change)
    before = (await world.store.files(RULES), await world.store.files(DANA_ME))
    response = await world.call(method, url, "admin", body)
    assert_problem(response, status, error)
    assert (await world.store.files(RULES), await world.store.files(DANA_ME)) == before
    assert (await world.store.get_change(world.change)).state == "waiting"
    assert await audit_actions(world.store) == []


async def test_a_body_that_is_not_json_is_400(world: World) -> None:
    response = await world.client.put(
        "/api/v1/spaces/rules/files/a.md",
        content=b"{not json",
        headers={**world.auth("member"), "Content-Type": "application/json"},
    )
    assert_problem(response, 400, "BadRequest")
    assert (await world.store.files(RULES))["a.md"] == b"one\n"


async def test_a_body_past_web_max_body_bytes_is_413_and_a_body_at_it_passes(world: World) -> None:
    frame = len(b'{"content": ""}')
    at = await world.client.put(
        "/api/v1/spaces/rules/files/big.md",
        content=b'{"content": "' + b"x" * (LIMIT - frame) + b'"}',
        headers={**world.auth("member"), "Content-Type": "application/json"},
    )
    assert at.status_code == 200, at.text
    past = await world.client.put(
        "/api/v1/spaces/rules/files/big2.md",
        content=b'{"content": "' + b"x" * (LIMIT - frame + 1) + b'"}',
        headers={**world.auth("member"), "Content-Type": "application/json"},
    )
    assert_problem(past, 413, "TooLarge")
    assert "big2.md" not in await world.store.files(RULES)


async def test_a_path_of_max_path_bytes_is_kept_and_one_byte_more_is_400_name_too_long(
    world: World,
) -> None:
    # Segments of at most MAX_SEGMENT_BYTES, MAX_PATH_BYTES in all.
    at = "/".join(["p" * MAX_SEGMENT_BYTES] * 3 + ["q" * 254, "r"])
    assert len(at.encode()) == MAX_PATH_BYTES
    past_path = at[:-1] + "rs"
    long_name = "n" * MAX_SEGMENT_BYTES
    for path in (at, long_name):
        kept = await world.call(
            "PUT", f"/api/v1/spaces/rules/files/{path}", "member", {"content": "x"}
        )
        assert kept.status_code == 200, kept.text
    for path in (past_path, long_name + "n"):
        past = await world.call(
            "PUT", f"/api/v1/spaces/rules/files/{path}", "member", {"content": "x"}
        )
        assert_problem(past, 400, "NameTooLong")
    files = await world.store.files(RULES)
    assert files[at] == files[long_name] == b"x"
    assert past_path not in files and long_name + "n" not in files


async def test_a_space_name_of_max_space_name_chars_is_looked_up_and_one_more_is_400(
    world: World,
) -> None:
    at, past = "s" * MAX_SPACE_NAME_CHARS, "s" * (MAX_SPACE_NAME_CHARS + 1)
    assert_problem(await world.call("GET", f"/api/v1/spaces/{at}/files", "member"), 404, "NotFound")
    assert_problem(
        await world.call("GET", f"/api/v1/spaces/{past}/files", "member"), 400, "InvalidName"
    )
    put = await world.call("PUT", f"/api/v1/spaces/{past}/files/a.md", "member", {"content": "x"})
    assert_problem(put, 400, "InvalidName")


async def test_a_file_past_max_file_bytes_is_refused_by_the_limits(tmp_path: Path) -> None:
    from memfs.core.models import Limits

    store = MemoryStore()
    await store.add_member(Member(id="ada", org=ORG, role="member"), by=None)
    token = (await store.create_token("ada", ORG, by=None)).token
    app = web_app(store, limits=Limits(max_file_bytes=10))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://m") as c:
        headers = {"Authorization": f"Bearer {token}"}
        ok = await c.put(
            "/api/v1/spaces/rules/files/a.md", json={"content": "x" * 10}, headers=headers
        )
        assert ok.status_code == 200, ok.text
        past = await c.put(
            "/api/v1/spaces/rules/files/a.md", json={"content": "x" * 11}, headers=headers
        )
        assert past.status_code == 413, past.text
    assert await store.files(RULES) == {"a.md": b"x" * 10}


async def test_puts_up_to_max_files_and_max_space_bytes_are_kept_and_one_past_is_413_space_full(
    tmp_path: Path,
) -> None:
    from memfs.core.models import Limits

    store = MemoryStore()
    await store.add_member(Member(id="ada", org=ORG, role="member"), by=None)
    token = (await store.create_token("ada", ORG, by=None)).token
    app = web_app(store, limits=Limits(max_files=2, max_space_bytes=15))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://m") as c:
        headers = {"Authorization": f"Bearer {token}"}
        url = "/api/v1/spaces/rules/files/"
        for path, content in (("a.md", "x" * 10), ("b.md", "y" * 5)):  # 2 files, 15 bytes
            ok = await c.put(url + path, json={"content": content}, headers=headers)
            assert ok.status_code == 200, ok.text
        third = await c.put(url + "c.md", json={"content": "z"}, headers=headers)
        assert_problem(third, 413, "SpaceFull")
        grown = await c.put(url + "b.md", json={"content": "y" * 6}, headers=headers)
        assert_problem(grown, 413, "SpaceFull")
    assert await store.files(RULES) == {"a.md": b"x" * 10, "b.md": b"y" * 5}


async def test_openapi_document_lists_every_route_and_problem_bodies(world: World) -> None:
    doc = (await world.client.get("/api/v1/openapi.json")).json()
    paths = set(doc["paths"])
    assert {
        "/api/v1/me",
        "/api/v1/spaces",
        "/api/v1/spaces/{space}/files",
        "/api/v1/spaces/{space}/files/{path}",
        "/api/v1/spaces/{space}/files/{path}/restore",
        "/api/v1/spaces/{space}/review",
        "/api/v1/review",
        "/api/v1/review/{change}",
        "/api/v1/review/{change}/approve",
        "/api/v1/review/{change}/reject",
        "/api/v1/review/{change}/edit",
        "/api/v1/people",
        "/api/v1/people/{user}/open",
        "/api/v1/people/{user}/files/{space}/{path}",
        "/api/v1/people/{user}",
        "/api/v1/audit",
    } <= paths
    assert "Problem" in doc["components"]["schemas"]


async def test_approving_a_stale_file_is_409_until_forced(world: World) -> None:
    put = await world.call("PUT", "/api/v1/spaces/rules/files/b.md", "member", {"content": "b2\n"})
    assert put.status_code == 200
    shown = (await world.call("GET", f"/api/v1/review/{world.change}", "viewer")).json()
    assert shown["stale"] == ["b.md"]
    url = f"/api/v1/review/{world.change}/approve"
    assert_problem(await world.call("POST", url, "member", {"paths": ["b.md"]}), 409, "Conflict")
    assert (await world.store.files(RULES))["b.md"] == b"b2\n"
    forced = await world.call("POST", url, "member", {"paths": ["b.md"], "force": True})
    assert forced.status_code == 200, forced.text
    assert (await world.store.files(RULES))["b.md"] == b"bee\n"


async def test_a_forced_approval_naming_the_live_version_shown_is_409_once_the_live_file_moved(
    world: World,
) -> None:
    file = "/api/v1/spaces/rules/files/b.md"
    assert (await world.call("PUT", file, "member", {"content": "b2\n"})).status_code == 200
    shown = (await world.call("GET", f"/api/v1/review/{world.change}", "viewer")).json()
    assert (await world.call("PUT", file, "member", {"content": "b3\n"})).status_code == 200
    url = f"/api/v1/review/{world.change}/approve"
    named = {"paths": ["b.md"], "force": True, "live_version": shown["live_version"]}
    assert_problem(await world.call("POST", url, "member", named), 409, "Conflict")
    assert (await world.store.files(RULES))["b.md"] == b"b3\n"
    again = (await world.call("GET", f"/api/v1/review/{world.change}", "viewer")).json()
    named["live_version"] = again["live_version"]
    assert (await world.call("POST", url, "member", named)).status_code == 200
    assert (await world.store.files(RULES))["b.md"] == b"bee\n"


# -- what every answer says to browsers and caches ------------------------------


@pytest.mark.parametrize(
    ("method", "url", "who", "body"),
    [
        ("GET", "/api/v1/me", "viewer", None),
        ("GET", "/api/v1/spaces/rules/files/a.md", "viewer", None),
        ("POST", "/api/v1/people/u_dana/open", "admin", None),
        ("GET", "/api/v1/audit", "admin", None),
        ("GET", "/api/v1/me", None, None),
        ("GET", "/api/v1/nowhere", "viewer", None),
        ("PUT", "/api/v1/spaces/rules/files/a.md", "member", {"content": "x" * (LIMIT + 1)}),
        ("GET", "/api/v1/openapi.json", None, None),
    ],
)
async def test_every_api_answer_is_never_stored_never_sniffed_and_never_framed(
    world: World, method: str, url: str, who: str | None, body: Any
) -> None:
    response = await world.call(method, url, who, body)
    assert response.headers["cache-control"] == "no-store", response.headers
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["referrer-policy"] == "same-origin"


@pytest.mark.error_log(r"GET /api/v1/spaces failed")
async def test_an_unexpected_failure_is_a_500_problem_that_tells_the_network_nothing_of_it(
    tmp_path: Path,
) -> None:
    made = await org_memory(new_store("memory", tmp_path))
    secret = "RuntimeError at /var/lib/memfs/people/u_dana/me.db"
    faulty = FaultyStore(made.store, fail={"spaces": RuntimeError(secret)})
    transport = httpx.ASGITransport(app=web_app(faulty))
    async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
        headers = {"Authorization": f"Bearer {made.tokens['viewer']}"}
        response = await client.get("/api/v1/spaces", headers=headers)
    body = assert_problem(response, 500, "InternalError")
    assert "u_dana" not in response.text and "RuntimeError" not in response.text
    assert "server's log" in body["detail"]
    await made.store.aclose()


async def test_bad_bearer_tokens_count_as_failed_sign_ins_throttled_and_audited(
    tmp_path: Path,
) -> None:
    # Without this, a client the /login form refuses would go on guessing here,
    # at any rate and unseen by the audit log.
    made = await org_memory(new_store("memory", tmp_path))
    app = web_app(made.store, signin=SigninLimits(signin_failures=3, signin_window_seconds=60))
    transport = httpx.ASGITransport(app=app, client=("2001:db8:5:5::1", 4711))
    async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:

        async def me(token: str | None) -> httpx.Response:
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}
            return await client.get("/api/v1/me", headers=headers)

        assert (await me(made.tokens["viewer"])).status_code == 200
        assert_problem(await me(None), 401, "NoIdentity")  # no token: no guess, not counted
        for bad in ["memfs_" + "D" * 43, "not-a-token", made.tokens["revoked"]]:
            assert_problem(await me(bad), 401, "NoIdentity")  # at the limit on the third
        refused = await me(made.tokens["viewer"])  # past it: not even a good token is looked at
        assert_problem(refused, 429, "SigninThrottled")
        assert refused.headers["retry-after"] == "60"
        failed = [e for e in await made.store.audit() if e.action == "sign-in-failed"]
        assert [e.detail for e in failed] == ["2001:db8:5:5::1"] * 3
        # The /login form is the same client's: refused there too, without looking.
        form = await client.post("/login", data={"token": made.tokens["viewer"]})
        assert form.status_code == 429
    await made.store.aclose()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_failed_sign_ins_client_is_audited_whole_at_max_client_key_and_cut_past_it(
    tmp_path: Path, kind: str
) -> None:
    # The client's address is a log field: one longer than MAX_CLIENT_KEY (a
    # proxy's or a socket's name) is cut, so no client can grow the audit with it.
    made = await org_memory(new_store(kind, tmp_path))
    app = web_app(made.store)
    at, past = "a" * (MAX_CLIENT_KEY - 1) + "z", "b" * MAX_CLIENT_KEY + "z"
    for host in (at, past):
        transport = httpx.ASGITransport(app=app, client=(host, 4711))
        async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
            answer = await client.get("/api/v1/me", headers={"Authorization": "Bearer nope"})
            assert_problem(answer, 401, "NoIdentity")
    failed = [e.detail for e in await made.store.audit() if e.action == "sign-in-failed"]
    assert failed == [at, past[:MAX_CLIENT_KEY]]
    await made.store.aclose()


@pytest.mark.parametrize(("who", "user"), [("other", "u_dana"), ("admin", "u_nobody")])
async def test_opening_a_person_with_no_memory_in_the_org_is_404_and_audits_nothing(
    world: World, who: str, user: str
) -> None:
    # Another org's person reads exactly as nobody: 404, as the People page says,
    # and no "open" entry for a look at nothing.
    before = await world.store.audit()
    response = await world.call("POST", f"/api/v1/people/{user}/open", who)
    assert_problem(response, 404, "NotFound")
    assert response.json()["detail"] == f"nobody of this id has memory in this org: '{user}'"
    assert [e for e in await world.store.audit() if e.action == "open"] == [
        e for e in before if e.action == "open"
    ]


async def test_the_audit_log_is_read_a_page_of_audit_page_entries_at_a_time_from_the_newest(
    world: World,
) -> None:
    store = world.store
    assert isinstance(store, ManagedStore)
    admin = By(id="u_admin", role="admin")
    for _ in range(AUDIT_PAGE + 1):
        await store.open_person("u_dana", ORG, by=admin)
    whole = [entry.id for entry in await store.audit(org=ORG)]
    newest = (await world.call("GET", "/api/v1/audit", "admin")).json()
    assert [e["id"] for e in newest["entries"]] == whole[-AUDIT_PAGE:]
    assert newest["older"] == whole[-AUDIT_PAGE]
    walked: list[str] = []
    before = None
    while True:
        params: dict[str, Any] = {"limit": 7} | ({"before": before} if before else {})
        page = (await world.call("GET", "/api/v1/audit", "admin", params=params)).json()
        walked[:0] = [e["id"] for e in page["entries"]]
        before = page["older"]
        if before is None:
            break
    assert walked == whole


async def test_an_audit_page_of_max_audit_page_entries_is_read_and_one_more_is_400(
    world: World,
) -> None:
    at = await world.call("GET", "/api/v1/audit", "admin", params={"limit": MAX_AUDIT_PAGE})
    assert at.status_code == 200 and at.json()["older"] is None
    for limit in (MAX_AUDIT_PAGE + 1, 0):
        past = await world.call("GET", "/api/v1/audit", "admin", params={"limit": limit})
        assert_problem(past, 400, "BadRequest")


async def test_an_audit_page_before_an_entry_no_store_issued_is_400(world: World) -> None:
    for before in ("9" * MAX_ENTRY_ID_CHARS, "9" * (MAX_ENTRY_ID_CHARS + 1), "x", "-1"):
        answer = await world.call("GET", "/api/v1/audit", "admin", params={"before": before})
        assert_problem(answer, 400, "BadRequest")
