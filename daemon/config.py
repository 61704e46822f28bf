"""The daemon's configuration: ``memfs.toml``, ``MEMFS_*`` variables and flags.

This module owns reading and checking the configuration and turning its
``[[memory]]`` tables (and an ``app = "module:attr"`` spec list) into memory
specs. Later sources win: the file, then the environment, then the command
line. Every mistake is a ``ConfigError`` at start whose message names the key
(``memory[1].commit: must be one of after-turn, manual, read-only``), so a
typo is never silently ignored and never surfaces in the middle of a turn.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from memfs.api.control import DEFAULT_MAX_BODY_BYTES
from memfs.core import defaults
from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
    STORE_CONNECTION_ENV,
    pool_size_problem,
    timeout_problem,
)
from memfs.core.defaults import (
    DEFAULT_WEB_LISTEN,
    DEFAULT_WEB_MAX_BODY_BYTES,
    DEFAULT_WEB_READ_TIMEOUT_SECONDS,
)
from memfs.core.errors import ConfigError, MemfsError
from memfs.core.listen import require_tls
from memfs.core.models import CommitMode, Limits
from memfs.core.names import check_mount_path, check_space_name
from memfs.core.policy import inherit_org, mount_inside
from memfs.core.review import ReviewMode
from memfs.core.specs import (
    OrgMemory,
    PersistentDir,
    Spec,
    UserMemory,
    org_memory,
    user_memory,
)
from memfs.engine.commits import DEFAULT_MAX_ITEMS
from memfs.stores.keyfile import default_key_file
from memfs.stores.open import parse_store_url

DEFAULT_MOUNT_ROOT = Path("/mnt/memfs")
# The state dir and the socket's name are the client's and the CLI's too: one owner.
DEFAULT_STATE_DIR = Path(defaults.DEFAULT_STATE_DIR)
SOCKET_NAME = defaults.SOCKET_NAME

# Which environment variable overrides which key.
ENV_VARS = {
    "mount_root": "MEMFS_MOUNT_ROOT",
    "state_dir": "MEMFS_STATE_DIR",
    "store": "MEMFS_STORE",
    "store_key_file": "MEMFS_STORE_KEY_FILE",
    **STORE_CONNECTION_ENV,  # MEMFS_STORE_POOL_SIZE, ...
    "forget_poll_seconds": "MEMFS_FORGET_POLL_SECONDS",
    "listen_retry_seconds": "MEMFS_LISTEN_RETRY_SECONDS",
    "web_listen": "MEMFS_WEB_LISTEN",
    "web_tls_cert": "MEMFS_WEB_TLS_CERT",
    "web_tls_key": "MEMFS_WEB_TLS_KEY",
}
# The variables whose empty value is a value: MEMFS_WEB_LISTEN= turns the
# Memory tab off. An empty one of the others counts as not set.
EMPTY_IS_A_VALUE = frozenset({"web_listen"})

# How often the daemon asks the store whether a person with an open turn was
# forgotten by another process (an app's my_memory handler, another daemon).
DEFAULT_FORGET_POLL_SECONDS = 2.0
DEFAULT_LISTEN_RETRY_SECONDS = 1.0
# A group-committing store's largest batch (memfs.engine.commits).
DEFAULT_STORE_BATCH_MAX = DEFAULT_MAX_ITEMS

_APP = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _invalid(reason: str) -> PydanticCustomError:
    # A custom error type keeps pydantic from prefixing "Value error, ".
    return PydanticCustomError("memfs", "{reason}", {"reason": reason})


class ExtraBodyRule:
    """``can_write = { role = ["underwriter"] }``: each named extra-body field holds a listed value.

    A field holding a list (``roles = [...]``) matches when any of its items is
    listed. A missing field never matches, so a turn without it is read-only.
    """

    def __init__(self, allowed: Mapping[str, Sequence[str]]) -> None:
        self.allowed = {field: tuple(values) for field, values in allowed.items()}

    def __call__(self, extra_body: Mapping[str, Any]) -> bool:
        return all(
            _holds_one_of(extra_body.get(field), values) for field, values in self.allowed.items()
        )

    def __repr__(self) -> str:
        rules = " and ".join(f"{f} in {list(v)!r}" for f, v in self.allowed.items())
        return f"ExtraBodyRule({rules})"


def _holds_one_of(value: Any, allowed: tuple[str, ...]) -> bool:
    if isinstance(value, str):
        return value in allowed
    if isinstance(value, list | tuple):
        return any(isinstance(item, str) and item in allowed for item in value)
    return False


class ByFields:
    """``by = { id = "userId", label = "name", role = "role" }``: who org revisions are by."""

    def __init__(self, id: str, label: str | None, role: str | None) -> None:
        self.id, self.label, self.role = id, label, role

    def __call__(self, extra_body: Mapping[str, Any]) -> dict[str, Any] | None:
        who = extra_body.get(self.id)
        if who is None or who == "":
            return None
        return {
            "id": str(who),
            "label": None if self.label is None else extra_body.get(self.label),
            "role": None if self.role is None else extra_body.get(self.role),
        }

    def __repr__(self) -> str:
        return f"ByFields(id={self.id!r}, label={self.label!r}, role={self.role!r})"


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ByTable(_Table):
    """Extra-body field names for the author of an org space's revisions."""

    id: str = "userId"
    label: str | None = "name"
    role: str | None = "role"


class MemoryTable(_Table):
    """One ``[[memory]]`` table: a space mounted into every turn."""

    layer: Literal["org", "user"]
    space: str | None = Field(default=None, validate_default=True)
    path: str | None = None
    org: str | None = None  # extra-body field naming the org; left out: org "default"
    user: str | None = None  # extra-body field naming the person (user layer; default userId)
    label: str | None = None  # extra-body field with the person's name (user layer; default name)
    description: str = ""
    commit: CommitMode = "after-turn"
    can_write: dict[str, list[str]] | None = None
    by: ByTable | None = None
    review: ReviewMode | None = None  # org spaces: person (default), after or none
    seed: Path | None = None  # org spaces: a folder that is version 1 of the space

    @field_validator("space")
    @classmethod
    def _check_space(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            if info.data.get("layer") == "org":
                raise _invalid('an org space needs a name, e.g. space = "lending-rules"')
            return None
        try:
            return check_space_name(value)
        except MemfsError as exc:
            raise _invalid(str(exc)) from None

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_mount_path(value)
        except MemfsError as exc:
            raise _invalid(str(exc)) from None

    @field_validator("user", "label")
    @classmethod
    def _user_layer_only(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("layer") == "org":
            raise _invalid('only user-layer spaces name a person; remove it or use layer = "user"')
        return value

    @field_validator("can_write")
    @classmethod
    def _check_can_write(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        if value is not None and not value:
            raise _invalid(
                'name at least one extra-body field, e.g. { role = ["underwriter"] }; '
                'for no writes at all use commit = "read-only"'
            )
        return value

    @field_validator("seed")
    @classmethod
    def _check_seed(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        if info.data.get("layer") == "user":
            raise _invalid("a person's own memory has no seed; seeds are for org spaces")
        value = _absolute(value)
        if not value.is_dir():
            raise _invalid(f"no such folder: {str(value)!r}")
        return value

    @field_validator("review")
    @classmethod
    def _review_org_only(cls, value: ReviewMode | None, info: ValidationInfo) -> ReviewMode | None:
        if value is not None and info.data.get("layer") == "user":
            raise _invalid("a person's own memory always saves at once; review is for org spaces")
        return value

    @field_validator("by")
    @classmethod
    def _org_layer_only(cls, value: ByTable | None, info: ValidationInfo) -> ByTable | None:
        if value is not None and info.data.get("layer") == "user":
            raise _invalid("a person's own space is always written by them; `by` is for org spaces")
        return value

    def spec(self) -> OrgMemory | UserMemory:
        can_write = None if self.can_write is None else ExtraBodyRule(self.can_write)
        if self.layer == "org":
            assert self.space is not None  # checked by _check_space
            return org_memory(
                space=self.space,
                org=self.org,
                description=self.description,
                can_write=can_write,
                by=None if self.by is None else ByFields(self.by.id, self.by.label, self.by.role),
                path=self.path,
                commit=self.commit,
                review=self.review or "person",
                seed=self.seed,
            )
        return user_memory(
            user=self.user or "userId",
            label=self.label or "name",
            org=self.org,
            space=self.space or "me",
            description=self.description,
            can_write=can_write,
            path=self.path,
            commit=self.commit,
        )


def _absolute(value: Path) -> Path:
    if not value.is_absolute():
        raise _invalid(f"must be an absolute path, not {str(value)!r}")
    return value


class DaemonConfig(BaseModel):
    """Everything ``memfs daemon`` needs to start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mount_root: Path = DEFAULT_MOUNT_ROOT
    state_dir: Path = DEFAULT_STATE_DIR
    store: str = Field(default="", validate_default=True)  # "": SQLite in state_dir
    # The store key that seals people's memory (memfs.core.sealing); never in
    # the database. None: <state_dir>/store.key, made 0600 if missing. Every
    # daemon and memfs command on one shared store names the same file.
    store_key_file: Path | None = None
    # A postgresql:// store's connections (memfs.core.connection): how many it
    # keeps at most, how long a call waits to connect or for a free one, how
    # long a write waits for the write lock. Other stores ignore them.
    store_pool_size: int = DEFAULT_STORE_POOL_SIZE
    store_connect_timeout_seconds: float = DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS
    store_lock_timeout_seconds: float = DEFAULT_STORE_LOCK_TIMEOUT_SECONDS
    app: str | None = None
    limits: Limits = Field(default_factory=Limits)
    memory: list[MemoryTable] = Field(default_factory=list)
    # The extra-body field naming the org, for every [[memory]] table (and the
    # app's specs) that names none: a turn belongs to one org.
    org: str | None = None
    # False: a close writes through to state_dir (a daemon crash loses nothing)
    # and fsync() makes it durable. True: every close, rename and unlink also
    # syncs to disk, so nothing closed is lost even to a power cut (slower).
    sync_on_close: bool = False
    # The largest request body the control API reads; a larger one gets 413.
    control_max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0, strict=True)
    # Seconds between two looks at the store for forgets another process made
    # (the CLI's forgets tell the daemon at once); 0: never look.
    forget_poll_seconds: float = Field(default=DEFAULT_FORGET_POLL_SECONDS, ge=0)
    # A shared (postgresql://) store: seconds between two tries to listen
    # again for other daemons' changes once the listening connection is lost.
    listen_retry_seconds: float = Field(default=DEFAULT_LISTEN_RETRY_SECONDS, gt=0)
    # A store that commits many turn ends at once (group commit): the most
    # stores and traces one of its transactions takes. 1: one at a time.
    store_batch_max: int = Field(default=DEFAULT_STORE_BATCH_MAX, ge=1, strict=True)
    # The Memory tab: a PEM certificate and its key (both or neither), which
    # web_listen needs on anything but loopback. Before web_listen, which is
    # checked against them.
    web_tls_cert: Path | None = None
    web_tls_key: Path | None = None
    # Where the daemon serves the Memory tab and its /api/v1 API: HOST:PORT
    # ([V6]:PORT); "": not at all.
    web_listen: str = Field(default=DEFAULT_WEB_LISTEN, validate_default=True)
    # The largest request body the Memory tab's API reads; past it 413.
    web_max_body_bytes: int = Field(default=DEFAULT_WEB_MAX_BODY_BYTES, gt=0, strict=True)
    # Seconds a client may be silent mid-request before the Memory tab hangs up.
    web_read_timeout_seconds: float = Field(default=DEFAULT_WEB_READ_TIMEOUT_SECONDS, gt=0)

    @field_validator("web_tls_cert", "web_tls_key")
    @classmethod
    def _check_tls_file(cls, value: Path | None) -> Path | None:
        return None if value is None else _absolute(value)

    @field_validator("web_listen")
    @classmethod
    def _check_web_listen(cls, value: str, info: ValidationInfo) -> str:
        cert, key = info.data.get("web_tls_cert"), info.data.get("web_tls_key")
        if value == "":
            return value
        if {"web_tls_cert", "web_tls_key"} - info.data.keys():
            return value  # a TLS file is wrong; its own error says so
        try:
            require_tls(
                value, None if cert is None else str(cert), None if key is None else str(key)
            )
        except MemfsError as exc:
            raise _invalid(str(exc)) from None
        return value

    @property
    def web_required(self) -> bool:
        """Whether ``web_listen`` was given (file, environment, flag), not left at its default.

        A daemon whose store cannot serve the Memory tab (the folder store)
        fails to start when it was asked for one, and leaves it off, saying
        so in the log, when it was not.
        """
        return "web_listen" in self.model_fields_set and self.web_listen != ""

    @field_validator("store_key_file")
    @classmethod
    def _check_store_key_file(cls, value: Path | None) -> Path | None:
        return None if value is None else _absolute(value)

    @field_validator("store_pool_size", mode="before")
    @classmethod
    def _check_store_pool_size(cls, value: Any) -> Any:
        problem = pool_size_problem(value)
        if problem is not None:
            raise _invalid(problem)
        return int(value)

    @field_validator("store_connect_timeout_seconds", "store_lock_timeout_seconds", mode="before")
    @classmethod
    def _check_store_timeout(cls, value: Any) -> Any:
        problem = timeout_problem(value)
        if problem is not None:
            raise _invalid(problem)
        return float(value)

    @property
    def key_file(self) -> Path:
        """The store key file: ``store_key_file``, or ``store.key`` in state_dir."""
        return self.store_key_file or default_key_file(self.state_dir)

    @field_validator("mount_root")
    @classmethod
    def _check_mount_root(cls, value: Path) -> Path:
        return _absolute(value)

    @field_validator("state_dir")
    @classmethod
    def _check_state_dir(cls, value: Path, info: ValidationInfo) -> Path:
        _absolute(value)
        mount_root = info.data.get("mount_root")
        if mount_root is not None and value.is_relative_to(mount_root):
            # The mount would hide the daemon's own blobs, database and socket.
            raise _invalid(f"must not be inside mount_root ({mount_root})")
        return value

    @field_validator("store")
    @classmethod
    def _check_store(cls, value: str, info: ValidationInfo) -> str:
        if not value:
            state_dir = info.data.get("state_dir")
            if state_dir is None:
                return value  # state_dir is wrong; its own error says so
            value = f"sqlite://{state_dir / 'memfs.db'}"
        try:
            parse_store_url(value)
        except MemfsError as exc:
            raise _invalid(str(exc)) from None
        return value

    @field_validator("forget_poll_seconds", "listen_retry_seconds", mode="before")
    @classmethod
    def _check_poll(cls, value: Any, info: ValidationInfo) -> Any:
        # A number of seconds: not a boolean (pydantic would take true as 1),
        # and finite (an infinite wait is 0, "off", said plainly).
        off = " (0 turns it off)" if info.field_name == "forget_poll_seconds" else ""
        if isinstance(value, bool):
            raise _invalid(f"must be a number of seconds, not true or false{off}")
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise _invalid(f"must be a number of seconds, not {value!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise _invalid(f"must be a finite number of seconds{off}")
        return value

    @field_validator("web_read_timeout_seconds", mode="before")
    @classmethod
    def _check_read_timeout(cls, value: Any) -> Any:
        # Set in the file only: a number, not true (pydantic would take it as 1)
        # nor a string, and finite (an infinite one is no bound at all).
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _invalid(f"must be a number of seconds, not {value!r}")
        if not math.isfinite(value):
            raise _invalid("must be a finite number of seconds")
        return value

    @field_validator("app")
    @classmethod
    def _check_app(cls, value: str | None) -> str | None:
        if value is not None and _APP.fullmatch(value) is None:
            raise _invalid(f"must be module:attribute, e.g. myapp.memory:specs, not {value!r}")
        return value

    @property
    def socket(self) -> Path:
        """The control API's Unix socket."""
        return self.state_dir / SOCKET_NAME

    def specs(self) -> list[Spec]:
        """The memory specs: the ``[[memory]]`` tables, then the ``app``'s; paths unique."""
        named: list[tuple[str, Spec]] = [
            (f"memory[{i}]", inherit_org(table.spec(), self.org))
            for i, table in enumerate(self.memory)
        ]
        if self.app is not None:
            named += [
                (f"app {self.app}", inherit_org(spec, self.org))
                for spec in load_app_specs(self.app)
            ]
        taken: dict[str, str] = {}
        for key, spec in named:
            if spec.path in taken:
                raise ConfigError(
                    f"{key}: mounts at path {spec.path!r}, which {taken[spec.path]} already "
                    "uses; give one of them another path"
                )
            taken[spec.path] = key
        for key, spec in named:
            outer = mount_inside(spec.path, taken)
            if outer is not None:
                raise ConfigError(
                    f"{key}: mounts at path {spec.path!r}, inside the folder of {taken[outer]} "
                    f"(path {outer!r}); mounts may not nest in one another"
                )
        return [spec for _, spec in named]


def load_app_specs(app: str) -> list[Spec]:
    """The specs ``module:attr`` names.

    That is a list of specs, a ``memfs.Memory`` (its ``specs``), or a function
    returning either, called once with no arguments.
    """
    from memfs.engine.turns import Memory

    module_name, _, attr = app.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"app: cannot import {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigError(f"app: {module_name!r} has no attribute {attr!r}") from None
    if callable(found) and not isinstance(found, Memory):
        try:
            found = found()
        except MemfsError as exc:
            raise ConfigError(f"app: {app}() failed: {exc}") from exc
        except Exception as exc:
            raise ConfigError(f"app: {app}() raised {type(exc).__name__}: {exc}") from exc
        if inspect.isawaitable(found):
            if inspect.iscoroutine(found):
                found.close()  # never awaited; closing avoids a "never awaited" warning
            raise ConfigError(f"app: {app} is async; give a plain function or a list of specs")
    if isinstance(found, Memory):
        # Its own org resolver goes with its specs, as it would in the app.
        found = [inherit_org(spec, found.org) for spec in found.specs]
    if not isinstance(found, list | tuple):
        raise ConfigError(
            f"app: {app} must be a list of memory specs, a memfs.Memory, or a function "
            f"returning one, not {type(found).__name__}"
        )
    for i, spec in enumerate(found):
        if not isinstance(spec, OrgMemory | UserMemory | PersistentDir):
            raise ConfigError(
                f"app: {app}[{i}] is {spec!r}, not a memory spec; build specs with "
                "memfs.org_memory(), memfs.user_memory() or memfs.persistent_dir()"
            )
    return list(found)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the config file: {exc.strerror or exc}", path=str(path)
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 at byte {exc.start}") from exc


def load_config(
    path: Path | None,
    *,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, Any] | None = None,
) -> DaemonConfig:
    """The configuration from ``path`` (if any), then ``MEMFS_*`` in ``env``, then ``overrides``.

    ``overrides`` holds the command line's values by key (``mount_root``,
    ``state_dir``, ``store``, ``app``, ``web_listen``, ...); ``None`` values
    are not given.
    """
    data: dict[str, Any] = {} if path is None else read_toml(path)
    sources: dict[str, str] = {}
    for key, var in ENV_VARS.items():
        if env.get(var) or (key in EMPTY_IS_A_VALUE and var in env):
            data[key] = env[var]
            sources[key] = var
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = str(value) if isinstance(value, Path) else value
            sources[key] = "the command line"
    try:
        return DaemonConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, path, sources)) from None


# What to suggest for an unknown key, by where it sits (list indexes left out).
_KNOWN_KEYS: dict[tuple[str, ...], type[BaseModel]] = {
    (): DaemonConfig,
    ("limits",): Limits,
    ("memory",): MemoryTable,
    ("memory", "by"): ByTable,
}


def _key(loc: Sequence[int | str]) -> str:
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
    return key


def _reason(error: Mapping[str, Any]) -> str:
    kind, loc, ctx = error["type"], error["loc"], error.get("ctx") or {}
    if kind == "memfs":
        return str(error["msg"])
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        model = _KNOWN_KEYS.get(tuple(p for p in loc[:-1] if isinstance(p, str)))
        known = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        if close:
            return f"unknown key; did you mean {close[0]!r}?"
        return f"unknown key; known keys here: {', '.join(known)}" if known else "unknown key"
    if kind == "literal_error":
        values = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"must be one of {', '.join(values)}"
    if kind == "dict_type" and loc and loc[-1] == "can_write":
        return (
            "must be a table of extra-body fields and allowed values, "
            'e.g. { role = ["underwriter"] }'
        )
    if kind == "list_type" and loc and loc[0] == "memory" and len(loc) == 1:
        return "must be an array of tables: [[memory]]"
    simple = {
        "string_type": "must be a string",
        "path_type": "must be a path (a string)",
        "int_type": "must be a whole number",
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "bool_type": "must be true or false",
        "list_type": "must be a list",
        "dict_type": "must be a table",
        "model_type": "must be a table",
        "model_attributes_type": "must be a table",
    }
    if kind in simple:
        return simple[kind]
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    message = str(error["msg"])
    return message[:1].lower() + message[1:]


def _explain(exc: ValidationError, path: Path | None, sources: Mapping[str, str]) -> str:
    parts = []
    for error in exc.errors():
        loc = error["loc"]
        key = _key(loc) or "config"
        source = sources.get(str(loc[0])) if loc else None
        if source is not None:
            parts.append(f"{key} (from {source}): {_reason(error)}")
        elif path is not None:
            parts.append(f"{path}: {key}: {_reason(error)}")
        else:
            parts.append(f"{key}: {_reason(error)}")
    if len(parts) == 1:
        return parts[0]
    return f"{len(parts)} mistakes in the configuration:\n  " + "\n  ".join(parts)


__all__ = [
    "DEFAULT_FORGET_POLL_SECONDS",
    "DEFAULT_LISTEN_RETRY_SECONDS",
    "DEFAULT_MOUNT_ROOT",
    "DEFAULT_STATE_DIR",
    "DEFAULT_STORE_BATCH_MAX",
    "EMPTY_IS_A_VALUE",
    "ENV_VARS",
    "ByFields",
    "DaemonConfig",
    "ExtraBodyRule",
    "MemoryTable",
    "load_app_specs",
    "load_config",
]
