"""`memfs db rotate-key` when things go wrong: a full disk, a `kill -9` mid-way, a lost answer.

The rotation is one transaction, so what can go wrong is around it: the new
key file is made first (and is then a key nothing is sealed under if the
transaction fails), and the operator may never see the answer. Each case
runs the real CLI as a process on a store with forty people in it (SQLite;
PostgreSQL too where no disk is filled):
the store must open with exactly one of the two keys, every person's memory
under it, and the CLI must say which.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from memfs.core.errors import ConfigError
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.open import open_store
from memfs.stores.sql.store import SqlStore
from tests.daemon_harness import tmpfs_disk
from tests.postgres_fixtures import Databases

PEOPLE = [SpaceRef(layer="user", space="me", org="bank-1", user=f"p{i}") for i in range(40)]


def sqlite_url(db: Path) -> str:
    return f"sqlite://{db}"


def seed(url: str, key: Path) -> None:
    async def put() -> None:
        store = opened(url, key)
        try:
            for ref in PEOPLE:
                mine = f"{ref.user}'s own\n".encode()
                await store.put(ref, ChangeSet(created={"d.md": mine}), provenance=Provenance())
        finally:
            await store.aclose()

    trio.run(put)


def opened(url: str, key: Path) -> SqlStore:
    store = open_store(url, key_file=key)
    assert isinstance(store, SqlStore)
    return store


def opens_with(url: str, key: Path) -> bool:
    """Whether ``key`` opens the store; if it does, every person's memory must be whole."""

    async def look() -> bool:
        store = opened(url, key)
        try:
            for ref in PEOPLE:
                assert await store.files(ref) == {"d.md": f"{ref.user}'s own\n".encode()}
        except ConfigError as exc:
            assert "another key" in str(exc)
            return False
        finally:
            await store.aclose()
        return True

    return trio.run(look)


def rotate(
    url: str, old: Path, new: Path, *, python: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            *(python or ["-m", "memfs.cli"]),
            "db",
            "rotate-key",
            "--store",
            url,
            "--store-key-file",
            str(old),
            "--new-key-file",
            str(new),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted after the test."""
    with tmpfs_disk(tmp_path / "disk", "4m", why="mounts a tmpfs to fill") as disk:
        yield disk


def fill(disk: Path, *, leave: int) -> Path:
    """Fill ``disk`` up to its last ``leave`` bytes; the filler file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, bytes(65536))
    except OSError:
        pass
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@pytest.mark.parametrize(
    ("full_at", "why"),
    [
        # No room to open the store: nothing is made, not even the new key file.
        ("open", "the store key was not rotated: the sqlite store failed"),
        # The store open (its log and shared memory made), no room for the new key.
        ("key-file", "not rotated: store_key_file cannot be created: No space left on device"),
        # Room for the new key file, none for the rotation's transaction.
        ("commit", "the store key was not rotated"),
    ],
)
def test_rotate_key_on_a_full_disk_fails_clearly_and_the_old_key_still_opens_everyone(
    small_disk: Path, full_at: str, why: str
) -> None:
    db, old, new = small_disk / "memfs.db", small_disk / "old.key", small_disk / "new.key"
    url = sqlite_url(db)
    seed(url, old)
    # An idle connection (a reader left open) keeps the log and shared memory there.
    holder = None if full_at == "open" else sqlite3.connect(db, isolation_level=None)
    try:
        if holder is not None:
            holder.execute("SELECT count(*) FROM person_keys").fetchone()
        filler = fill(small_disk, leave=4096 if full_at == "commit" else 0)
        done = rotate(url, old, new)
    finally:
        if holder is not None:
            holder.close()
    assert done.returncode != 0 and done.stdout == ""
    assert why in done.stderr, done.stderr
    assert new.exists() == (full_at == "commit")
    if new.exists():
        # Kept (a commit that failed may yet be in the log), and said so.
        assert f"opens with {old} as before" in done.stderr and f"Keep {new}" in done.stderr
    filler.unlink()
    assert opens_with(url, old)  # no person's key half wrapped again
    if new.exists():
        assert not opens_with(url, new)
    # Run again with the same files once there is room: it rotates.
    again = rotate(url, old, new)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"rotated": 40, "store_key_file": str(new)}
    assert opens_with(url, new) and not opens_with(url, old)


# The CLI dies where named: on the 20th of 40 person keys wrapped again (inside
# the transaction), or once the transaction committed, before the answer is printed.
SEAM = """
import os, signal, sys
import memfs.stores.sql.sealed as sealed
from memfs.stores.sqlite import SqliteStore
from memfs.stores.sql.store import SqlStore

AT = sys.argv.pop(1)
wraps = {"n": 0}
wrap = sealed.sealing.wrap_person_key
def wrap_or_die(*args):
    wraps["n"] += 1
    if AT == "mid-transaction" and wraps["n"] == 20:
        os.kill(os.getpid(), signal.SIGKILL)
    return wrap(*args)
sealed.sealing.wrap_person_key = wrap_or_die

def killed_once_committed(purge):
    def purge_or_die(self, fn, *, what):
        done = purge(self, fn, what=what)
        if AT == "committed":
            os.kill(os.getpid(), signal.SIGKILL)
        return done
    return purge_or_die
# SQLite's own purge (it empties its log after), PostgreSQL's the shared one.
SqliteStore._run_purge = killed_once_committed(SqliteStore._run_purge)
SqlStore._run_purge = killed_once_committed(SqlStore._run_purge)

from memfs.cli import main
sys.argv[0] = "memfs"
main()
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store: SQLite in tmp_path, or a schema of the throwaway PostgreSQL server."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "memfs.db")
    databases: Databases = request.getfixturevalue("postgres_databases")
    return databases.url()


def test_rotate_key_killed_mid_transaction_leaves_every_person_under_the_old_key(
    store_url: str, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.key", tmp_path / "new.key"
    seed(store_url, old)
    killed = rotate(store_url, old, new, python=["-c", SEAM, "mid-transaction"])
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert opens_with(store_url, old) and not opens_with(store_url, new)
    again = rotate(store_url, old, new)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rotated"] == 40
    assert opens_with(store_url, new) and not opens_with(store_url, old)


def test_rotate_key_run_again_after_a_kill_past_its_commit_reports_the_rotation_done(
    store_url: str, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.key", tmp_path / "new.key"
    seed(store_url, old)
    killed = rotate(store_url, old, new, python=["-c", SEAM, "committed"])
    assert killed.returncode == -signal.SIGKILL and killed.stdout == ""  # no answer seen
    assert opens_with(store_url, new) and not opens_with(store_url, old)
    # The operator runs the same command again: the rotation is done, and said to be.
    again = rotate(store_url, old, new)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {
        "rotated": 0,
        "store_key_file": str(new),
        "already_rotated": True,
    }
    assert opens_with(store_url, new) and not opens_with(store_url, old)
    # A key that fits neither is still refused, as before.
    other = rotate(store_url, old, tmp_path / "other.key")
    assert other.returncode == 78 and "another key" in other.stderr


def test_rotate_key_to_a_key_file_whose_folder_cannot_be_made_is_a_clear_error(
    tmp_path: Path,
) -> None:
    db, old = tmp_path / "memfs.db", tmp_path / "old.key"
    url = sqlite_url(db)
    seed(url, old)
    new = old / "keys" / "new.key"  # under a file: no folder can be made there
    done = rotate(url, old, new)
    assert done.returncode == 78, done.stderr
    assert done.stderr.startswith("memfs: error: the store key was not rotated: ")
    assert "store_key_file cannot be created" in done.stderr and "Traceback" not in done.stderr
    assert opens_with(url, old)
