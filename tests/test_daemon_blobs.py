"""The blob cache's removals: bytes no turn holds leave the disk, even after a failed unlink."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.core.models import digest
from memfsd.blobs import BlobCache

UNREMOVED = "could not remove"


def failing_unlink(monkeypatch: pytest.MonkeyPatch, sha: str, times: int = 1) -> list[Path]:
    """Make removing ``sha``'s blob fail with EIO ``times`` times; the failed paths."""
    unlink: Callable[..., None] = Path.unlink
    failed: list[Path] = []

    def eio(self: Path, missing_ok: bool = False) -> None:
        if self.name == sha and len(failed) < times:
            failed.append(self)
            raise OSError(errno.EIO, "Input/output error")
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", eio)
    return failed


@pytest.mark.error_log(UNREMOVED)
def test_a_blob_whose_removal_failed_is_removed_at_the_next_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [hers, other] = blobs.put_many([b"her diagnosis\n", b"another\n"], hold=True)
    failed = failing_unlink(monkeypatch, hers)
    blobs.release([hers], discard=True)  # the failure is the cache's to retry, not the caller's
    assert failed and blobs.path(hers).exists()
    assert blobs.unremoved() == 1
    blobs.release([other], discard=True)
    assert not blobs.path(hers).exists()
    assert not blobs.path(other).exists()
    assert blobs.unremoved() == 0


@pytest.mark.error_log(UNREMOVED)
def test_retrying_removals_keeps_a_blob_a_turn_took_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"same words\n"], hold=True)
    failing_unlink(monkeypatch, sha)
    blobs.release([sha], discard=True)
    [again] = blobs.put_many([b"same words\n"], hold=True)  # another turn loads the same bytes
    assert again == sha
    assert blobs.remove_unheld() == 0
    assert blobs.get(sha) == b"same words\n"
    blobs.release([sha], discard=True)
    assert not blobs.path(sha).exists()


@pytest.mark.error_log(UNREMOVED)
def test_retrying_removals_keeps_a_blob_shared_memory_has_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"the rule\n"], hold=True)
    failing_unlink(monkeypatch, sha)
    blobs.release([sha], discard=True)
    assert blobs.share_here([sha]) == [sha]  # an org space names them: to be stored again
    assert blobs.remove_unheld() == 0
    blobs.put_many([b"the rule\n"], [sha], share=True)
    assert blobs.get(sha) == b"the rule\n"
    assert blobs.unremoved() == 0


@pytest.mark.error_log(UNREMOVED)
def test_a_removal_that_keeps_failing_is_counted_until_it_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blobs = BlobCache(tmp_path / "blobs")
    [sha] = blobs.put_many([b"her words\n"], hold=True)
    failing_unlink(monkeypatch, sha, times=3)
    blobs.release([sha], discard=True)
    assert blobs.remove_unheld() == 1
    assert blobs.remove_unheld() == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, "one error when it first failed, not one per retry"
    assert blobs.remove_unheld() == 0
    assert not blobs.path(sha).exists()


@pytest.mark.error_log(UNREMOVED)
def test_the_start_sweep_goes_on_past_a_blob_it_cannot_remove_and_retries_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "blobs"
    BlobCache(root).put_many([b"left by a crash\n", b"also\n"])
    blobs = BlobCache(root)  # the next start: nothing held
    sha, also = digest(b"left by a crash\n"), digest(b"also\n")
    failing_unlink(monkeypatch, sha)
    assert blobs.sweep() == 1
    assert not blobs.path(also).exists()
    assert blobs.unremoved() == 1
    assert blobs.remove_unheld() == 0
    assert not blobs.path(sha).exists()
