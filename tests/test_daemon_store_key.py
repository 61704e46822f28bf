"""The daemon's store key: the config key ``store_key_file``, and the store opened with it.

A person's files written through a real mount are sealed in the database
under the key in ``<state_dir>/store.key`` (made 0600 at start); a daemon
started with another key than the store was sealed under stops at start,
naming the file, with nothing mounted.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from memfs.core.errors import ConfigError
from memfs.core.models import ChangeSet, Limits, Provenance, SpaceRef
from memfs.core.specs import as_spec
from memfs.stores.keyfile import load_store_key
from memfs.stores.open import open_store
from memfsd.config import load_config
from memfsd.main import Settings, serve
from tests.daemon_harness import require_fuse, running_daemon, sh
from tests.test_daemon_mount import SPECS, start


def test_store_key_file_defaults_to_the_state_dir_and_is_set_by_env_or_flag() -> None:
    assert load_config(None, env={"MEMFS_STATE_DIR": "/data/memfs"}).key_file == Path(
        "/data/memfs/store.key"
    )
    env = {"MEMFS_STATE_DIR": "/data/memfs", "MEMFS_STORE_KEY_FILE": "/keys/memfs.key"}
    assert load_config(None, env=env).key_file == Path("/keys/memfs.key")
    flagged = load_config(None, env=env, overrides={"store_key_file": Path("/flag/k")})
    assert flagged.key_file == Path("/flag/k")


def test_a_relative_store_key_file_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="store_key_file"):
        load_config(None, env={"MEMFS_STORE_KEY_FILE": "keys/store.key"})


async def test_a_persons_files_written_through_the_mount_are_sealed_in_the_database(
    tmp_path: Path,
) -> None:
    async with running_daemon(tmp_path, SPECS) as daemon:
        root = await start(daemon, "s1", prompt="kiwi-prompt-71c3")
        await sh("printf 'pangolin-b8e4' > me/notes.md", root)
        await daemon.service.end_turn("s1")
        state = daemon.settings.state_dir
        key = state / "store.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        raw = b"".join(p.read_bytes() for p in state.iterdir() if p.name.startswith("memfs.db"))
        assert b"pangolin-b8e4" not in raw
        root = await start(daemon, "s2")
        # Through the mount, by a shell (never from this thread: it serves the mount).
        assert (await sh("cat me/notes.md", root)).stdout == b"pangolin-b8e4"
        await daemon.service.end_turn("s2")


@pytest.fixture
def public() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="memfs-key-", dir="/tmp"))
    yield path
    subprocess.run(["fusermount3", "-u", "-z", str(path / "mnt")], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def sealed_store(request: pytest.FixtureRequest, public: Path) -> str:
    """The URL of a store with one person's file sealed under ``public/first.key``."""
    if request.param == "sqlite":
        (public / "state").mkdir(mode=0o700)
        return f"sqlite://{public / 'state' / 'memfs.db'}"
    databases = request.getfixturevalue("postgres_databases")
    url: str = databases.url()
    return url


async def seal_one_file(url: str, key_file: Path) -> None:
    store = open_store(url, key_file=key_file)
    try:
        dana = SpaceRef(layer="user", space="me", org="bank_17", user="u_dana")
        loaded = await store.load(dana, "s0")
        await store.store(
            dana, ChangeSet(created={"a.md": b"x"}), cursor=loaded.cursor, provenance=Provenance()
        )
    finally:
        await store.aclose()


async def test_a_daemon_with_another_store_key_stops_at_start_naming_store_key_file(
    public: Path, sealed_store: str
) -> None:
    require_fuse()
    state = public / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    sealed_under = public / "first.key"
    await seal_one_file(sealed_store, sealed_under)
    db = state / "memfs.db"
    before = db.read_bytes() if db.exists() else None
    settings = Settings(
        mount_root=public / "mnt",
        state_dir=state,
        store=sealed_store,
        specs=[as_spec(spec) for spec in SPECS],
        limits=Limits(),
        socket=state / "memfs.sock",
    )
    with pytest.raises(ConfigError, match="store_key_file") as caught, trio.fail_after(30):
        await serve(settings)
    assert caught.value.path == str(state / "store.key")  # the default it was given
    assert not os.path.ismount(public / "mnt")
    if before is not None:
        assert db.read_bytes() == before
    assert load_store_key(sealed_under) != load_store_key(state / "store.key")


async def test_memfs_web_with_another_store_key_stops_at_start_naming_store_key_file(
    public: Path, sealed_store: str
) -> None:
    await seal_one_file(sealed_store, public / "first.key")
    with socket.socket() as probe:  # a free port (nothing must ever be served on it)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with trio.fail_after(60):  # a start that serves instead never returns
        done = await trio.run_process(
            [sys.executable, "-m", "memfs.cli", "web", "--store", sealed_store,
             "--listen", f"127.0.0.1:{port}", "--store-key-file", str(public / "other.key")],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )  # fmt: skip
    assert done.returncode == 78, done.stderr
    assert b"store_key_file" in done.stderr
