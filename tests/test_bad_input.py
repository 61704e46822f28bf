"""Bad input gets a clear error and loses nothing: the CLI, the config and the Memory tab's API.

Each test pins a defect a hostile review found: a traceback, a 500, a
silent default or a renamed file where a clear error belongs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memfs.core.signin import SigninLimits
from memfs.stores.base import ReviewingStore
from memfs.web.app import web_app
from tests.test_cli_manage import db, memfs_cli  # noqa: F401 (db is a fixture)
from tests.web_world import RULES, new_store, org_memory

# -- the Memory tab's API: bad bodies are 400, never 500 --------------------------------


@dataclass
class Web:
    store: ReviewingStore
    client: httpx.AsyncClient
    member: dict[str, str]
    change: str


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[Web]:
    made = await org_memory(new_store("sqlite", tmp_path))
    app = web_app(made.store, signin=SigninLimits(signin_failures=1000))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://memfs"
    ) as client:
        yield Web(
            made.store,
            client,
            {
                "Authorization": f"Bearer {made.tokens['member']}",
                "content-type": "application/json",
            },
            made.change,
        )
    await made.store.aclose()


def assert_bad_request(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"] in ("BadRequest", "InvalidName"), response.text


async def test_put_of_content_holding_a_lone_surrogate_is_400_not_500(web: Web) -> None:
    # "\ud800" is valid JSON and no UTF-8 text: content.encode() raised
    # UnicodeEncodeError, answered 500 InternalError.
    response = await web.client.put(
        f"/api/v1/spaces/{RULES.space}/files/a.md",
        headers=web.member,
        content=b'{"content": "\\ud800"}',
    )
    assert_bad_request(response)
    assert (await web.store.files(RULES))["a.md"] == b"one\n"  # as it was


async def test_review_edit_of_content_holding_a_lone_surrogate_is_400_not_500(web: Web) -> None:
    response = await web.client.post(
        f"/api/v1/review/{web.change}/edit",
        headers=web.member,
        content=b'{"path": "x.md", "content": "\\ud800"}',
    )
    assert_bad_request(response)


async def test_put_of_a_path_with_a_newline_is_invalid_name_not_not_found(web: Web) -> None:
    # docs/web.md: control characters in a new name are 400 InvalidName. The
    # route's {path:path} does not match a newline, so it answered 404.
    response = await web.client.put(
        f"/api/v1/spaces/{RULES.space}/files/a%0Ab.md",
        headers=web.member,
        content=b'{"content": "x"}',
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "InvalidName"


@pytest.mark.parametrize("escaped", ["a%FF.md", "%ED%A0%80.md"])
async def test_put_of_a_path_that_is_not_utf8_is_refused_not_renamed(
    web: Web, escaped: str
) -> None:
    # The mount refuses a name that is not UTF-8 (EINVAL) and the CLI says
    # "file path is not valid UTF-8". The API decoded the bytes with
    # replacement and stored the file under another name ('a\ufffd.md').
    response = await web.client.put(
        f"/api/v1/spaces/{RULES.space}/files/{escaped}",
        headers=web.member,
        content=b'{"content": "x"}',
    )
    assert_bad_request(response)
    assert not [path for path in await web.store.files(RULES) if "\ufffd" in path]
