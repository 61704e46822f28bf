"""Memory specs: how an app declares the spaces mounted into each turn.

``org_memory``, ``user_memory`` and ``persistent_dir`` build the specs an app
passes to ``memfs.Memory``. A spec is checked when it is built, so a bad space
name or commit mode fails at start, not in the middle of a turn.

Two types name specs. :class:`MemorySpec` is what they all are, and what
the doors that take an app's specs accept (``memfs.Memory``,
``memfs.testing.mounted_daemon``): a list that holds an org space and a
person's is a ``list[MemorySpec]`` to a type checker, as the app writes it.
:data:`Spec` is the closed union of the three kinds, told apart by ``layer``
(``"org"``, ``"user"``, ``"dir"``); :func:`as_spec` turns the one into the
other, at runtime, once, at the door, so the code behind it matches on the
kind with no cast.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import PurePath
from typing import Any, Literal, TypeVar

from pydantic import ConfigDict, field_validator

from memfs.core.errors import ConfigError, MemfsError
from memfs.core.models import CommitMode, Frozen, TurnContext
from memfs.core.names import check_mount_path, check_space_name
from memfs.core.review import ReviewMode, check_mode

ExtraBody = Mapping[str, Any]
Resolver = str | Callable[[ExtraBody], Any]
"""The name of an extra-body field, or a callable that reads the extra body."""
CanWrite = Callable[[ExtraBody], "bool | Awaitable[bool]"]
ByResolver = Callable[[ExtraBody], Any]
LoadFn = Callable[[TurnContext], Awaitable[Any]]
StoreFn = Callable[..., Awaitable[Any]]

COMMIT_MODES: tuple[CommitMode, ...] = ("after-turn", "manual", "read-only")


class MemorySpec(Frozen):
    """What every kind of mount shares."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    path: str
    description: str = ""
    commit: CommitMode = "after-turn"
    can_write: CanWrite | None = None

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        return check_mount_path(value)


class OrgMemory(MemorySpec):
    """A space shared by everyone in an org."""

    layer: Literal["org"] = "org"
    space: str
    org: Resolver | None = None
    by: ByResolver | None = None
    review: ReviewMode = "person"
    seed: PurePath | None = None  # a folder in the app's repo: version 1 of the space

    @field_validator("space")
    @classmethod
    def _check_space(cls, value: str) -> str:
        return check_space_name(value)


class UserMemory(MemorySpec):
    """One person's own space: private to them, saved at once."""

    layer: Literal["user"] = "user"
    space: str = "me"
    user: Resolver = "userId"
    label: Resolver | None = "name"
    org: Resolver | None = None

    @field_validator("space")
    @classmethod
    def _check_space(cls, value: str) -> str:
        return check_space_name(value)


class PersistentDir(MemorySpec):
    """An app-defined folder kept by the app's ``load`` and ``store``; not reviewed or versioned."""

    layer: Literal["dir"] = "dir"
    load: LoadFn
    store: StoreFn

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        # A dir may sit below folders of its own (``persistent/user``); spaces may not.
        return check_mount_path(value, nested=True)

    @property
    def space(self) -> str:
        return self.path


Spec = OrgMemory | UserMemory | PersistentDir


def as_spec(spec: object) -> Spec:
    """``spec`` as the kind it is; ``ConfigError`` unless a spec function built it."""
    if isinstance(spec, OrgMemory | UserMemory | PersistentDir):
        return spec
    raise ConfigError(
        "memory specs are built with org_memory(), user_memory() or persistent_dir()",
        path=repr(spec),
    )


S = TypeVar("S", bound=MemorySpec)


def _build(cls: type[S], **fields: Any) -> S:
    if fields.get("commit", "after-turn") not in COMMIT_MODES:
        raise ConfigError(
            f"commit must be one of {', '.join(COMMIT_MODES)}", path=str(fields.get("commit"))
        )
    try:
        return cls(**fields)
    except MemfsError:
        raise
    except ValueError as exc:  # pydantic's ValidationError
        raise ConfigError(f"bad {cls.__name__} spec: {exc}") from exc


def org_memory(
    *,
    space: str,
    org: Resolver | None = None,
    description: str = "",
    can_write: CanWrite | None = None,
    by: ByResolver | None = None,
    path: str | None = None,
    commit: CommitMode = "after-turn",
    review: ReviewMode = "person",
    seed: str | PurePath | None = None,
) -> OrgMemory:
    """A space everyone in an org shares; ``org`` left out means org ``default``.

    ``review``: ``person`` (default) holds each conversation's change for a
    person; ``after`` makes it live and lists it for review; ``none`` makes it
    live. A space's own setting in the store wins over this default.

    ``seed``: a folder whose files are version 1 of the space (origin
    ``code``); later changes to it arrive as a waiting "Changed in code" change.
    """
    check_mode(review)
    return _build(
        OrgMemory,
        space=space,
        org=org,
        description=description,
        can_write=can_write,
        by=by,
        path=space if path is None else path,
        commit=commit,
        review=review,
        seed=None if seed is None else PurePath(seed),
    )


def user_memory(
    *,
    user: Resolver = "userId",
    label: Resolver | None = "name",
    org: Resolver | None = None,
    space: str = "me",
    description: str = "",
    can_write: CanWrite | None = None,
    path: str | None = None,
    commit: CommitMode = "after-turn",
) -> UserMemory:
    """A person's own memory in ``space`` (``me`` by default), found by ``user``."""
    return _build(
        UserMemory,
        user=user,
        label=label,
        org=org,
        space=space,
        description=description,
        can_write=can_write,
        path=space if path is None else path,
        commit=commit,
    )


def persistent_dir(
    *,
    path: str,
    load: LoadFn,
    store: StoreFn,
    description: str = "",
    can_write: CanWrite | None = None,
    commit: CommitMode = "after-turn",
) -> PersistentDir:
    """A folder the app keeps: ``await load(ctx)`` and ``await store(ctx, changes, cursor)``."""
    return _build(
        PersistentDir,
        path=path,
        load=load,
        store=store,
        description=description,
        can_write=can_write,
        commit=commit,
    )


__all__ = [
    "COMMIT_MODES",
    "ByResolver",
    "CanWrite",
    "ExtraBody",
    "LoadFn",
    "MemorySpec",
    "OrgMemory",
    "PersistentDir",
    "Resolver",
    "Spec",
    "StoreFn",
    "UserMemory",
    "as_spec",
    "org_memory",
    "persistent_dir",
    "user_memory",
]
