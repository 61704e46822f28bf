"""Group sync (``memfsd.durable``): syncs shared by the threads that ask at once, none skipped.

A caller alone syncs its own file; callers that ask while a sync runs wait
for it to end and share one ``syncfs``, and none returns before a sync that
began after it asked; a failed sync fails every caller that relied on it;
writes on another filesystem are synced on their own. The workspace's and
the blob cache's writes go through it and still leave whole files.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from memfsd import durable
from memfsd.blobs import BlobCache
from memfsd.durable import GroupSync


def test_a_caller_alone_syncs_its_own_file(tmp_path: Path) -> None:
    syncs = GroupSync(tmp_path)
    ran: list[str] = []
    syncs.sync(lambda: ran.append("own"), tmp_path)
    assert ran == ["own"]
    assert (syncs.own, syncs.shared) == (1, 0)


def test_a_caller_alone_with_many_files_syncs_the_filesystem_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(durable, "syncfs", lambda fd: calls.append(fd))
    syncs = GroupSync(tmp_path)
    syncs.sync(lambda: pytest.fail("one syncfs, not an fsync per file"), tmp_path, files=3)
    assert len(calls) == 1
    assert (syncs.own, syncs.shared, syncs.covered) == (0, 1, 1)


def held_sync(syncs: GroupSync, folder: Path) -> tuple[threading.Thread, threading.Event]:
    """A first caller whose own sync runs until the returned event is set."""
    release, running = threading.Event(), threading.Event()

    def own() -> None:
        running.set()
        release.wait(10)

    first = threading.Thread(target=syncs.sync, args=(own, folder))
    first.start()
    assert running.wait(10)
    return first, release


def test_callers_asking_while_a_sync_runs_wait_for_it_and_share_one_syncfs_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    monkeypatch.setattr(durable, "syncfs", lambda fd: order.append("syncfs"))
    syncs = GroupSync(tmp_path)
    first, release = held_sync(syncs, tmp_path)
    returned: list[int] = []

    def later(n: int) -> None:
        syncs.sync(lambda: pytest.fail("covered by the shared sync"), tmp_path)
        returned.append(n)

    others = [threading.Thread(target=later, args=(n,)) for n in range(3)]
    for thread in others:
        thread.start()
    # The running sync may have begun before their writes: none is done by it.
    first.join(0.2)
    assert returned == [] and order == []
    order.append("first done")
    release.set()
    for thread in [first, *others]:
        thread.join(10)

    assert sorted(returned) == [0, 1, 2]
    assert order == ["first done", "syncfs"]  # their sync began after the first ended
    assert (syncs.own, syncs.shared, syncs.covered) == (1, 1, 3)


def test_a_failed_shared_sync_fails_every_caller_that_relied_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(durable, "syncfs", broken)
    syncs = GroupSync(tmp_path)
    first, release = held_sync(syncs, tmp_path)
    errors: list[int | None] = []

    def later() -> None:
        try:
            syncs.sync(lambda: None, tmp_path)
        except OSError as exc:
            errors.append(exc.errno)

    others = [threading.Thread(target=later) for _ in range(3)]
    for thread in others:
        thread.start()
    first.join(0.2)
    release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert errors == [errno.EIO] * 3


def test_a_write_on_another_filesystem_is_synced_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(durable, "syncfs", lambda fd: pytest.fail("not that filesystem's sync"))
    syncs = GroupSync(tmp_path)
    ran: list[str] = []
    other = os.stat(tmp_path).st_dev + 1
    syncs.sync(lambda: ran.append("own"), other, files=5)
    assert ran == ["own"] and syncs.own == 1


def test_the_real_syncfs_runs_on_the_state_dir_filesystem(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        durable.syncfs(fd)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as raised:
        durable.syncfs(-1)
    assert raised.value.errno == errno.EBADF


def test_blobs_written_at_once_by_many_threads_are_whole_and_synced_only_when_made_durable(
    tmp_path: Path,
) -> None:
    cache = BlobCache(tmp_path / "blobs")
    contents = [[f"blob {t}-{n}".encode() * 100 for n in range(3)] for t in range(8)]
    threads = [threading.Thread(target=cache.put_many, args=(batch,)) for batch in contents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    shas = [[cache.put(content) for content in batch] for batch in contents]  # nothing new
    for batch, named in zip(contents, shas, strict=True):
        assert [cache.get(sha) for sha in named] == batch
    assert not list((tmp_path / "blobs").glob("*/.*.tmp"))  # no temporary name left
    assert (cache.syncs.own, cache.syncs.covered) == (0, 0)  # written, not synced
    # Made durable by many turns at once: each asks twice (contents, then
    # names), several asks share a sync, and what is synced is not again.
    durable = [threading.Thread(target=cache.make_durable, args=(named,)) for named in shas]
    for thread in durable:
        thread.start()
    for thread in durable:
        thread.join(30)
    assert cache.syncs.own + cache.syncs.covered == 2 * len(durable)
    assert cache.make_durable([sha for named in shas for sha in named]) == 0


def test_a_blob_left_on_disk_by_an_earlier_run_is_trusted_only_if_it_hashes_to_its_name(
    tmp_path: Path,
) -> None:
    first = BlobCache(tmp_path / "blobs")
    sha = first.put(b"the content")
    first.path(sha).write_bytes(b"")  # torn, as a power cut could leave an unsynced blob
    again = BlobCache(tmp_path / "blobs")
    assert again.put(b"the content") == sha
    assert again.get(sha) == b"the content"


def test_turns_starting_at_once_over_one_space_write_each_blob_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = BlobCache(tmp_path / "blobs")
    written: list[str] = []
    real = BlobCache._write
    started = threading.Barrier(8)

    def write(self: BlobCache, blobs: dict[str, bytes]) -> None:
        written.extend(blobs)
        real(self, blobs)

    monkeypatch.setattr(BlobCache, "_write", write)
    contents = [f"note {n}".encode() * 50 for n in range(200)]
    answers: list[list[str]] = []

    def start() -> None:
        started.wait(10)
        answers.append(cache.put_many(contents, hold=True))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 8 and all(answer == answers[0] for answer in answers)
    assert sorted(written) == sorted(set(answers[0]))  # each blob written by one of them
    # Every caller returned only once every blob it named was there to read.
    assert [cache.get(sha) for sha in answers[0]] == contents
