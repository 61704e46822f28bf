"""Rules the SQL stores (SQLite and PostgreSQL) share above their SQL.

Pure functions over values the stores read from their rows: which ids a
store issued, what a revision without a mode means, how a forgotten person
or space is keyed, which stores are turn stores (exactly once), and what a
forgotten path leaves of a turn's record. Each lived in the SQLite store
first; both stores call them, so the two cannot drift apart.
"""

from __future__ import annotations

from memfs.core.models import By, FileMeta, Provenance, Stored, digest

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
