"""Which open turns and held change sets a forget found by a look takes a person's words out of.

A look at the store (the poll, a start that heard a notice, a restart) can
find a person forgotten whole that no notice told of. Their words (prompt,
labels) leave every open turn and held change set they gave them in before
the forget, and stay in those they gave once back. Two ways to tell which:

- **Their own space's cursor**, where the turn loaded it: a load that saw
  the forget has a cursor at or past it. Exact.
- **A mark**, for a turn over org memory only. When a turn starts, the
  daemon notes where the store last forgot each person in it
  (``ForgetLog.person_forgotten_at``, read at most ``MARK_SECONDS`` before,
  or asked then); a mark that differs now says a forget came after the
  words. It errs early by at most ``MARK_SECONDS`` (words of a turn started
  just after a forget are dropped: never kept), and late only by the start
  itself (a forget made while the turn started, which no notice told of).
- **Neither** (a turn brought back after a restart, one a look judges while
  it starts): the turn's earliest cursor (:func:`dating`), which may date it
  too early (words dropped).

A change set held for ``memfs turn commit`` is judged by its turn's marks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable

import trio

from memfs.core.forgetting import dating, earliest, own_cursors
from memfs.engine.plan import Mount, MountState
from memfs.stores.base import ForgetLog

# (session, turn) of an open turn, or of an ended one whose change set is held.
Key = tuple[str, str]
# (org, user)
Person = tuple[str, str]
# Whether a person was forgotten after the words of the turn ``Key``, whose loads are these.
Judge = Callable[[Key, Iterable[Mount | MountState]], Awaitable[bool]]

# How old a mark read for another turn (or by the poll) may be and still be
# a new turn's: the longest a forget just before a start is taken for one
# after it. Longer than the default poll (2 s), so that under load a start
# mostly finds the mark the last look read instead of asking the store.
MARK_SECONDS = 5.0


class WordMarks:
    """The marks noted for open turns and held change sets, and the last one read of each person."""

    def __init__(self) -> None:
        self._read: dict[Person, tuple[float, str | None]] = {}  # person -> (when, mark)
        self._turns: dict[Key, dict[Person, str | None]] = {}

    async def mark(self, store: ForgetLog, key: Key, people: Collection[Person]) -> None:
        """Note, for the turn ``key`` just started, where the store last forgot each person."""
        marks: dict[Person, str | None] = {}
        for person in sorted(people):
            read = self._read.get(person)
            now = trio.current_time()
            if read is None or now - read[0] > MARK_SECONDS:
                read = (now, await store.person_forgotten_at(*person))
                self._read[person] = read
            marks[person] = read[1]
        self._turns[key] = marks

    def heard(self, org: str, user: str) -> None:
        """A forget of ``user`` of ``org`` was heard: a start reads their mark again."""
        self._read.pop((org, user), None)

    def marks(self, key: Key, mounts: Iterable[Mount | MountState]) -> dict[Person, str]:
        """What dates each person's words in turn ``key``, whose loads are ``mounts``.

        Their own space's cursor where the turn loaded it (exact, as in
        :func:`dating`), else the mark noted at its start ("0": never
        forgotten then). A store compares it with the person's last forget
        (``Provenance.words_since``).
        """
        mounts = list(mounts)
        found = {}
        for (org, user), mark in self._turns.get(key, {}).items():
            own = earliest(own_cursors(mounts, org, user))
            found[(org, user)] = own if own is not None else (mark or "0")
        return found

    def judge(self, store: ForgetLog, org: str, user: str) -> Judge:
        """Whether ``user`` of ``org`` was forgotten after a turn's words; the store asked once."""
        person = (org, user)
        now: list[str | None] = []
        by_cursor: dict[str, bool] = {}

        async def forgot_after(key: Key, mounts: Iterable[Mount | MountState]) -> bool:
            if not now:
                read_at = trio.current_time()
                now.append(await store.person_forgotten_at(org, user))
                self._read[person] = (read_at, now[0])
            if now[0] is None:
                return False  # never forgotten
            mounts = list(mounts)
            marks = self._turns.get(key)
            if not own_cursors(mounts, org, user) and marks is not None and person in marks:
                return marks[person] != now[0]
            dated = dating(mounts, org, user)
            if dated not in by_cursor:
                by_cursor[dated] = await store.person_forgotten_since(org, user, dated)
            return by_cursor[dated]

        return forgot_after

    def keep_only(self, live: Collection[Key]) -> None:
        """Let go of the marks of turns no longer open or held, and of marks too old to use."""
        self._turns = {key: marks for key, marks in self._turns.items() if key in live}
        now = trio.current_time()
        self._read = {p: read for p, read in self._read.items() if now - read[0] <= MARK_SECONDS}


__all__ = ["MARK_SECONDS", "Judge", "Key", "Person", "WordMarks"]
