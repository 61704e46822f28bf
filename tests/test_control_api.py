"""The control API, driven through ASGI against a fake daemon service."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
import trio

from memfs.api.control import control_app
from memfs.api.models import DaemonStatus, Problem, StartTurnRequest, TurnEnded, TurnStarted
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


@pytest.mark.error_log(r"memfs\.api\.control: control API: GET /status failed")
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
    ("body", "key"),
    [
        (b'{"session": "s1", "session": "s2"}', "session"),
        (b'{"session": "s1", "extra_body": {"userId": "u_a", "userId": "u_b"}}', "userId"),
        (b'{"session": "s1", "extra_body": {"teams": [{"id": 1, "id": 2}]}}', "id"),
        # The same key once escaped: it is the same key once read.
        (b'{"session": "s1", "extra_body": {"userId": "u_a", "\\u0075serId": "u_b"}}', "userId"),
    ],
)
async def test_control_api_refuses_a_repeated_json_key_at_any_depth_with_400(
    client: httpx.AsyncClient, target: FakeTarget, body: bytes, key: str
) -> None:
    # json.loads keeps the last of a repeated key: {"userId": "u_a", "userId": "u_b"}
    # mounted u_b's memory while anything that read the first saw u_a.
    response = await client.post(
        "/turns", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["error"] == "BadRequest"
    assert problem["detail"] == (
        f'the request body is not valid JSON (the key "{key}" appears twice in one object)'
    )
    assert target.calls == []


async def test_control_api_takes_the_same_key_in_different_objects(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    body = b'{"session": "s1", "extra_body": {"userId": "u_a", "team": {"userId": "u_b"}}}'
    response = await client.post(
        "/turns", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 201, response.text
    assert target.calls[0][1].extra_body == {"userId": "u_a", "team": {"userId": "u_b"}}


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
        async def status(self) -> DaemonStatus:
            seen.append(trio.lowlevel.current_task() is not None)
            return await super().status()

    transport = httpx.ASGITransport(app=control_app(Probe()))
    async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
        assert (await client.get("/status")).status_code == 200
    assert seen == [True]


@pytest.mark.parametrize(
    ("field", "value"),
    [("uid", 2**32), ("uid", 2**32 - 1), ("gid", 2**32), ("gid", 2**64), ("uid", -1)],
)
async def test_an_id_out_of_range_is_400_and_reaches_no_target(
    client: httpx.AsyncClient, target: FakeTarget, field: str, value: int
) -> None:
    response = await client.post("/turns", json={"session": "s1", field: value})
    assert response.status_code == 400
    assert response.json()["error"] == "BadRequest"
    assert f"body.{field}" in response.json()["detail"]
    assert target.calls == []


async def test_the_highest_real_id_is_accepted(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    response = await client.post("/turns", json={"session": "s1", "uid": 2**32 - 2, "gid": 0})
    assert response.status_code == 201
    assert target.calls[0][1].uid == 2**32 - 2


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ('{"session": "s\\ud800"}', "session"),
        ('{"session": "s1", "prompt": "hi \\udfff"}', "prompt"),
        ('{"session": "s1", "extra_body": {"name": "\\ud83d"}}', "extra_body.name"),
        ('{"session": "s1", "extra_body": {"\\ud800": "x"}}', "extra_body key"),
        ('{"session": "s1", "extra_body": {"a": [1, {"b": ["\\udc80"]}]}}', "extra_body.a[1].b[0]"),
    ],
)
async def test_a_lone_surrogate_anywhere_is_400_and_reaches_no_target(
    client: httpx.AsyncClient, target: FakeTarget, body: str, where: str
) -> None:
    response = await client.post(
        "/turns", content=body.encode(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    problem = response.json()
    assert problem["error"] == "BadRequest"
    assert f"must be valid UTF-8 text: {where} holds a lone surrogate" in problem["detail"]
    assert target.calls == []


async def test_a_valid_surrogate_pair_is_just_an_emoji(
    client: httpx.AsyncClient, target: FakeTarget
) -> None:
    body = b'{"session": "s1", "prompt": "\\ud83d\\ude00"}'
    response = await client.post(
        "/turns", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 201
    assert target.calls[0][1].prompt == "\U0001f600"


LIMIT = 4096


@pytest.fixture
async def small_client(target: FakeTarget):  # type: ignore[no-untyped-def]
    transport = httpx.ASGITransport(app=control_app(target, max_body_bytes=LIMIT))
    async with httpx.AsyncClient(transport=transport, base_url="http://memfs") as client:
        yield client


def padded(size: int) -> bytes:
    """A valid start request of exactly ``size`` bytes."""
    head, tail = b'{"session": "s1", "prompt": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


async def test_a_body_at_the_limit_is_read_and_one_byte_past_it_is_413(
    small_client: httpx.AsyncClient, target: FakeTarget
) -> None:
    headers = {"content-type": "application/json"}
    at = await small_client.post("/turns", content=padded(LIMIT), headers=headers)
    assert at.status_code == 201
    past = await small_client.post("/turns", content=padded(LIMIT + 1), headers=headers)
    assert past.status_code == 413
    problem = past.json()
    assert problem["error"] == "TooLarge"
    assert problem["detail"] == (
        f"the request body is {LIMIT + 1} bytes; the control API takes at most {LIMIT}"
    )
    assert len(target.calls) == 1  # only the one at the limit


async def test_a_streamed_body_past_the_limit_is_413_and_read_no_further(
    target: FakeTarget,
) -> None:
    # Driven as raw ASGI, so the test sees every chunk the API pulls.
    app = control_app(target, max_body_bytes=LIMIT)
    pulled = 0
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, object]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": pulled < 10_000}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/turns",
        "raw_path": b"/turns",
        "query_string": b"",
        # No Content-Length (chunked): the limit must hold while reading.
        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
        "server": ("memfs", 80),
        "client": None,
        "root_path": "",
    }
    await app(scope, receive, send)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert b'"error":"TooLarge"' in b"".join(m.get("body", b"") for m in sent[1:])
    assert pulled == LIMIT // 1000 + 1  # stopped at the first chunk past the limit
    assert target.calls == []
