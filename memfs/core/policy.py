"""The rules of a turn: whose space a mount is, whether it may write, what ending does.

Pure decisions, no I/O: the turn engine (copy mode now, the daemon later)
asks these functions and does what they say.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from memfs.core.errors import BadRequest, ConfigError, NoIdentity
from memfs.core.models import DEFAULT_ORG, By, ChangeSet, CommitMode, Layer, SpaceRef, orgs_of
from memfs.core.specs import ExtraBody, OrgMemory, PersistentDir, Resolver, Spec, UserMemory


def resolve(resolver: Resolver | None, extra_body: ExtraBody) -> str | None:
    """Read one identity from the extra body: a field name or a callable.

    Empty values count as nothing. A mapping with an ``id`` (as a ``user``
    callable may return, ``{"id": ..., "label": ...}``) gives its id.
    """
    if resolver is None:
        return None
    value: Any = extra_body.get(resolver) if isinstance(resolver, str) else resolver(extra_body)
    if isinstance(value, Mapping):
        value = value.get("id")
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        if isinstance(resolver, str):  # the request's field: its mistake, not the config's
            raise BadRequest(
                f"the extra body's {resolver!r} must be a string id, not {type(value).__name__}",
                path=resolver,
            )
        raise ConfigError(f"an identity resolver returned {value!r}; expected a string id")
    return str(value)


def _resolve_label(spec: UserMemory, extra_body: ExtraBody) -> str | None:
    if not isinstance(spec.user, str):
        value = spec.user(extra_body)
        if isinstance(value, Mapping) and value.get("label") is not None:
            return str(value["label"])
    label = resolve(spec.label, extra_body)
    return label


def resolve_org(org: Resolver | None, extra_body: ExtraBody) -> str:
    """``None`` means the one org of a single-company deployment; a resolver must find one."""
    if org is None:
        return DEFAULT_ORG
    found = resolve(org, extra_body)
    if found is None:
        raise NoIdentity(
            "the org resolver found no org in the extra body; the turn cannot fall back to "
            "a shared folder",
            path=org if isinstance(org, str) else None,
        )
    return found


def resolve_ref(spec: Spec, extra_body: ExtraBody, *, org: Resolver | None = None) -> SpaceRef:
    """The stored space this spec mounts for this extra body, or ``NoIdentity``.

    ``org``: the resolver of the whole ``Memory``, used when the spec names none.
    """
    if isinstance(spec, PersistentDir):
        return SpaceRef(layer="dir", space=spec.path)
    org = resolve_org(spec.org if spec.org is not None else org, extra_body)
    if isinstance(spec, OrgMemory):
        return SpaceRef(layer="org", space=spec.space, org=org)
    user = resolve(spec.user, extra_body)
    if user is None:
        raise NoIdentity(
            "the user resolver found no signed-in person in the extra body; a person's "
            "memory is never mounted without one",
            path=spec.user if isinstance(spec.user, str) else None,
        )
    return SpaceRef(layer="user", space=spec.space, org=org, user=user)


def inherit_org(spec: Spec, org: Resolver | None) -> Spec:
    """The spec with ``org`` as its org resolver, unless it names its own (or has no org)."""
    if org is None or isinstance(spec, PersistentDir) or spec.org is not None:
        return spec
    return spec.model_copy(update={"org": org})


def check_one_org(refs: Iterable[SpaceRef]) -> None:
    """A turn belongs to one org: its org and person spaces must all resolve to the same."""
    orgs = sorted(orgs_of(refs))
    if len(orgs) > 1:
        raise ConfigError(
            f"the specs of one turn resolve to different orgs ({', '.join(orgs)}); a turn "
            "belongs to one org: give memfs.Memory an org resolver (org=...) for every spec, "
            "or the same one to each"
        )


def resolve_by(spec: Spec, extra_body: ExtraBody) -> By | None:
    """Who this turn's revisions are attributed to."""
    if isinstance(spec, UserMemory):
        user = resolve(spec.user, extra_body)
        return None if user is None else By(id=user, label=_resolve_label(spec, extra_body))
    if isinstance(spec, OrgMemory) and spec.by is not None:
        return By.coerce(spec.by(extra_body))
    return None


def is_shared(layer: Layer) -> bool:
    """Whether a layer's content is shared memory, kept for everyone.

    The rest (a person's memory, an app's own dirs) is private: caches of it
    must not outlive the turns that use it, so that forgetting leaves nothing.
    """
    return layer == "org"


def is_read_only(commit: CommitMode, may_write: bool) -> bool:
    """A mount is read-only for a turn when its mode says so or ``can_write`` said no."""
    return commit == "read-only" or not may_write


class EndAction(enum.Enum):
    """What ending a turn does with one mount's changes."""

    NOTHING = "nothing"  # no changes: nothing to send
    SKIP = "skip"  # read-only this turn: discard, never call store
    MANUAL = "manual"  # hold until commit_manual()
    REFUSE_STALE = "refuse_stale"  # loaded from the last known copy: do not send
    STORE = "store"


def end_action(
    *, commit: CommitMode, read_only: bool, from_last_known_copy: bool, has_changes: bool
) -> EndAction:
    if read_only:
        return EndAction.SKIP
    if not has_changes:
        return EndAction.NOTHING
    # Before the commit mode: a change made against a stale copy is never
    # sent, so it is never held for a later commit either.
    if from_last_known_copy:
        return EndAction.REFUSE_STALE
    if commit == "manual":
        return EndAction.MANUAL
    return EndAction.STORE


def check_unique_paths(specs: Iterable[Spec]) -> None:
    """Two mounts in one session may not share a folder, nor may one lie inside another's."""
    seen: set[str] = set()
    for spec in specs:
        if spec.path in seen:
            raise ConfigError("two memory specs mount at the same path", path=spec.path)
        seen.add(spec.path)
    for path in sorted(seen):
        outer = mount_inside(path, seen)
        if outer is not None:
            raise ConfigError(
                f"a mount may not lie inside another mount's folder ({outer!r})", path=path
            )


def mount_inside(path: str, others: Iterable[str]) -> str | None:
    """The mount path among ``others`` whose folder holds ``path`` (a nested mount), if any."""
    for other in others:
        if path.startswith(other + "/"):
            return other
    return None


__all__ = [
    "EndAction",
    "check_one_org",
    "check_unique_paths",
    "end_action",
    "inherit_org",
    "is_read_only",
    "mount_inside",
    "moved_on",
    "parse_cursor",
    "purged_since",
    "resolve",
    "resolve_by",
    "resolve_org",
    "resolve_ref",
]


def moved_on(paths: Iterable[str], last_change: Mapping[str, int], cursor: int) -> tuple[str, ...]:
    """The paths whose last change (a revision or a deletion) is newer than the snapshot.

    Managed stores check per file: another session's changes to files this
    change set does not touch never block it.
    """
    return tuple(sorted(p for p in paths if last_change.get(p, 0) > cursor))


def purged_since(changes: ChangeSet, last_change: Mapping[str, int]) -> tuple[str, ...]:
    """The paths a change set updates of which the store keeps no revision at all.

    A turn updates only files its snapshot held, and a managed store keeps
    every revision until a person's file is forgotten (purged). So such a path
    was purged after the turn loaded it, and saving the turn's copy would bring
    back what the person asked to have forgotten: it conflicts instead.
    (Deleting a file the store does not hold stays the caller's mistake.)
    """
    return tuple(sorted(p for p in changes.updated if p not in last_change))


def parse_cursor(cursor: str | None) -> int | None:
    """Managed stores' cursors are revision sequence numbers; ``None`` means no snapshot."""
    if cursor is None:
        return None
    try:
        value = int(cursor)
    except ValueError:
        raise ConfigError("this store did not issue that cursor", path=cursor) from None
    if value < 0:
        raise ConfigError("this store did not issue that cursor", path=cursor)
    return value
