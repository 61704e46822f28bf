"""The JSON shapes of the control API, shared by the daemon, ``memfs.Client`` and the CLI.

Field names here are public interface: the CLI prints exactly these objects.
Replies only ever gain fields, and a reader passes over those it does not know
(a client older than its daemon still reads its status); a request's unknown
field is refused (a misspelt one would otherwise be dropped unseen).

What a turn start may carry is checked here, for the daemon and
``memfs.Client`` alike: a uid or gid is a real id, a JSON integer (0 ≤ id <
2**32 - 1; the last value is the kernel's "no id"), and every string of the request (the
session, the prompt, the extra body's keys and values at any depth) is text
that encodes as UTF-8, which a lone surrogate (``"\\ud800"`` in JSON) does not.
The extra body nests at most ``MAX_EXTRA_BODY_DEPTH`` levels (the object itself
is level 1): it is written into the turn's record and its trace, and pydantic
refuses to serialise past a depth of its own, so a deeper one would fail the
start only after the store was read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from memfs.core.defaults import MAX_ID
from memfs.core.models import Layer, SpaceRef, Status
from memfs.core.names import unencodable

MAX_EXTRA_BODY_DEPTH = 64


class Request(BaseModel):
    """What a client sends: a field the daemon does not know is refused."""

    model_config = ConfigDict(extra="forbid")


class Reply(BaseModel):
    """What the daemon answers: a field the reader does not know is passed over."""

    model_config = ConfigDict(extra="ignore")


def _depth(value: Any) -> int:
    """How many levels of objects and arrays ``value`` nests (a scalar is 0); no recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_EXTRA_BODY_DEPTH:
            break  # enough to refuse; walking the rest costs without telling more
        stack.extend((child, level + 1) for child in children)
    return deepest


class StartTurnRequest(Request):
    session: str
    extra_body: dict[str, Any] = Field(default_factory=dict)
    prompt: str | None = None
    # Strict: lax mode would take true as uid 1 and "0" as root.
    uid: int | None = Field(default=None, ge=0, le=MAX_ID, strict=True)
    gid: int | None = Field(default=None, ge=0, le=MAX_ID, strict=True)

    @field_validator("extra_body", mode="before")
    @classmethod
    def _shallow(cls, value: Any) -> Any:
        if _depth(value) > MAX_EXTRA_BODY_DEPTH:
            raise PydanticCustomError(
                "depth",
                "is nested more than {limit} levels deep",
                {"limit": MAX_EXTRA_BODY_DEPTH},
            )
        return value

    @field_validator("session", "prompt", "extra_body")
    @classmethod
    def _utf8(cls, value: Any, info: ValidationInfo) -> Any:
        found = unencodable(value, info.field_name or "value")
        if found is not None:
            # A custom error type keeps pydantic from prefixing "Value error, ".
            raise PydanticCustomError("utf8", "must be valid UTF-8 text: {found}", {"found": found})
        return value


class MountInfo(Reply):
    path: str
    read_only: bool
    space: str
    layer: Layer


class TurnStarted(Reply):
    session: str
    turn: str
    root: str
    mounts: dict[str, MountInfo]
    note: str


class SpaceOutcome(Reply):
    status: Status
    created: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    not_saved: list[str] = Field(default_factory=list)
    error: str | None = None
    conflicts: list[str] = Field(default_factory=list)
    errors: dict[str, str] = Field(default_factory=dict)
    folders_created: list[str] = Field(default_factory=list)  # folders the space now stores
    folders_deleted: list[str] = Field(default_factory=list)
    # Why it was not saved: "store failed", "conflict", "forgotten", "discarded",
    # "refused" (the store refused some paths), "last known copy".
    reason: str | None = None
    # The store did not take it: its files stay (GET /sessions/{session}/kept)
    # until `turn end` again stores them or `turn discard` drops them.
    kept: bool = False
    # For a kept space: each changed path -> the revision the turn loaded (null: new).
    bases: dict[str, str | None] = Field(default_factory=dict)


class KeptFile(Reply):
    """One file of a kept space: what the turn did to it, and what it started from."""

    change: Literal["created", "updated", "deleted"]
    base: str | None  # the revision the turn loaded; null for a file it created
    size: int | None  # null for a deletion


class KeptSpace(Reply):
    """A space whose store failed at turn end, kept on disk with everything needed to merge."""

    space: str
    layer: Layer
    reason: str | None
    error: str | None
    conflicts: list[str] = Field(default_factory=list)
    files: dict[str, KeptFile] = Field(default_factory=dict)


class KeptTurn(Reply):
    session: str
    turn: str
    spaces: dict[str, KeptSpace]


class ForgetNotice(Request):
    """A store forgot a person (``path`` null) or one file of theirs; open turns drop it."""

    org: str
    user: str
    space: str | None = None  # with ``path``: the space the file was in
    path: str | None = None

    def reaches(self, ref: SpaceRef) -> bool:
        """Whether this forget takes something out of space ``ref`` (the space, or its file)."""
        return ref.owned_by(self.org, self.user) and self.space in (None, ref.space)


class ForgetApplied(Reply):
    """What a running daemon dropped from its open turns: session -> mount names."""

    dropped: dict[str, list[str]] = Field(default_factory=dict)


class FileAccess(Reply):
    """What the filesystem saw a turn do to one file (path ``NAME/relative/path``)."""

    read: str | None = None  # the exact revision read; None if not read, or not a stored revision
    opened: bool = False  # opened for reading at least once
    wrote: bool = False
    created: bool = False
    deleted: bool = False
    renamed_from: str | None = None


class TurnEnded(Reply):
    session: str
    turn: str
    spaces: dict[str, SpaceOutcome]
    files: dict[str, FileAccess] = Field(default_factory=dict)


class SessionClosed(Reply):
    session: str
    closed: Literal[True] = True


class SessionStatus(Reply):
    session: str
    turn: str | None
    root: str
    mounts: list[str]
    uid: int | None = None
    gid: int | None = None
    # Mounts of the open turn whose store failed at its end, kept for a retry or discard.
    kept: list[str] = Field(default_factory=list)
    # Mounts of the open turn that the configuration no longer has (restored from
    # the turn's own record; they can still be ended or discarded).
    orphaned: list[str] = Field(default_factory=list)


class StoreHealth(Reply):
    """Whether the daemon reaches its store now, as its listening connection finds it."""

    ok: bool
    # Why not, as the driver said it (a password never shows: the URL is redacted).
    error: str | None = None


class DaemonStatus(Reply):
    version: str
    pid: int
    mount_root: str
    state_dir: str
    store: str
    sessions: list[SessionStatus]
    # FUSE requests served since the daemon started, by operation ("open",
    # "read", ...): what a workload costs the daemon, for profiling.
    requests: dict[str, int] = Field(default_factory=dict)
    # A shared store's health (PostgreSQL: checked every half second over the
    # connection that listens for other daemons' changes); None for a store
    # with no such connection (SQLite, folder, memory).
    store_health: StoreHealth | None = None
    # Sessions whose open turn this daemon's start could not bring back (its
    # log says why): each takes no new turn until a start brings it back.
    left_behind: list[str] = Field(default_factory=list)


class Problem(Reply):
    """An error, as the API returns it (RFC 9457 problem details)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    error: str  # the memfs error class, e.g. "NotFound"
    exit_code: int


__all__ = [
    "MAX_EXTRA_BODY_DEPTH",
    "MAX_ID",
    "DaemonStatus",
    "FileAccess",
    "ForgetApplied",
    "ForgetNotice",
    "KeptFile",
    "KeptSpace",
    "KeptTurn",
    "MountInfo",
    "Problem",
    "SessionClosed",
    "SessionStatus",
    "SpaceOutcome",
    "StartTurnRequest",
    "StoreHealth",
    "TurnEnded",
    "TurnStarted",
]
