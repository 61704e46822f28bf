"""Loading and storing a space's files: loads (full and lean), turn stores, puts, restores, history.

Turn stores come one per call or many in one transaction (``_store_batch``,
group commit: one commit, so one disk flush, for concurrent turn ends).

A turn's store is exactly once: a second store of the same change set from
the same (space, session, turn) returns the ``Stored`` the first got and
writes nothing, so a turn end repeated after a crash between the store and
the daemon's own record is reported as saved, not as a conflict. A store
from a turn that loaded before a person's space was forgotten is refused
(``Forgotten``). A lean load reads the manifest once per space version
(``memfs.stores.manifests``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Container, Sequence
from itertools import compress
from operator import itemgetter, ne
from typing import Any

from memfs.core import audit as audit_rules
from memfs.core import review
from memfs.core.errors import Forgotten, MemfsError, NotFound, StoreUnavailable, TraceFailed
from memfs.core.forgetting import words_kept
from memfs.core.limits import require_within
from memfs.core.lineage import Lineage
from memfs.core.models import (
    ChangeSet,
    FileMeta,
    Limits,
    Loaded,
    Provenance,
    ReviewSetting,
    Revision,
    SpaceRef,
    Stored,
    Trace,
)
from memfs.core.policy import parse_cursor
from memfs.core.review import ReviewMode
from memfs.core.sealing import SealBroken
from memfs.stores.base import StoreRequest
from memfs.stores.managed import by_of as _by
from memfs.stores.managed import file_meta as _meta
from memfs.stores.managed import row_id as _row_id
from memfs.stores.managed import turn_key as _turn_key
from memfs.stores.manifests import Manifest
from memfs.stores.sql.audit import _log
from memfs.stores.sql.db import Db, chunks, marks
from memfs.stores.sql.lean import LeanCache
from memfs.stores.sql.review import _own_waiting, _review_setting, _store_reviewed
from memfs.stores.sql.rows import (
    _cursor,
    _folders,
    _forgotten_at,
    _in_path_order,
    _live_files,
    _live_metas,
    _live_sizes,
    _make_live,
    _person_forgotten_at,
    _record,
)
from memfs.stores.sql.sealed import (
    SEALED_WORDS,
    Sealer,
    _author_sealer,
    _names,
    _opened,
    _sealer,
)
from memfs.stores.sql.spaces import _ensure_space, _found, _space_id
from memfs.stores.sql.traces import _record_trace

log = logging.getLogger(__name__)


def _load_lean(
    db: Db,
    ref: SpaceRef,
    session: str,
    have: Container[str],
    lean: LeanCache,
) -> Loaded:
    """``_load`` without the bytes of live files whose sha256 is in ``have``."""
    key = (ref.layer, ref.org, ref.user or "", ref.space)
    row = db.one(
        f"SELECT id, version, live_changes, {db.generation()} FROM spaces"
        ' WHERE layer = ? AND org = ? AND "user" = ? AND space = ?',
        key,
    )
    if row is None:
        return Loaded(
            files={}, cursor=str(_forgotten_at(db, ref)), revisions={}, review=_review_of(ref, None)
        )
    space_id, version = _found(db, key, int(row[0])), int(row[1])
    changes, generation = int(row[2]), int(row[3])
    held = lean.held(generation, space_id, version)
    manifest = lean.get(generation, space_id, version)
    if manifest is not None and not _as_read(db, space_id, manifest):
        manifest = None  # a backup put back in place handed this version out again
    if manifest is None:
        if held is None:
            manifest = _read_manifest(db, space_id, version, changes)
        else:
            manifest = _refresh_manifest(db, space_id, version, changes, held)
        manifest = lean.put(generation, space_id, manifest)
    files: dict[str, bytes] = {}
    wanted = {int(manifest.revisions[path]): path for path in manifest.lacking(have)}
    ids = list(wanted)
    sealer = _sealer(db, space_id, create=False) if ids else None
    for chunk in chunks(ids):
        for revision_id, content, sealed in db.tuples(
            f"SELECT id, content, sealed FROM revisions WHERE id IN ({marks(len(chunk))})", chunk
        ):
            path = wanted[revision_id]
            files[path] = _opened(sealer, path, revision_id, content, sealed)
    # model_construct: these dicts come straight from the store's own tables,
    # and validating 10,000 entries three times would cost more than the query.
    # Copies: the cached manifest is shared by every load at its version.
    live = Loaded.model_construct(
        files=files,
        cursor=str(max(_cursor(db, space_id), _forgotten_at(db, ref))),
        revisions=dict(manifest.revisions),
        shas=dict(manifest.shas),
        sizes=dict(manifest.sizes),
        meta=dict(manifest.meta),
        folders=tuple(sorted(manifest.folders)),
        review=_review_of(ref, db, space_id),
    )
    if manifest.lineage is not None:
        live = live.with_lineage(manifest.lineage)
    own = _own_waiting(db, space_id, ref, session)
    if own is None:
        return live
    loaded = review.lay_over(live, own)
    return loaded.model_copy(update={"revisions": dict(sorted(loaded.revisions.items()))})


def _review_of(ref: SpaceRef, db: Db | None, space_id: int | None = None) -> ReviewSetting | None:
    """An org space's own review setting, read with its load: a turn start needs both."""
    if ref.layer != "org":
        return None
    return ReviewSetting(mode=None if db is None else _review_setting(db, space_id))


def _read_manifest(db: Db, space_id: int, version: int, changes: int) -> Manifest:
    """Every live file of the space without its bytes, in path order, and its folders."""
    # Plain tuples and comprehensions: this runs over every file of a space.
    rows = db.tuples(
        "SELECT live.path, live.revision_id, revisions.sha256, revisions.size,"
        " revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        f" JOIN revisions{db.index('revisions_manifest')} ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? ORDER BY live.path",
        (space_id,),
    )
    if (names := _names(db, space_id, create=False)).sealed:
        rows = _in_path_order(rows, names)
    return Manifest(
        version=version,
        revisions={row[0]: str(row[1]) for row in rows},
        shas={row[0]: row[2] for row in rows},
        sizes={row[0]: int(row[3]) for row in rows},
        meta={row[0]: _meta(row[4], row[5], row[6]) for row in rows},
        folders=frozenset(_folders(db, space_id)),
        changes=changes,
        top=max((int(row[1]) for row in rows), default=0),
        newest=_newest_row(db, space_id),
        lineage=Lineage.start(version),
    )


def _refresh_manifest(db: Db, space_id: int, version: int, changes: int, old: Manifest) -> Manifest:
    """The manifest at ``version``, from ``old`` (read at an earlier one) and the rows that moved.

    A live row names a revision, and a revision never changes once written
    (ids come from one sequence, only grow and are never reused, and no
    statement rewrites a revision's sha256, size or metadata): a path whose
    revision id is the one ``old`` has holds what ``old`` says. So the rows
    that moved are read whole, found by :func:`_moved_since` where they
    account for every write since ``old``; else each live path's revision id
    is read (the primary key alone) to find them.

    Neither holds for a backup put back in place (:func:`_as_read`): the
    manifest is then read whole.
    """
    if not _as_read(db, space_id, old):
        return _read_manifest(db, space_id, version, changes)
    found = _moved_since(db, space_id, version, changes, old)
    if found is not None:
        return found
    live = _in_path_order(
        db.tuples(
            # As text, as a manifest keeps it: no conversion per row here.
            "SELECT path, CAST(revision_id AS TEXT) FROM live WHERE space_id = ? ORDER BY path",
            (space_id,),
        ),
        _names(db, space_id, create=False),
    )
    # C-level maps, not comprehensions: this runs over every file of the
    # space at every turn start that follows a change to it.
    paths = list(map(itemgetter(0), live))
    now = list(map(itemgetter(1), live))
    revisions = dict(zip(paths, now, strict=True))
    was = old.revisions
    moved = list(compress(paths, map(ne, map(was.get, paths), now)))
    if len(moved) > len(revisions) // 2:
        return _read_manifest(db, space_id, version, changes)  # most moved: read it all at once
    shas, sizes, meta = dict(old.shas), dict(old.sizes), dict(old.meta)
    added = sum(path not in was for path in moved)
    some_went = len(was) + added != len(revisions)
    gone = [path for path in was if path not in revisions] if some_went else []
    for path in gone:
        del shas[path], sizes[path], meta[path]
    wanted = {int(revisions[path]): path for path in moved}
    ids = list(wanted)
    for chunk in chunks(ids):
        for revision_id, sha, size, mode, mtime, ctime in db.tuples(
            "SELECT id, sha256, size, mode, mtime_ns, ctime_ns FROM revisions"
            f" WHERE id IN ({marks(len(chunk))})",
            chunk,
        ):
            path = wanted[revision_id]
            shas[path], sizes[path], meta[path] = sha, size, _meta(mode, mtime, ctime)
    if added:
        shas, sizes, meta = _in_order(paths, shas, sizes, meta)
    top = max(map(int, now), default=0)
    return Manifest(
        version=version,
        revisions=revisions,
        shas=shas,
        sizes=sizes,
        meta=meta,
        folders=frozenset(_folders(db, space_id)),
        changes=changes,
        top=top,
        newest=_newest_row(db, space_id),
        lineage=old.moved_to(version, frozenset([*moved, *gone])),
    )


def _moved_since(
    db: Db, space_id: int, version: int, changes: int, old: Manifest
) -> Manifest | None:
    """``old`` at ``version`` from the live rows naming a revision newer than any it has.

    Every write to a live row since ``old`` was read is counted
    (``spaces.live_changes``, by trigger) and either leaves such a row or is
    one these rows miss (a deletion; a row put back to an older revision).
    So where the rows are as many as the writes counted since, each row is
    one write and no other write happened: every other path of ``old``
    holds. None where they are not, or where the count of live rows says
    ``old`` is of a space forgotten and made again under the same id (whose
    count of writes began again). Costs the rows that moved and a count;
    the caller has found ``old``'s newest revision as it was.
    """
    if old.changes is None or changes < old.changes:
        return None
    names = _names(db, space_id, create=False)
    rows = db.tuples(
        "SELECT live.path, live.revision_id, revisions.sha256, revisions.size,"
        " revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = ? AND live.revision_id > ?",
        (space_id, old.top),
    )
    if len(rows) != changes - old.changes:
        return None
    rows = _in_path_order(rows, names)
    revisions, shas = dict(old.revisions), dict(old.shas)
    sizes, meta = dict(old.sizes), dict(old.meta)
    added = sum(row[0] not in revisions for row in rows)
    (live,) = db.one("SELECT count(*) FROM live WHERE space_id = ?", (space_id,)) or (0,)
    if len(revisions) + added != int(live):
        return None
    # New paths go after the others (see ``Manifest``), in path order among themselves.
    for path, revision_id, sha, size, mode, mtime, ctime in rows:
        revisions[path], shas[path] = str(revision_id), sha
        sizes[path], meta[path] = int(size), _meta(mode, mtime, ctime)
    top = max((int(row[1]) for row in rows), default=old.top)
    return Manifest(
        version=version,
        revisions=revisions,
        shas=shas,
        sizes=sizes,
        meta=meta,
        folders=frozenset(_folders(db, space_id)),
        changes=changes,
        top=top,
        newest=_newest_row(db, space_id),
        lineage=old.moved_to(version, frozenset(map(itemgetter(0), rows))),
    )


def _as_read(db: Db, space_id: int, manifest: Manifest) -> bool:
    """Whether the space's newest revision row when ``manifest`` was read is still as it was.

    Revision ids and space versions only grow, but a backup put back in
    place (SQLite's backup API, the shell's ``.restore``; a PostgreSQL
    restore of the rows alone) takes them back with it, and the writes
    after it hand the same numbers out again: that row is then gone, or
    another row has its id (another path, other bytes, another write). Every
    write of a file, a deletion too, adds a row; a write of folders alone
    adds none, so folders written after such a restore alone are not told
    apart (restart every process on a store put back in place).
    """
    if manifest.newest is None:
        return False
    newest, seen = manifest.newest
    if not newest:
        return _newest_row(db, space_id) == (0, None)
    row = db.one(
        "SELECT created_at, sha256, path FROM revisions WHERE id = ? AND space_id = ?",
        (newest, space_id),
    )
    return row is not None and tuple(row) == seen


def _newest_row(db: Db, space_id: int) -> tuple[int, object]:
    """The space's newest revision row of any kind: its id and what tells it apart; (0, None)."""
    row = db.one(
        "SELECT id, created_at, sha256, path FROM revisions WHERE space_id = ?"
        " ORDER BY id DESC LIMIT 1",
        (space_id,),
    )
    return (0, None) if row is None else (int(row[0]), tuple(row[1:]))


def _in_order(paths: Sequence[str], *maps: dict[str, Any]) -> list[dict[str, Any]]:
    """``maps`` with their paths in ``paths``' order: path order, as a manifest read whole is."""
    # C-level maps: this runs over every file of the space.
    return [dict(zip(paths, map(held.__getitem__, paths), strict=True)) for held in maps]


def _put(
    db: Db,
    ref: SpaceRef,
    changes: ChangeSet,
    provenance: Provenance,
    limits: Limits,
) -> Stored:
    """A person's edit: within the limits a turn has, or nothing of it is written.

    Origin ``edited`` is audited (``put``) in the write's own transaction.
    """
    require_within(changes, _live_sizes(db, _space_id(db, ref)), limits)
    stored = _store_reviewed(db, ref, changes, None, provenance, "none")
    about = audit_rules.about_put(ref, changes, provenance)
    if about is not None:  # a person's edit: recorded in the same transaction
        target, detail = about
        _log(db, "put", ref.org, by=provenance.by, space=ref.space, target=target, detail=detail)
    return stored


def _contents(db: Db, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
    space_id = _space_id(db, ref)
    found: dict[str, bytes] = {}
    if space_id is None:
        return found
    wanted = list(dict.fromkeys(shas))
    names = _names(db, space_id, create=False)
    for chunk in chunks(wanted):
        for sha, content, revision_id, kept, sealed in db.tuples(
            "SELECT sha256, content, id, path, sealed FROM revisions"
            f" WHERE space_id = ? AND sha256 IN ({marks(len(chunk))})",
            (space_id, *chunk),
        ):
            if sha not in found:
                found[sha] = _opened(names.sealer, names.path(kept), revision_id, content, sealed)
    return found


def _load(db: Db, ref: SpaceRef, session: str | None) -> Loaded:
    """The live files; with ``session``, that conversation's waiting change laid over them."""
    space_id = _space_id(db, ref)
    if space_id is None:
        return Loaded(
            files={}, cursor=str(_forgotten_at(db, ref)), revisions={}, review=_review_of(ref, None)
        )
    files, revisions, shas = _live_files(db, space_id)
    live = Loaded(
        files=files,
        cursor=str(max(_cursor(db, space_id), _forgotten_at(db, ref))),
        revisions=revisions,
        shas=shas,
        meta=_live_metas(db, space_id),
        folders=tuple(sorted(_folders(db, space_id))),
        review=_review_of(ref, db, space_id),
    )
    own = _own_waiting(db, space_id, ref, session)
    if own is None:
        return live  # ordered by path already
    loaded = review.lay_over(live, own)
    return loaded.model_copy(update={"files": dict(sorted(loaded.files.items()))})


def _restore(db: Db, ref: SpaceRef, path: str, revision: str, provenance: Provenance) -> Stored:
    unknown = NotFound(f"{path!r} in {ref} has no revision {revision!r}", path=path)
    space_id = _space_id(db, ref)
    row_id = _row_id(revision)
    if space_id is None or row_id is None:
        raise unknown
    row = db.execute(
        "SELECT content, mode, sealed FROM revisions WHERE id = ? AND space_id = ? AND path = ?",
        (row_id, space_id, _names(db, space_id, create=False).kept(path)),
    ).fetchone()
    if row is None:
        raise unknown
    if row["content"] is None:
        raise NotFound(f"revision {revision!r} deleted {path!r}; it has no content", path=path)
    sealer = _sealer(db, space_id, create=False)
    content = _opened(sealer, path, row_id, row["content"], row["sealed"])
    # The mode comes back with the bytes; the times are the restore's own.
    mode = FileMeta(mode=0o644 if row["mode"] is None else row["mode"])
    current = _record(db, space_id, path, content, provenance, meta=mode)
    _make_live(db, space_id, path, current)
    target, detail = audit_rules.about_file(ref, path, revision)
    _log(db, "restore", ref.org, by=provenance.by, space=ref.space, target=target, detail=detail)
    return Stored(status="saved", revisions={path: str(current)}, cursor=str(current))


def _history(db: Db, ref: SpaceRef, path: str) -> list[Revision]:
    space_id = _space_id(db, ref)
    if space_id is None:
        return []
    rows = db.execute(
        "SELECT id, sha256, size, origin, session, turn, prompt, by_id, by_label, by_role,"
        " approved_by_id, approved_by_label, approved_by_role, created_at, mode, mtime_ns,"
        " sealed, author FROM revisions WHERE space_id = ? AND path = ? ORDER BY id",
        (space_id, _names(db, space_id, create=False).kept(path)),
    ).fetchall()
    sealer = _sealer(db, space_id, create=False)
    authors: dict[str, Sealer | None] = {}

    def text(row: Any, column: str) -> str | None:
        sealed = row["sealed"]
        if not sealed or (sealed == SEALED_WORDS and column == "approved_by_label"):
            return db.read_text(row[column])
        if sealed == SEALED_WORDS:  # an author's words in org memory: gone once they are forgotten
            author = row["author"]
            if author not in authors:
                authors[author] = _author_sealer(db, space_id, author, create=False)
            words = authors[author]
            return None if words is None else words.open_text(column, path, row["id"], row[column])
        if sealer is None:
            raise SealBroken("a sealed revision has no person key to open it")
        return sealer.open_text(column, path, row["id"], row[column])

    return [
        Revision(
            id=str(row["id"]),
            path=path,
            sha256=row["sha256"],
            size=row["size"],
            deleted=row["sha256"] is None,
            provenance=Provenance(
                origin=row["origin"],
                session=row["session"],
                turn=row["turn"],
                prompt=text(row, "prompt"),
                by=_by(row["by_id"], text(row, "by_label"), row["by_role"]),
                at=db.instant(row["created_at"]),
            ),
            approved_by=_by(
                row["approved_by_id"], text(row, "approved_by_label"), row["approved_by_role"]
            ),
            mode=(None if row["sha256"] is None else 0o644 if row["mode"] is None else row["mode"]),
            mtime_ns=None if row["sha256"] is None else row["mtime_ns"],
        )
        for row in rows
    ]


def _spaces(db: Db) -> list[SpaceRef]:
    rows = db.execute(
        'SELECT layer, org, "user", space FROM spaces'
        " WHERE EXISTS (SELECT 1 FROM revisions WHERE revisions.space_id = spaces.id)"
    ).fetchall()
    refs = [
        SpaceRef(layer=layer, org=org, user=user or None, space=space)
        for layer, org, user, space in rows
    ]
    return sorted(refs, key=str)


def _store_turn(
    db: Db,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
    requested: ReviewMode,
) -> Stored:
    """``_store_reviewed``, exactly once per turn, and never over a forget the turn predates."""
    provenance = words_kept(provenance, lambda user: _person_forgotten_at(db, ref.org, user))
    key = _turn_key(provenance)
    if key is not None:
        space_id = _space_id(db, ref)
        row = (
            None
            if space_id is None
            else db.execute(
                "SELECT changes, stored, sealed_stored FROM stored_turns"
                " WHERE space_id = ? AND session = ? AND turn = ?",
                (space_id, *key),
            ).fetchone()
        )
        if row is not None and row["changes"] == _kept_fingerprint(db, space_id, changes):
            assert space_id is not None
            return _stored_of(db, space_id, key, row["stored"], row["sealed_stored"])
    if base is not None and _forgotten_at(db, ref) > base:
        raise Forgotten(
            "this person's memory was forgotten after the turn loaded it; nothing of the "
            "turn is stored in it",
            path=str(ref),
        )
    stored = _store_reviewed(db, ref, changes, base, provenance, requested)
    if key is not None and stored.status != "conflict" and not changes.is_empty():
        space_id = _ensure_space(db, ref)
        plain, sealed = _kept_stored(db, space_id, key, stored)
        db.execute(
            "INSERT INTO stored_turns (space_id, session, turn, changes, stored, sealed_stored)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (space_id, session, turn) DO UPDATE"
            " SET changes = excluded.changes, stored = excluded.stored,"
            " sealed_stored = excluded.sealed_stored",
            (space_id, *key, _kept_fingerprint(db, space_id, changes), plain, sealed),
        )
    return stored


def _kept_fingerprint(db: Db, space_id: int | None, changes: ChangeSet) -> str:
    """The change set's fingerprint as ``stored_turns`` keeps it: keyed in a person's space.

    An unkeyed digest over paths and contents' sha256 (which revisions keep
    in the clear) would confirm a guessed file name; keyed by the person's
    name key (``Sealer.fingerprint``) it confirms nothing.
    """
    sealer = None if space_id is None else _sealer(db, space_id, create=False)
    fingerprint = changes.fingerprint()
    return fingerprint if sealer is None else sealer.fingerprint(fingerprint)


def _kept_stored(
    db: Db, space_id: int, key: tuple[str, str], stored: Stored
) -> tuple[str, bytes | None]:
    """A turn's ``Stored`` as ``stored_turns`` keeps it: sealed in a person's space."""
    sealer = _sealer(db, space_id, create=True)
    if sealer is None:
        return stored.model_dump_json(), None
    return "", sealer.seal_json("stored-turn", key, stored.model_dump_json())


def _stored_of(
    db: Db, space_id: int, key: tuple[str, str], plain: str, sealed: bytes | None
) -> Stored:
    if sealed is None:
        return Stored.model_validate_json(plain)
    sealer = _sealer(db, space_id, create=False)
    if sealer is None:
        raise SealBroken("a sealed turn record has no person key to open it")
    return Stored.model_validate_json(sealer.open_json("stored-turn", key, sealed))


def _store_batch(db: Db, items: Sequence[StoreRequest | Trace]) -> list[Stored | Exception | None]:
    """Every item as its own call would do it, in this one transaction (group commit).

    Each item runs under a savepoint: one that raises memfs's own error
    (``Forgotten``, ``InvalidName``, ...) is undone alone and answered with
    that error, and the rest go on. What this transaction looked up (``Db.memo``)
    is dropped with it, since the rows it came from may be gone. So is an item
    whose own values broke memfs's code (a ``TypeError``, ``UnicodeEncodeError``
    ...: a bug, or data one turn brought): undone alone, logged at ERROR, and
    answered ``StoreUnavailable``, so its turn keeps its files for a later end
    and no turn batched with it fails with it. An error of the database
    driver (``Db.driver_errors``) fails the whole batch: the transaction or
    the connection may be broken.
    """
    answers: list[Stored | Exception | None] = []
    for item in items:
        db.execute("SAVEPOINT batch_item")
        try:
            if isinstance(item, Trace):
                _record_trace(db, item)
                answer: Stored | Exception | None = None
            else:
                answer = _store_turn(
                    db,
                    item.ref,
                    item.changes,
                    parse_cursor(item.cursor),
                    item.provenance,
                    item.review,
                )
                if item.trace is not None and answer.status != "conflict":
                    _record_traced(db, item.trace, answer)
        except MemfsError as exc:
            db.execute("ROLLBACK TO SAVEPOINT batch_item")
            db.forget_lookups()
            answer = exc
        except Exception as exc:
            if isinstance(exc, db.driver_errors):
                raise
            db.execute("ROLLBACK TO SAVEPOINT batch_item")
            db.forget_lookups()
            answer = _item_failed(item, exc)
        db.execute("RELEASE SAVEPOINT batch_item")
        answers.append(answer)
    return answers


def _item_failed(item: StoreRequest | Trace, exc: Exception) -> StoreUnavailable:
    """A batch item memfs's own code failed on: logged once, answered as a store failing."""
    where = item.ref.space if isinstance(item, StoreRequest) else item.session
    log.error(
        "a group commit's item (%s) failed and was undone alone; the rest of the batch goes on: %r",
        where,
        exc,
        exc_info=exc,
    )
    failed = StoreUnavailable(
        f"the store failed on this turn's changes: {type(exc).__name__}: {exc}", path=where
    )
    failed.__cause__ = exc
    return failed


def _record_traced(db: Db, trace: Callable[[Stored], Trace], stored: Stored) -> None:
    """The turn's trace, made from its store's answer, in the store's transaction.

    Whatever goes wrong making or recording it is ``TraceFailed``: the item
    fails alone (the caller then stores without it, and records the trace on
    its own), never the batch. A connection lost on the way fails the batch
    at its next statement, as any other.
    """
    try:
        _record_trace(db, trace(stored))
    except Exception as exc:
        raise TraceFailed(f"the turn's trace could not be recorded: {exc}") from exc
