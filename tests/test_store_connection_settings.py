"""A shared store's connection settings: ``store_pool_size``, ``store_connect_timeout_seconds``,
``store_lock_timeout_seconds``.

Each is a config key, a ``MEMFS_*`` variable and a flag of ``memfs daemon``
and of every ``memfs`` command that opens a store, checked at load (a
``ConfigError`` naming it, exit 78) and passed through ``open_store`` to the
PostgreSQL store. Each is tested at and past its limit: a pool of one
connection serves calls one at a time, a write waiting on another's write
lock fails once the configured lock timeout passes, and a server that does
not answer fails the call once the configured connect timeout passes.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio
from click.testing import CliRunner

from memfs.cli import main
from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
    MAX_STORE_TIMEOUT_SECONDS,
)
from memfs.core.errors import ConfigError, StoreUnavailable
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores import postgres
from memfs.stores.memory import MemoryStore
from memfs.stores.open import open_store
from memfs.stores.postgres.schema import LOCK_CLASS, WRITE_LOCK
from memfsd.config import load_config
from tests.daemon_harness import require_fuse
from tests.postgres_fixtures import Databases
from tests.test_daemon_process import DANA, DaemonProcess, memfs

RULES = SpaceRef(layer="org", space="lending-rules", org="bank_17")
TIMEOUTS = ("store_connect_timeout_seconds", "store_lock_timeout_seconds")
KEYS = ("store_pool_size", *TIMEOUTS)


# The configuration: keys, variables and flags, checked at load.


@pytest.fixture(autouse=True)
def one_store_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The store key every command and daemon here names (as on a shared store they must)."""
    key = tmp_path / "keys" / "store.key"
    monkeypatch.setenv("MEMFS_STORE_KEY_FILE", str(key))
    return key


def test_the_defaults_are_the_postgres_stores_own() -> None:
    config = load_config(None, env={})
    assert config.store_pool_size == DEFAULT_STORE_POOL_SIZE == postgres.store.DEFAULT_POOL_SIZE
    assert (
        config.store_connect_timeout_seconds
        == DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS
        == postgres.store.DEFAULT_CONNECT_TIMEOUT_SECONDS
    )
    assert (
        config.store_lock_timeout_seconds
        == DEFAULT_STORE_LOCK_TIMEOUT_SECONDS
        == postgres.store.DEFAULT_LOCK_TIMEOUT_SECONDS
    )


def test_the_file_then_the_environment_then_the_flags_set_them(tmp_path: Path) -> None:
    toml = tmp_path / "memfs.toml"
    toml.write_text(
        "store_pool_size = 2\n"
        "store_connect_timeout_seconds = 3\n"
        "store_lock_timeout_seconds = 0.25\n"
    )
    from_file = load_config(toml, env={})
    assert from_file.store_pool_size == 2
    assert from_file.store_connect_timeout_seconds == 3.0
    assert from_file.store_lock_timeout_seconds == 0.25
    env = {
        "MEMFS_STORE_POOL_SIZE": "3",
        "MEMFS_STORE_CONNECT_TIMEOUT_SECONDS": "4.5",
        "MEMFS_STORE_LOCK_TIMEOUT_SECONDS": "0.5",
    }
    from_env = load_config(toml, env=env)
    assert (from_env.store_pool_size, from_env.store_connect_timeout_seconds) == (3, 4.5)
    assert from_env.store_lock_timeout_seconds == 0.5
    overrides = {
        "store_pool_size": 4,
        "store_connect_timeout_seconds": 6.0,
        "store_lock_timeout_seconds": 0.75,
    }
    flagged = load_config(toml, env=env, overrides=overrides)
    assert (flagged.store_pool_size, flagged.store_connect_timeout_seconds) == (4, 6.0)
    assert flagged.store_lock_timeout_seconds == 0.75


@pytest.mark.parametrize("value", [1, 1.0, "1"])
def test_a_pool_of_one_connection_is_accepted(value: object) -> None:
    assert load_config(None, env={}, overrides={"store_pool_size": value}).store_pool_size == 1


@pytest.mark.parametrize("value", [0, -1, "0", 1.5, True, "many", [2]])
def test_a_pool_of_fewer_than_one_connection_or_not_a_whole_number_is_refused(
    value: object,
) -> None:
    with pytest.raises(ConfigError, match=r"^store_pool_size \(from the command line\): must"):
        load_config(None, env={}, overrides={"store_pool_size": value})


@pytest.mark.parametrize("key", TIMEOUTS)
@pytest.mark.parametrize("value", [0.001, 1, "0.2", MAX_STORE_TIMEOUT_SECONDS])
def test_a_timeout_of_more_than_0_up_to_the_bound_is_accepted(key: str, value: object) -> None:
    config = load_config(None, env={}, overrides={key: value})
    assert getattr(config, key) == float(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", TIMEOUTS)
@pytest.mark.parametrize(
    "value",
    [0, 0.0, -1, "-0.5", math.nan, math.inf, "inf", MAX_STORE_TIMEOUT_SECONDS + 1, True, "soon"],
)
def test_a_timeout_of_0_negative_unbounded_or_not_a_number_is_refused(
    key: str, value: object
) -> None:
    with pytest.raises(ConfigError, match=rf"^{key} \(from the command line\): must"):
        load_config(None, env={}, overrides={key: value})


@pytest.mark.parametrize("key", KEYS)
def test_a_bad_value_in_the_file_or_the_environment_names_the_key_and_where(
    key: str, tmp_path: Path
) -> None:
    toml = tmp_path / "memfs.toml"
    toml.write_text(f"{key} = 0\n")
    with pytest.raises(ConfigError, match=rf"^{toml}: {key}: must"):
        load_config(toml, env={})
    var = f"MEMFS_{key.upper()}"
    with pytest.raises(ConfigError, match=rf"^{key} \(from {var}\): must"):
        load_config(None, env={var: "0"})


@pytest.mark.parametrize("store", ["memory://", "folder:///srv/memory", "sqlite:///var/m.db"])
def test_other_stores_accept_the_settings_and_ignore_them(store: str) -> None:
    overrides = {"store": store, "store_pool_size": 1, "store_lock_timeout_seconds": 0.1}
    assert load_config(None, env={}, overrides=overrides).store_pool_size == 1
    opened = open_store("memory://", pool_size=1, connect_timeout_seconds=0.1)
    assert isinstance(opened, MemoryStore)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"pool_size": 0}, "pool_size: must be at least 1"),
        ({"connect_timeout_seconds": 0}, "connect_timeout_seconds: must be more than 0"),
        ({"lock_timeout_seconds": -1}, "lock_timeout_seconds: must be more than 0"),
        ({"lock_timeout_seconds": math.inf}, "lock_timeout_seconds: must be a finite"),
    ],
)
@pytest.mark.parametrize("url", ["memory://", "postgresql://memfs@db.example/memfs"])
def test_open_store_refuses_a_bad_setting_whatever_the_store(
    url: str, option: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        open_store(url, **option)


def test_the_daemon_exits_78_naming_a_bad_setting_from_its_flag_or_variable(
    tmp_path: Path,
) -> None:
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_MOUNT_ROOT": str(tmp_path / "mnt")}
    flagged = CliRunner().invoke(main, ["daemon", "--store-pool-size", "0"], env=env)
    assert flagged.exit_code == 78
    assert "store_pool_size (from the command line): must be at least 1" in flagged.output
    from_env = CliRunner().invoke(
        main, ["daemon"], env={**env, "MEMFS_STORE_LOCK_TIMEOUT_SECONDS": "0"}
    )
    assert from_env.exit_code == 78
    assert "store_lock_timeout_seconds (from MEMFS_STORE_LOCK_TIMEOUT_SECONDS)" in from_env.output
    assert not (tmp_path / "state").exists()  # refused before anything was made


@pytest.mark.parametrize(
    "command",
    [
        ["review", "list", "--as", "ada"],
        ["people", "list"],
        ["db", "status"],
        ["db", "migrate"],
        ["web"],  # refused before its address is bound
    ],
)
def test_every_command_that_opens_a_store_exits_78_naming_a_bad_setting(
    command: list[str], tmp_path: Path
) -> None:
    store = f"sqlite://{tmp_path}/memfs.db"
    flagged = CliRunner().invoke(
        main, [*command, "--store", store, "--store-connect-timeout-seconds", "0"], env={}
    )
    assert flagged.exit_code == 78, flagged.output
    assert "store_connect_timeout_seconds (from --store-connect-timeout-seconds)" in flagged.output
    from_env = CliRunner().invoke(
        main, [*command, "--store", store], env={"MEMFS_STORE_POOL_SIZE": "0"}
    )
    assert from_env.exit_code == 78, from_env.output
    assert "store_pool_size (from MEMFS_STORE_POOL_SIZE): must be at least 1" in from_env.output
    assert list(tmp_path.iterdir()) == []  # no store was opened


# The PostgreSQL store, opened the configured way.


def holding_the_write_lock(url: str) -> psycopg.Connection[Any]:
    """Another writer: a connection in a transaction holding the store's write lock."""
    holder = psycopg.connect(url)
    holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, WRITE_LOCK))
    return holder


def waiting_for_the_lock(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def save(store: Any, changes: ChangeSet) -> None:
    await store.store(RULES, changes, cursor=None, provenance=Provenance(), review="none")


@pytest.mark.parametrize("pool_size", [1, 2])
async def test_a_pool_of_one_serves_calls_one_at_a_time_and_a_second_waits_the_connect_timeout(
    pool_size: int, postgres_databases: Databases
) -> None:
    url = postgres_databases.url()
    store = open_store(
        url,
        key_file=postgres_databases.key_file,
        pool_size=pool_size,
        connect_timeout_seconds=1,
        lock_timeout_seconds=30,
    )
    try:
        await save(store, ChangeSet(created={"a.md": b"1"}))
        assert (await store.load(RULES, "s1")).files == {"a.md": b"1"}
        holder = holding_the_write_lock(url)
        try:
            async with trio.open_nursery() as nursery:
                # A writer that waits on the lock, holding a pooled connection.
                nursery.start_soon(save, store, ChangeSet(updated={"a.md": b"2"}))
                for _ in range(200):
                    if waiting_for_the_lock(url):
                        break
                    await trio.sleep(0.05)
                else:
                    raise AssertionError("the writer never waited for the lock")
                began = time.monotonic()
                if pool_size == 1:
                    # The only connection is the waiting writer's: a read waits its turn
                    # for connect_timeout_seconds, then is unavailable.
                    with pytest.raises(StoreUnavailable):
                        await store.load(RULES, "s2")
                    assert 0.8 < time.monotonic() - began < 3
                else:
                    assert (await store.load(RULES, "s2")).files == {"a.md": b"1"}
                holder.commit()  # the writer gets the lock and stores
        finally:
            holder.close()
        assert (await store.load(RULES, "s3")).files == {"a.md": b"2"}
    finally:
        await store.aclose()


def test_a_write_waiting_on_another_writers_lock_fails_after_the_cli_lock_timeout(
    postgres_databases: Databases, tmp_path: Path
) -> None:
    url = postgres_databases.url()
    source = tmp_path / "rules.md"
    source.write_bytes(b"no lending on Sundays\n")
    put = ["put", "lending-rules", "rules.md", str(source), "--store", url, "--org", "bank_17"]
    put += ["--as", "ada", "--role", "admin"]
    runner = CliRunner()
    assert runner.invoke(main, put, env={}).exit_code == 0  # migrated, and the lock is free
    holder = holding_the_write_lock(url)
    try:
        for args, env in [
            (["--store-lock-timeout-seconds", "0.2"], {}),
            ([], {"MEMFS_STORE_LOCK_TIMEOUT_SECONDS": "0.2"}),
        ]:
            began = time.monotonic()
            refused = runner.invoke(main, [*put, *args], env=env)
            took = time.monotonic() - began
            assert refused.exit_code == StoreUnavailable.exit_code, refused.output
            assert "lock timeout" in refused.output
            assert took < 3, took  # not the default 5 s
    finally:
        holder.close()
    assert runner.invoke(main, [*put, "--store-lock-timeout-seconds", "0.2"], env={}).exit_code == 0


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A PostgreSQL URL whose address takes the connection and then never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # connections wait in the backlog: nothing ever answers them
        yield f"postgresql://memfs@127.0.0.1:{listener.getsockname()[1]}/memfs"


async def test_a_server_that_does_not_answer_fails_the_call_after_the_connect_timeout(
    silent_server: str, one_store_key: Path
) -> None:
    # libpq counts whole seconds, and psycopg waits at least 2 s to connect.
    store = open_store(silent_server, key_file=one_store_key, connect_timeout_seconds=2)
    try:
        began = time.monotonic()
        with trio.fail_after(10), pytest.raises(StoreUnavailable, match="timeout"):
            await store.load(RULES, "s1")
        assert 1.5 < time.monotonic() - began < 4.5
    finally:
        await store.aclose()


def test_db_status_on_a_server_that_does_not_answer_fails_after_its_connect_timeout(
    silent_server: str,
) -> None:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "db", "status", "--store", silent_server],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": "/usr/bin:/bin", "MEMFS_STORE_CONNECT_TIMEOUT_SECONDS": "2"},
    )
    assert done.returncode == StoreUnavailable.exit_code, done.stderr
    assert "timeout" in done.stderr
    assert time.monotonic() - began < 10  # the interpreter's start, and 2 s


# The daemon: its store opened with its settings.

ONE_SPACE = """
mount_root = "{root}/mnt"
state_dir = "{root}/state"
forget_poll_seconds = 0

[[memory]]
layer = "org"
space = "lending-rules"
org = "bankId"
review = "none"
"""


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    require_fuse()
    yield tmp_path
    subprocess.run(["fusermount3", "-u", "-z", str(tmp_path / "mnt")], capture_output=True)


def test_a_daemons_turn_end_waiting_on_another_writer_is_kept_after_its_lock_timeout(
    root: Path, postgres_databases: Databases
) -> None:
    url = postgres_databases.url()
    env = {"MEMFS_STORE": url, "MEMFS_STORE_LOCK_TIMEOUT_SECONDS": "0.3"}
    daemon = DaemonProcess(root, env, config=ONE_SPACE)
    try:
        started = memfs("turn", "start", "s1", "--extra-body", json.dumps(DANA), root=root)
        rules = Path(started["root"]) / "lending-rules"
        subprocess.run(["sh", "-c", "echo v1 > a.md"], cwd=rules, check=True)
        holder = holding_the_write_lock(url)
        try:
            began = time.monotonic()
            kept = memfs("turn", "end", "s1", root=root)["spaces"]["lending-rules"]
            assert time.monotonic() - began < 3.5  # the lock timeout, not the default 5 s
            assert kept["status"] == "not_saved" and kept["kept"] is True, kept
        finally:
            holder.close()
        again = memfs("turn", "end", "s1", root=root)["spaces"]["lending-rules"]
        assert again["status"] == "saved", again
    finally:
        assert daemon.stop() == 0
