"""The ``spaces`` table's lookups, memoized per transaction.

A turn's store asks for its space's id from several places (the turn record,
the conflict check, each file's row, the sealer); each would be a statement,
and a round trip to PostgreSQL. The first answer is kept on the transaction's
``Db`` (``space_ids``, ``space_refs``) and dropped with everything else it
memoized (``Db.forget_lookups``: a savepoint rolled back, a space deleted).
A space not found is not memoized: the same transaction may make it next.
"""

from __future__ import annotations

from memfs.core.models import SpaceRef
from memfs.stores.sql.db import Db


def _space_id(db: Db, ref: SpaceRef) -> int | None:
    key = (ref.layer, ref.org, ref.user or "", ref.space)
    found = db.space_ids.get(key)
    if found is not None:
        return found
    row = db.execute(
        'SELECT id FROM spaces WHERE layer = ? AND org = ? AND "user" = ? AND space = ?', key
    ).fetchone()
    if row is None:
        return None  # not memoized: the transaction may make it next
    return _found(db, key, int(row[0]))


def _found(db: Db, key: tuple[str, str, str, str], space_id: int) -> int:
    """Keep what a query of the spaces table found, for the rest of the transaction."""
    db.space_ids[key] = space_id
    db.space_refs[space_id] = key
    return space_id


def _space_row(db: Db, space_id: int) -> tuple[str, str, str, str] | None:
    """(layer, org, user, space) of the space ``space_id``; None if there is none."""
    found = db.space_refs.get(space_id)
    if found is not None:
        return found
    row = db.one('SELECT layer, org, "user", space FROM spaces WHERE id = ?', (space_id,))
    if row is None:
        return None
    key = (row[0], row[1], row[2], row[3])
    _found(db, key, space_id)
    return key


def _ensure_space(db: Db, ref: SpaceRef) -> int:
    found = db.space_ids.get((ref.layer, ref.org, ref.user or "", ref.space))
    if found is not None:
        return found  # found in this transaction: it is there
    db.execute(
        'INSERT INTO spaces (layer, org, "user", space) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
        (ref.layer, ref.org, ref.user or "", ref.space),
    )
    space_id = _space_id(db, ref)
    assert space_id is not None  # inserted just above, in this transaction
    return space_id
