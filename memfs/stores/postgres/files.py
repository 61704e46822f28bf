"""Loading and storing a space's files: full and lean loads, turn stores, puts, restores, history.

The same contract as the SQLite store's (:mod:`memfs.stores.sqlite.files`):
a turn's store is exactly once per (space, session, turn), a store from a
turn that loaded before a person's space was forgotten is refused
(``Forgotten``), and a lean load reads the manifest once per space version
(``memfs.stores.manifests``; the versions are moved by the schema's triggers).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Container
from datetime import UTC

from memfs.core import audit as audit_rules
from memfs.core import review
from memfs.core.errors import Forgotten, NotFound
from memfs.core.limits import require_within
from memfs.core.models import (
    ChangeSet,
    FileMeta,
    Limits,
    Loaded,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
)
from memfs.core.review import ReviewMode
from memfs.stores.managed import by_of, file_meta, row_id, turn_key
from memfs.stores.manifests import Manifest, ManifestCache
from memfs.stores.postgres.audit import _log
from memfs.stores.postgres.review import _own_waiting, _store_reviewed
from memfs.stores.postgres.rows import (
    Conn,
    _all,
    _cursor,
    _ensure_space,
    _folders,
    _forgotten_at,
    _live_files,
    _live_metas,
    _live_sizes,
    _make_live,
    _one,
    _record,
    _run,
    _space_id,
)


class LeanCache:
    """The store's manifests by space version, shared by its pool's threads under a lock.

    Emptied when the database behind the URL may be another than the one the
    manifests were read from: on every new connection (the store calls
    ``clear``), and when the ``spaces`` table is not the one it was (a restore
    that dropped and made the tables again, on live connections).
    """

    def __init__(self, max_files: int) -> None:
        self._lock = threading.Lock()
        self._cache = ManifestCache(max_files)
        self._generation: int | None = None

    def get(self, generation: int, space_id: int, version: int) -> Manifest | None:
        with self._lock:
            if generation != self._generation:
                self._cache.clear()
                self._generation = generation
            return self._cache.get(space_id, version)

    def put(self, generation: int, space_id: int, manifest: Manifest) -> None:
        with self._lock:
            if generation == self._generation:
                self._cache.put(space_id, manifest)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def drop(self, space_id: int) -> None:
        """Let go of the space's manifest: a notice said it changed (a hint; versions decide)."""
        with self._lock:
            self._cache.drop(space_id)

    @property
    def files(self) -> int:
        with self._lock:
            return self._cache.files


def _load_lean(
    conn: Conn,
    ref: SpaceRef,
    session: str,
    have: Container[str],
    lean: LeanCache,
) -> Loaded:
    """``_load`` without the bytes of live files whose sha256 is in ``have``."""
    row = _one(
        conn,
        "SELECT id, version, 'spaces'::regclass::oid FROM spaces"
        ' WHERE layer = %s AND org = %s AND "user" = %s AND space = %s',
        (ref.layer, ref.org, ref.user or "", ref.space),
    )
    if row is None:
        return Loaded(files={}, cursor=str(_forgotten_at(conn, ref)), revisions={})
    space_id, version, generation = int(row[0]), int(row[1]), int(row[2])
    manifest = lean.get(generation, space_id, version)
    if manifest is None:
        manifest = _read_manifest(conn, space_id, version)
        lean.put(generation, space_id, manifest)
    files: dict[str, bytes] = {}
    wanted = {
        int(manifest.revisions[path]): path
        for path, sha in manifest.shas.items()
        if sha not in have
    }
    if wanted:
        for revision_id, content in _all(
            conn, "SELECT id, content FROM revisions WHERE id = ANY(%s)", (list(wanted),)
        ):
            files[wanted[revision_id]] = bytes(content)
    # model_construct: these dicts come straight from the store's own tables.
    # Copies: the cached manifest is shared by every load at its version.
    live = Loaded.model_construct(
        files=files,
        cursor=str(max(_cursor(conn, space_id), _forgotten_at(conn, ref))),
        revisions=dict(manifest.revisions),
        shas=dict(manifest.shas),
        sizes=dict(manifest.sizes),
        meta=dict(manifest.meta),
        folders=tuple(sorted(manifest.folders)),
    )
    own = _own_waiting(conn, space_id, ref, session)
    if own is None:
        return live  # ordered by path already
    loaded = review.lay_over(live, own)
    return loaded.model_copy(update={"revisions": dict(sorted(loaded.revisions.items()))})


def _read_manifest(conn: Conn, space_id: int, version: int) -> Manifest:
    """Every live file of the space without its bytes, in path order, and its folders."""
    rows = _all(
        conn,
        "SELECT live.path, live.revision_id, revisions.sha256, revisions.size,"
        " revisions.mode, revisions.mtime_ns, revisions.ctime_ns FROM live"
        " JOIN revisions ON revisions.id = live.revision_id"
        " WHERE live.space_id = %s ORDER BY live.path",
        (space_id,),
    )
    return Manifest(
        version=version,
        revisions={row[0]: str(row[1]) for row in rows},
        shas={row[0]: row[2] for row in rows},
        sizes={row[0]: int(row[3]) for row in rows},
        meta={row[0]: file_meta(row[4], row[5], row[6]) for row in rows},
        folders=frozenset(_folders(conn, space_id)),
    )


def _put(
    conn: Conn, ref: SpaceRef, changes: ChangeSet, provenance: Provenance, limits: Limits
) -> Stored:
    """A person's edit: within the limits a turn has, or nothing of it is written (audited)."""
    require_within(changes, _live_sizes(conn, _space_id(conn, ref)), limits)
    stored = _store_reviewed(conn, ref, changes, None, provenance, "none")
    about = audit_rules.about_put(ref, changes, provenance)
    if about is not None:  # a person's edit: recorded in the same transaction
        target, detail = about
        _log(conn, "put", ref.org, by=provenance.by, space=ref.space, target=target, detail=detail)
    return stored


def _contents(conn: Conn, ref: SpaceRef, shas: Collection[str]) -> dict[str, bytes]:
    space_id = _space_id(conn, ref)
    found: dict[str, bytes] = {}
    wanted = list(dict.fromkeys(shas))
    if space_id is None or not wanted:
        return found
    for sha, content in _all(
        conn,
        "SELECT sha256, content FROM revisions WHERE space_id = %s AND sha256 = ANY(%s)",
        (space_id, wanted),
    ):
        found.setdefault(sha, bytes(content))
    return found


def _load(conn: Conn, ref: SpaceRef, session: str | None) -> Loaded:
    """The live files; with ``session``, that conversation's waiting change laid over them."""
    space_id = _space_id(conn, ref)
    if space_id is None:
        return Loaded(files={}, cursor=str(_forgotten_at(conn, ref)), revisions={})
    files, revisions, shas = _live_files(conn, space_id)
    live = Loaded(
        files=files,
        cursor=str(max(_cursor(conn, space_id), _forgotten_at(conn, ref))),
        revisions=revisions,
        shas=shas,
        meta=_live_metas(conn, space_id),
        folders=tuple(sorted(_folders(conn, space_id))),
    )
    own = _own_waiting(conn, space_id, ref, session)
    if own is None:
        return live  # ordered by path already
    loaded = review.lay_over(live, own)
    return loaded.model_copy(update={"files": dict(sorted(loaded.files.items()))})


def _restore(conn: Conn, ref: SpaceRef, path: str, revision: str, provenance: Provenance) -> Stored:
    unknown = NotFound(f"{path!r} in {ref} has no revision {revision!r}", path=path)
    space_id = _space_id(conn, ref)
    found = row_id(revision)
    if space_id is None or found is None:
        raise unknown
    row = _one(
        conn,
        "SELECT content, mode FROM revisions WHERE id = %s AND space_id = %s AND path = %s",
        (found, space_id, path),
    )
    if row is None:
        raise unknown
    if row[0] is None:
        raise NotFound(f"revision {revision!r} deleted {path!r}; it has no content", path=path)
    # The mode comes back with the bytes; the times are the restore's own.
    mode = FileMeta(mode=0o644 if row[1] is None else row[1])
    current = _record(conn, space_id, path, bytes(row[0]), provenance, meta=mode)
    _make_live(conn, space_id, path, current)
    target, detail = audit_rules.about_file(ref, path, revision)
    _log(conn, "restore", ref.org, by=provenance.by, space=ref.space, target=target, detail=detail)
    return Stored(status="saved", revisions={path: str(current)}, cursor=str(current))


def _history(conn: Conn, ref: SpaceRef, path: str) -> list[Revision]:
    space_id = _space_id(conn, ref)
    if space_id is None:
        return []
    rows = _all(
        conn,
        "SELECT id, sha256, size, origin, session, turn, prompt, by_id, by_label, by_role,"
        " approved_by_id, approved_by_label, approved_by_role, created_at, mode, mtime_ns"
        " FROM revisions WHERE space_id = %s AND path = %s ORDER BY id",
        (space_id, path),
    )
    revisions = []
    for (
        id_, sha, size, origin, session, turn, prompt, by_id, by_label, by_role,
        approved_id, approved_label, approved_role, created_at, mode, mtime_ns,
    ) in rows:  # fmt: skip
        deleted = sha is None
        revisions.append(
            Revision(
                id=str(id_),
                path=path,
                sha256=sha,
                size=size,
                deleted=deleted,
                provenance=Provenance(
                    origin=origin,
                    session=session,
                    turn=turn,
                    prompt=prompt,
                    by=by_of(by_id, by_label, by_role),
                    at=created_at.astimezone(UTC),
                ),
                approved_by=by_of(approved_id, approved_label, approved_role),
                mode=None if deleted else 0o644 if mode is None else mode,
                mtime_ns=None if deleted else mtime_ns,
            )
        )
    return revisions


def _spaces(conn: Conn) -> list[SpaceRef]:
    rows = _all(
        conn,
        'SELECT layer, org, "user", space FROM spaces'
        " WHERE EXISTS (SELECT 1 FROM revisions WHERE revisions.space_id = spaces.id)",
    )
    refs = [
        SpaceRef(layer=layer, org=org, user=user or None, space=space)
        for layer, org, user, space in rows
    ]
    return sorted(refs, key=str)


def _store_turn(
    conn: Conn,
    ref: SpaceRef,
    changes: ChangeSet,
    base: int | None,
    provenance: Provenance,
    requested: ReviewMode,
) -> Stored:
    """``_store_reviewed``, exactly once per turn, and never over a forget the turn predates."""
    key = turn_key(provenance)
    if key is not None:
        space_id = _space_id(conn, ref)
        row = (
            None
            if space_id is None
            else _one(
                conn,
                "SELECT changes, stored FROM stored_turns"
                " WHERE space_id = %s AND session = %s AND turn = %s",
                (space_id, *key),
            )
        )
        if row is not None and row[0] == changes.fingerprint():
            return Stored.model_validate_json(row[1])
    if base is not None and _forgotten_at(conn, ref) > base:
        raise Forgotten(
            "this person's memory was forgotten after the turn loaded it; nothing of the "
            "turn is stored in it",
            path=str(ref),
        )
    stored = _store_reviewed(conn, ref, changes, base, provenance, requested)
    if key is not None and stored.status != "conflict" and not changes.is_empty():
        _run(
            conn,
            "INSERT INTO stored_turns (space_id, session, turn, changes, stored)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (space_id, session, turn) DO UPDATE"
            " SET changes = excluded.changes, stored = excluded.stored",
            (_ensure_space(conn, ref), *key, changes.fingerprint(), stored.model_dump_json()),
        )
    return stored
