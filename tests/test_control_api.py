"""The control API, driven through ASGI against a fake daemon service."""

from __future__ import annotations

import logging

import httpx
import pytest
import trio

from memfs.api.control import control_app
from memfs.api.models import Problem, StartTurnRequest, TurnEnded, TurnStarted
from memfs.core.errors import AlreadyCommitted, NotFound, StoreUnavailable
from tests.control_fake import FakeTarget

DANA = {"userId": "u_dana", "name": "Dana", "role": "underwriter"}


@pytest.fixture
def target() -> FakeTarget:
    return FakeTarget()


@pytest.fixture
async def client(target: FakeTarget):  # type: ignore[no-untyped-def]
    transport = httpx.ASGITransport(app=control_app(target))
    async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
        yield client


async def test_start_turn_returns_the_mounts_and_note(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    response = await client.post(
        "/turns", json={"session": "s1", "extra_body": DANA, "prompt": "hi", "uid": 1000}
    )
    assert response.status_code == 201
    started = TurnStarted.model_validate(response.json())
    assert started.session == "s1"
    assert started.mounts["lending-rules"].read_only is False
    assert started.mounts["me"].layer == "user"
    assert "lending-rules/" in started.note
    assert target.calls == [
        (
            "start_turn",
            StartTurnRequest(session="s1", extra_body=DANA, prompt="hi", uid=1000),
        )
    ]


async def test_end_commit_close_and_status_reach_the_target(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    await client.post("/turns", json={"session": "s1"})
    status = (await client.get("/status")).json()
    assert [s["session"] for s in status["sessions"]] == ["s1"]

    ended = await client.post("/sessions/s1/turn/end")
    assert ended.status_code == 200
    result = TurnEnded.model_validate(ended.json())
    assert result.spaces["me"].created == ["style.md"]
    assert result.files["lending-rules/income.md"].read == "r-7"

    committed = await client.post("/sessions/s1/turns/t-1/commit")
    assert committed.json()["turn"] == "t-1"

    closed = await client.delete("/sessions/s1")
    assert closed.json() == {"session": "s1", "closed": True}
    assert [name for name, _ in target.calls] == [
        "start_turn",
        "status",
        "end_turn",
        "commit_turn",
        "close_session",
    ]
    assert target.calls[3] == ("commit_turn", ("s1", "t-1"))


async def test_memfs_error_becomes_its_http_status_and_problem_json(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/sessions/nobody/turn/end")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    body = Problem.model_validate(response.json())
    assert body.error == "NotFound"
    assert body.title == "NotFound"
    assert body.status == 404
    assert body.detail == str(NotFound("no open turn in this session", path="nobody"))
    assert body.exit_code == NotFound.exit_code == 3


async def test_subclass_errors_keep_their_own_name(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    target.fail_with = AlreadyCommitted("this turn was committed already")
    response = await client.post("/sessions/s1/turns/t-1/commit")
    assert response.status_code == 409
    assert response.json()["error"] == "AlreadyCommitted"
    assert response.json()["exit_code"] == AlreadyCommitted.exit_code


async def test_memfs_error_inside_an_exception_group_is_still_translated(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    # A target that raises from a trio nursery hands us the error wrapped in a group.
    target.fail_with = ExceptionGroup("from a nursery", [StoreUnavailable("store is down")])
    response = await client.get("/status")
    assert response.status_code == 503
    assert response.json()["error"] == "StoreUnavailable"


async def test_unexpected_error_is_a_logged_500_problem(
    client: httpx.AsyncClient, target: FakeTarget, caplog: pytest.LogCaptureFixture
) -> None:
    target.fail_with = RuntimeError("a bug")
    with caplog.at_level(logging.ERROR, logger="memfs.api.control"):
        response = await client.get("/status")
    assert response.status_code == 500
    assert response.json()["error"] == "InternalError"
    assert response.json()["exit_code"] == 1
    assert "RuntimeError: a bug" in response.json()["detail"]
    [record] = [r for r in caplog.records if r.name == "memfs.api.control"]
    assert record.exc_info is not None  # the traceback is in the log, once


async def test_bad_json_is_400_and_reaches_no_target(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    response = await client.post(
        "/turns", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "BadRequest"
    assert body["exit_code"] == 2
    assert "not valid JSON" in body["detail"]
    assert target.calls == []


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({}, "body.session"),
        ({"session": "s1", "extra_body": [1]}, "body.extra_body"),
        ({"session": "s1", "uid": -1}, "body.uid"),
        ({"session": "s1", "typo": 1}, "body.typo"),
    ],
)
async def test_invalid_body_is_400_naming_the_field(
    client: httpx.AsyncClient, target: FakeTarget, payload: dict[str, object], where: str
) -> None:
    response = await client.post("/turns", json=payload)
    assert response.status_code == 400
    assert response.json()["error"] == "BadRequest"
    assert where in response.json()["detail"]
    assert target.calls == []


async def test_unknown_route_is_a_not_found_problem(client: httpx.AsyncClient) -> None:
    response = await client.get("/nope")
    assert response.status_code == 404
    assert response.json()["error"] == "NotFound"
    wrong_method = await client.get("/turns")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"] == "BadRequest"


async def test_openapi_document_lists_every_route(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    routes = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert routes == {
        ("POST", "/turns"),
        ("POST", "/sessions/{session}/turn/end"),
        ("POST", "/sessions/{session}/turns/{turn}/commit"),
        ("DELETE", "/sessions/{session}"),
        ("GET", "/status"),
        ("POST", "/sessions/{session}/turn/discard"),
        ("GET", "/sessions/{session}/kept"),
        ("GET", "/sessions/{session}/kept/{name}/{path}"),
        ("POST", "/forgotten"),
    }
    schemas = document["components"]["schemas"]
    assert {"StartTurnRequest", "TurnStarted", "TurnEnded", "Problem", "DaemonStatus"} <= set(
        schemas
    )
    start = document["paths"]["/turns"]["post"]["responses"]
    assert "201" in start
    assert "422" not in start  # validation errors are 400 problems, as documented
    assert start["4XX"]["content"]["application/json"]["schema"]["$ref"].endswith("/Problem")


async def test_requests_run_under_trio() -> None:
    # The daemon serves this app from trio; the fake target checks it runs there too.
    seen: list[bool] = []

    class Probe(FakeTarget):
        async def status(self):  # type: ignore[no-untyped-def]
            seen.append(trio.lowlevel.current_task() is not None)
            return await super().status()

    transport = httpx.ASGITransport(app=control_app(Probe()))
    async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
        assert (await client.get("/status")).status_code == 200
    assert seen == [True]
