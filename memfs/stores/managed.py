"""Rules the managed stores (memory, SQLite and PostgreSQL) share above their rows.

Pure functions over values the stores read from their rows: which ids a
store issued, what a revision without a mode means, how a forgotten person
or space is keyed, which stores are turn stores (exactly once), and what a
forgotten path leaves of a turn's record. Each lived in the SQLite store
first; both stores call them, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable

from memfs.core.models import By, FileMeta, Provenance, Stored, Trace, digest

MAX_ROW_ID = 2**63 - 1  # SQLite's rowid and PostgreSQL's bigint alike


def row_id(issued: str) -> int | None:
    """The row id a revision (or change) id names, or None if the store never issued it."""
    # Exact round trip: "05", " 5" or "+5" are not ids a store gave out.
    if not (issued.isascii() and issued.isdigit()) or str(int(issued)) != issued:
        return None
    value = int(issued)
    return value if value <= MAX_ROW_ID else None


def by_of(id_: str | None, label: str | None, role: str | None) -> By | None:
    return None if id_ is None else By(id=id_, label=label, role=role)


def file_meta(mode: int | None, mtime_ns: int | None, ctime_ns: int | None) -> FileMeta:
    """A revision's metadata; one written before stores kept modes has none: 0644."""
    return FileMeta(0o644 if mode is None else mode, mtime_ns, ctime_ns)


def forgotten_key(org: str, user: str, space: str) -> str:
    """How a store keys "(org, user, space) was forgotten"; space '' is the whole person."""
    return digest(f"{org}\0{user}\0{space}".encode())


def turn_key(provenance: Provenance) -> tuple[str, str] | None:
    """The (session, turn) a store comes from, if it comes from a turn (stored exactly once)."""
    if provenance.origin != "conversation" or not provenance.session or not provenance.turn:
        return None
    return provenance.session, provenance.turn


def stored_without(stored: Stored, path: str) -> Stored | None:
    """A turn's recorded ``Stored`` without a forgotten ``path``; None if it never named it."""
    if path not in stored.revisions:
        return None
    return stored.model_copy(
        update={"revisions": {p: r for p, r in stored.revisions.items() if p != path}}
    )


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
        own = [
            int(mount.cursor)
            for mount in trace.mounts.values()
            if mount.ref.owned_by(org, user) and mount.cursor is not None and mount.cursor.isdigit()
        ]
        if own:
            dated = min(own)
        elif user == author and since is not None and since.isdigit():
            dated = int(since)
        else:
            continue
        if forgotten_at(org, user) > dated:
            trace = trace.without_words_of(user, org) or trace
    return trace
