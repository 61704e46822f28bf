"""Org changes held for review: the rows of ``changes`` and carrying out the core's decisions.

A change waiting for review is not live: it is a ``WaitingChange`` kept as
JSON in ``changes`` (its state also in a column, to query by). Which change
an edit joins, what a conversation's load sees, which deletions are valid and
what a decision does are :mod:`memfs.core.review`'s; this module only keeps
its changes and applies its effects.
"""

from __future__ import annotations

import itertools
import sqlite3
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
from memfs.stores.sqlite.audit import _log
from memfs.stores.sqlite.rows import (
    _cursor,
    _delete_live,
    _ensure_space,
    _live_among,
    _live_files,
    _live_sizes,
    _make_live,
    _record,
    _set_folders,
    _space_id,
    _store,
    _tick,
    _timestamp,
)
from memfs.stores.sqlite.sealed import _opened, _sealer


def _own_waiting(
    conn: sqlite3.Connection, space_id: int, ref: SpaceRef, session: str | None
) -> WaitingChange | None:
    """The conversation's waiting change to the space, which its loads see (core.review.joins)."""
    if session is None:
        return None
    waiting = _open_changes(conn, space_id, session, ("waiting",))  # the live ones: not read
    return review.joins(waiting, ref, session, "person")


# Review (memfs.core.review decides; these keep its changes and carry out its effects).


def _review_setting(conn: sqlite3.Connection, space_id: int | None) -> ReviewMode | None:
    if space_id is None:
        return None
    row = conn.execute(
        "SELECT mode FROM review_settings WHERE space_id = ?", (space_id,)
    ).fetchone()
    return None if row is None else review.check_mode(row["mode"])


def _set_review(conn: sqlite3.Connection, ref: SpaceRef, mode: ReviewMode, by: By | None) -> None:
    space_id = _ensure_space(conn, ref)
    conn.execute(
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
            _timestamp(datetime.now(UTC)),
        ),
    )
    _log(conn, "set-review", ref.org, by=by, space=ref.space, detail=mode)


def _open_changes(
    conn: sqlite3.Connection,
    space_id: int,
    session: str,
    states: tuple[ChangeState, ...] = OPEN_STATES,
) -> list[WaitingChange]:
    """The conversation's changes to the space in ``states``, oldest first (for review.joins)."""
    marks = ",".join("?" * len(states))
    return [
        WaitingChange.model_validate_json(row["data"])
        for row in conn.execute(
            f"SELECT data FROM changes WHERE space_id = ? AND session = ? AND state IN ({marks})"
            " ORDER BY id",
            (space_id, session, *states),
        )
    ]


def _save_change(conn: sqlite3.Connection, change: WaitingChange) -> None:
    last_edited = max((file.edited for file in change.files.values()), default=0)
    # MAX: a partly decided change drops files, but the space's cursor must not go back.
    conn.execute(
        "UPDATE changes SET state = ?, last_edited = MAX(last_edited, ?), data = ? WHERE id = ?",
        (change.state, last_edited, change.model_dump_json(), int(change.id)),
    )


def _new_change_id(conn: sqlite3.Connection, space_id: int, session: str) -> str:
    """A row for a new change; its data is written once the change, with this id, exists."""
    cur = conn.execute(
        "INSERT INTO changes (space_id, session, state, last_edited, data)"
        " VALUES (?, ?, 'waiting', 0, '')",
        (space_id, session),
    )
    assert cur.lastrowid is not None  # always set after an INSERT into a rowid table
    return str(cur.lastrowid)


def _snapshot_at(
    conn: sqlite3.Connection, space_id: int, paths: tuple[str, ...], loaded: int
) -> dict[str, str]:
    """The revision of each path a snapshot at ``loaded`` held (absent: none, or deleted)."""
    snapshot: dict[str, str] = {}
    for path in paths:
        row = conn.execute(
            "SELECT id, content IS NULL AS deleted FROM revisions"
            " WHERE space_id = ? AND path = ? AND id <= ? ORDER BY id DESC LIMIT 1",
            (space_id, path, loaded),
        ).fetchone()
        if row is not None and not row["deleted"]:
            snapshot[path] = str(row["id"])
    return snapshot


def _keep_change(
    conn: sqlite3.Connection,
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
    existing = review.joins(_open_changes(conn, space_id, session), ref, session, mode)
    edited = _tick(conn)
    if existing is None:
        change = review.open_change(
            _new_change_id(conn, space_id, session),
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
    _save_change(conn, change)
    return change.id


def _hold(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
) -> Stored:
    """Review ``person``: the change waits in the conversation's change; nothing goes live.

    No conflict check against the live files: nothing is overwritten yet, and
    a reviewer sees a file that moved on as stale instead.
    """
    space_id = _ensure_space(conn, ref)
    if changes.is_empty():
        return Stored(status="saved", cursor=str(_cursor(conn, space_id)))
    loaded = _cursor(conn, space_id) if base is None else base
    own = _own_waiting(conn, space_id, ref, provenance.session)
    review.require_deletable(changes.deleted, _live_among(conn, space_id, changes.deleted), own)
    snapshot = _snapshot_at(conn, space_id, changes.paths, loaded)
    change_id = _keep_change(
        conn,
        space_id,
        ref,
        "person",
        changes,
        snapshot=snapshot,
        loaded=loaded,
        provenance=provenance,
    )
    return Stored(status="waiting", change=change_id, cursor=str(_cursor(conn, space_id)))


def _store_reviewed(
    conn: sqlite3.Connection,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
    requested: ReviewMode,
) -> Stored:
    """A turn's store under review: the space's own setting wins over the turn's mode."""
    mode = review.effective_mode(_review_setting(conn, _space_id(conn, ref)), requested)
    review.conversation_of(ref.layer, mode, provenance)  # before anything is written
    if not review.saves_at_once(ref.layer, mode):
        return _hold(conn, ref, changes, base, provenance)
    if not review.is_listed(ref.layer, mode):
        return _store(conn, ref, changes, base, provenance)
    # Review ``after``: live now (conflict-checked as usual), and listed for a person.
    space_id = _space_id(conn, ref)
    # What each path was before this write: what a reviewer's reject puts back.
    before = {} if space_id is None else _live_files(conn, space_id)[1]
    stored = _store(conn, ref, changes, base, provenance)
    if stored.status != "saved" or changes.is_empty():
        return stored
    space_id = _ensure_space(conn, ref)
    # Loaded at the write itself: the change's own revisions do not make it
    # stale, a later live write to its files does.
    loaded = int(stored.cursor or 0)
    snapshot = {path: before[path] for path in changes.paths if path in before}
    change_id = _keep_change(
        conn,
        space_id,
        ref,
        mode,
        changes,
        snapshot=snapshot,
        loaded=loaded,
        provenance=provenance,
    )
    return stored.model_copy(update={"change": change_id, "cursor": str(_cursor(conn, space_id))})


def _last_live_change(conn: sqlite3.Connection, space_id: int) -> dict[str, int]:
    """Each path's latest revision in the space, deletions included."""
    return {
        path: int(latest)
        for path, latest in conn.execute(
            "SELECT path, MAX(id) FROM revisions WHERE space_id = ? GROUP BY path", (space_id,)
        )
    }


def _marked(
    conn: sqlite3.Connection, space_id: int, changes: list[WaitingChange]
) -> list[WaitingChange]:
    """``changes`` (all of one space) with their stale files marked.

    Only open changes are marked: a decided change has nothing left to
    approve, and its own applied revisions would otherwise mark it stale.
    """
    if not any(change.state in OPEN_STATES for change in changes):
        return changes
    rivals = [
        WaitingChange.model_validate_json(row["data"])
        for row in conn.execute(
            "SELECT data FROM changes WHERE space_id = ? AND state IN (?, ?)",
            (space_id, *OPEN_STATES),
        )
    ]
    live = _last_live_change(conn, space_id)
    open_ones = iter(
        review.mark_stale_all([c for c in changes if c.state in OPEN_STATES], live, rivals)
    )
    return [next(open_ones) if change.state in OPEN_STATES else change for change in changes]


def _list_changes(
    conn: sqlite3.Connection, org: str | None, open_only: bool
) -> list[WaitingChange]:
    query = "SELECT changes.space_id, changes.data FROM changes"
    query += " JOIN spaces ON spaces.id = changes.space_id WHERE 1"
    params: list[str] = []
    if org is not None:
        query += " AND spaces.org = ?"
        params.append(org)
    if open_only:
        query += " AND changes.state IN (?, ?)"
        params.extend(OPEN_STATES)
    rows = conn.execute(query + " ORDER BY changes.id", params).fetchall()
    by_space: dict[int, list[WaitingChange]] = {}
    for row in rows:
        by_space.setdefault(row["space_id"], []).append(
            WaitingChange.model_validate_json(row["data"])
        )
    marked = itertools.chain.from_iterable(
        _marked(conn, space_id, changes) for space_id, changes in by_space.items()
    )
    return sorted(marked, key=lambda change: int(change.id))


def _change_row(conn: sqlite3.Connection, id: str) -> tuple[int, WaitingChange]:
    row_id = _row_id(id)
    row = (
        None
        if row_id is None
        else conn.execute("SELECT space_id, data FROM changes WHERE id = ?", (row_id,)).fetchone()
    )
    if row is None:
        raise NotFound(f"no change {id!r} is held for review", path=id)
    return int(row["space_id"]), WaitingChange.model_validate_json(row["data"])


def _get_change(conn: sqlite3.Connection, id: str) -> WaitingChange:
    space_id, change = _change_row(conn, id)
    [marked] = _marked(conn, space_id, [change])
    return marked


def _decide(
    conn: sqlite3.Connection,
    id: str,
    action: Literal["approve", "edit", "reject"],
    by: By | None,
    paths: list[str] | None,
    edits: dict[str, bytes | None] | None,
    force: bool,
    limits: Limits,
) -> WaitingChange:
    """A reviewer's move; the new state and its effect on live files commit together."""
    space_id, unmarked = _change_row(conn, id)
    # The rules refuse to apply a stale file unforced, so they get the change marked.
    [change] = _marked(conn, space_id, [unmarked])
    decided, effect, concerned = review.decide(
        change,
        action,
        by=by,
        paths=paths,
        edits=edits,
        force=force,
        live_sizes=_live_sizes(conn, space_id),
        limits=limits,
    )
    if effect is Effect.APPLY:
        for path, content in sorted(concerned.items()):
            # Who taught each file stays on its revision; who let it in is approved_by.
            applied = review.applied_provenance(change, path, action)
            if content is None:
                _delete_live(conn, space_id, path, applied, by)
            else:
                # A reviewer's edit replaces the bytes, not the mode the turn gave.
                meta = change.files[path].meta
                revision_id = _record(conn, space_id, path, content, applied, by, meta=meta)
                _make_live(conn, space_id, path, revision_id)
    elif effect is Effect.REVERT:
        put_back = Provenance(origin="edited", by=by)
        for path in sorted(concerned):
            base = change.files[path].base
            if base is None:  # the change created it: reverting removes it
                _delete_live(conn, space_id, path, put_back)
                continue
            row = conn.execute(
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
                _sealer(conn, space_id, create=False),
                path,
                int(base),
                row["content"],
                row["sealed"],
            )
            revision_id = _record(conn, space_id, path, content, put_back, meta=meta)
            _make_live(conn, space_id, path, revision_id)
    _set_folders(conn, space_id, review.decided_folders(change, effect, paths))
    _save_change(conn, decided)
    _log(
        conn,
        action,
        change.ref.org,
        by=by,
        space=change.ref.space,
        target=id,
        detail=",".join(sorted(concerned)),
    )
    [marked] = _marked(conn, space_id, [decided])
    return marked
