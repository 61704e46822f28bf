"""The values memfs passes between its layers: refs, change sets, snapshots, revisions.

All are frozen pydantic models. File contents are ``bytes`` everywhere below
the app-facing edges, so binary files and non-UTF-8 content round-trip byte
for byte; paths are ``str`` (see :mod:`memfs.core.names`).

What a space keeps is what a filesystem keeps: each file's content with its
:class:`FileMeta` (permission bits, mtime, ctime), and its folders, empty
ones included. Both are optional everywhere, so a caller that knows nothing
of them (an app's store, an older memfs) still fits:

- ``ChangeSet.meta`` gives a created or updated file's metadata; a created
  file without it is ``0o644`` with the store's time, an updated one keeps
  the mode it had and takes the store's time. A change of mode alone is an
  update (the same bytes, a new revision), because a later turn must see it.
- ``ChangeSet.folders_created`` / ``folders_deleted`` name folders the space
  gains or loses. A space's folders are its stored folders plus every folder
  a file's path implies; a folder is stored when a turn makes it, or when it
  outlives the files that implied it. Folders never conflict: making a folder
  the store holds, or removing one it does not, changes nothing.
- ``Loaded.meta`` and ``Loaded.folders`` are the same at load.

Folders keep no mode or times of their own: a folder is planted 0755 each turn.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from memfs.core.errors import InvalidName
from memfs.core.lineage import Lineage
from memfs.core.names import (
    check_identity,
    check_mount_path,
    check_path,
    check_space_name,
    unencodable,
)

Layer = Literal["org", "user", "dir"]
CommitMode = Literal["after-turn", "manual", "read-only"]
Status = Literal["saved", "waiting", "skipped", "not_saved", "manual"]
StoreStatus = Literal["saved", "waiting", "conflict"]
Origin = Literal["conversation", "code", "edited", "fix"]
# How an org space's changes go live (``memfs.core.review`` owns what each means).
ReviewMode = Literal["person", "after", "none"]
AuditAction = Literal[
    "approve",
    "reject",
    "edit",
    "restore",
    "forget",
    "forget-user",
    "open",
    "set-review",
    "put",
    # Who may sign in (see memfs.core.members): never a token or its hash.
    "add-member",
    "change-member",
    "remove-member",
    "create-token",
    "revoke-tokens",
    # A browser's sign-in to the Memory tab; a failed one names no org (see memfs.core.signin).
    "sign-in",
    "sign-in-failed",
]

DEFAULT_ORG = "default"

KIB = 1024
MIB = 1024 * KIB


class Frozen(BaseModel):
    # Contents are bytes; in JSON they travel as base64 so binary survives.
    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )


def digest(content: bytes) -> str:
    """The content address memfs uses for blobs and folder-store revisions."""
    return hashlib.sha256(content).hexdigest()


def now() -> datetime:
    return datetime.now(UTC)


MAX_LIMIT = 2**63 - 1  # the largest value of any limit: a signed 64-bit count
# A limit: a whole number (strict: not true, not "64"), at most MAX_LIMIT.
_Limit = Annotated[int, Field(gt=0, le=MAX_LIMIT, strict=True)]
_Reserve = Annotated[int, Field(ge=0, le=MAX_LIMIT, strict=True)]


class Limits(Frozen):
    """Every size limit memfs enforces, as one setting each.

    Each is a whole number (``true`` or ``"64"`` in a config file is refused,
    not read as 1 or 64) of at most :data:`MAX_LIMIT`, what a 64-bit field
    holds (``statfs`` reports them so).
    """

    max_file_bytes: _Limit = 1 * MIB
    max_files: _Limit = 10_000
    # Folders a space stores (empty ones, or ones a turn made): each is a row
    # of the store, so they are bounded like files.
    max_folders: _Limit = 10_000
    max_space_bytes: _Limit = 64 * MIB
    note_file_list_bytes: _Limit = 8_000
    # What one session may hold of the daemon's resources, so that no agent
    # can exhaust what the others need (the daemon enforces these).
    max_open_files: _Limit = 1024  # per session, at once; past it EMFILE
    journal_bytes: _Limit = 4 * MIB  # a turn's journal is compacted past it
    # Free space kept on the disk under state_dir for ending turns and storing
    # them: below it, agents' writes get ENOSPC. 0 keeps none.
    disk_reserve_bytes: _Reserve = 256 * MIB


MODE_BITS = 0o777  # the permission bits memfs keeps: not setuid, setgid or sticky
# The times memfs keeps: a signed 64-bit count of nanoseconds since the epoch
# (1677 to 2262), what SQLite's INTEGER and PostgreSQL's bigint hold.
MIN_TIME_NS = -(2**63)
MAX_TIME_NS = 2**63 - 1
FILE_MODE = 0o644  # a file's mode when nobody said otherwise


class FileMeta(NamedTuple):
    """What memfs keeps of a file beside its content.

    ``mode`` is the permission bits (``MODE_BITS``). ``mtime_ns`` and
    ``ctime_ns`` are nanoseconds since the epoch, before it too (an old
    archive unpacked), within ``MIN_TIME_NS``..``MAX_TIME_NS`` (see
    ``clamp_time_ns``); ``None`` means the store's own time of the revision.
    The ctime is kept as well as the mtime because tools that cache stat
    data (git's index) compare both, so a file whose ctime changed from one
    turn to the next would look modified to them.

    A named tuple, not a model: a turn start over 10,000 files makes one per
    file, and a tuple costs a fifth of a model to build. The bounds are
    checked wherever one is validated as part of a model (a ``ChangeSet``, a
    ``Loaded``); in JSON it is ``[mode, mtime_ns, ctime_ns]``.
    """

    mode: Annotated[int, Field(ge=0, le=MODE_BITS)] = FILE_MODE
    mtime_ns: Annotated[int | None, Field(ge=MIN_TIME_NS, le=MAX_TIME_NS)] = None
    ctime_ns: Annotated[int | None, Field(ge=MIN_TIME_NS, le=MAX_TIME_NS)] = None


DEFAULT_META = FileMeta()


def clamp_time_ns(ns: int) -> int:
    """A time a file was given, brought into the range memfs keeps.

    As Linux does for a filesystem that cannot hold the time asked for
    (``touch -d @100000000000`` on ext4): the nearest time it can, so the
    file is stored, never refused, and no store is handed a number it
    cannot bind.
    """
    return min(max(ns, MIN_TIME_NS), MAX_TIME_NS)


class LiveOrigin(NamedTuple):
    """A live file as the Memory map shows it (``ManagedStore.live_origins``): no bytes.

    Its size, and the origin of its latest revision (the one that is live). A
    named tuple like ``FileMeta``: the map of a 10,000-file space makes one per file.
    """

    size: int
    origin: Origin


def settle_meta(given: FileMeta | None, before: FileMeta | None, at: datetime) -> FileMeta:
    """The metadata a store keeps with a new revision: the rule every store shares.

    ``given`` is what the change set says (None: nothing), ``before`` the
    file's live metadata (None: new file), ``at`` the revision's time. A
    change set that says nothing keeps the mode the file had; times it leaves
    out are the revision's own.
    """
    at_ns = int(at.timestamp() * 1_000_000_000)
    if given is None:
        given = FileMeta(mode=FILE_MODE if before is None else before.mode)
    mtime = at_ns if given.mtime_ns is None else given.mtime_ns
    ctime = mtime if given.ctime_ns is None else given.ctime_ns
    if given.mtime_ns == mtime and given.ctime_ns == ctime:
        return given
    return FileMeta(mode=given.mode, mtime_ns=mtime, ctime_ns=ctime)


class SpaceRef(Frozen):
    """Which stored space a mount is: layer, org, space name and, for the user layer, whose."""

    layer: Layer
    space: str
    org: str = DEFAULT_ORG
    user: str | None = None

    @model_validator(mode="after")
    def _check(self) -> SpaceRef:
        if self.layer == "dir":
            check_mount_path(self.space, nested=True)  # a dir's space is its mount path
        else:
            check_space_name(self.space)
        check_identity(self.org, what="org id")
        if self.layer == "user":
            if self.user is None:
                raise InvalidName("a user-layer space needs a user id", path=self.space)
            check_identity(self.user, what="user id")
        elif self.user is not None:
            raise InvalidName(f"a {self.layer}-layer space has no user", path=self.space)
        return self

    @property
    def own_org(self) -> str | None:
        """The org this space is of; None for a dir, whose ``org`` is only the default.

        A persistent dir is the app's, in no org (``memfs.core.policy.resolve_ref``
        leaves its ``org`` at ``DEFAULT_ORG``): read as an org, it would put every
        org's turns that mount it in the org named ``default``.
        """
        return None if self.layer == "dir" else self.org

    def owned_by(self, org: str, user: str) -> bool:
        """Whether this is ``user``'s own memory in ``org`` (what forgetting them removes)."""
        return self.layer == "user" and self.org == org and self.user == user

    def __str__(self) -> str:
        if self.layer == "user":
            return f"user:{self.org}/{self.user}/{self.space}"
        return f"{self.layer}:{self.org}/{self.space}"


class ChangeSet(Frozen):
    """What a turn changed in one space, against the snapshot it loaded."""

    created: dict[str, bytes] = Field(default_factory=dict)
    updated: dict[str, bytes] = Field(default_factory=dict)
    deleted: tuple[str, ...] = ()
    # Metadata of created and updated files (see the module docstring).
    meta: dict[str, FileMeta] = Field(default_factory=dict)
    folders_created: tuple[str, ...] = ()
    folders_deleted: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> ChangeSet:
        seen: set[str] = set()
        for path in (*self.created, *self.updated, *self.deleted):
            check_path(path)
            if path in seen:
                raise InvalidName("a path appears twice in one change set", path=path)
            seen.add(path)
        for path in self.meta:
            if path not in self.created and path not in self.updated:
                raise InvalidName("metadata for a file the change set does not write", path=path)
        folders: set[str] = set()
        for path in (*self.folders_created, *self.folders_deleted):
            check_path(path)
            if path in folders:
                raise InvalidName("a folder appears twice in one change set", path=path)
            folders.add(path)
        for path in self.folders_created:
            # A removed folder may give way to a file of the same name; a made one may not.
            if path in self.created or path in self.updated:
                raise InvalidName("a path would be both a file and a folder", path=path)
        return self

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the change set touches, sorted."""
        return tuple(sorted((*self.created, *self.updated, *self.deleted)))

    @property
    def folders(self) -> tuple[str, ...]:
        """Every folder the change set makes or removes, sorted."""
        return tuple(sorted((*self.folders_created, *self.folders_deleted)))

    def is_empty(self) -> bool:
        return not (
            self.created
            or self.updated
            or self.deleted
            or self.folders_created
            or self.folders_deleted
        )

    def without(self, paths: Iterable[str]) -> ChangeSet:
        """The change set less the files (and folders) named in ``paths``."""
        drop = set(paths)
        return ChangeSet(
            created={p: c for p, c in self.created.items() if p not in drop},
            updated={p: c for p, c in self.updated.items() if p not in drop},
            deleted=tuple(p for p in self.deleted if p not in drop),
            meta={p: m for p, m in self.meta.items() if p not in drop},
            folders_created=tuple(p for p in self.folders_created if p not in drop),
            folders_deleted=tuple(p for p in self.folders_deleted if p not in drop),
        )

    def only(self, paths: Iterable[str]) -> ChangeSet:
        """The change set's files (and folders) named in ``paths``, nothing else."""
        keep = set(paths)
        return self.without(p for p in (*self.paths, *self.folders) if p not in keep)

    def fingerprint(self) -> str:
        """A sha256 naming exactly this change set: what a store compares to tell a repeat.

        A turn end repeated after a crash sends the same change set again; a
        store that kept this with the turn's first store knows it is one.
        """
        h = hashlib.sha256()
        for kind, files in (("c", self.created), ("u", self.updated)):
            for path in sorted(files):
                h.update(f"{kind}\0{path}\0{digest(files[path])}\0".encode())
        for path in sorted(self.deleted):
            h.update(f"d\0{path}\0".encode())
        # Only where there are some, so a change set of files alone hashes as
        # stores kept it before (a repeat across an upgrade is still one).
        # Times stay out, as before: they do not decide whether a store repeats.
        for kind, folders in (("F", self.folders_created), ("G", self.folders_deleted)):
            for path in sorted(folders):
                h.update(f"{kind}\0{path}\0".encode())
        for path in sorted(self.meta):
            if self.meta[path].mode != FILE_MODE:
                h.update(f"m\0{path}\0{self.meta[path].mode:o}\0".encode())
        return h.hexdigest()

    def summary(self) -> dict[str, list[str]]:
        """Paths only, for JSON output and logs."""
        out = {
            "created": sorted(self.created),
            "updated": sorted(self.updated),
            "deleted": sorted(self.deleted),
        }
        # Only when there are some, so the shape callers know stays as it was.
        if self.folders_created:
            out["folders_created"] = sorted(self.folders_created)
        if self.folders_deleted:
            out["folders_deleted"] = sorted(self.folders_deleted)
        return out


def _text(value: str | None) -> str | None:
    """Text a store keeps (and seals) as UTF-8: a lone surrogate is refused where it comes in."""
    found = unencodable(value, "text")
    if found is not None:
        raise ValueError(f"must be valid UTF-8 text: {found}")
    return value


class By(Frozen):
    """Who a revision is attributed to, as the app's sign-in named them."""

    id: str
    label: str | None = None
    role: str | None = None

    @field_validator("id", "label", "role")
    @classmethod
    def _utf8(cls, value: str | None) -> str | None:
        return _text(value)

    @classmethod
    def coerce(cls, value: Any) -> By | None:
        """Accept what an app's ``by`` callable returns: a ``By``, a mapping, a bare id or None."""
        if value is None or isinstance(value, By):
            return value
        if isinstance(value, str):
            return cls(id=value)
        if isinstance(value, Mapping):
            return cls(
                id=str(value["id"]),
                label=None if value.get("label") is None else str(value["label"]),
                role=None if value.get("role") is None else str(value["role"]),
            )
        raise TypeError(f"'by' must return a mapping with 'id', a string or None, not {value!r}")


class Provenance(Frozen):
    """Where a change came from: what every revision written from it records."""

    origin: Origin = "conversation"
    session: str | None = None
    turn: str | None = None
    prompt: str | None = None
    by: By | None = None
    at: datetime = Field(default_factory=now)
    # Whose own memory the turn mounted (the user id of its user layer), where
    # that is one person: the prompt was theirs to type, wherever it is kept.
    person: str | None = None
    # Where the store had last forgotten the author (``ForgetLog``'s mark,
    # "0": never) as the turn started: a store keeps no words of an author
    # forgotten since (``memfs.core.forgetting.words_kept``). None: not known.
    # Only a request in this process carries it: no store keeps it, and no
    # dump of a provenance (history, a held change set on disk) shows it.
    words_since: str | None = Field(default=None, exclude=True)

    @field_validator("session", "turn", "prompt", "person")
    @classmethod
    def _utf8(cls, value: str | None) -> str | None:
        return _text(value)

    @property
    def author(self) -> str | None:
        """The user id whose words the prompt and the ``by`` label are, if anyone's.

        The turn's person, else whom the revision is attributed to. A managed
        store keeps them sealed under that person's key in the space's org, so
        forgetting the person (``forget_user``) reaches them in org memory too.
        """
        if self.person is not None:
            return self.person
        return None if self.by is None else self.by.id

    def without_words_of(self, user: str) -> Provenance:
        """This provenance with no prompt and no ``by`` label where they are ``user``'s words.

        What forgetting ``user`` leaves of what they taught org memory (a
        managed store destroys the key they were sealed under); anyone else's
        words stay.
        """
        if self.author != user:
            return self
        by = None if self.by is None else self.by.model_copy(update={"label": None})
        return self.model_copy(update={"prompt": None, "by": by})

    @property
    def words_author(self) -> str | None:
        """:attr:`author`, where there are words of theirs here (a prompt or a ``by`` label).

        None where there are none: a store seals nothing then, and makes no
        key for the author (a person forgotten mid-turn must not get one again).
        """
        if self.prompt is None and (self.by is None or self.by.label is None):
            return None
        return self.author


class ReviewSetting(Frozen):
    """A space's own review setting as a store keeps it: ``mode`` None when it has none."""

    mode: ReviewMode | None = None


class Loaded(Frozen):
    """What ``Store.load`` returns: the files, the cursor to send back, and the snapshot."""

    files: dict[str, bytes] = Field(default_factory=dict)
    cursor: str | None = None
    revisions: dict[str, str] = Field(default_factory=dict)
    # path -> sha256 of its content, where the store already knows it (saves
    # hashing every file at every turn start); paths left out are hashed.
    shas: dict[str, str] = Field(default_factory=dict)
    # A lean load (``LeanStore.load_lean``) leaves out the bytes of files the
    # caller already holds: those paths are in ``shas`` and ``sizes``, not in
    # ``files``. ``sizes`` covers every path of a lean load; otherwise empty.
    sizes: dict[str, int] = Field(default_factory=dict)
    # path -> mode and times, where the store keeps them; a path left out is
    # FILE_MODE with times unknown. Lean loads carry it for every path too.
    meta: dict[str, FileMeta] = Field(default_factory=dict)
    # The folders the space stores (empty ones among them); folders a file's
    # path implies need not be listed.
    folders: tuple[str, ...] = ()
    # An org space's own review setting, where the store read it with the
    # load (in the same transaction); None: not read, ask ``review_mode``.
    review: ReviewSetting | None = None
    # The session's own waiting change laid over the live files (its id), if
    # any: this load is that session's view, never to be shown to another.
    own_change: str | None = None
    # Where the maps came from, with the maps themselves (see ``lineage``).
    _from: tuple[Lineage, tuple[Mapping[str, Any], ...]] | None = PrivateAttr(default=None)

    def with_lineage(self, lineage: Lineage) -> Loaded:
        """This load, saying its maps are its store's manifest at ``lineage.version``."""
        self._from = (lineage, (self.revisions, self.shas, self.sizes, self.meta))
        return self

    @property
    def lineage(self) -> Lineage | None:
        """Which paths moved since earlier versions, while the maps are still the store's own.

        A copy that replaced any map (a waiting change laid over, an app's
        source renaming revisions) is no longer the manifest the lineage
        describes: it has none. The maps are held by identity, not compared.
        """
        if self._from is None:
            return None
        lineage, maps = self._from
        held = (self.revisions, self.shas, self.sizes, self.meta)
        return lineage if all(map(operator.is_, held, maps)) else None

    def __eq__(self, other: object) -> bool:
        # The fields alone: a lineage is a hint about where they came from.
        if not isinstance(other, Loaded):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in type(self).model_fields)

    __hash__ = None  # type: ignore[assignment]  # its maps make it unhashable anyway

    def meta_of(self, path: str) -> FileMeta:
        return self.meta.get(path, DEFAULT_META)

    @property
    def lean(self) -> bool:
        """Whether some files' bytes were left out (see ``LeanStore``)."""
        return len(self.files) < len(self.revisions)

    def paths(self) -> list[str]:
        """Every path of the space, bytes included or not, in the store's order."""
        return list(self.revisions) if self.lean else list(self.files)

    def size(self, path: str) -> int:
        content = self.files.get(path)
        return len(content) if content is not None else self.sizes[path]


class Stored(Frozen):
    """What ``Store.store`` returns."""

    status: StoreStatus
    conflicts: tuple[str, ...] = ()
    revisions: dict[str, str] = Field(default_factory=dict)
    cursor: str | None = None
    change: str | None = None  # the waiting (or listed) change this store went into


class Revision(Frozen):
    """One immutable version of one file (or its deletion), with its provenance."""

    id: str
    path: str
    sha256: str | None
    size: int
    deleted: bool = False
    provenance: Provenance
    approved_by: By | None = None
    mode: int | None = None  # the file's permission bits in this revision; None: deleted
    mtime_ns: int | None = None


class AsOfFile(NamedTuple):
    """One file of a space as of a cursor (``ManagedStore.files_as_of``): no bytes.

    A named tuple like ``FileMeta``: an as-of query over a 10,000-file space
    makes one per file.
    """

    revision: str
    sha256: str
    size: int


class Forgot(Frozen):
    """What ``forget_user`` removed: the person's spaces that held anything, and their files.

    ``spaces`` is sorted; ``files`` counts the files those spaces held
    (what a turn would have loaded), never what they were.
    """

    spaces: tuple[SpaceRef, ...] = ()
    files: int = 0


class Forgetting(Frozen):
    """What of a person's space was forgotten after a cursor, as an open turn must drop it.

    ``everything``: the whole person was forgotten, so nothing of the space
    stays. Otherwise ``paths``: which of the paths asked about were forgotten
    one by one (maybe none: a file the turn never saw). Either way the store
    refuses what the turn would store of the space.
    """

    everything: bool = False
    paths: tuple[str, ...] = ()


def forgotten_file_key(ref: SpaceRef, path: str) -> str:
    """How a store remembers that one file of a person was forgotten: a digest, never the name.

    Enough for a daemon that holds the name to ask whether it was forgotten
    (``forgotten_files_since``); the store keeps no name of what it forgot.
    """
    return digest(f"{ref.org}\0{ref.user or ''}\0{ref.space}\0{path}".encode())


class AuditEntry(Frozen):
    """One sensitive act, as the audit log keeps it: who did what to which space, and when.

    ``target`` is what the act was about: a file path, a change id, or a
    user id (``forget-user`` and ``open``). ``detail`` adds what the act
    needs to be understood (the paths a review decided, the revision
    restored, the review mode set) and never file content, so the log can
    outlive what a person asked to be forgotten. An entry about a person's
    own memory names the act, the actor, the space and the person, and counts
    what it touched (``detail`` like ``"1 file"``): never a path.

    ``prev_hash`` is the ``hash`` of the entry before it in the store's log
    and ``hash`` this entry's own, so the log is a hash chain (the encoding
    and the check are :mod:`memfs.core.audit`).
    """

    id: str
    at: datetime
    actor: By | None
    action: AuditAction
    org: str
    space: str | None = None
    target: str | None = None
    detail: str | None = None
    prev_hash: str = ""
    hash: str = ""


class TurnContext(Frozen):
    """What an app-defined persistent dir's ``load``/``store`` is told about the turn."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    session: str
    turn: str
    path: str
    prompt: str | None = None
    extra_body: Mapping[str, Any] = Field(default_factory=dict)


class SpaceResult(Frozen):
    """What ending a turn did with one mounted space."""

    status: Status
    changes: ChangeSet = Field(default_factory=ChangeSet)
    not_saved: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    error: str | None = None
    errors: dict[str, str] = Field(default_factory=dict)
    revisions: dict[str, str] = Field(default_factory=dict)
    change: str | None = None  # the change this turn's edit went into, if the store holds one
    # Why a space was not saved, in one word: "store failed", "conflict",
    # "forgotten", "discarded", "refused" (the store refused some paths).
    reason: str | None = None
    # Kept: the store did not take this space's change set, so its working
    # copy stays on disk until a later turn end stores it or a discard drops it.
    kept: bool = False
    # For a kept space: each changed path -> the revision the turn loaded (None: new).
    bases: dict[str, str | None] = Field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The JSON shape the CLI and control API print."""
        return {
            "status": self.status,
            **self.changes.summary(),
            "not_saved": list(self.not_saved),
            "error": self.error,
        }


class TraceFile(Frozen):
    """What a turn did to one file, as the filesystem saw it.

    ``read`` is the snapshot revision the turn read, if it read the file
    before changing it. Copy mode cannot see reads, so its traces have none.
    """

    read: str | None = None
    opened: bool = False
    wrote: bool = False
    created: bool = False
    deleted: bool = False
    renamed_from: str | None = None


class TraceMount(Frozen):
    """One space a turn mounted: what it loaded (``snapshot``) and what ending did with it."""

    ref: SpaceRef
    read_only: bool
    from_last_known_copy: bool
    # path -> the revision the turn carried. Where the workspace sees file
    # access (the daemon), only the files the turn opened or changed: the rest
    # is the space as of ``cursor``, and a trace per turn stays O(what it did).
    snapshot: dict[str, str]
    status: Status
    saved: tuple[str, ...] = ()
    not_saved: tuple[str, ...] = ()
    change: str | None = None  # the waiting (or listed) change, if the store holds one
    cursor: str | None = None  # the store's cursor the turn loaded at


def orgs_of(refs: Iterable[SpaceRef]) -> set[str]:
    """The orgs these spaces are of (:attr:`SpaceRef.own_org`: a dir is of none)."""
    return {org for ref in refs if (org := ref.own_org) is not None}


def org_of(refs: Iterable[SpaceRef]) -> str | None:
    """The org a turn over these spaces was of; None if of none (or, never so, of two).

    Its org and person spaces' orgs agree (a turn's specs resolve to one org:
    ``memfs.core.policy.check_one_org``); its dirs are of no org.
    """
    orgs = orgs_of(refs)
    return next(iter(orgs)) if len(orgs) == 1 else None


class Trace(Frozen):
    """What one turn saw and did: the record a managed store keeps of every turn.

    ``files`` is keyed ``<mount name>/<path in the space>``, so forgetting a
    person can drop every entry of their mounts by name.
    """

    session: str
    turn: str
    prompt: str | None
    at: datetime = Field(default_factory=now)
    mounts: dict[str, TraceMount]
    files: dict[str, TraceFile]
    # Whose words the prompt is besides the people whose memory it mounted
    # (``Provenance.author`` of the turn): a store seals it for them too.
    author: str | None = None
    # ``Provenance.words_since`` of the author, for ``memfs.core.forgetting.trace_kept``;
    # a store keeps none, and no dump shows it.
    words_since: str | None = Field(default=None, exclude=True)

    def people(self) -> list[tuple[str, str]]:
        """(org, user) of every person whose own memory the turn mounted, sorted."""
        return sorted(
            {
                (mount.ref.org, mount.ref.user)
                for mount in self.mounts.values()
                if mount.ref.layer == "user" and mount.ref.user is not None
            }
        )

    def _mounts_of(self, org: str, user: str) -> set[str]:
        return {
            name
            for name, mount in self.mounts.items()
            if mount.ref.layer == "user" and mount.ref.org == org and mount.ref.user == user
        }

    def org(self) -> str | None:
        """The org the turn belonged to; None if it mounted no space of an org.

        The orgs of its org and person spaces, which agree (a turn's specs must
        resolve to one org: ``memfs.core.policy.check_one_org``); its dirs are of
        no org. A trace keeps no org of its own, so this is the only say.
        """
        return org_of(mount.ref for mount in self.mounts.values())

    def holders(self) -> list[tuple[str, str]]:
        """(org, user) of everyone whose words the prompt is: the people, and the author."""
        held = set(self.people())
        org = self.org()
        if self.author is not None and org is not None:
            held.add((org, self.author))
        return sorted(held)

    def part_of(self, org: str, user: str) -> Trace:
        """What of this trace is ``user``'s in ``org``: their mounts and those files.

        The person's part, kept sealed under their key (a store seals it), so
        forgetting them destroys it wherever a copy is; ``without_user`` is
        the rest, and ``with_part`` puts the two together again. The prompt is
        in no part: it is every holder's (``holders``), and a store keeps it so
        that forgetting any one of them destroys it.
        """
        theirs = self._mounts_of(org, user)
        return self.model_copy(
            update={
                "prompt": None,
                "mounts": {n: m for n, m in self.mounts.items() if n in theirs},
                "files": {
                    key: entry
                    for key, entry in self.files.items()
                    if any(key == name or key.startswith(f"{name}/") for name in theirs)
                },
            }
        )

    def with_part(self, part: Trace) -> Trace:
        """This trace with a person's ``part`` (``part_of``) laid back over it."""
        return self.model_copy(
            update={
                "mounts": {**self.mounts, **part.mounts},
                "files": {**self.files, **part.files},
            }
        )

    def without_user(self, user: str, org: str) -> Trace | None:
        """This trace with nothing left of ``user``'s own memory in ``org``; None if it had none.

        Their mounts go, and every file entry under those mounts, so neither
        the names of their files nor the revisions the turn carried remain.
        The prompt goes too: a turn that mounted a person's own memory was
        that person's turn (a turn's user layer is its owner's), so what was
        typed is theirs. What remains is the turn's session and turn ids, its
        time, and its other mounts (the org's, dirs) with what the turn did to
        them, which is the org's record, not the person's memory.
        """
        gone = self._mounts_of(org, user)
        if not gone:
            return None
        return self.model_copy(
            update={
                "prompt": None,
                "mounts": {n: m for n, m in self.mounts.items() if n not in gone},
                "files": {
                    key: entry
                    for key, entry in self.files.items()
                    if not any(key == name or key.startswith(f"{name}/") for name in gone)
                },
            }
        )

    def without_words_of(self, user: str, org: str) -> Trace | None:
        """This trace once ``user`` of ``org`` is forgotten; None if nothing of theirs was in it.

        Their part goes (:meth:`without_user`), and the prompt with it wherever
        it was theirs too (:meth:`holders`: the author of a turn over org
        memory only among them), as a store that splits the prompt among its
        holders loses it when any one of them is forgotten.
        """
        rest = self.without_user(user, org)
        if (org, user) not in self.holders():
            return rest
        rest = rest or self
        author = None if rest.author == user else rest.author
        return rest.model_copy(update={"prompt": None, "author": author})

    def without_file(self, ref: SpaceRef, path: str) -> Trace | None:
        """This trace with no mention of ``path`` of ``ref``; None if it had none.

        For forgetting one file of a person's memory: its snapshot entry, its
        file entry, its place in ``saved``/``not_saved`` and any rename from it go.
        """
        names = {name for name, mount in self.mounts.items() if mount.ref == ref}
        mounts = dict(self.mounts)
        for name in names:
            mount = mounts[name]
            mounts[name] = mount.model_copy(
                update={
                    "snapshot": {p: r for p, r in mount.snapshot.items() if p != path},
                    "saved": tuple(p for p in mount.saved if p != path),
                    "not_saved": tuple(p for p in mount.not_saved if p != path),
                }
            )
        files: dict[str, TraceFile] = {}
        for key, entry in self.files.items():
            # Mount names may hold "/" themselves, so match each name as a prefix.
            if any(key.startswith(f"{name}/") for name in names):
                if any(key == f"{name}/{path}" for name in names):
                    continue
                # A rename's source is NAME/path like the keys; traces stored
                # before it carried the mount name hold the bare path.
                gone = {path, *(f"{name}/{path}" for name in names)}
                if entry.renamed_from in gone:
                    entry = entry.model_copy(update={"renamed_from": None})
            files[key] = entry
        if mounts == self.mounts and files == self.files:
            return None
        return self.model_copy(update={"mounts": mounts, "files": files})


__all__ = [
    "DEFAULT_META",
    "DEFAULT_ORG",
    "FILE_MODE",
    "KIB",
    "MAX_TIME_NS",
    "MIB",
    "MIN_TIME_NS",
    "MODE_BITS",
    "AsOfFile",
    "AuditAction",
    "AuditEntry",
    "By",
    "ChangeSet",
    "CommitMode",
    "FileMeta",
    "Forgot",
    "Layer",
    "Limits",
    "LiveOrigin",
    "Loaded",
    "Origin",
    "Provenance",
    "ReviewMode",
    "ReviewSetting",
    "Revision",
    "SpaceRef",
    "SpaceResult",
    "Status",
    "StoreStatus",
    "Stored",
    "Trace",
    "TraceFile",
    "TraceMount",
    "TurnContext",
    "clamp_time_ns",
    "digest",
    "now",
    "org_of",
    "orgs_of",
    "settle_meta",
]
