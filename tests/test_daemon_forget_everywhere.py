"""What is forgotten leaves every file of state_dir: held change sets, open turns, torn records."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import memfs
from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfsd.service import DaemonService
from tests.daemon_harness import KILL_POINT, require_fuse, running_daemon, sh
from tests.postgres_fixtures import Databases
from tests.test_daemon_forget import (
    ME,
    PROMPT,
    SPECS,
    desk,
    manage,
    mounts_of,
    org_store_down,
    seeded,
    write_new,
)
from tests.test_daemon_mount import start
from tests.test_daemon_process import ME_TABLE, PLACES, DaemonProcess, root
from tests.test_daemon_process import memfs as memfs_cli
from tests.test_daemon_process_postgres import cli, end, turn, within

__all__ = ["root"]  # the fixture, shared with test_daemon_process

# Markers unique to this module's content, file names and prompts.
NAME = b"quokka-chart"
BODY = b"quokka-body: stage III"


def holding(folder: Path, *markers: bytes) -> list[str]:
    """Every file under ``folder`` whose raw bytes hold one of ``markers``."""
    return sorted(
        f"{path}: {marker!r}"
        for path in folder.rglob("*")
        if path.is_file()
        for marker in markers
        if marker in path.read_bytes()
    )


async def test_a_forgotten_file_leaves_the_manual_change_set_waiting_for_commit(
    tmp_path: Path,
) -> None:
    # Dana's memory commits by hand: her ended turn's change set waits in
    # sessions/s1/manual/<turn>.json, contents in base64. Forgetting the one
    # file she wrote there (memfs forget, which tells this daemon) must take
    # its name and bytes out of that file, as forget-user does for the space.
    specs = [spec.model_copy(update={"commit": "manual"}) for spec in SPECS]
    async with running_daemon(tmp_path, specs) as daemon:
        store = await seeded(daemon)
        chart = f"{NAME.decode()}.md"
        await store.put(ME, ChangeSet(created={chart: b"first\n"}), provenance=Provenance())
        root = await start(daemon, "s1")
        await sh(f"printf '{BODY.decode()}' > me/{chart}", root)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].status == "manual"
        state_dir = daemon.settings.state_dir
        b64 = base64.b64encode(BODY)[:16]
        assert holding(state_dir / "sessions", NAME, b64) != []

        await manage(daemon, "forget", "me", chart, "--user", "u_dana")
        await daemon.service.poll_forgets()  # and a look at the store, for good measure

        found = await trio.to_thread.run_sync(holding, state_dir / "sessions", NAME, b64)
        assert found == []
        committed = await daemon.service.commit_turn("s1", ended.turn)
        assert committed.spaces["me"].reason == "forgotten"
        assert chart not in await store.files(ME)  # nothing of the held change set stored


async def test_a_file_forgotten_elsewhere_after_its_space_was_stored_leaves_the_open_turn(
    tmp_path: Path,
) -> None:
    # Dana's turn created a file in her memory; its end stored her space, and
    # the turn stays open because the org space is kept (its store failed):
    # the mount stays readable, her file's bytes in the turn's data folder.
    # Another process (my_memory, another daemon, the CLI of another host)
    # forgets that one file and tells no daemon: the look for forgets must
    # drop it as a notice of it would.
    store, rules = org_store_down()
    specs = [memfs.user_memory(), memfs.org_memory(space=rules.space, review="none")]
    memory, ws = desk(tmp_path, store, specs)
    turn = await memory.start_turn("s1", {"userId": "u_dana"})
    chart = f"{NAME.decode()}.md"
    write_new(ws.overlay, mounts_of(ws.overlay)["me"], chart, BODY)
    write_new(ws.overlay, mounts_of(ws.overlay)["lending-rules"], "rule.md", b"x\n")
    ended = await turn.end()
    assert ended.spaces["me"].status == "saved"
    assert ended.spaces["lending-rules"].kept
    state = tmp_path / "state"
    assert holding(state, NAME, BODY) != []

    await store.forget_file(SpaceRef(layer="user", space="me", user="u_dana"), chart, by=None)
    service = DaemonService(memory, ws, "memory://", str(state))
    await service.poll_forgets()

    assert holding(state, NAME, BODY) == []


MANUAL_ME_CONFIG = (
    PLACES
    + """forget_poll_seconds = 0.2
listen_retry_seconds = 0.2

[[memory]]
layer = "org"
space = "lending-rules"
org = "bankId"
review = "none"
"""
    + ME_TABLE
    + 'commit = "{commit}"\n'
)


def test_a_file_forgotten_through_another_host_leaves_daemon_bs_manual_change_set(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    postgres_databases: Databases,
    postgres_key_file: Path,
) -> None:
    # Two daemons on one PostgreSQL store. Dana's turn on B edited her file;
    # B's memory commits by hand, so the change set (her file's name and new
    # bytes, base64) waits in B's state_dir. The file is forgotten through
    # another host's `memfs forget`, which tells B nothing: B hears the
    # notice (and polls every 0.2 s), yet her file stays in B's state_dir.
    require_fuse()
    monkeypatch.setenv("MEMFS_STORE_KEY_FILE", str(postgres_key_file))
    url = postgres_databases.url()
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    a_root.mkdir()
    b_root.mkdir()
    chart = f"{NAME.decode()}.md"
    a = DaemonProcess(
        a_root, {"MEMFS_STORE": url}, config=MANUAL_ME_CONFIG.replace("{commit}", "after-turn")
    )
    try:
        b = DaemonProcess(
            b_root, {"MEMFS_STORE": url}, config=MANUAL_ME_CONFIG.replace("{commit}", "manual")
        )
        try:
            turn(a_root, "a1", f"printf first > me/{chart}")
            assert end(a_root, "a1")["me"]["status"] == "saved"
            turn(b_root, "b1", f"printf '{BODY.decode()}' > me/{chart}")
            assert end(b_root, "b1")["me"]["status"] == "manual"
            b_state = b_root / "state"
            b64 = base64.b64encode(BODY)[:16]
            assert holding(b_state, NAME, b64) != []

            cli(url, "forget", "me", chart, "--user", "u_dana")

            assert within(5, lambda: holding(b_state, NAME, b64) == []), holding(b_state, NAME, b64)
        finally:
            assert b.stop() == 0
    finally:
        assert a.stop() == 0
        for root in (a_root, b_root):
            subprocess.run(["fusermount3", "-u", "-z", str(root / "mnt")], capture_output=True)


# The daemon dies (SIGKILL) as a turn start has written its record's temporary
# copy (<session>/turn.json.tmp) and not yet renamed it to turn.json.
TURN_RECORD_SEAM = (
    KILL_POINT
    + """
import memfsd.workspace as workspace

class Os:
    def __getattr__(self, name):
        return getattr(os, name)
    def replace(self, src, dst):
        if str(dst).endswith("sessions/s2/turn.json"):
            point("turn-record-replace")
        os.replace(src, dst)

workspace.os = Os()

from memfs.cli import main
main()
"""
)
QUOKKA = {"userId": "u_dana", "name": "Quokka Tapir", "bankId": "bank_17", "role": "underwriter"}


def test_a_turn_record_a_kill_left_half_made_keeps_no_word_of_a_person_forgotten_after(
    root: Path,
) -> None:
    # A kill -9 between a turn start's write of turn.json.tmp and its rename leaves
    # turn.json.tmp (the prompt, the body with her name, her files' names and
    # sha256s). The next start brings back no such turn, and forgetting her
    # afterwards (the CLI, which tells the daemon) leaves that file as it was.
    env = {"MEMFS_TEST_KILL_AT": "turn-record-replace"}
    daemon = DaemonProcess(root, env, python=["-c", TURN_RECORD_SEAM])
    body = json.dumps(QUOKKA)
    memfs_cli("turn", "start", "s0", "--extra-body", body, root=root)
    first = root / "mnt" / "s0"
    (first / "me" / f"{NAME.decode()}.md").write_bytes(BODY)
    assert memfs_cli("turn", "end", "s0", root=root)["spaces"]["me"]["status"] == "saved"
    prompt = "quokka-prompt: my chart says stage III"
    started = memfs_cli(
        "turn", "start", "s2", "--extra-body", body, "--prompt", prompt, root=root, check=False
    )
    assert started.returncode != 0
    assert daemon.proc.wait(timeout=60) == -signal.SIGKILL
    daemon.log.close()

    again = DaemonProcess(root)
    try:
        db = root / "state" / "memfs.db"
        done = subprocess.run(
            [sys.executable, "-m", "memfs.cli", "forget-user", "u_dana", "--store", f"sqlite://{db}",
             "--org", "bank_17", "--as", "root-admin", "--role", "admin"],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "MEMFS_SOCKET": str(root / "state" / "memfs.sock")},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert holding(root / "state", NAME, b"quokka-prompt", b"Quokka Tapir") == []
    finally:
        assert again.stop() == 0


async def test_a_person_forgotten_elsewhere_leaves_no_prompt_in_a_change_set_held_of_her_space(
    tmp_path: Path,
) -> None:
    # Her manual space is the hold's only one: a look that took her space out
    # first (as a file's forget does) left a hold that no longer names her,
    # so her forget as a whole passed over the prompt still in it.
    specs = [SPECS[0], SPECS[1].model_copy(update={"commit": "manual"})]
    async with running_daemon(tmp_path, specs) as daemon:
        store = await seeded(daemon)
        root = await start(daemon, "s1", prompt=PROMPT)
        await sh(f"printf '{BODY.decode()}' > me/{NAME.decode()}.md", root)
        ended = await daemon.service.end_turn("s1")
        assert ended.spaces["me"].status == "manual"
        [held] = (daemon.settings.state_dir / "sessions" / "s1" / "manual").glob("*.json")
        assert b"okapi-prompt" in held.read_bytes()

        await store.forget_user("u_dana", ME.org, by=None)  # another process: no notice
        await daemon.service.poll_forgets()

        assert b"okapi-prompt" not in held.read_bytes()
        assert b"Dana" not in held.read_bytes()
