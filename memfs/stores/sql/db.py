"""``Db``: one transaction's connection, in the words the shared SQL modules are written in.

The managed stores (SQLite and PostgreSQL) keep the same tables and run
the same statements (:mod:`memfs.stores.sql`); only this much differs
between them, and each store's ``db.py`` says it:

- placeholders: statements are written with ``?``; PostgreSQL's adapter
  turns them into ``%s`` (and a literal ``%`` into ``%%``) once per statement;
- where the store's one sequence (``clock``) and the audit log's last id
  live (a table in SQLite, a sequence and ``audit_head`` in PostgreSQL);
- how a timestamp is kept (UTC ISO text in SQLite, ``timestamptz`` in
  PostgreSQL) and read back;
- a few spellings: substring search, the larger of two values, an index
  hint SQLite's planner needs and PostgreSQL has no syntax for.

Rows come back as the driver gives them: a row reads by position, and by
column name where the statement names its columns (``execute``); ``tuples``
is the fast path for a statement run over every file of a space.

``driver_errors`` names what the database driver raises (and ``OSError``:
a disk, a socket): after one of them the transaction or the connection may
be broken, so nothing more is run in it (a group commit fails whole,
``files._store_batch``). Any other exception came from memfs's own code
building one statement's values.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, ClassVar, Protocol

Params = Sequence[Any]

CHUNK = 500  # host parameters per IN (...) list, well under either server's limit


class Rows(Protocol):
    """What a statement's result offers: both drivers' cursors are this."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


def marks(count: int) -> str:
    """``?, ?, ...``: the placeholders of an ``IN (...)`` list of ``count`` values."""
    return ",".join("?" * count)


def chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    """``values`` in slices of at most ``CHUNK``, for ``IN (...)`` lists."""
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


class Db(ABC):
    """A connection inside one transaction, and the store key it seals people's memory with."""

    # The driver's own errors (the subclass adds its driver's base class).
    driver_errors: ClassVar[tuple[type[Exception], ...]] = (OSError,)

    def __init__(self, store_key: bytes) -> None:
        self.store_key = store_key
        # What one transaction looked up once and may use again (a space's
        # sealer, its names), so a turn that writes a hundred files asks once.
        # Per transaction: another process may forget a person at any moment.
        self.memo: dict[tuple[str, int], Any] = {}
        # Space ids by (layer, org, user, space) and back, found in this
        # transaction (``rows._space_id``); a space deleted in it is dropped.
        self.space_ids: dict[tuple[str, str, str, str], int] = {}
        self.space_refs: dict[int, tuple[str, str, str, str]] = {}

    def forget_lookups(self) -> None:
        """Drop what this transaction memoized (its rows may be gone: a rollback, a delete)."""
        self.memo.clear()
        self.space_ids.clear()
        self.space_refs.clear()

    @abstractmethod
    def execute(self, sql: str, params: Params = ()) -> Rows:
        """Run one statement; its rows read by position and by column name."""

    @abstractmethod
    def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Run one query; its rows as plain tuples (the fast path)."""

    def one(self, sql: str, params: Params = ()) -> Any:
        """The first row of a query, or None."""
        return self.execute(sql, params).fetchone()

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row of a query (None for no row, or NULL)."""
        row = self.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement for each of ``rows`` (a store may send them as one batch)."""
        for row in rows:
            self.execute(sql, row)

    @abstractmethod
    def tick(self) -> int:
        """The next number of the store's one sequence (revisions and change edits)."""

    def ticks(self, count: int) -> list[int]:
        """The next ``count`` numbers of the sequence, in ascending order."""
        return [self.tick() for _ in range(count)]

    @abstractmethod
    def clock(self) -> int:
        """Where the store's one sequence stands: no number it handed out is past it."""

    @abstractmethod
    def generation(self) -> str:
        """What tells this database from another behind the same path or URL (``lean.py``).

        An SQL expression of one integer, read in the query that finds the
        space a lean load reads (one statement, not two).
        """

    @abstractmethod
    def last_audit_id(self) -> int:
        """The id of the last audit entry ever written (it only grows), 0 for none.

        Called only with the store's write lock held, so the next entry's id is this one plus one.
        """

    @abstractmethod
    def audit_appended(self, id: int) -> None:
        """Note ``id`` as the last audit entry written (where the store does not by itself)."""

    @abstractmethod
    def kept_text(self, text: str | None) -> Any:
        """A revision's prompt or label as its column keeps it in the clear.

        The columns hold sealed bytes in people's spaces, so PostgreSQL keeps
        them as ``bytea`` (which also holds a NUL no ``text`` column takes).
        """

    @abstractmethod
    def read_text(self, kept: Any) -> str | None:
        """A prompt or label kept in the clear (``kept_text``), read back."""

    @abstractmethod
    def stamp(self, at: datetime) -> Any:
        """``at`` as the store keeps a time (aware; a naive one is taken as UTC)."""

    @abstractmethod
    def stamp_floor(self, at: datetime) -> Any:
        """``at`` to the second, as a bound that compares with kept times in SQL."""

    @abstractmethod
    def instant(self, kept: Any) -> datetime:
        """A kept time read back, aware in UTC."""

    @abstractmethod
    def contains(self, column: str) -> str:
        """SQL true where ``column`` holds the next parameter as a substring."""

    @abstractmethod
    def greatest(self, left: str, right: str) -> str:
        """SQL for the larger of two values."""

    @abstractmethod
    def index(self, name: str) -> str:
        """An index hint after a table name (SQLite's ``INDEXED BY``), or nothing."""
