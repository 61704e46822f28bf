"""The in-process store: managed semantics (revisions, per-file conflicts, review) in plain dicts.

Used by ``memfs.testing`` and for tests of apps built on memfs. Every method
runs without awaiting in between reads and writes, so each is atomic with
respect to other trio tasks.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from memfs.core import audit as audit_rules
from memfs.core import members as member_rules
from memfs.core import review as rules
from memfs.core import signin as signin_rules
from memfs.core.audit import GENESIS, AuditCheck
from memfs.core.errors import Forgotten, NotFound
from memfs.core.forgetting import trace_kept, words_kept
from memfs.core.limits import require_within
from memfs.core.members import IssuedToken, Member
from memfs.core.models import (
    FILE_MODE,
    AsOfFile,
    AuditAction,
    AuditEntry,
    By,
    ChangeSet,
    FileMeta,
    Forgetting,
    Forgot,
    Limits,
    LiveOrigin,
    Loaded,
    Provenance,
    Revision,
    SpaceRef,
    Stored,
    Trace,
    digest,
    forgotten_file_key,
    now,
    settle_meta,
)
from memfs.core.names import check_identity, check_path
from memfs.core.policy import moved_on, parse_cursor, purged_since
from memfs.core.review import OPEN_STATES, Effect, ReviewMode, WaitingChange
from memfs.core.story import as_of_cursor, live_at, trace_matches


@dataclass
class _Space:
    live: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # path -> (revision, content)
    last_change: dict[str, int] = field(default_factory=dict)  # path -> seq of last revision
    history: dict[str, list[Revision]] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)  # revision -> content, for restore
    metas: dict[str, FileMeta] = field(default_factory=dict)  # revision -> its file's metadata
    folders: set[str] = field(default_factory=set)  # the folders stored (see core.models)
    seq: int = 0

    def meta(self, path: str) -> FileMeta | None:
        """The live file's metadata, None if it is not live."""
        live = self.live.get(path)
        return None if live is None else self.metas[live[0]]


@dataclass(frozen=True)
class StoredEvent:
    """One change a store made, as ``memfs.testing`` reports it.

    ``status`` is ``saved`` for change sets, restores and forgetting an org
    file, and ``purged`` for forgetting a file of a person's own memory.
    """

    ref: SpaceRef
    changes: ChangeSet
    provenance: Provenance
    status: str


class MemoryStore:
    """A managed store that lives and dies with the process."""

    def __init__(self) -> None:
        self._spaces: dict[SpaceRef, _Space] = {}
        self._seq = 0
        self.events: list[StoredEvent] = []
        self.closed = False
        self._changes: dict[str, WaitingChange] = {}
        self._review: dict[SpaceRef, ReviewMode] = {}
        # Append-only: entries are added by the acts below and never changed or removed.
        self._audit: list[AuditEntry] = []
        self._traces: list[Trace] = []  # in the order turns ended
        # What each turn's store got, so a repeated store of one turn writes once.
        # (space, session, turn) -> (fingerprint of the change set, what it got).
        self._stored_turns: dict[tuple[SpaceRef, str, str], tuple[str, Stored]] = {}
        # (org, user, space) -> the sequence number when it was last forgotten;
        # space "" is the whole person. No path, no content.
        self._forgotten: dict[tuple[str, str, str], int] = {}
        # forgotten_file_key(space, path) -> the sequence number when that file was forgotten.
        self._forgotten_files: dict[str, int] = {}
        # People who sign in, by (org, id); tokens by their hash (never the token).
        self._members: dict[tuple[str, str], Member] = {}
        self._tokens: dict[str, tuple[str, str]] = {}  # hash -> (org, id)

    def _log(
        self,
        action: AuditAction,
        org: str,
        *,
        by: By | None,
        space: str | None = None,
        target: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Record one sensitive act. Called after the act succeeded, with no await between."""
        entry = AuditEntry(
            id=f"a{len(self._audit) + 1}",
            at=now(),
            actor=by,
            action=action,
            org=org,
            space=space,
            target=target,
            detail=detail,
        )
        prev = self._audit[-1].hash if self._audit else GENESIS
        self._audit.append(audit_rules.seal(entry, prev))

    async def verify_audit(self) -> AuditCheck:
        return audit_rules.verify_chain(self._audit)

    async def audit(
        self, *, org: str | None = None, before: str | None = None, limit: int | None = None
    ) -> list[AuditEntry]:
        return audit_rules.page(self.audit_nowait(org=org), before, limit)

    def audit_nowait(self, *, org: str | None = None) -> list[AuditEntry]:
        return [entry for entry in self._audit if org is None or entry.org == org]

    def _space(self, ref: SpaceRef) -> _Space:
        return self._spaces.setdefault(ref, _Space())

    async def load(self, ref: SpaceRef, session: str) -> Loaded:
        space = self._spaces.get(ref, _Space())
        files = {path: content for path, (_, content) in space.live.items()}
        revisions = {path: rev for path, (rev, _) in space.live.items()}
        metas = {path: space.metas[rev] for path, (rev, _) in space.live.items()}
        # The cursor is the store's whole sequence, so waiting edits and
        # revisions can be ordered against the snapshot (see core.review).
        live = Loaded(
            files=files,
            cursor=str(self._seq),
            revisions=revisions,
            meta=metas,
            folders=tuple(sorted(space.folders)),
        )
        # A conversation sees what it saved, even while it waits for review.
        return rules.lay_over(live, self._joins(ref, session, "person"))

    async def store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
    ) -> Stored:
        base = parse_cursor(cursor)
        key = _turn_key(ref, provenance)
        earlier = None if key is None else self._stored_turns.get(key)
        if earlier is not None and earlier[0] == changes.fingerprint():
            return earlier[1]
        if base is not None and self._forgotten_at(ref) > base:
            raise Forgotten(
                "this person's memory was forgotten after the turn loaded it; nothing of the "
                "turn is stored in it",
                path=str(ref),
            )
        provenance = words_kept(provenance, lambda user: self._person_forgotten_at(ref.org, user))
        stored = self._store(ref, changes, base, provenance, review)
        if key is not None and stored.status != "conflict" and not changes.is_empty():
            self._stored_turns[key] = (changes.fingerprint(), stored)
        return stored

    def _forgotten_at(self, ref: SpaceRef) -> int:
        if ref.layer != "user":
            return 0
        user = ref.user or ""
        return max(
            self._forgotten.get((ref.org, user, ref.space), 0),
            self._person_forgotten_at(ref.org, user),
        )

    def _store(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        base: int | None,
        provenance: Provenance,
        review: ReviewMode,
    ) -> Stored:
        mode = rules.effective_mode(self._review.get(ref), review)
        rules.conversation_of(ref.layer, mode, provenance)  # before anything is written
        space = self._space(ref)
        if not rules.saves_at_once(ref.layer, mode):
            return self._hold(ref, changes, base, provenance, mode)
        if base is not None:
            conflicts = sorted(
                {
                    *moved_on(changes.paths, space.last_change, base),
                    *purged_since(changes, space.last_change),
                }
            )
            if conflicts:
                return Stored(status="conflict", conflicts=tuple(conflicts), cursor=str(space.seq))
        before = self._snapshot(ref)  # the bases a reviewer's reject would put back
        stored = self._apply(ref, space, changes, provenance)
        if rules.is_listed(ref.layer, mode):
            listed = self._hold(
                ref, changes, base, provenance, mode, live=stored.revisions, snapshot=before
            )
            stored = stored.model_copy(update={"change": listed.change})
        return stored

    def _joins(self, ref: SpaceRef, session: str, mode: ReviewMode) -> WaitingChange | None:
        return rules.joins(self._changes.values(), ref, session, mode)

    def _hold(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        loaded: int | None,
        provenance: Provenance,
        mode: ReviewMode,
        *,
        live: dict[str, str] | None = None,
        snapshot: dict[str, str] | None = None,
    ) -> Stored:
        """Put a turn's change into its conversation's open change (made if need be)."""
        session = rules.conversation_of(ref.layer, mode, provenance)
        assert session is not None  # only listed changes are held
        change = self._joins(ref, session, mode)
        if live is None:  # waiting: checked against what the conversation sees
            rules.require_deletable(changes.deleted, self._space(ref).live, change)
            unseen = rules.unseen_edits(change, changes, self._seq if loaded is None else loaded)
            if unseen:
                return Stored(status="conflict", conflicts=unseen, cursor=str(self._seq))
        snapshot = self._snapshot(ref) if snapshot is None else snapshot
        edited = int(self._next(self._space(ref)))
        # Live (review after): loaded at the write itself, as the SQL stores
        # do, so the change's own revisions do not make it stale.
        start = edited - 1 if loaded is None or live is not None else loaded
        if change is None:
            change = rules.open_change(
                f"c{edited}",
                ref,
                mode=mode,
                changes=changes,
                snapshot=snapshot,
                loaded=start,
                edited=edited,
                provenance=provenance,
            )
        else:
            change = rules.update(
                change,
                changes,
                snapshot=snapshot,
                loaded=start,
                edited=edited,
                provenance=provenance,
            )
        self._changes[change.id] = change
        status: Literal["saved", "waiting"] = "saved" if live is not None else "waiting"
        return Stored(status=status, change=change.id, revisions=live or {}, cursor=str(self._seq))

    def _snapshot(self, ref: SpaceRef) -> dict[str, str]:
        """The live revision of each file, as the bases of a change's files."""
        space = self._spaces.get(ref, _Space())
        return {path: rev for path, (rev, _) in space.live.items()}

    async def set_review(self, ref: SpaceRef, mode: ReviewMode, *, by: By | None) -> None:
        self.set_review_nowait(ref, mode, by=by)

    def set_review_nowait(self, ref: SpaceRef, mode: ReviewMode, *, by: By | None) -> None:
        self._review[ref] = rules.check_mode(mode)
        self._log("set-review", ref.org, by=by, space=ref.space, detail=mode)

    async def review_mode(self, ref: SpaceRef) -> ReviewMode | None:
        return self._review.get(ref)

    def _marked(self, change: WaitingChange) -> WaitingChange:
        space = self._spaces.get(change.ref, _Space())
        others = [c for c in self._changes.values() if c.ref == change.ref]
        return rules.mark_stale(change, space.last_change, others)

    async def list_changes(
        self, *, org: str | None = None, open_only: bool = True
    ) -> list[WaitingChange]:
        return self.list_changes_nowait(org=org, open_only=open_only)

    def list_changes_nowait(
        self, *, org: str | None = None, open_only: bool = True
    ) -> list[WaitingChange]:
        by_space: dict[SpaceRef, list[WaitingChange]] = {}
        for change in self._changes.values():
            if (org is None or change.ref.org == org) and (
                not open_only or change.state in OPEN_STATES
            ):
                by_space.setdefault(change.ref, []).append(change)
        found = []
        for ref, changes in by_space.items():
            others = [c for c in self._changes.values() if c.ref == ref]
            last = self._spaces.get(ref, _Space()).last_change
            found.extend(rules.mark_stale_all(changes, last, others))
        return sorted(found, key=lambda change: int(change.id[1:]))

    async def get_change(self, id: str) -> WaitingChange:
        return self.get_change_nowait(id)

    def get_change_nowait(self, id: str) -> WaitingChange:
        change = self._changes.get(id)
        if change is None:
            raise NotFound("no such change", path=id)
        return self._marked(change)

    async def decide(
        self,
        id: str,
        action: Literal["approve", "edit", "reject"],
        *,
        by: By | None,
        paths: list[str] | None = None,
        edits: dict[str, bytes | None] | None = None,
        force: bool = False,
        limits: Limits | None = None,
        version: str | None = None,
        live_version: str | None = None,
    ) -> WaitingChange:
        return self.decide_nowait(
            id,
            action,
            by=by,
            paths=paths,
            edits=edits,
            force=force,
            limits=limits,
            version=version,
            live_version=live_version,
        )

    def decide_nowait(
        self,
        id: str,
        action: Literal["approve", "edit", "reject"],
        *,
        by: By | None,
        paths: list[str] | None = None,
        edits: dict[str, bytes | None] | None = None,
        force: bool = False,
        limits: Limits | None = None,
        version: str | None = None,
        live_version: str | None = None,
    ) -> WaitingChange:
        change = self.get_change_nowait(id)  # stale files marked, as the rules need
        after, effect, files = rules.decide(
            change,
            action,
            by=by,
            paths=paths,
            edits=edits,
            force=force,
            live_sizes=self._live_sizes(change.ref),
            limits=limits,
            version=version,
            live_version=live_version,
        )
        space = self._space(change.ref)
        if effect is Effect.APPLY:
            for path, content in sorted(files.items()):
                if content is None and path not in space.live:
                    continue
                provenance = rules.applied_provenance(change, path, action)
                # A reviewer's edit replaces the bytes, not the mode the turn gave.
                meta = change.files[path].meta
                self._record(space, path, content, provenance, approved_by=by, meta=meta)
        elif effect is Effect.REVERT:
            fix = Provenance(origin="edited", by=by)
            for path in sorted(files):
                base = change.files[path].base
                content = None if base is None else space.contents.get(base)
                if content is None and path not in space.live:
                    continue
                meta = None if base is None else space.metas.get(base)
                self._record(space, path, content, fix, approved_by=by, meta=meta)
        for path, made in rules.decided_folders(change, effect, paths).items():
            (space.folders.add if made else space.folders.discard)(path)
        self._changes[id] = after
        self._log(
            action,
            change.ref.org,
            by=by,
            space=change.ref.space,
            target=id,
            detail=",".join(sorted(files)),
        )
        return self._marked(after)

    async def put(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        provenance: Provenance,
        limits: Limits | None = None,
    ) -> Stored:
        return self.put_nowait(ref, changes, provenance=provenance, limits=limits)

    def _live_sizes(self, ref: SpaceRef) -> dict[str, int]:
        space = self._spaces.get(ref, _Space())
        return {path: len(content) for path, (_, content) in space.live.items()}

    def _apply(
        self, ref: SpaceRef, space: _Space, changes: ChangeSet, provenance: Provenance
    ) -> Stored:
        for path in changes.deleted:
            check_path(path)
        rules.require_deletable(changes.deleted, space.live)
        written: dict[str, str] = {}
        for path, content in sorted({**changes.created, **changes.updated}.items()):
            meta = changes.meta.get(path)
            written[path] = self._record(space, path, content, provenance, meta=meta)
        for path in changes.deleted:
            written[path] = self._record(space, path, None, provenance)
        space.folders.difference_update(changes.folders_deleted)
        space.folders.update(changes.folders_created)
        self.events.append(StoredEvent(ref, changes, provenance, "saved"))
        return Stored(status="saved", revisions=written, cursor=str(space.seq))

    def _record(
        self,
        space: _Space,
        path: str,
        content: bytes | None,
        provenance: Provenance,
        *,
        approved_by: By | None = None,
        meta: FileMeta | None = None,
    ) -> str:
        settled = None if content is None else settle_meta(meta, space.meta(path), provenance.at)
        rev = self._next(space)
        space.history.setdefault(path, []).append(
            Revision(
                id=rev,
                path=path,
                sha256=None if content is None else digest(content),
                size=0 if content is None else len(content),
                deleted=content is None,
                provenance=provenance,
                approved_by=approved_by,
                mode=None if settled is None else settled.mode,
                mtime_ns=None if settled is None else settled.mtime_ns,
            )
        )
        space.last_change[path] = self._seq
        if content is None:
            del space.live[path]
        else:
            assert settled is not None
            space.contents[rev] = content
            space.metas[rev] = settled
            space.live[path] = (rev, content)
        return rev

    def _next(self, space: _Space) -> str:
        """Take the next sequence number, which becomes the space's cursor."""
        self._seq += 1
        space.seq = self._seq
        return str(self._seq)

    async def history(self, ref: SpaceRef, path: str) -> list[Revision]:
        check_path(path)
        return list(self._spaces.get(ref, _Space()).history.get(path, []))

    async def open_history(self, ref: SpaceRef, path: str, *, by: By | None) -> list[Revision]:
        found = await self.history(ref, path)
        if ref.layer == "user":
            detail = audit_rules.count(len(found), "revision")
            self._log("open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
        return found

    async def files(self, ref: SpaceRef) -> dict[str, bytes]:
        return self.files_nowait(ref)

    def files_nowait(self, ref: SpaceRef) -> dict[str, bytes]:
        space = self._spaces.get(ref, _Space())
        return {path: content for path, (_, content) in space.live.items()}

    async def live_origins(self, ref: SpaceRef) -> dict[str, LiveOrigin]:
        space = self._spaces.get(ref, _Space())
        # A live file's latest revision is the live one: a deletion would have made it not live.
        return {
            path: LiveOrigin(len(content), space.history[path][-1].provenance.origin)
            for path, (_, content) in sorted(space.live.items())
        }

    def put_nowait(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        provenance: Provenance,
        limits: Limits | None = None,
    ) -> Stored:
        require_within(changes, self._live_sizes(ref), limits or Limits())
        stored = self._apply(ref, self._space(ref), changes, provenance)
        about = audit_rules.about_put(ref, changes, provenance)
        if about is not None:
            self._log(
                "put", ref.org, by=provenance.by, space=ref.space, target=about[0], detail=about[1]
            )
        return stored

    async def restore(self, ref: SpaceRef, path: str, revision: str, *, by: By | None) -> Stored:
        check_path(path)
        space = self._spaces.get(ref, _Space())
        found = next((r for r in space.history.get(path, []) if r.id == revision), None)
        if found is None:
            raise NotFound(f"{path!r} in {ref} has no revision {revision!r}", path=path)
        if found.deleted:
            raise NotFound(f"revision {revision!r} deleted {path!r}; it has no content", path=path)
        content = space.contents[revision]
        # The mode comes back with the bytes (said only where it differs from
        # what the file would get anyway); the times are the restore's own.
        mode = space.metas[revision].mode
        current = space.meta(path)
        meta = (
            {}
            if mode == (FILE_MODE if current is None else current.mode)
            else {path: FileMeta(mode=mode)}
        )
        changes = (
            ChangeSet(updated={path: content}, meta=meta)
            if path in space.live
            else ChangeSet(created={path: content}, meta=meta)
        )
        stored = self._apply(ref, space, changes, Provenance(origin="edited", by=by))
        target, detail = audit_rules.about_file(ref, path, revision)
        self._log("restore", ref.org, by=by, space=ref.space, target=target, detail=detail)
        return stored

    async def forget_file(self, ref: SpaceRef, path: str, *, by: By | None) -> Stored:
        check_path(path)
        if ref.layer == "user":
            return self._purge(ref, path, by)
        space = self._spaces.get(ref, _Space())
        if path not in space.live:
            raise NotFound(f"{ref} holds no file {path!r} to forget", path=path)
        stored = self._apply(
            ref, space, ChangeSet(deleted=(path,)), Provenance(origin="edited", by=by)
        )
        self._log("forget", ref.org, by=by, space=ref.space, target=path)
        return stored

    def _purge(self, ref: SpaceRef, path: str, by: By | None) -> Stored:
        space = self._spaces.get(ref)
        if space is None or path not in space.history:
            raise NotFound(f"{ref} holds nothing of {path!r} to forget", path=path)
        for revision in space.history.pop(path):
            space.contents.pop(revision.id, None)
            space.metas.pop(revision.id, None)
        space.live.pop(path, None)
        space.last_change.pop(path, None)
        # The space changed, so its cursor moves on, though no revision records it.
        self._next(space)
        self._forgotten[(ref.org, ref.user or "", ref.space)] = self._seq
        self._forgotten_files[forgotten_file_key(ref, path)] = self._seq
        for key, (print_, stored) in self._stored_turns.items():
            if key[0] == ref and path in stored.revisions:
                revisions = {p: r for p, r in stored.revisions.items() if p != path}
                self._stored_turns[key] = (
                    print_,
                    stored.model_copy(update={"revisions": revisions}),
                )
        # The event log is part of the store: earlier events must not keep the
        # content either. Events that touched only this file go entirely, with
        # the prompt that came with them.
        scrubbed: list[StoredEvent] = []
        for event in self.events:
            if event.ref == ref and event.status != "purged" and path in event.changes.paths:
                rest = event.changes.without([path])
                if rest.is_empty():
                    continue
                event = StoredEvent(event.ref, rest, event.provenance, event.status)
            scrubbed.append(event)
        scrubbed.append(
            StoredEvent(
                ref, ChangeSet(deleted=(path,)), Provenance(origin="edited", by=by), "purged"
            )
        )
        self.events = scrubbed
        self._traces = [trace.without_file(ref, path) or trace for trace in self._traces]
        # Neither path nor content: the name can say as much as what was forgotten.
        target, detail = audit_rules.about_file(ref, path)
        self._log("forget", ref.org, by=by, space=ref.space, target=target, detail=detail)
        return Stored(status="saved", cursor=str(space.seq))

    def _own_spaces(self, user: str, org: str) -> list[SpaceRef]:
        """Every user-layer space of ``user`` in ``org`` the store has any entry for."""
        check_identity(user, what="user id")
        check_identity(org, what="org id")
        return sorted(
            (
                ref
                for ref in {*self._spaces, *self._review, *(c.ref for c in self._changes.values())}
                if ref.owned_by(org, user)
            ),
            key=str,
        )

    async def forget_user(self, user: str, org: str, *, by: By | None) -> Forgot:
        refs = set(self._own_spaces(user, org))
        purged = sorted(
            (ref for ref in refs if ref in self._spaces and self._spaces[ref].history), key=str
        )
        files = sum(len(self._spaces[ref].live) for ref in purged)
        for ref in refs:
            self._spaces.pop(ref, None)
            self._review.pop(ref, None)
        # Their words in the org's memory go too (Provenance.without_words_of),
        # as the managed SQL stores destroy the key they were sealed under.
        self._changes = {
            id: rules.without_words_of(c, user) if c.ref.org == org else c
            for id, c in self._changes.items()
            if c.ref not in refs
        }
        for ref, space in self._spaces.items():
            if ref.org == org:
                space.history = {
                    path: [
                        r.model_copy(update={"provenance": r.provenance.without_words_of(user)})
                        for r in revisions
                    ]
                    for path, revisions in space.history.items()
                }
        self._stored_turns = {k: v for k, v in self._stored_turns.items() if k[0] not in refs}
        self._seq += 1
        self._forgotten[(org, user, "")] = self._seq
        # Events keep content and prompts, and even a "purged" event names the
        # person, so every event of these spaces goes and none is added; the
        # rest keep no words of theirs.
        self.events = [
            replace(event, provenance=event.provenance.without_words_of(user))
            if event.ref.org == org
            else event
            for event in self.events
            if event.ref not in refs
        ]
        # Traces name the person's files and the revisions a turn carried of
        # them, and the prompt is theirs wherever they are among its holders.
        self._traces = [trace.without_words_of(user, org) or trace for trace in self._traces]
        # Naming whom was forgotten, and by whom, is what makes the erasure accountable.
        detail = audit_rules.count(len(purged), "space")  # how many, never what they held
        self._log("forget-user", org, by=by, target=user, detail=detail)
        return Forgot(spaces=tuple(purged), files=files)

    async def forgotten_since(self, ref: SpaceRef, cursor: str | None) -> bool:
        base = parse_cursor(cursor)
        return base is not None and self._forgotten_at(ref) > base

    async def forgotten_files_since(
        self, ref: SpaceRef, cursor: str | None, paths: Collection[str]
    ) -> Forgetting:
        base = parse_cursor(cursor)
        if base is None or ref.layer != "user":
            return Forgetting()
        if self._person_forgotten_at(ref.org, ref.user or "") > base:
            return Forgetting(everything=True)
        return Forgetting(
            paths=tuple(
                sorted(
                    path
                    for path in set(paths)
                    if self._forgotten_files.get(forgotten_file_key(ref, path), 0) > base
                )
            )
        )

    async def person_forgotten_since(self, org: str, user: str, cursor: str | None) -> bool:
        base = parse_cursor(cursor)
        return base is not None and self._person_forgotten_at(org, user) > base

    async def person_forgotten_at(self, org: str, user: str) -> str | None:
        seq = self._person_forgotten_at(org, user)
        return str(seq) if seq else None

    def _person_forgotten_at(self, org: str, user: str) -> int:
        return self._forgotten.get((org, user, ""), 0)

    async def record_trace(self, trace: Trace) -> None:
        # Once per (session, turn): a turn end repeated after a crash traces nothing twice.
        if any(t.session == trace.session and t.turn == trace.turn for t in self._traces):
            return
        self._traces.append(trace_kept(trace, self._person_forgotten_at))

    async def traces(self, *, session: str | None = None) -> list[Trace]:
        return [t for t in self._traces if session is None or t.session == session]

    async def find_traces(
        self,
        *,
        turn: str | None = None,
        space: SpaceRef | None = None,
        since: datetime | None = None,
    ) -> list[Trace]:
        return [t for t in self._traces if trace_matches(t, turn=turn, space=space, since=since)]

    async def files_as_of(self, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
        return self._as_of(ref, cursor)

    def _as_of(self, ref: SpaceRef, cursor: str) -> dict[str, AsOfFile]:
        at = as_of_cursor(cursor, self._seq)
        space = self._spaces.get(ref, _Space())
        found: dict[str, AsOfFile] = {}
        # Purged files and forgotten people left no history, so they are gone from the past too.
        for path in sorted(space.history):
            revision = live_at(space.history[path], at)
            if revision is not None and revision.sha256 is not None:
                found[path] = AsOfFile(revision.id, revision.sha256, revision.size)
        return found

    async def open_files_as_of(
        self, ref: SpaceRef, cursor: str, *, by: By | None
    ) -> dict[str, AsOfFile]:
        try:
            found = self._as_of(ref, cursor)
        except NotFound:
            if ref.layer == "user":  # the look is recorded all the same (see SqlStore's)
                detail = audit_rules.UNKNOWN_CURSOR
                self._log("open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
            raise
        if ref.layer == "user":
            detail = audit_rules.count(len(found), "file")
            self._log("open", ref.org, by=by, space=ref.space, target=ref.user, detail=detail)
        return found

    async def user_files(self, user: str, org: str) -> dict[str, dict[str, bytes]]:
        found: dict[str, dict[str, bytes]] = {}
        for ref in self._own_spaces(user, org):
            files = self.files_nowait(ref)
            if files:
                found[ref.space] = files
        return found

    async def open_person(
        self, user: str, org: str, *, by: By | None
    ) -> dict[str, dict[str, bytes]]:
        found = await self.user_files(user, org)
        files = sum(len(space) for space in found.values())
        self._log("open", org, by=by, target=user, detail=audit_rules.count(files, "file"))
        return found

    async def people(self, org: str) -> dict[SpaceRef, int]:
        check_identity(org, what="org id")
        sizes = {
            ref: sum(len(content) for _, content in space.live.values())
            for ref, space in self._spaces.items()
            if ref.layer == "user" and ref.org == org and space.live
        }
        return dict(sorted(sizes.items(), key=lambda item: str(item[0])))

    async def spaces(self) -> list[SpaceRef]:
        return sorted((ref for ref, space in self._spaces.items() if space.history), key=str)

    async def add_member(self, member: Member, *, by: By | None) -> Member:
        key = (member.org, member.id)
        before = self._members.get(key)
        detail = member_rules.member_change(before, member)
        if detail is None:
            return member
        self._members[key] = member
        action: AuditAction = "add-member" if before is None else "change-member"
        self._log(action, member.org, by=by, target=member.id, detail=detail)
        return member

    def _member(self, id: str, org: str) -> Member:
        member_rules.check_member_id(id)
        member_rules.check_member_id(org, what="org id")
        found = self._members.get((org, id))
        if found is None:
            raise NotFound(f"org {org!r} has no member of this id", path=id)
        return found

    async def member(self, id: str, org: str) -> Member:
        return self._member(id, org)

    async def members(self, org: str) -> list[Member]:
        member_rules.check_member_id(org, what="org id")
        return sorted((m for (o, _), m in self._members.items() if o == org), key=lambda m: m.id)

    def _drop_tokens(self, id: str, org: str) -> int:
        mine = [h for h, owner in self._tokens.items() if owner == (org, id)]
        for hashed in mine:
            del self._tokens[hashed]
        return len(mine)

    async def remove_member(self, id: str, org: str, *, by: By | None) -> Member:
        found = self._member(id, org)
        revoked = self._drop_tokens(id, org)
        del self._members[(org, id)]
        detail = audit_rules.count(revoked, "token")
        self._log("remove-member", org, by=by, target=id, detail=detail)
        return found

    async def record_signin(self, member: Member | None, *, client: str) -> None:
        key = signin_rules.client_key(client)
        if member is None:
            self._log("sign-in-failed", signin_rules.NO_ORG, by=None, detail=key)
        else:
            self._log("sign-in", member.org, by=member_rules.member_by(member), detail=key)

    async def create_token(self, id: str, org: str, *, by: By | None) -> IssuedToken:
        found = self._member(id, org)
        token = member_rules.new_token()
        self._tokens[member_rules.token_hash(token)] = (org, id)
        self._log("create-token", org, by=by, target=id)
        return IssuedToken(token=token, member=found)

    async def revoke_tokens(self, id: str, org: str, *, by: By | None) -> int:
        self._member(id, org)
        revoked = self._drop_tokens(id, org)
        self._log(
            "revoke-tokens", org, by=by, target=id, detail=audit_rules.count(revoked, "token")
        )
        return revoked

    async def resolve_token(self, token: str) -> Member | None:
        if not member_rules.looks_like_token(token):
            return None
        hashed = member_rules.token_hash(token)
        # Every kept hash is compared, each in constant time: a test store, few tokens.
        match = next(
            (owner for kept, owner in self._tokens.items() if member_rules.same_hash(kept, hashed)),
            None,
        )
        return None if match is None else self._members.get(match)

    async def aclose(self) -> None:
        self.closed = True


def _turn_key(ref: SpaceRef, provenance: Provenance) -> tuple[SpaceRef, str, str] | None:
    """The (space, session, turn) a store comes from, if it comes from a turn."""
    if provenance.origin != "conversation" or not provenance.session or not provenance.turn:
        return None
    return ref, provenance.session, provenance.turn


__all__ = ["MemoryStore", "StoredEvent"]
