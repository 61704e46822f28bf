"""What ending a turn says about one space: its status, its reason, what is reported not saved.

Pure: the turn engine decides *what to do* with a space by
:func:`memfs.core.policy.end_action`, does the I/O (scan, store), and asks
this module how to report the outcome. Each function here is one way a space
ends, and the whole vocabulary of ``SpaceResult.reason`` is written here:

===================  ==========  ===============================================
how it ended         status      reason / what is not saved
===================  ==========  ===============================================
read-only            skipped     every changed or refused path (discarded)
nothing changed      saved       ``refused`` if the scan refused paths
held (``manual``)    manual      the refused paths; the rest waits for a commit
last known copy      not_saved   ``last known copy``: every changed path
nothing left         not_saved   ``refused`` (or none): every refused path
forgotten            not_saved   ``forgotten``: every changed path, nothing kept
conflict             not_saved   ``conflict``: kept, with each path's base
store failed         not_saved   ``store failed``: kept, with each path's base
discarded            not_saved   ``discarded`` (``skipped`` when nothing changed)
stored               saved /     ``refused`` if the store or the scan refused
                     waiting     some paths; those are named
===================  ==========  ===============================================

A *kept* space is one whose change set the store did not take: its working
copy stays until a later end stores it or a discard drops it.

:func:`was_ending` reads these results back: whether a turn written down
with them (a daemon's ``turn.json``, restored after a stop) was already
ending, so no more writes may be let in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from memfs.core.errors import MemfsError
from memfs.core.models import ChangeSet, SpaceResult, Stored

LAST_KNOWN_COPY = "last known copy"
FORGOTTEN = "forgotten"
CONFLICT = "conflict"
STORE_FAILED = "store failed"
DISCARDED = "discarded"
REFUSED = "refused"


def first_error(refused: Mapping[str, MemfsError]) -> str | None:
    """The one line a result's ``error`` carries for its refused paths."""
    if not refused:
        return None
    if len(refused) == 1:
        return str(next(iter(refused.values())))
    return f"{len(refused)} files were not saved; see errors"


def _errors(refused: Mapping[str, MemfsError]) -> dict[str, str]:
    return {path: str(exc) for path, exc in refused.items()}


def _unsaved(paths: Collection[str], refused: Mapping[str, MemfsError]) -> tuple[str, ...]:
    return tuple(sorted({*paths, *refused}))


def skipped(changes: ChangeSet, refused: Mapping[str, MemfsError]) -> SpaceResult:
    """Read-only this turn: nothing is sent, and every change is named as discarded."""
    discarded = _unsaved(changes.paths, refused)
    return SpaceResult(
        status="skipped",
        changes=changes,
        not_saved=discarded,
        error="read-only this turn; changes were discarded" if discarded else None,
        errors=_errors(refused),
    )


def unchanged(refused: Mapping[str, MemfsError]) -> SpaceResult:
    """Nothing to send; a path the scan refused is still named."""
    return SpaceResult(
        status="not_saved" if refused else "saved",
        not_saved=tuple(sorted(refused)),
        error=first_error(refused),
        errors=_errors(refused),
        reason=REFUSED if refused else None,
    )


def held(changes: ChangeSet, refused: Mapping[str, MemfsError]) -> SpaceResult:
    """A ``manual`` space: its change set waits for ``commit_manual``."""
    return SpaceResult(
        status="manual",
        changes=changes,
        not_saved=tuple(sorted(refused)),
        error=first_error(refused),
        errors=_errors(refused),
    )


def stale_message(changes: ChangeSet, refused: Mapping[str, MemfsError]) -> str:
    """Why a space loaded from the last known copy was not sent (also reported to the app)."""
    unsaved = _unsaved(changes.paths, refused)
    return (
        "the space was loaded from the last known copy, so its changes were not "
        f"sent: {', '.join(unsaved)}"
    )


def refused_stale(changes: ChangeSet, refused: Mapping[str, MemfsError]) -> SpaceResult:
    """Loaded from the last known copy: a change made against it is never sent."""
    return SpaceResult(
        status="not_saved",
        changes=changes,
        not_saved=_unsaved(changes.paths, refused),
        error=stale_message(changes, refused),
        errors={
            **_errors(refused),
            **{p: "loaded from the last known copy" for p in changes.paths},
        },
        reason=LAST_KNOWN_COPY,
    )


def nothing_left(
    changes: ChangeSet, refused: Mapping[str, MemfsError], reason: str | None
) -> SpaceResult:
    """Every change was refused (by the limits or the store): nothing is sent."""
    return SpaceResult(
        status="not_saved",
        changes=changes,
        not_saved=tuple(sorted(refused)),
        error=first_error(refused),
        errors=_errors(refused),
        reason=reason,
    )


def forgotten(changes: ChangeSet, refused: Mapping[str, MemfsError], error: str) -> SpaceResult:
    """The person was forgotten since the turn loaded: nothing of the space is stored or kept."""
    return SpaceResult(
        status="not_saved",
        changes=changes,
        not_saved=_unsaved(changes.paths, refused),
        error=error,
        errors={**_errors(refused), **{p: FORGOTTEN for p in changes.paths}},
        reason=FORGOTTEN,
    )


def forgotten_in_turn(stored: SpaceResult | None) -> SpaceResult:
    """A space whose person was forgotten while the turn was open.

    Stored before the forget, it stays reported as stored, naming nothing of
    them; otherwise nothing of it is stored.
    """
    if stored is not None and stored.status in ("saved", "waiting"):
        return SpaceResult(status=stored.status, change=stored.change)
    return SpaceResult(
        status="not_saved",
        error="this person's memory was forgotten during the turn; nothing of this space is stored",
        reason=FORGOTTEN,
    )


def conflicted(
    changes: ChangeSet,
    accepted: ChangeSet,
    refused: Mapping[str, MemfsError],
    moved: Collection[str],
    snapshot: Mapping[str, str],
) -> SpaceResult:
    """Changed by someone else since the turn loaded it: nothing is saved, all is kept."""
    return SpaceResult(
        status="not_saved",
        changes=changes,
        not_saved=_unsaved(accepted.paths, refused),
        conflicts=tuple(moved),
        error=(
            "changed by someone else since this turn loaded it, so nothing of this "
            f"space was saved (its files are kept to merge): {', '.join(moved)}"
        ),
        errors={**_errors(refused), **{p: "changed since this turn loaded it" for p in moved}},
        reason=CONFLICT,
        kept=True,
        bases={p: snapshot.get(p) for p in accepted.paths},
    )


def store_failed(
    changes: ChangeSet,
    accepted: ChangeSet,
    refused: Mapping[str, MemfsError],
    exc: BaseException,
    snapshot: Mapping[str, str],
) -> SpaceResult:
    """The store did not take the space (down, locked, full): it is kept for a retry."""
    return SpaceResult(
        status="not_saved",
        changes=changes,
        not_saved=_unsaved(accepted.paths, refused),
        error=f"the store failed (the files are kept; end the turn again to retry): {exc}",
        errors={**_errors(refused), **{p: f"the store failed: {exc}" for p in accepted.paths}},
        reason=STORE_FAILED,
        kept=True,
        bases={p: snapshot.get(p) for p in accepted.paths},
    )


def stored(changes: ChangeSet, refused: Mapping[str, MemfsError], outcome: Stored) -> SpaceResult:
    """The store took the space (saved, or waiting for review); refused paths are named."""
    return SpaceResult(
        status=outcome.status,
        changes=changes,
        not_saved=tuple(sorted(refused)),
        error=first_error(refused),
        errors=_errors(refused),
        revisions=outcome.revisions,
        change=outcome.change,
        reason=REFUSED if refused else None,
    )


def was_ending(kept: Mapping[str, SpaceResult], done: Mapping[str, SpaceResult]) -> bool:
    """Whether a turn with these kept and settled spaces was ending (or being discarded).

    Its end had kept a space, or settled one (stored, or discarded): a write
    let in now would be to a space whose end is written down, and lost. A
    space settled only because its person was forgotten says nothing: the
    turn may still be going on in its other spaces.
    """
    return bool(kept) or any(result.reason != FORGOTTEN for result in done.values())


def discarded(changes: ChangeSet, refused: Collection[str]) -> SpaceResult:
    """Dropped on purpose (``discard_turn``): nothing of it was stored."""
    dropped = tuple(sorted({*changes.paths, *refused}))
    return SpaceResult(
        status="not_saved" if dropped else "skipped",
        changes=changes,
        not_saved=dropped,
        error="discarded; nothing of it was stored" if dropped else None,
        errors={path: DISCARDED for path in dropped},
        reason=DISCARDED,
    )


__all__ = [
    "CONFLICT",
    "DISCARDED",
    "FORGOTTEN",
    "LAST_KNOWN_COPY",
    "REFUSED",
    "STORE_FAILED",
    "conflicted",
    "discarded",
    "first_error",
    "forgotten",
    "forgotten_in_turn",
    "held",
    "nothing_left",
    "refused_stale",
    "skipped",
    "stale_message",
    "store_failed",
    "stored",
    "unchanged",
    "was_ending",
]
