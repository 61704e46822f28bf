"""`memfs db rotate-key` against PostgreSQL when things go wrong around the rotation.

The SQLite attack (``test_store_key_rotation_faults.py``) fills the disk the
database and both key files share; against PostgreSQL the database is
elsewhere, so what fails here is the new key file's folder (full, read-only),
the server refusing the rotation's writes (its own disk full), the
connection dropped or the server stopped mid-rotation, the answer lost after
the commit, and a kill while the new key file is being made. Each runs the
real CLI as a process on a store with forty people in it; after each the
store must open with exactly one of the two keys, every person's memory
under it, the CLI must have said which, and a second run with the same files
must finish the rotation (or say it is done).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memfs.core.errors import StoreUnavailable
from memfs.testing.postgres import ThrowawayPostgres, postgres_bindir, throwaway_postgres
from tests.daemon_harness import tmpfs_disk
from tests.postgres_fixtures import Databases
from tests.test_store_key_rotation_faults import fill, opens_with, rotate, seed


@pytest.fixture
def store_url(postgres_databases: Databases) -> str:
    return postgres_databases.url()


@pytest.fixture
def key_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs for the new key file, unmounted after the test."""
    with tmpfs_disk(tmp_path / "keys", "1m", why="mounts a tmpfs for the new key file") as disk:
        yield disk


def rotated_after_all(url: str, old: Path, new: Path) -> None:
    """A second run with the same files rotates: only the new key opens, everyone in it."""
    again = rotate(url, old, new)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"rotated": 40, "store_key_file": str(new)}
    assert opens_with(url, new) and not opens_with(url, old)


@pytest.mark.parametrize(
    ("fault", "why"), [("full", "No space left on device"), ("read-only", "Read-only file system")]
)
def test_postgres_rotate_key_whose_new_key_file_cannot_be_written_fails_clearly_changing_nothing(
    store_url: str, tmp_path: Path, key_disk: Path, fault: str, why: str
) -> None:
    old, new = tmp_path / "old.key", key_disk / "new.key"
    seed(store_url, old)
    filler = None
    if fault == "full":
        filler = fill(key_disk, leave=0)
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(key_disk)], check=True)
    done = rotate(store_url, old, new)
    assert done.returncode == 78 and done.stdout == ""
    assert done.stderr.startswith("memfs: error: the store key was not rotated: "), done.stderr
    assert f"store_key_file cannot be created: {why}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not new.exists()
    assert [p.name for p in key_disk.iterdir()] == ([] if filler is None else ["filler"])
    assert opens_with(store_url, old)
    if filler is not None:
        filler.unlink()
    else:
        subprocess.run(["mount", "-o", "remount,rw", str(key_disk)], check=True)
    rotated_after_all(store_url, old, new)


def test_postgres_rotate_key_the_server_refuses_as_its_disk_is_full_keeps_both_keys_and_says_old(
    store_url: str, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.key", tmp_path / "new.key"
    seed(store_url, old)
    # The server's own disk full, as it answers it (SQLSTATE 53100), at the
    # rotation's last write: every person's key was wrapped again before it.
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION disk_is_full() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'"
            " USING ERRCODE = 'disk_full'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER disk_is_full BEFORE UPDATE ON store_key_check"
            " FOR EACH ROW EXECUTE FUNCTION disk_is_full()"
        )
    done = rotate(store_url, old, new)
    assert done.returncode == StoreUnavailable.exit_code and done.stdout == ""
    assert "the store key was not rotated" in done.stderr and "No space left" in done.stderr
    assert f"the store opens with {old} as before" in done.stderr and f"Keep {new}" in done.stderr
    assert "Traceback" not in done.stderr
    assert new.exists()  # made first, and kept: nothing is sealed under it
    assert opens_with(store_url, old) and not opens_with(store_url, new)
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER disk_is_full ON store_key_check")
    rotated_after_all(store_url, old, new)


# The CLI against PostgreSQL, failing where named: its connection dropped by
# the server at the 20th of 40 person keys wrapped again; stopped there until
# the test has stopped the server (``<marker>`` made, ``<marker>.go`` awaited);
# its answer lost after the commit; killed while making the new key file.
SEAM = """
import os, signal, sys, time
from pathlib import Path
import psycopg
import memfs.stores.sql.sealed as sealed
from memfs.core.errors import StoreUnavailable
from memfs.stores.sql.store import SqlStore

AT = sys.argv.pop(1)
MARKER = Path(sys.argv.pop(1))
URL = sys.argv[sys.argv.index("--store") + 1]
wraps = {"n": 0}
wrap = sealed.sealing.wrap_person_key
def wrap_or_fail(*args):
    wraps["n"] += 1
    if wraps["n"] == 20 and AT == "dropped":
        with psycopg.connect(URL, autocommit=True) as other:
            other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    if wraps["n"] == 20 and AT == "server-stopped":
        MARKER.write_text("stopped")
        while not MARKER.with_suffix(".go").exists():
            time.sleep(0.01)
    return wrap(*args)
sealed.sealing.wrap_person_key = wrap_or_fail

purge = SqlStore._run_purge
def purge_then_lose_the_answer(self, fn, *, what):
    done = purge(self, fn, what=what)
    if AT == "answer-lost":
        raise StoreUnavailable("the postgresql store failed: server closed the connection")
    return done
SqlStore._run_purge = purge_then_lose_the_answer

fsync = os.fsync
def killed_making_the_key(fd):
    if AT == "key-kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return fsync(fd)
os.fsync = killed_making_the_key

from memfs.cli import main
sys.argv[0] = "memfs"
main()
"""


def seam(at: str, marker: Path) -> list[str]:
    return ["-c", SEAM, at, str(marker)]


def test_postgres_rotate_key_whose_connection_drops_mid_rotation_keeps_everyone_under_the_old_key(
    store_url: str, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.key", tmp_path / "new.key"
    seed(store_url, old)
    done = rotate(store_url, old, new, python=seam("dropped", tmp_path / "marker"))
    assert done.returncode == StoreUnavailable.exit_code and done.stdout == ""
    assert f"the store opens with {old} as before" in done.stderr, done.stderr
    assert f"Keep {new}" in done.stderr and "Traceback" not in done.stderr
    assert opens_with(store_url, old) and not opens_with(store_url, new)
    rotated_after_all(store_url, old, new)


def test_postgres_rotate_key_whose_answer_is_lost_after_the_commit_says_only_the_new_key_opens(
    store_url: str, tmp_path: Path
) -> None:
    old, new = tmp_path / "old.key", tmp_path / "new.key"
    seed(store_url, old)
    done = rotate(store_url, old, new, python=seam("answer-lost", tmp_path / "marker"))
    assert done.returncode == StoreUnavailable.exit_code and done.stdout == ""
    assert f"the store key is rotated: only {new} opens the store now" in done.stderr, done.stderr
    assert opens_with(store_url, new) and not opens_with(store_url, old)
    again = rotate(store_url, old, new)  # the operator runs it again: done, and said to be
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {
        "rotated": 0,
        "store_key_file": str(new),
        "already_rotated": True,
    }


def test_postgres_rotate_key_killed_making_the_new_key_file_leaves_none_and_runs_again(
    store_url: str, tmp_path: Path
) -> None:
    old, keys = tmp_path / "old.key", tmp_path / "keys"
    new = keys / "new.key"
    seed(store_url, old)
    killed = rotate(store_url, old, new, python=seam("key-kill", tmp_path / "marker"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list(keys.iterdir()) == []  # no key, no temporary file
    assert opens_with(store_url, old)
    rotated_after_all(store_url, old, new)


@pytest.fixture(scope="module")
def own_server() -> Iterator[ThrowawayPostgres]:
    """A server of this module's own, to stop and start (the session's must stay up)."""
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed here")
    with throwaway_postgres(bindir) as server:
        yield server


def test_postgres_rotate_key_with_the_server_stopped_mid_rotation_says_it_cannot_tell_keep_both(
    postgres_server: ThrowawayPostgres, own_server: ThrowawayPostgres, tmp_path: Path
) -> None:
    url = own_server.new_database()
    old, new, marker = tmp_path / "old.key", tmp_path / "new.key", tmp_path / "marker"
    seed(url, old)
    cli = subprocess.Popen(
        rotate_command(url, old, new, seam("server-stopped", marker)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, "the rotation never reached its 20th person"
            time.sleep(0.01)
        own_server.stop_server()
        try:
            marker.with_suffix(".go").write_text("go")
            out, err = cli.communicate(timeout=60)
            # Run again while the server is still down: this run changes nothing,
            # and must not read as "the old key is the store's" (the new may be).
            early = rotate(url, old, new)
        finally:
            own_server.start_server()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == StoreUnavailable.exit_code and out == ""
    assert "may or may not be rotated" in err and "the store cannot tell now" in err, err
    assert f"Keep both {old} and {new}" in err and "Traceback" not in err
    assert new.exists()
    assert early.returncode == StoreUnavailable.exit_code and early.stdout == ""
    assert early.stderr.startswith("memfs: error: the store key was not rotated: ")
    assert f"; this run changed nothing, but keep {new}: an earlier run" in early.stderr, (
        early.stderr
    )
    # The server back: the transaction it cut was rolled back; the same run again rotates.
    assert opens_with(url, old) and not opens_with(url, new)
    rotated_after_all(url, old, new)


def rotate_command(url: str, old: Path, new: Path, python: list[str]) -> list[str]:
    """The command line ``rotate`` runs, for a CLI the test drives while it runs."""
    return [
        sys.executable,
        *python,
        *["db", "rotate-key", "--store", url, "--store-key-file", str(old)],
        *["--new-key-file", str(new)],
    ]
