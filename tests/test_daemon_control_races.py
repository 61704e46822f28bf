"""The control API under concurrency and bad sequencing: stored once, lost nothing, a clear 4xx.

The daemon's service over its overlay workspace (no mount, as
``tests/test_daemon_forget.py`` builds it), with a :class:`FaultyStore` to
hold a store call where a race needs it; a stop of the daemon is a cancel of
the request in flight, which is what SIGTERM does to the control API's
requests (``memfsd.main.serve`` cancels the nursery serving it).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio

from memfs.api.control import control_app
from memfs.api.models import StartTurnRequest, TurnEnded
from memfs.core.errors import MemfsError
from memfs.core.models import SpaceRef
from memfs.core.specs import MemorySpec
from memfs.stores.sqlite import SqliteStore
from memfs.testing import FaultyStore
from memfsd.service import DaemonService
from tests.test_daemon_forget import SPECS, desk, mounts_of, write_new

BODY = {"userId": "u_dana", "name": "Dana", "role": "underwriter"}
ME = SpaceRef(layer="user", space="me", user="u_dana")
# Her own memory waits for `memfs turn commit`.
MANUAL = [SPECS[0], SPECS[1].model_copy(update={"commit": "manual"})]


def service_over(
    tmp_path: Path, store: FaultyStore, specs: Sequence[MemorySpec] = SPECS
) -> DaemonService:
    memory, ws = desk(tmp_path, store, specs)
    return DaemonService(memory, ws, "sqlite://", str(tmp_path / "state"))


async def ended_with_a_manual_space(service: DaemonService) -> TurnEnded:
    """Dana's turn in s1 writes her (manual) space and ends: its change set waits."""
    await service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
    overlay = service.workspace.overlay
    write_new(overlay, mounts_of(overlay)["me"], "n.md", b"mine\n")
    ended = await service.end_turn("s1")
    assert ended.spaces["me"].status == "manual"
    return ended


async def commits_while_the_store_holds(
    store: FaultyStore,
    service: DaemonService,
    turn: str,
    commits: int,
    meanwhile: Callable[[], Awaitable[object]] | None = None,
) -> tuple[list[object], object]:
    """Start ``commits`` commits of s1's held ``turn`` at once, the store holding the first;
    run ``meanwhile`` then, and let the store go. What each commit and ``meanwhile`` gave."""
    gate = store.block("store")
    results: list[object] = []
    during: object = None

    async def commit() -> None:
        try:
            results.append(await service.commit_turn("s1", turn))
        except Exception as exc:
            results.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(commits):
            nursery.start_soon(commit)
        with trio.fail_after(10):
            while store.calls["store"] < 1:  # noqa: ASYNC110
                await trio.sleep(0.01)
        await trio.sleep(0.1)  # every commit has come in
        if meanwhile is not None:
            try:
                during = await meanwhile()
            except MemfsError as exc:
                during = exc
        gate.set()
    return results, during


async def test_two_commits_of_one_manual_turn_at_once_store_it_once_and_refuse_the_other(
    tmp_path: Path,
) -> None:
    # `memfs turn commit s1 T` run twice at once (a retry after a timeout):
    # both read the held change set before either is through, so both store
    # it, and the second then fails on the hold the first removed (KeyError:
    # a 500 over the control API).
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    service = service_over(tmp_path, store, MANUAL)
    try:
        ended = await ended_with_a_manual_space(service)
        results, _ = await commits_while_the_store_holds(store, service, ended.turn, 2)
        assert store.calls["store"] == 1, "the turn's change set was sent to the store twice"
        [done] = [r for r in results if isinstance(r, TurnEnded)]
        assert done.spaces["me"].status == "saved"
        [refused] = [r for r in results if not isinstance(r, TurnEnded)]
        assert isinstance(refused, MemfsError) and refused.http_status < 500, repr(refused)
        assert service.manual == {} and ("s1", ended.turn) in service.committed
    finally:
        await store.aclose()


async def test_a_session_closed_while_its_commit_stores_leaves_no_state_and_no_500(
    tmp_path: Path,
) -> None:
    # The close was let through (the session has no open turn) while a commit
    # of its held change set was at the store. The commit then stored, failed
    # on the hold the close removed (KeyError: a 500), and wrote a
    # `.committed` mark into the closed session's folder, made again.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    service = service_over(tmp_path, store, MANUAL)
    try:
        ended = await ended_with_a_manual_space(service)
        [result], closed = await commits_while_the_store_holds(
            store, service, ended.turn, 1, partial(service.close_session, "s1")
        )
        assert not isinstance(result, KeyError), "the commit failed on the hold the close removed"
        if isinstance(result, MemfsError):
            assert result.http_status < 500
        if not isinstance(closed, MemfsError):  # the session is closed: nothing of it stays
            assert not (tmp_path / "state" / "sessions" / "s1").exists()
    finally:
        await store.aclose()


async def test_a_stop_while_a_manual_turn_ends_keeps_its_change_set_for_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The end closes the turn (turn.json gone, its folder removed in a worker
    # thread) and only then writes the held change set down
    # (DaemonService.end_turn -> save_manual). A stop landing while the folder
    # is removed cancels the request before that write: the next start has
    # neither the open turn nor the change set. What the agent wrote is lost.
    db = tmp_path / "memfs.db"
    store = FaultyStore(SqliteStore(db))
    service = service_over(tmp_path, store, MANUAL)
    overlay = service.workspace.overlay
    removing = trio.Event()
    token = trio.lowlevel.current_trio_token()
    remove = overlay.remove_turn_dir

    def slow_remove(folder: Path, marks: Collection[str] = ()) -> None:  # a slow disk
        trio.from_thread.run_sync(removing.set, trio_token=token)
        time.sleep(0.3)
        remove(folder, marks)

    try:
        await service.start_turn(StartTurnRequest(session="s1", extra_body=BODY))
        write_new(overlay, mounts_of(overlay)["me"], "n.md", b"mine\n")
        monkeypatch.setattr(overlay, "remove_turn_dir", slow_remove)
        with trio.CancelScope() as stopping:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service.end_turn, "s1")
                with trio.fail_after(10):
                    await removing.wait()
                stopping.cancel()  # SIGTERM: the control API's requests are cancelled
    finally:
        overlay.write_held()  # as the daemon's stop does
        await store.aclose()

    store = FaultyStore(SqliteStore(db))
    again = service_over(tmp_path, store, MANUAL)
    try:
        back = again.recover()
        held = [key[0] for key in again.manual]
        assert back == ["s1"] or held == ["s1"], "neither the turn nor its change set came back"
    finally:
        await store.aclose()


async def test_an_identity_in_the_extra_body_that_is_not_a_string_is_a_bad_request(
    tmp_path: Path,
) -> None:
    # The daemon's resolvers are extra-body field names (its config holds no
    # code), so a list where the user id belongs is the request's mistake:
    # 400, not a 500 `ConfigError` (exit code 78) telling the operator their
    # configuration is wrong.
    store = FaultyStore(SqliteStore(tmp_path / "memfs.db"))
    app = control_app(service_over(tmp_path, store))
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            body = {"session": "s1", "extra_body": {**BODY, "userId": ["u_dana"]}}
            response = await client.post("/turns", json=body)
        assert response.status_code == 400, response.text
        assert response.json()["exit_code"] == 2
    finally:
        await store.aclose()
