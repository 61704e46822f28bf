"""Every store backend passes the same contract, ``memfs.testing.check_store``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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

BACKENDS: dict[str, tuple[bool, Callable[[Path], Callable[[], Store]]]] = {
    # name: (managed, factory of make_store for a tmp dir)
    "memory": (True, lambda tmp: lambda: open_store("memory://")),
    # a fresh folder per store, as the contract wants a fresh store per check
    "folder": (
        False,
        lambda tmp: (lambda n: lambda: FolderStore(tmp / f"folder-{n()}"))(_counter()),
    ),
    # a fresh database file per store, likewise
    "sqlite": (
        True,
        lambda tmp: (lambda n: lambda: SqliteStore(tmp / f"memfs-{n()}.db"))(_counter()),
    ),
}


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
        # every store here forgets people; managed stores (memory, sqlite) also
        # keep history and hold org changes for review
        extra = (*MANAGED_CHECKS, *REVIEW_CHECKS) if managed else ()
        names = [*COMMON_CHECKS, *FORGET_CHECKS, *extra]
        cases.extend((backend, name) for name in names)
    return cases


@pytest.mark.parametrize(("backend", "check"), _cases())
async def test_store_contract(backend: str, check: str, tmp_path: Path) -> None:
    _, factory = BACKENDS[backend]
    await run_check(factory(tmp_path), check)


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_check_store_runs_the_whole_contract(backend: str, tmp_path: Path) -> None:
    _, factory = BACKENDS[backend]
    await check_store(factory(tmp_path))
