"""Every store backend passes the same contract, ``memfs.testing.check_store``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from memfs.stores.base import Store
from memfs.stores.folder import FolderStore
from memfs.stores.open import open_store
from memfs.stores.sqlite import SqliteStore
from memfs.testing import (
    COMMON_CHECKS,
    FORGET_CHECKS,
    MANAGED_CHECKS,
    REVIEW_CHECKS,
    check_store,
    run_check,
)
from memfs.testing.conformance import GROUP_COMMIT_CHECKS, MakeStore
from tests.postgres_fixtures import Databases

BACKENDS: dict[str, tuple[bool, Callable[[Path, pytest.FixtureRequest], MakeStore]]] = {
    # name: (managed, factory of make_store for a tmp dir and the test's fixtures)
    "memory": (True, lambda tmp, _: lambda: open_store("memory://")),
    # a fresh folder per store, as the contract wants a fresh store per check
    "folder": (
        False,
        lambda tmp, _: (lambda n: lambda: FolderStore(tmp / f"folder-{n()}"))(_counter()),
    ),
    # a fresh database file per store, likewise
    "sqlite": (
        True,
        lambda tmp, _: (lambda n: lambda: SqliteStore(tmp / f"memfs-{n()}.db"))(_counter()),
    ),
    # a fresh database per store on the session's throwaway server
    "postgresql": (True, lambda _, request: _postgres(request)),
}


def _postgres(request: pytest.FixtureRequest) -> MakeStore:
    databases: Databases = request.getfixturevalue("postgres_databases")

    async def make() -> Store:
        return databases.open(await trio.to_thread.run_sync(databases.url))

    return make


def _counter() -> Callable[[], int]:
    n = 0

    def next_n() -> int:
        nonlocal n
        n += 1
        return n

    return next_n


def _cases() -> list[tuple[str, str]]:
    cases: list[tuple[str, str]] = []
    for backend, (managed, _) in BACKENDS.items():
        # every store here forgets people; managed stores (memory, sqlite, postgresql) also
        # keep history and hold org changes for review
        extra = (*MANAGED_CHECKS, *REVIEW_CHECKS) if managed else ()
        # the SQL stores also commit many turn ends' stores in one transaction
        batched = GROUP_COMMIT_CHECKS if backend in ("sqlite", "postgresql") else ()
        names = [*COMMON_CHECKS, *FORGET_CHECKS, *extra, *batched]
        cases.extend((backend, name) for name in names)
    return cases


@pytest.mark.parametrize(("backend", "check"), _cases())
async def test_store_contract(
    backend: str, check: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _, factory = BACKENDS[backend]
    await run_check(factory(tmp_path, request), check)


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_check_store_runs_the_whole_contract(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _, factory = BACKENDS[backend]
    await check_store(factory(tmp_path, request))
