"""``SqliteDb``: the shared SQL modules' ``Db`` over a ``sqlite3`` connection.

SQLite's words for what differs (:mod:`memfs.stores.sql.db`):

- the one sequence is the ``clock`` table's AUTOINCREMENT: a row is inserted
  and deleted at once, and the number lives on in ``sqlite_sequence``;
- the audit log's ids are its own AUTOINCREMENT, so ``sqlite_sequence`` keeps
  the last ever written without being told;
- times are UTC ISO 8601 text, which sorts as time to the second;
- ``INDEXED BY`` pins the covering indexes the planner would otherwise skip.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from memfs.stores.sql.db import Db, Params, Rows


def _utc(at: datetime) -> datetime:
    # memfs makes aware times (models.now); a naive one from an app is taken as UTC
    # rather than the host's zone, so the stored instant never depends on the host.
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


class SqliteDb(Db):
    """A connection whose rows are ``sqlite3.Row`` (by position and by name)."""

    driver_errors: ClassVar[tuple[type[Exception], ...]] = (sqlite3.Error, OSError)

    def __init__(self, conn: sqlite3.Connection, store_key: bytes) -> None:
        super().__init__(store_key)
        self._conn = conn

    def execute(self, sql: str, params: Params = ()) -> Rows:
        cursor = self._conn.cursor()
        cursor.row_factory = sqlite3.Row
        return cursor.execute(sql, params)

    def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        cursor = self._conn.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params).fetchall()

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        self._conn.executemany(sql, rows)

    def tick(self) -> int:
        cursor = self._conn.execute("INSERT INTO clock DEFAULT VALUES")
        number = cursor.lastrowid
        assert number is not None  # always set after an INSERT into a rowid table
        # The number lives on in sqlite_sequence; the row itself is not needed.
        self._conn.execute("DELETE FROM clock WHERE id = ?", (number,))
        return number

    def clock(self) -> int:
        return self._sequence("clock")

    def generation(self) -> str:
        # A database file replaced under an open connection is refused by the
        # store (it checks the file's identity), which also empties the cache.
        return "0"

    def last_audit_id(self) -> int:
        return self._sequence("audit")

    def audit_appended(self, id: int) -> None:
        pass  # AUTOINCREMENT moved sqlite_sequence past it with the insert

    def _sequence(self, table: str) -> int:
        row = self._conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def kept_text(self, text: str | None) -> str | None:
        return text

    def read_text(self, kept: Any) -> str | None:
        return None if kept is None else str(kept)

    def stamp(self, at: datetime) -> str:
        return _utc(at).isoformat()

    def stamp_floor(self, at: datetime) -> str:
        # The seconds of the ISO text: with or without microseconds, kept times
        # compare against it in text order as they do in time.
        return self.stamp(at)[:19]

    def instant(self, kept: Any) -> datetime:
        return datetime.fromisoformat(str(kept))

    def contains(self, column: str) -> str:
        return f"instr({column}, ?) > 0"

    def greatest(self, left: str, right: str) -> str:
        return f"MAX({left}, {right})"

    def index(self, name: str) -> str:
        return f" INDEXED BY {name}"
