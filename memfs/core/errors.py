"""The one error hierarchy of memfs.

Every error carries the three ways it is reported at a boundary: an ``errno``
for FUSE, an ``http_status`` for the control and review APIs, and an
``exit_code`` for the CLI. Each boundary translates once, from these fields,
so the same mistake reads the same everywhere.
"""

from __future__ import annotations

import errno as _errno
from typing import ClassVar


class MemfsError(Exception):
    """Base of every error memfs raises on purpose."""

    errno: ClassVar[int] = _errno.EIO
    http_status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        if self.path is not None:
            return f"{self.message}: {self.path!r}"
        return self.message


class InvalidName(MemfsError):
    """A space name, session id, identity or file path breaks the name rules."""

    errno = _errno.EINVAL
    http_status = 400
    exit_code = 2


class NameTooLong(InvalidName):
    """A path segment or whole path is longer than the rules allow."""

    errno = _errno.ENAMETOOLONG


class NotFound(MemfsError):
    """The named session, turn, space, file or revision does not exist."""

    errno = _errno.ENOENT
    http_status = 404
    exit_code = 3


class ReadOnly(MemfsError):
    """A write to a mount that is read-only for this turn."""

    errno = _errno.EROFS
    http_status = 403
    exit_code = 4


class Conflict(MemfsError):
    """What the caller acted on has moved on, or the action was already taken."""

    errno = _errno.EBUSY
    http_status = 409
    exit_code = 5

    def __init__(
        self, message: str, *, path: str | None = None, paths: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, path=path)
        self.paths = paths


class AlreadyCommitted(Conflict):
    """A manual commit was asked for twice; the second would be a double write."""


class TurnOpen(Conflict):
    """A session already has an open turn."""


class TooLarge(MemfsError):
    """A file, a space's file count or a space's total size is past its limit."""

    errno = _errno.EFBIG
    http_status = 413
    exit_code = 6


class SpaceFull(TooLarge):
    """The space's file count or total size would pass its limit."""

    errno = _errno.ENOSPC


class DiskFull(MemfsError):
    """The disk under ``state_dir`` is down to its reserve: agents' writes wait for room.

    The reserve is kept so that ending turns and storing them still succeed.
    """

    errno = _errno.ENOSPC
    http_status = 507
    exit_code = 6


class TooManyOpen(MemfsError):
    """A session already holds as many open files as it may (``Limits.max_open_files``)."""

    errno = _errno.EMFILE
    http_status = 429
    exit_code = 6


class Unsupported(MemfsError):
    """A kind of file memfs does not keep: symlinks, devices, FIFOs, sockets."""

    errno = _errno.EPERM
    http_status = 422
    exit_code = 2


class StoreUnavailable(MemfsError):
    """The store could not be reached or failed; the cause is in ``__cause__``."""

    errno = _errno.EIO
    http_status = 503
    exit_code = 7


class TraceFailed(StoreUnavailable):
    """A turn's trace could not be made or recorded with its store, which was undone with it.

    The caller stores the space again without the trace, then records the trace on its own.
    """


class ConfigError(MemfsError):
    """A mistake in configuration or in the app's memory specs; fails loudly at start."""

    errno = _errno.EINVAL
    http_status = 500
    exit_code = 78  # EX_CONFIG from sysexits.h


class NoIdentity(MemfsError):
    """The org or user resolver returned nothing for this turn's extra body."""

    errno = _errno.EACCES
    http_status = 401
    exit_code = 8


class SigninThrottled(NoIdentity):
    """A client failed to sign in too often lately; it may try again after ``retry_after`` s."""

    http_status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Exists(MemfsError):
    """The name is taken: a create that must be new, or a rename that must not replace."""

    errno = _errno.EEXIST
    http_status = 409
    exit_code = 5


class NotADirectory(MemfsError):
    """A path goes through, or an operation needs, a folder, and this is a file."""

    errno = _errno.ENOTDIR
    http_status = 400
    exit_code = 2


class IsADirectory(MemfsError):
    """An operation on files was asked of a folder."""

    errno = _errno.EISDIR
    http_status = 400
    exit_code = 2


class NotEmpty(MemfsError):
    """A folder that still holds entries cannot be removed or replaced."""

    errno = _errno.ENOTEMPTY
    http_status = 409
    exit_code = 5


class NotSupported(Unsupported):
    """A feature memfs does not offer at all, such as extended attributes."""

    errno = _errno.ENOTSUP


class PermissionDenied(MemfsError):
    """The caller may not do this here (outside any space, or not its own session)."""

    errno = _errno.EPERM
    http_status = 403
    exit_code = 4


class BadRequest(MemfsError):
    """A request the control API could not read: not JSON, or missing or mistyped fields."""

    errno = _errno.EINVAL
    http_status = 400
    exit_code = 2


class DaemonUnavailable(MemfsError):
    """No memfs daemon answers on the control socket: not running, or not ours to use."""

    errno = _errno.ECONNREFUSED
    http_status = 503
    exit_code = 9


class AuditTampered(MemfsError):
    """The audit log's hash chain does not hold: an entry was changed, removed or added.

    ``path`` names the first entry where the chain breaks.
    """

    errno = _errno.EIO
    http_status = 500
    exit_code = 10


def sole_memfs_error(exc: BaseException) -> MemfsError | None:
    """The memfs error ``exc`` is, or carries alone through exception groups (trio nurseries).

    Boundaries use this to translate an error a nursery wrapped as the error
    itself, not as an unexpected failure.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, MemfsError) else None


class Forgotten(Conflict):
    """A store from a turn that loaded a person's memory before part or all of it was forgotten.

    Refused whole: the turn may hold (or have copied) what was erased, and
    storing any of it would write the erased content back.
    """

    errno = _errno.ENOENT
    http_status = 410


class IllegalTransition(Conflict):
    """A review action the change's state does not allow, such as approving a rejected change."""


__all__ = [
    "AlreadyCommitted",
    "AuditTampered",
    "BadRequest",
    "ConfigError",
    "Conflict",
    "DaemonUnavailable",
    "DiskFull",
    "Exists",
    "Forgotten",
    "IllegalTransition",
    "InvalidName",
    "IsADirectory",
    "MemfsError",
    "NameTooLong",
    "NoIdentity",
    "NotADirectory",
    "NotEmpty",
    "NotFound",
    "NotSupported",
    "PermissionDenied",
    "ReadOnly",
    "SpaceFull",
    "StoreUnavailable",
    "TooLarge",
    "TooManyOpen",
    "TraceFailed",
    "TurnOpen",
    "Unsupported",
    "sole_memfs_error",
]
