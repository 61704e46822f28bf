"""Org changes held for review: the rows of ``changes`` and carrying out the core's decisions.

A change waiting for review is not live: it is a ``WaitingChange`` kept as
JSON in ``changes`` (its state also in a column, to query by). Which change
an edit joins, what a conversation's load sees, which deletions are valid and
what a decision does are :mod:`memfs.core.review`'s; this module only keeps
its changes and applies its effects.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Literal

from memfs.core import review
from memfs.core.errors import (
    NotFound,
)
from memfs.core.models import (
    By,
    ChangeSet,
    Limits,
    Provenance,
    SpaceRef,
    Stored,
)
from memfs.core.review import OPEN_STATES, ChangeState, Effect, ReviewMode, WaitingChange
from memfs.stores.managed import file_meta as _meta
from memfs.stores.managed import row_id as _row_id
from memfs.stores.sql.audit import _log
from memfs.stores.sql.db import Db, marks
from memfs.stores.sql.rows import (
    _cursor,
    _delete_live,
    _live_among,
    _live_files,
    _live_sizes,
    _make_live,
    _put_back_since,
    _record,
    _set_folders,
    _store,
)
from memfs.stores.sql.sealed import _author_sealer, _opened, _sealer
from memfs.stores.sql.spaces import _ensure_space, _space_id


def _own_waiting(db: Db, space_id: int, ref: SpaceRef, session: str | None) -> WaitingChange | None:
    """The conversation's waiting change to the space, which its loads see (core.review.joins)."""
    if session is None:
        return None
    waiting = _open_changes(db, space_id, session, ("waiting",))  # the live ones: not read
    return review.joins(waiting, ref, session, "person")


# Review (memfs.core.review decides; these keep its changes and carry out its effects).


def _review_setting(db: Db, space_id: int | None) -> ReviewMode | None:
    if space_id is None:
        return None
    row = db.execute("SELECT mode FROM review_settings WHERE space_id = ?", (space_id,)).fetchone()
    return None if row is None else review.check_mode(row["mode"])


def _set_review(db: Db, ref: SpaceRef, mode: ReviewMode, by: By | None) -> None:
    space_id = _ensure_space(db, ref)
    db.execute(
        "INSERT INTO review_settings (space_id, mode, by_id, by_label, by_role, set_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (space_id) DO UPDATE SET mode = excluded.mode, by_id = excluded.by_id,"
        " by_label = excluded.by_label, by_role = excluded.by_role, set_at = excluded.set_at",
        (
            space_id,
            mode,
            None if by is None else by.id,
            None if by is None else by.label,
            None if by is None else by.role,
            db.stamp(datetime.now(UTC)),
        ),
    )
    _log(db, "set-review", ref.org, by=by, space=ref.space, detail=mode)


def _open_changes(
    db: Db,
    space_id: int,
    session: str,
    states: tuple[ChangeState, ...] = OPEN_STATES,
) -> list[WaitingChange]:
    """The conversation's changes to the space in ``states``, oldest first (for review.joins)."""
    return [
        _change_of(db, space_id, data, words)
        for data, words in db.tuples(
            "SELECT data, sealed_words FROM changes WHERE space_id = ? AND session = ?"
            f" AND state IN ({marks(len(states))})"
            " ORDER BY id",
            (space_id, session, *states),
        )
    ]


def _kept_change(db: Db, space_id: int, change: WaitingChange) -> tuple[str, str | None]:
    """A change as ``changes`` keeps it: its authors' words sealed apart (``sealed_words``).

    ``sealed_words`` is JSON: each key of ``review.without_words`` to the
    author and their prompt and label (a JSON pair), sealed under the
    author's key and bound to the change and the key, in base64.
    """
    silent, words = review.without_words(change)
    if not words:
        return silent.model_dump_json(), None
    kept: dict[str, dict[str, str]] = {}
    for key, (author, prompt, label) in words.items():
        sealer = _author_sealer(db, space_id, author, create=True)
        assert sealer is not None  # made just now if the author had no key
        sealed = sealer.seal_json("words", (change.id, key), json.dumps([prompt, label]))
        kept[key] = {"author": author, "sealed": base64.b64encode(sealed).decode()}
    return silent.model_dump_json(), json.dumps(kept, sort_keys=True)


def _change_of(db: Db, space_id: int, data: str, sealed_words: str | None) -> WaitingChange:
    """A change read back, with the words of its authors who are not forgotten."""
    change = WaitingChange.model_validate_json(data)
    if not sealed_words:
        return change
    words: review.Words = {}
    for key, kept in json.loads(sealed_words).items():
        sealer = _author_sealer(db, space_id, kept["author"], create=False)
        if sealer is None:
            continue  # the author was forgotten: their words went with their key
        spoken = sealer.open_json("words", (change.id, key), base64.b64decode(kept["sealed"]))
        prompt, label = json.loads(spoken)
        words[key] = (kept["author"], prompt, label)
    return review.with_words(change, words)


def _save_change(db: Db, change: WaitingChange) -> None:
    last_edited = max((file.edited for file in change.files.values()), default=0)
    (space_id,) = db.one("SELECT space_id FROM changes WHERE id = ?", (int(change.id),))
    data, words = _kept_change(db, int(space_id), change)
    # The larger: a partly decided change drops files, but the space's cursor must not go back.
    db.execute(
        f"UPDATE changes SET state = ?, last_edited = {db.greatest('last_edited', '?')},"
        " data = ?, sealed_words = ? WHERE id = ?",
        (change.state, last_edited, data, words, int(change.id)),
    )


def _new_change_id(db: Db, space_id: int, session: str) -> str:
    """A row for a new change; its data is written once the change, with this id, exists."""
    return str(
        db.scalar(
            "INSERT INTO changes (space_id, session, state, last_edited, data)"
            " VALUES (?, ?, 'waiting', 0, '') RETURNING id",
            (space_id, session),
        )
    )


def _snapshot_at(db: Db, space_id: int, paths: tuple[str, ...], loaded: int) -> dict[str, str]:
    """The revision of each path a snapshot at ``loaded`` held (absent: none, or deleted)."""
    snapshot: dict[str, str] = {}
    for path in paths:
        row = db.execute(
            "SELECT id, content IS NULL AS deleted FROM revisions"
            " WHERE space_id = ? AND path = ? AND id <= ? ORDER BY id DESC LIMIT 1",
            (space_id, path, loaded),
        ).fetchone()
        if row is not None and not row["deleted"]:
            snapshot[path] = str(row["id"])
    return snapshot


def _keep_change(
    db: Db,
    space_id: int,
    ref: SpaceRef,
    mode: ReviewMode,
    changes: ChangeSet,
    *,
    snapshot: Mapping[str, str],
    loaded: int,
    provenance: Provenance,
) -> str:
    """Put ``changes`` into the conversation's open change (a new one if it has none)."""
    # Checked first, so no empty row is left behind.
    session = review.conversation_of(ref.layer, mode, provenance)
    assert session is not None  # only listed changes are kept
    existing = review.joins(_open_changes(db, space_id, session), ref, session, mode)
    edited = db.tick()
    if existing is None:
        change = review.open_change(
            _new_change_id(db, space_id, session),
            ref,
            mode=mode,
            changes=changes,
            snapshot=snapshot,
            loaded=loaded,
            edited=edited,
            provenance=provenance,
        )
    else:
        change = review.update(
            existing,
            changes,
            snapshot=snapshot,
            loaded=loaded,
            edited=edited,
            provenance=provenance,
        )
    _save_change(db, change)
    return change.id


def _hold(
    db: Db,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
) -> Stored:
    """Review ``person``: the change waits in the conversation's change; nothing goes live.

    No conflict check against the live files: nothing is overwritten yet, and
    a reviewer sees a file that moved on as stale instead.
    """
    space_id = _ensure_space(db, ref)
    current = _cursor(db, space_id)
    if changes.is_empty():
        return Stored(status="saved", cursor=str(current))
    if base is not None and _put_back_since(db, base, current):
        return Stored(
            status="conflict", conflicts=tuple(sorted(changes.paths)), cursor=str(current)
        )
    loaded = current if base is None else base
    own = _own_waiting(db, space_id, ref, provenance.session)
    review.require_deletable(changes.deleted, _live_among(db, space_id, changes.deleted), own)
    unseen = review.unseen_edits(own, changes, loaded)
    if unseen:
        return Stored(status="conflict", conflicts=unseen, cursor=str(current))
    snapshot = _snapshot_at(db, space_id, changes.paths, loaded)
    change_id = _keep_change(
        db,
        space_id,
        ref,
        "person",
        changes,
        snapshot=snapshot,
        loaded=loaded,
        provenance=provenance,
    )
    return Stored(status="waiting", change=change_id, cursor=str(_cursor(db, space_id)))


def _store_reviewed(
    db: Db,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
    requested: ReviewMode,
) -> Stored:
    """A turn's store under review: the space's own setting wins over the turn's mode."""
    mode = review.effective_mode(_review_setting(db, _space_id(db, ref)), requested)
    review.conversation_of(ref.layer, mode, provenance)  # before anything is written
    if not review.saves_at_once(ref.layer, mode):
        return _hold(db, ref, changes, base, provenance)
    if not review.is_listed(ref.layer, mode):
        return _store(db, ref, changes, base, provenance)
    # Review ``after``: live now (conflict-checked as usual), and listed for a person.
    space_id = _space_id(db, ref)
    # What each path was before this write: what a reviewer's reject puts back.
    before = {} if space_id is None else _live_files(db, space_id)[1]
    stored = _store(db, ref, changes, base, provenance)
    if stored.status != "saved" or changes.is_empty():
        return stored
    space_id = _ensure_space(db, ref)
    # Loaded at the write itself: the change's own revisions do not make it
    # stale, a later live write to its files does.
    loaded = int(stored.cursor or 0)
    snapshot = {path: before[path] for path in changes.paths if path in before}
    change_id = _keep_change(
        db,
        space_id,
        ref,
        mode,
        changes,
        snapshot=snapshot,
        loaded=loaded,
        provenance=provenance,
    )
    return stored.model_copy(update={"change": change_id, "cursor": str(_cursor(db, space_id))})


def _last_live_change(db: Db, space_id: int) -> dict[str, int]:
    """Each path's latest revision in the space, deletions included."""
    return {
        path: int(latest)
        for path, latest in db.execute(
            "SELECT path, MAX(id) FROM revisions WHERE space_id = ? GROUP BY path", (space_id,)
        )
    }


def _marked(db: Db, space_id: int, changes: list[WaitingChange]) -> list[WaitingChange]:
    """``changes`` (all of one space) with their stale files marked.

    Only open changes are marked: a decided change has nothing left to
    approve, and its own applied revisions would otherwise mark it stale.
    """
    if not any(change.state in OPEN_STATES for change in changes):
        return changes
    rivals = [
        WaitingChange.model_validate_json(row["data"])
        for row in db.execute(
            "SELECT data FROM changes WHERE space_id = ? AND state IN (?, ?)",
            (space_id, *OPEN_STATES),
        )
    ]
    live = _last_live_change(db, space_id)
    open_ones = iter(
        review.mark_stale_all([c for c in changes if c.state in OPEN_STATES], live, rivals)
    )
    return [next(open_ones) if change.state in OPEN_STATES else change for change in changes]


def _list_changes(db: Db, org: str | None, open_only: bool) -> list[WaitingChange]:
    query = "SELECT changes.space_id, changes.data, changes.sealed_words FROM changes"
    query += " JOIN spaces ON spaces.id = changes.space_id WHERE 1 = 1"
    params: list[str] = []
    if org is not None:
        query += " AND spaces.org = ?"
        params.append(org)
    if open_only:
        query += " AND changes.state IN (?, ?)"
        params.extend(OPEN_STATES)
    rows = db.execute(query + " ORDER BY changes.id", params).fetchall()
    by_space: dict[int, list[WaitingChange]] = {}
    for row in rows:
        space_id = int(row["space_id"])
        by_space.setdefault(space_id, []).append(
            _change_of(db, space_id, row["data"], row["sealed_words"])
        )
    marked = itertools.chain.from_iterable(
        _marked(db, space_id, changes) for space_id, changes in by_space.items()
    )
    return sorted(marked, key=lambda change: int(change.id))


def _change_row(db: Db, id: str) -> tuple[int, WaitingChange]:
    row_id = _row_id(id)
    row = (
        None
        if row_id is None
        else db.execute(
            "SELECT space_id, data, sealed_words FROM changes WHERE id = ?", (row_id,)
        ).fetchone()
    )
    if row is None:
        raise NotFound(f"no change {id!r} is held for review", path=id)
    space_id = int(row["space_id"])
    return space_id, _change_of(db, space_id, row["data"], row["sealed_words"])


def _get_change(db: Db, id: str) -> WaitingChange:
    space_id, change = _change_row(db, id)
    [marked] = _marked(db, space_id, [change])
    return marked


def _decide(
    db: Db,
    id: str,
    action: Literal["approve", "edit", "reject"],
    by: By | None,
    paths: list[str] | None,
    edits: dict[str, bytes | None] | None,
    force: bool,
    limits: Limits,
    version: str | None = None,
    live_version: str | None = None,
) -> WaitingChange:
    """A reviewer's move; the new state and its effect on live files commit together."""
    space_id, unmarked = _change_row(db, id)
    # The rules refuse to apply a stale file unforced, so they get the change marked.
    [change] = _marked(db, space_id, [unmarked])
    decided, effect, concerned = review.decide(
        change,
        action,
        by=by,
        paths=paths,
        edits=edits,
        force=force,
        live_sizes=_live_sizes(db, space_id),
        limits=limits,
        version=version,
        live_version=live_version,
    )
    if effect is Effect.APPLY:
        for path, content in sorted(concerned.items()):
            # Who taught each file stays on its revision; who let it in is approved_by.
            applied = review.applied_provenance(change, path, action)
            if content is None:
                _delete_live(db, space_id, path, applied, by)
            else:
                # A reviewer's edit replaces the bytes, not the mode the turn gave.
                meta = change.files[path].meta
                revision_id = _record(db, space_id, path, content, applied, by, meta=meta)
                _make_live(db, space_id, path, revision_id)
    elif effect is Effect.REVERT:
        put_back = Provenance(origin="edited", by=by)
        for path in sorted(concerned):
            base = change.files[path].base
            if base is None:  # the change created it: reverting removes it
                _delete_live(db, space_id, path, put_back)
                continue
            row = db.execute(
                "SELECT content, mode, mtime_ns, ctime_ns, sealed FROM revisions"
                " WHERE id = ? AND space_id = ? AND path = ?",
                (_row_id(base), space_id, path),
            ).fetchone()
            if row is None or row["content"] is None:
                raise NotFound(
                    f"revision {base!r} of {path!r} is gone; cannot put it back", path=path
                )
            meta = _meta(row["mode"], row["mtime_ns"], row["ctime_ns"])
            content = _opened(
                _sealer(db, space_id, create=False),
                path,
                int(base),
                row["content"],
                row["sealed"],
            )
            revision_id = _record(db, space_id, path, content, put_back, meta=meta)
            _make_live(db, space_id, path, revision_id)
    _set_folders(db, space_id, review.decided_folders(change, effect, paths))
    _save_change(db, decided)
    _log(
        db,
        action,
        change.ref.org,
        by=by,
        space=change.ref.space,
        target=id,
        detail=",".join(sorted(concerned)),
    )
    [marked] = _marked(db, space_id, [decided])
    return marked
