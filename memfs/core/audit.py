"""The audit log's rules: what an entry about a person may say, and the hash chain over entries.

Every managed store keeps its audit log as one chain: each entry carries the
hash of the entry before it (``prev_hash``) and its own (``hash``), so
changing, removing, reordering or inserting an entry anywhere but at the end
breaks the chain at that entry, and :func:`verify_chain` names it.

The format, owned here::

    hash  = sha256(b"memfs-audit-v1\\n" + canonical).hexdigest()
    canonical = JSON of {"id", "at", "actor", "action", "org", "space",
                         "target", "detail", "prev_hash"}
                keys sorted, separators "," and ":", UTF-8 (not ASCII-escaped);
                "at" is ISO 8601 in UTC (datetime.isoformat), "actor" is
                {"id", "label", "role"} or null; "prev_hash" of the first
                entry is GENESIS (64 zeros).

What the chain proves and what it cannot: anyone who can write the store can
also recompute every hash after an entry they changed, or cut entries off
the end. The chain makes a partial rewrite evident; a whole rewrite shows
only against a head hash kept elsewhere (``memfs audit --verify`` prints the
head, for an operator to record off the host). Stores add what they can see
of a cut tail (the SQLite store compares the last id with its sequence).

Entries about a person's own memory (the user layer) name the act, the
actor, the space and the person, and count what the act touched: never a
path, which may say as much as the content (:func:`count`).

The log only grows, so it is read a page at a time: the newest ``limit``
entries written before an entry (``before``), oldest first (:func:`page`
for a store that holds the log as a list; SQL stores ask the same of SQL).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC

from memfs.core import paging
from memfs.core.errors import AuditTampered
from memfs.core.models import AuditEntry, ChangeSet, Frozen, Provenance, SpaceRef
from memfs.core.paging import latest_before

GENESIS = "0" * 64
# Entries a page of the log shows (the Memory tab, ``GET /api/v1/audit``) unless
# asked for another number, and the most one page may ask for.
AUDIT_PAGE = 100
MAX_AUDIT_PAGE = 1000
ENTRY = "audit entry"  # what a page of the log holds, as its errors say
_HEADER = b"memfs-audit-v1\n"


class AuditCheck(Frozen):
    """A chain that holds: its number of entries and the last one's hash (``GENESIS`` if none)."""

    entries: int
    head: str


class AuditPage(Frozen):
    """One page of an org's audit log, as the Memory tab shows it."""

    entries: list[AuditEntry]  # oldest first
    older: str | None  # ``before`` for the page of older entries; None: this page is the first


def canonical(entry: AuditEntry) -> bytes:
    """The bytes an entry's hash is taken over (everything but ``hash`` itself)."""
    actor = None if entry.actor is None else entry.actor.model_dump(mode="json")
    fields = {
        "id": entry.id,
        "at": entry.at.astimezone(UTC).isoformat(),
        "actor": actor,
        "action": entry.action,
        "org": entry.org,
        "space": entry.space,
        "target": entry.target,
        "detail": entry.detail,
        "prev_hash": entry.prev_hash,
    }
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(entry: AuditEntry) -> str:
    return hashlib.sha256(_HEADER + canonical(entry)).hexdigest()


def seal(entry: AuditEntry, prev_hash: str) -> AuditEntry:
    """``entry`` linked after the entry whose hash is ``prev_hash``, with its own hash set."""
    linked = entry.model_copy(update={"prev_hash": prev_hash, "hash": ""})
    return linked.model_copy(update={"hash": entry_hash(linked)})


def verify_chain(entries: Iterable[AuditEntry]) -> AuditCheck:
    """Check the whole log, oldest first; ``AuditTampered`` names the first entry that breaks it."""
    prev = GENESIS
    count = 0
    for entry in entries:
        if entry.prev_hash != prev:
            raise AuditTampered(
                "the audit log's chain is broken before this entry: the entry before it was "
                "changed, removed or added",
                path=entry.id,
            )
        if entry_hash(entry) != entry.hash:
            raise AuditTampered(
                "this audit entry was changed after it was written: its hash does not match",
                path=entry.id,
            )
        prev = entry.hash
        count += 1
    return AuditCheck(entries=count, head=prev)


# The detail of an ``open`` of a person's space as of a cursor the store did
# not issue: it cannot say what was there, and the one who looked sees the
# names a turn's trace kept (the look is recorded all the same).
UNKNOWN_CURSOR = "as of a cursor the store did not issue"


def count(n: int, noun: str) -> str:
    """An entry's detail about a person: ``"1 file"``, ``"3 revisions"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def about_file(
    ref: SpaceRef, path: str, detail: str | None = None
) -> tuple[str | None, str | None]:
    """The ``target`` and ``detail`` of an entry about one file of ``ref``.

    The path and ``detail`` for shared memory; for a person's own memory the
    person and a count, never the path.
    """
    if ref.layer == "user":
        return ref.user, count(1, "file")
    return path, detail


def about_put(
    ref: SpaceRef, changes: ChangeSet, provenance: Provenance
) -> tuple[str | None, str | None] | None:
    """The ``target`` and ``detail`` of the ``put`` entry for a person's edit, or None.

    A ``put`` whose origin is ``edited`` is a person's hand on memory outside
    any turn, so it is audited; one from code (seeding, a test's setup) or a
    conversation is not. Shared memory: the one path as ``target``, or the
    paths, sorted, as ``detail``; a person's own memory: the person and a count.
    """
    if provenance.origin != "edited":
        return None
    paths = sorted(changes.paths)
    if ref.layer == "user":
        return ref.user, count(len(paths), "file")
    if len(paths) == 1:
        return paths[0], None
    return None, ", ".join(paths)


def page(entries: Sequence[AuditEntry], before: str | None, limit: int | None) -> list[AuditEntry]:
    """The newest ``limit`` (all, with None) of ``entries`` written before entry ``before``.

    ``entries`` is a whole log, oldest first, and so is the page
    (:func:`memfs.core.paging.latest_before`).
    """
    return latest_before(entries, _entry_id, before, limit, what=ENTRY)[0]


def check_limit(limit: int) -> int:
    """A page's ``limit``: at least one entry (a store bounds nothing else)."""
    return paging.check_limit(limit, ENTRY)


def _entry_id(entry: AuditEntry) -> str:
    return entry.id


__all__ = [
    "AUDIT_PAGE",
    "GENESIS",
    "MAX_AUDIT_PAGE",
    "AuditCheck",
    "AuditPage",
    "about_file",
    "about_put",
    "canonical",
    "check_limit",
    "count",
    "entry_hash",
    "page",
    "seal",
    "verify_chain",
]
