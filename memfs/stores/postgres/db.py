"""``PostgresDb``: the shared SQL modules' ``Db`` over a psycopg connection.

PostgreSQL's words for what differs (:mod:`memfs.stores.sql.db`):

- statements come written with ``?``; psycopg takes ``%s`` and reads a bare
  ``%`` as the start of one, so each statement is translated once (cached);
  no statement of memfs has a ``?`` of its own (no JSON operators);
- the one sequence is the SEQUENCE ``clock``, and ``audit_head`` keeps the
  id of the last audit entry ever written (a trigger lets it only grow);
- times are ``timestamptz``, read back as aware datetimes in UTC (each
  connection runs ``SET TIME ZONE 'UTC'``);
- revisions' prompts and labels are ``bytea``: UTF-8 in the clear, sealed
  bytes in people's spaces, and a NUL is kept as any other character;
- the generation a lean load checks is the ``spaces`` table's oid, which a
  restore that drops and makes the tables again changes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import psycopg
from psycopg.rows import RowMaker, TupleRow

from memfs.stores.sql.db import Db, Params, Rows

Conn = psycopg.Connection[TupleRow]


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """A statement written with ``?`` placeholders, as psycopg takes it."""
    return sql.replace("%", "%%").replace("?", "%s")


class NamedRow(tuple[Any, ...]):
    """A row that reads by position and, like ``sqlite3.Row``, by column name."""

    __slots__ = ()
    _names: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._names[key])
        return super().__getitem__(key)


@functools.lru_cache(maxsize=512)
def _row_type(columns: tuple[str, ...]) -> type[NamedRow]:
    """The row class of a result with these columns: made once, not at every statement."""
    names = {name: i for i, name in enumerate(columns)}
    return type("Row", (NamedRow,), {"__slots__": (), "_names": names})


def _named_rows(cursor: psycopg.Cursor[Any]) -> RowMaker[NamedRow]:
    row_type = _row_type(tuple(column.name for column in cursor.description or ()))

    def make(values: Sequence[Any]) -> NamedRow:
        return row_type(values)

    return make


def _utc(at: datetime) -> datetime:
    # memfs makes aware times (models.now); a naive one from an app is taken as UTC
    # rather than the server's zone, as the SQLite store takes it.
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


class PostgresDb(Db):
    """A psycopg connection inside one transaction."""

    driver_errors: ClassVar[tuple[type[Exception], ...]] = (psycopg.Error, OSError)

    def __init__(self, conn: Conn, store_key: bytes) -> None:
        super().__init__(store_key)
        self._conn = conn

    def execute(self, sql: str, params: Params = ()) -> Rows:
        cursor = self._conn.cursor(row_factory=_named_rows)
        return cursor.execute(translate(sql), params)

    def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(translate(sql), params).fetchall()

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        # psycopg sends the rows in pipeline mode: one round trip, not one per row.
        if rows:
            self._conn.cursor().executemany(translate(sql), rows)

    def tick(self) -> int:
        return int(self._value("SELECT nextval('clock')"))

    def ticks(self, count: int) -> list[int]:
        rows = self._conn.execute(
            "SELECT nextval('clock') FROM generate_series(1, %s)", (count,)
        ).fetchall()
        return sorted(int(row[0]) for row in rows)

    def clock(self) -> int:
        return int(self._value("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM clock"))

    def generation(self) -> str:
        return "'spaces'::regclass::oid"

    def last_audit_id(self) -> int:
        return int(self._value("SELECT last_id FROM audit_head"))

    def audit_appended(self, id: int) -> None:
        self._conn.execute("UPDATE audit_head SET last_id = %s", (id,))

    def _value(self, sql: str) -> Any:
        row = self._conn.execute(sql).fetchone()
        assert row is not None  # each query above answers one row
        return row[0]

    def kept_text(self, text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    def read_text(self, kept: Any) -> str | None:
        return None if kept is None else bytes(kept).decode()

    def stamp(self, at: datetime) -> datetime:
        return _utc(at)

    def stamp_floor(self, at: datetime) -> datetime:
        return _utc(at).replace(microsecond=0)

    def instant(self, kept: Any) -> datetime:
        assert isinstance(kept, datetime)
        return kept.astimezone(UTC)

    def contains(self, column: str) -> str:
        return f"strpos({column}, ?) > 0"

    def greatest(self, left: str, right: str) -> str:
        return f"GREATEST({left}, {right})"

    def index(self, name: str) -> str:
        return ""  # PostgreSQL's planner picks its indexes itself
