"""What a store keeps of a turn's words once a person in it is forgotten.

Forgetting a person empties their words (a prompt, a label) everywhere a
store keeps them and destroys their key. A turn that started before the
forget may still be storing (its store in flight, or its end after): what it
stores and its trace keep none of the words of anyone forgotten since, by
the mark the turn carries (``Provenance.words_since``, ``Trace.words_since``).
Pure: each store passes when it last forgot a person.

How a turn's loads date a person's words is here too (:func:`dating`). A
turn's cursors come from one sequence of the store. A person's own space's
cursor is at least their last forget once the load saw it, so it dates their
words exactly; a turn without one is dated by its earliest cursor, which may
date it too early (its words then dropped, never kept). The daemon judges
open turns by it (``memfsd.words``), a turn brought back after a restart
carries it to its stores, and :func:`trace_kept` dates a trace's holders by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from memfs.core.models import Provenance, SpaceRef, Trace
from memfs.core.policy import parse_cursor


class Load(Protocol):
    """A space a turn loaded: which one, and the store's cursor when it did (None: none)."""

    @property
    def ref(self) -> SpaceRef: ...

    @property
    def cursor(self) -> str | None: ...


def earliest(cursors: Iterable[str | None]) -> str | None:
    """The earliest of a turn's cursors (they come from one sequence); None if none."""
    known = [(parse_cursor(cursor), cursor) for cursor in cursors if cursor is not None]
    return min(known)[1] if known else None


def own_cursors(loads: Iterable[Load], org: str, user: str) -> list[str]:
    """The cursors of the loads of the person's own space: each dates their words exactly."""
    return [m.cursor for m in loads if m.cursor is not None and m.ref.owned_by(org, user)]


def dating(loads: Iterable[Load], org: str, user: str) -> str:
    """The cursor that dates the words of ``user`` of ``org`` in one turn's loads.

    Their own space's cursor tells a turn they started once back from one
    open before; otherwise the earliest cursor. Only the store's loads count
    (an app's folder has cursors of its own), and a load that failed has
    none: a turn with none left is dated before every forget.
    """
    known = [m for m in loads if m.ref.layer != "dir" and m.cursor is not None]
    return earliest(own_cursors(known, org, user) or [m.cursor for m in known]) or "0"


def words_kept(provenance: Provenance, forgotten_at: Callable[[str], int]) -> Provenance:
    """What a store keeps of a turn's ``provenance``: no words of an author forgotten since.

    ``forgotten_at(user)``: when a user of the space's org was last forgotten
    whole (0: never). A forget after the turn started (past the mark its
    ``words_since`` carries) emptied the author's words everywhere and
    destroyed their key; the turn's store, in flight then, must not bring
    them back, nor make them a key again. Without a mark nothing is judged:
    a cursor cannot date a turn over org memory (an org space's cursor is
    its own last revision, however late it was loaded).
    """
    since = provenance.words_since
    if since is None:
        return provenance
    kept = provenance.model_copy(update={"words_since": None})
    author = kept.words_author
    if author is None or not since.isdigit() or forgotten_at(author) <= int(since):
        return kept
    return kept.without_words_of(author)


def trace_kept(trace: Trace, forgotten_at: Callable[[str, str], int]) -> Trace:
    """What a store keeps of ``trace``: nothing of a holder forgotten after the turn's words.

    ``forgotten_at(org, user)``: when they were last forgotten whole (0:
    never). A person whose own space the turn loaded is dated by that load
    (its cursor is at least their last forget once the load saw it); the
    author of a turn over org memory by the mark the turn carries
    (``words_since``); anyone else is kept. A holder forgotten since loses
    their part and the prompt, as ``forget_user`` took them from every trace
    recorded before.
    """
    since, author = trace.words_since, trace.author
    trace = trace.model_copy(update={"words_since": None}) if since is not None else trace
    for org, user in trace.holders():
        own = earliest(c for c in own_cursors(trace.mounts.values(), org, user) if c.isdigit())
        if own is not None:
            dated = int(own)
        elif user == author and since is not None and since.isdigit():
            dated = int(since)
        else:
            continue
        if forgotten_at(org, user) > dated:
            trace = trace.without_words_of(user, org) or trace
    return trace


__all__ = ["Load", "dating", "earliest", "own_cursors", "trace_kept", "words_kept"]
