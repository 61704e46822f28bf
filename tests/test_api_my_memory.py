"""The app-facing handler: a signed-in person lists and forgets their own memory over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from memfs.api import my_memory
from memfs.core.models import By, ChangeSet, Provenance, SpaceRef
from memfs.stores.base import ManagedStore
from memfs.stores.folder import FolderStore
from memfs.stores.memory import MemoryStore
from memfs.stores.sqlite import SqliteStore

DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
DANA_DRAFTS = DANA.model_copy(update={"space": "drafts"})
CAROL = SpaceRef(layer="user", space="me", org="bank-1", user="carol")
ORG = SpaceRef(layer="org", space="lending-rules", org="bank-1")
PROV = Provenance(session="s1", turn="t1", prompt="remember", by=By(id="dana"))


def signed_in(request: Request) -> dict[str, str] | None:
    """The app's own sign-in, as a test stands it in: a header names the person."""
    user = request.headers.get("x-user")
    return None if user is None else {"user": user, "org": "bank-1"}


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ManagedStore]:
    made: ManagedStore = (
        MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "m.db")
    )
    await made.put(DANA, ChangeSet(created={"prefs.md": b"tea, no sugar"}), provenance=PROV)
    await made.put(DANA_DRAFTS, ChangeSet(created={"scan.bin": b"\xff\xfe\x00"}), provenance=PROV)
    await made.put(CAROL, ChangeSet(created={"prefs.md": b"coffee"}), provenance=PROV)
    await made.put(ORG, ChangeSet(created={"rules.md": b"org rules"}), provenance=PROV)
    yield made
    await made.aclose()


def client(app: Any, user: str | None = "dana") -> httpx.AsyncClient:
    headers = {} if user is None else {"x-user": user}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
    )


async def snapshot(store: ManagedStore) -> dict[str, Any]:
    """Everything the tests' people hold, to show a refused request changed nothing."""
    return {
        "dana": await store.user_files("dana", "bank-1"),
        "carol": await store.user_files("carol", "bank-1"),
        "org": await store.files(ORG),
    }


async def test_get_lists_the_signed_in_persons_memory_with_text_when_utf8(
    store: ManagedStore,
) -> None:
    async with client(my_memory(store, signed_in)) as http:
        response = await http.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "user": "dana",
        "org": "bank-1",
        "spaces": {
            "drafts": {"scan.bin": {"size": 3, "text": None}},
            "me": {"prefs.md": {"size": 13, "text": "tea, no sugar"}},
        },
    }


async def test_authorize_may_be_async(store: ManagedStore) -> None:
    async def authorize(request: Request) -> dict[str, str] | None:
        return {"user": "carol", "org": "bank-1"}

    async with client(my_memory(store, authorize)) as http:
        response = await http.get("/")
    assert response.json()["spaces"] == {"me": {"prefs.md": {"size": 6, "text": "coffee"}}}


async def test_no_identity_is_a_401_problem_for_every_request(store: ManagedStore) -> None:
    before = await snapshot(store)
    async with client(my_memory(store, signed_in), user=None) as http:
        for response in [
            await http.get("/"),
            await http.delete("/", params={"all": "true"}),
            await http.delete("/", params={"space": "me", "path": "prefs.md"}),
        ]:
            assert response.status_code == 401
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["error"] == "NoIdentity"
    assert await snapshot(store) == before


async def test_delete_a_file_forgets_it_and_its_history(store: ManagedStore) -> None:
    async with client(my_memory(store, signed_in)) as http:
        response = await http.delete("/", params={"space": "me", "path": "prefs.md"})
        assert response.status_code == 200
        assert response.json() == {"forgotten": ["prefs.md"]}
        assert "me" not in (await http.get("/")).json()["spaces"]
    assert await store.history(DANA, "prefs.md") == []
    assert await store.files(DANA_DRAFTS) == {"scan.bin": b"\xff\xfe\x00"}
    assert await store.files(CAROL) == {"prefs.md": b"coffee"}


async def test_delete_an_unknown_file_is_a_404_problem(store: ManagedStore) -> None:
    before = await snapshot(store)
    async with client(my_memory(store, signed_in)) as http:
        response = await http.delete("/", params={"space": "me", "path": "never.md"})
    assert response.status_code == 404
    assert response.json()["error"] == "NotFound"
    assert await snapshot(store) == before


async def test_delete_all_forgets_every_space_of_the_person_only(store: ManagedStore) -> None:
    async with client(my_memory(store, signed_in)) as http:
        response = await http.delete("/", params={"all": "true"})
        assert response.status_code == 200
        assert response.json() == {"forgotten_spaces": ["drafts", "me"], "forgotten_files": 2}
        assert (await http.get("/")).json()["spaces"] == {}
        # Forgetting again is not an error: there is simply nothing left.
        again = await http.delete("/", params={"all": "true"})
        assert again.json() == {"forgotten_spaces": [], "forgotten_files": 0}
    assert await store.user_files("dana", "bank-1") == {}
    assert await store.files(CAROL) == {"prefs.md": b"coffee"}
    assert await store.files(ORG) == {"rules.md": b"org rules"}


@pytest.mark.parametrize(
    "params",
    [
        {"space": "me", "path": "../me/prefs.md"},
        {"space": "me", "path": "notes/../prefs.md"},
        {"space": "me", "path": "/prefs.md"},
        {"space": "me", "path": "/etc/passwd"},
        {"space": "..", "path": "prefs.md"},
        {"space": "Me/../me", "path": "prefs.md"},
        {"space": "me"},
        {"path": "prefs.md"},
        {},
        {"all": "yes"},
        {"all": "true", "path": "prefs.md"},
    ],
)
async def test_bad_delete_is_a_400_problem_and_touches_nothing(
    store: ManagedStore, params: dict[str, str]
) -> None:
    before = await snapshot(store)
    async with client(my_memory(store, signed_in)) as http:
        response = await http.delete("/", params=params)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 400
    assert await snapshot(store) == before


async def test_mounted_under_a_prefix_its_root_is_the_mount_point(store: ManagedStore) -> None:
    app = Starlette(routes=[Mount("/api/my-memory", app=my_memory(store, signed_in))])
    async with client(app) as http:
        listed = await http.get("/api/my-memory/")
        assert listed.status_code == 200
        assert set(listed.json()["spaces"]) == {"drafts", "me"}
        forgotten = await http.delete(
            "/api/my-memory/", params={"space": "drafts", "path": "scan.bin"}
        )
        assert forgotten.json() == {"forgotten": ["scan.bin"]}
        elsewhere = await http.get("/api/my-memory/nothing-here")
        assert elsewhere.status_code == 404
        assert elsewhere.json()["error"] == "NotFound"
    assert await store.files(DANA_DRAFTS) == {}


async def test_an_identity_authorize_cannot_vouch_for_is_a_500_not_a_guess(
    store: ManagedStore,
) -> None:
    bad: list[Callable[[Request], Any]] = [
        lambda request: {"user": "../carol", "org": "bank-1"},
        lambda request: {"user": "dana"},
    ]
    before = await snapshot(store)
    for authorize in bad:
        async with client(my_memory(store, authorize)) as http:
            response = await http.delete("/", params={"all": "true"})
        assert response.status_code == 500
        assert response.json()["error"] == "ConfigError"
    assert await snapshot(store) == before


# -- over the folder store: plain files, no history, no audit ------------------


@pytest.fixture
async def folder_store(tmp_path: Path) -> AsyncIterator[FolderStore]:
    made = FolderStore(tmp_path / "folders")
    for ref, files in [
        (DANA, {"prefs.md": b"tea, no sugar"}),
        (DANA_DRAFTS, {"scan.bin": b"\xff\xfe\x00"}),
        (CAROL, {"prefs.md": b"coffee"}),
        (ORG, {"rules.md": b"org rules"}),
    ]:
        stored = await made.store(ref, ChangeSet(created=files), cursor=None, provenance=PROV)
        assert stored.status == "saved"
    yield made
    await made.aclose()


async def test_get_over_the_folder_store_lists_the_persons_folders(
    folder_store: FolderStore,
) -> None:
    # A folder a person made by hand with no files is no space to list.
    (folder_store.folder(DANA.model_copy(update={"space": "empty"}))).mkdir(parents=True)
    async with client(my_memory(folder_store, signed_in)) as http:
        response = await http.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "user": "dana",
        "org": "bank-1",
        "spaces": {
            "drafts": {"scan.bin": {"size": 3, "text": None}},
            "me": {"prefs.md": {"size": 13, "text": "tea, no sugar"}},
        },
    }


async def test_get_over_the_folder_store_with_no_memory_lists_nothing(tmp_path: Path) -> None:
    async with client(my_memory(FolderStore(tmp_path / "none"), signed_in)) as http:
        response = await http.get("/")
    assert response.status_code == 200
    assert response.json() == {"user": "dana", "org": "bank-1", "spaces": {}}


async def test_delete_a_file_over_the_folder_store_removes_it_from_disk(
    folder_store: FolderStore,
) -> None:
    async with client(my_memory(folder_store, signed_in)) as http:
        response = await http.request("DELETE", "/", params={"space": "me", "path": "prefs.md"})
        assert response.status_code == 200
        assert response.json() == {"forgotten": ["prefs.md"]}
        again = await http.request("DELETE", "/", params={"space": "me", "path": "prefs.md"})
    assert again.status_code == 404
    assert again.json()["error"] == "NotFound"
    assert not (folder_store.folder(DANA) / "prefs.md").exists()
    left = await folder_store.user_files("dana", "bank-1")
    assert left == {"drafts": {"scan.bin": b"\xff\xfe\x00"}}
    assert await folder_store.user_files("carol", "bank-1") == {"me": {"prefs.md": b"coffee"}}
    assert (await folder_store.load(ORG, "s")).files == {"rules.md": b"org rules"}


async def test_delete_all_over_the_folder_store_forgets_or_says_it_cannot(
    folder_store: FolderStore,
) -> None:
    async with client(my_memory(folder_store, signed_in)) as http:
        response = await http.request("DELETE", "/", params={"all": "true"})
    if hasattr(folder_store, "forget_user"):
        assert response.status_code == 200
        assert await folder_store.user_files("dana", "bank-1") == {}
    else:
        # Never a 500: a problem naming what this store cannot do, and nothing touched.
        assert response.status_code == 422
        assert "forget a whole person" in response.json()["detail"]
        assert set(await folder_store.user_files("dana", "bank-1")) == {"drafts", "me"}
    assert await folder_store.user_files("carol", "bank-1") == {"me": {"prefs.md": b"coffee"}}
