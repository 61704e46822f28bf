"""The people's side of the command line: review, history, restore, forget, put, audit, files.

These commands act on the store directly (the embedded SQLite file, or any
store URL), as a named actor with a role (``--as ID --role
member|admin|viewer``), and print JSON. Who may do what is
:mod:`memfs.core.roles`; every sensitive act is recorded in the store's audit
log by the store itself.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
    STORE_CONNECTION_ENV,
    check_pool_size,
    check_timeout,
)
from memfs.core.defaults import DEFAULT_STATE_DIR
from memfs.core.diff import unified
from memfs.core.errors import MemfsError
from memfs.core.models import DEFAULT_ORG, Limits
from memfs.core.review import REVIEW_MODES, WaitingChange
from memfs.core.roles import Role

# The engine, the stores, the client and trio are imported by the commands
# that use them: `memfs --help` builds these commands without loading any.
if TYPE_CHECKING:
    from memfs.engine.acting import Acting
    from memfs.stores.base import Store

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def default_store() -> str:
    if os.environ.get("MEMFS_STORE"):
        return os.environ["MEMFS_STORE"]
    state_dir = Path(os.environ.get("MEMFS_STATE_DIR") or DEFAULT_STATE_DIR)
    return f"sqlite://{state_dir.absolute() / 'memfs.db'}"


_KEY_FILE = "memfs.store_key_file"  # where --store-key-file leaves its value in ctx.meta


def store_key_file() -> Path | None:
    """The store key file a command opens its store with; None: the store's own default.

    ``--store-key-file``, else ``$MEMFS_STORE_KEY_FILE``, else None: a SQLite
    store's ``store.key`` beside its database, which is the daemon's default
    (``<state_dir>/store.key``) for the daemon's default store. A command that
    names another key than the store was sealed under is refused at open.
    """
    ctx = click.get_current_context(silent=True)
    named = None if ctx is None else ctx.meta.get(_KEY_FILE)
    if named is not None:
        return Path(named).absolute()
    if os.environ.get("MEMFS_STORE_KEY_FILE"):
        return Path(os.environ["MEMFS_STORE_KEY_FILE"]).absolute()
    return None


def _remember_key_file(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.meta[_KEY_FILE] = value


def key_file_option(command: F) -> F:
    """``--store-key-file``: the store key that seals people's memory (``store_key_file``)."""
    return click.option(
        "--store-key-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_remember_key_file,
        help="The store key file (the daemon's store_key_file); made 0600 if missing.",
        show_default="$MEMFS_STORE_KEY_FILE, else store.key beside a SQLite store",
    )(command)


# A shared store's connection settings (memfs.core.connection): each flag,
# the config key it sets, and where it leaves its value in ctx.meta.
_CONNECTION_FLAGS = {
    "store_pool_size": ("--store-pool-size", "memfs.store_pool_size"),
    "store_connect_timeout_seconds": (
        "--store-connect-timeout-seconds",
        "memfs.store_connect_timeout_seconds",
    ),
    "store_lock_timeout_seconds": (
        "--store-lock-timeout-seconds",
        "memfs.store_lock_timeout_seconds",
    ),
}


def store_connection() -> dict[str, Any]:
    """The connection settings a command opens a ``postgresql://`` store with.

    Each is its flag (``--store-pool-size``, ...), else its variable
    (``$MEMFS_STORE_POOL_SIZE``, ...), else its default: the keywords of
    ``open_store`` (``pool_size``, ``connect_timeout_seconds``,
    ``lock_timeout_seconds``). A bad value is a ``ConfigError`` naming the
    setting and where it came from. Other stores ignore them.
    """
    ctx = click.get_current_context(silent=True)

    def given(key: str, default: object) -> tuple[object, str]:
        """The value for ``key`` and how to name it in an error."""
        flag, meta = _CONNECTION_FLAGS[key]
        var = STORE_CONNECTION_ENV[key]
        if ctx is not None and ctx.meta.get(meta) is not None:
            return ctx.meta[meta], f"{key} (from {flag})"
        if os.environ.get(var):
            return os.environ[var], f"{key} (from {var})"
        return default, key

    pool, pool_key = given("store_pool_size", DEFAULT_STORE_POOL_SIZE)
    connect, connect_key = given(
        "store_connect_timeout_seconds", DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS
    )
    lock, lock_key = given("store_lock_timeout_seconds", DEFAULT_STORE_LOCK_TIMEOUT_SECONDS)
    return {
        "pool_size": check_pool_size(pool, key=pool_key),
        "connect_timeout_seconds": check_timeout(connect, key=connect_key),
        "lock_timeout_seconds": check_timeout(lock, key=lock_key),
    }


def _remember(meta: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def remember(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[meta] = value

    return remember


def connection_options(command: F) -> F:
    """``--store-pool-size`` and the two timeouts: a ``postgresql://`` store's connections."""
    helps = {
        "store_pool_size": (
            click.INT,
            f"$MEMFS_STORE_POOL_SIZE, else {DEFAULT_STORE_POOL_SIZE}",
            "Connections to a postgresql:// store, at most (the daemon's store_pool_size).",
        ),
        "store_connect_timeout_seconds": (
            click.FLOAT,
            f"$MEMFS_STORE_CONNECT_TIMEOUT_SECONDS, else {DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS:g}",
            "Seconds to wait to connect to a postgresql:// store, or for a free connection "
            "(store_connect_timeout_seconds).",
        ),
        "store_lock_timeout_seconds": (
            click.FLOAT,
            f"$MEMFS_STORE_LOCK_TIMEOUT_SECONDS, else {DEFAULT_STORE_LOCK_TIMEOUT_SECONDS:g}",
            "Seconds a write to a postgresql:// store waits for its write lock "
            "(store_lock_timeout_seconds).",
        ),
    }
    for key, (flag, meta) in reversed(_CONNECTION_FLAGS.items()):
        kind, default, text = helps[key]
        command = click.option(
            flag,
            type=kind,
            default=None,
            expose_value=False,
            callback=_remember(meta),
            help=text,
            show_default=default,
        )(command)
    return command


FORGET_NOTICE_TIMEOUT = 10.0  # seconds: the daemon only drops files it already holds


def tell_daemon(
    org: str, user: str, *, space: str | None = None, path: str | None = None
) -> dict[str, list[str]] | None:
    """Tell a running daemon what was forgotten, so its open turns drop it at once.

    Best effort: the store already refuses whatever an open turn that loaded
    before the forget would store, so with no daemon (or another one's
    socket) nothing is lost; the answer is then ``None``. Otherwise: the open
    turns that held it, session -> mount names. A daemon that took the notice
    and did not answer it (within ``FORGET_NOTICE_TIMEOUT``, or with an
    error) is ``None`` too, with a warning on stderr.
    """
    from memfs.client import Client
    from memfs.unix_http import Unreachable

    try:
        with Client(timeout=FORGET_NOTICE_TIMEOUT) as client:
            return client.forgotten(org, user, space=space, path=path).dropped
    except MemfsError as exc:
        if not isinstance(exc.__cause__, Unreachable):
            # A daemon is there and may still hold it: the admin should not read
            # "no daemon answered" into the null.
            click.echo(
                f"memfs: warning: the daemon did not confirm the forget ({exc}); its open "
                "turns may hold what was forgotten until it next asks the store "
                "(forget_poll_seconds), and none can store it back",
                err=True,
            )
        return None


def actor_options(command: F) -> F:
    """``--store``, ``--org``, ``--as`` and ``--role``: where, in which company, and who."""
    for option in reversed(
        [
            click.option(
                "--store",
                "store_url",
                default=None,
                help="Store URL.",
                show_default="$MEMFS_STORE, else the SQLite file in $MEMFS_STATE_DIR",
            ),
            click.option("--org", default=DEFAULT_ORG, show_default=True, help="The org."),
            click.option("--as", "actor", required=True, help="Who acts (an id)."),
            click.option(
                "--role",
                type=click.Choice(["viewer", "member", "admin"]),
                default="member",
                show_default=True,
                help="The actor's role.",
            ),
        ]
    ):
        command = option(command)
    return connection_options(key_file_option(command))


def limits_option(command: F) -> F:
    """``--config``: the daemon's config file, whose ``[limits]`` a reviewer's edit obeys."""
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="MEMFS_CONFIG",
        default=None,
        help="The daemon's memfs.toml (also $MEMFS_CONFIG), for its [limits]; "
        "without one, the default limits.",
    )(command)


def config_limits(config_file: Path | None) -> Limits:
    """The limits turns have under ``config_file`` (the defaults without one)."""
    if config_file is None:
        return Limits()
    from memfsd.config import load_config  # the daemon's own reading of its file

    return load_config(config_file).limits


def force_option(command: F) -> F:
    return click.option(
        "--force",
        is_flag=True,
        help="Apply files marked stale too, overwriting the edit made since (else it fails).",
    )(command)


def version_option(command: F) -> F:
    return click.option(
        "--version",
        "version",
        default=None,
        help="The change's version as shown (review show prints it): if the change has "
        "changed since, nothing is decided (exit 5).",
    )(command)


def live_version_option(command: F) -> F:
    return click.option(
        "--live-version",
        "live_version",
        default=None,
        help="The change's live_version as shown (review show prints it): if the live file "
        "of a file being applied has changed since, nothing is decided (exit 5), --force or not.",
    )(command)


READ_CHUNK_BYTES = 1 << 20  # what read_at_most asks for at a time


def read_at_most(source: Any, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``source``, read a chunk at a time.

    One ``read(limit)`` allocates ``limit`` up front, which a large (valid)
    ``max_file_bytes`` turns into a ``MemoryError`` for a file of six bytes.
    """
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk: bytes = source.read(min(left, READ_CHUNK_BYTES))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _text(content: bytes | None) -> dict[str, Any]:
    if content is None:
        return {"deleted": True}
    try:
        return {"text": content.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(content).decode()}


def change_json(
    change: WaitingChange,
    *,
    contents: bool = False,
    live: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """A change as the commands print it; with ``contents``, each file's new content, and
    with ``live`` (the space's live files) each file's ``diff`` against its live version."""
    out: dict[str, Any] = {
        "id": change.id,
        "space": change.ref.space,
        "org": change.ref.org,
        "session": change.session,
        "state": change.state,
        "mode": change.mode,
        "prompt": change.provenance.prompt,
        "origin": change.provenance.origin,
        "by": None if change.provenance.by is None else change.provenance.by.model_dump(),
        "stale": list(change.stale_paths),
        "version": change.version,
        "live_version": change.live_version,
        "files": sorted(change.files),
        "reviews": [r.model_dump(mode="json") for r in change.reviews],
        # Folders the change makes (true) or removes (false): a reviewer decides them too.
        "folders": dict(sorted(change.folders.items())),
    }
    if contents:
        out["files"] = {
            path: {
                "base": file.base,
                "stale": file.stale,
                # The permission bits the change gives the file, in octal; None: as it was.
                "file_mode": None if file.meta is None else f"{file.meta.mode:o}",
                **_text(file.content),
                **({} if live is None else {"diff": unified(path, live.get(path), file.content)}),
            }
            for path, file in sorted(change.files.items())
        }
    return out


def run(store_url: str | None, act: Callable[[Store], Awaitable[T]]) -> T:
    import trio

    from memfs.stores.open import open_store

    async def main() -> T:
        store = open_store(
            store_url or default_store(), key_file=store_key_file(), **store_connection()
        )
        try:
            return await act(store)
        finally:
            await store.aclose()

    return trio.run(main)


def register(main: click.Group, echo: Callable[[Any], None], guard: Callable[[], Any]) -> None:
    """Add the commands to ``main``; ``echo`` prints JSON, ``guard`` reports memfs errors."""

    def acting(
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
        act: Callable[[Acting], Any],
        *,
        limits: Limits | None = None,
    ) -> Any:
        """Run ``act`` as this actor: each act checks the role before it reaches the store."""
        from memfs.engine.acting import act_as

        return run(store_url, lambda store: act(act_as(store, actor, role, org=org, limits=limits)))

    @main.group()
    def review() -> None:
        """Changes to shared memory that wait for (or are listed for) a person."""

    @review.command("list")
    @actor_options
    def review_list(store_url: str | None, org: str, actor: str, role: Role) -> None:
        """The open changes of the org, oldest first, stale files marked."""
        with guard():
            changes = acting(store_url, org, actor, role, lambda a: a.waiting())
        echo([change_json(c) for c in changes])

    @review.command("show")
    @click.argument("change_id")
    @actor_options
    def review_show(
        change_id: str, store_url: str | None, org: str, actor: str, role: Role
    ) -> None:
        """One change: each file's new content and its unified diff against the live file."""

        async def show(a: Acting) -> tuple[WaitingChange, dict[str, bytes]]:
            change = await a.change(change_id)
            return change, await a.files(change.ref.space)

        with guard():
            change, live = acting(store_url, org, actor, role, show)
        echo(change_json(change, contents=True, live=live))

    @review.command("approve")
    @click.argument("change_id")
    @click.option("--path", "paths", multiple=True, help="Only these files (repeatable).")
    @force_option
    @version_option
    @live_version_option
    @limits_option
    @actor_options
    def review_approve(
        change_id: str,
        paths: tuple[str, ...],
        force: bool,
        version: str | None,
        live_version: str | None,
        config_file: Path | None,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """Approve a change, or some of its files (a stale file needs --force)."""
        with guard():
            limits = config_limits(config_file)
            change = acting(
                store_url,
                org,
                actor,
                role,
                lambda a: a.approve(
                    change_id,
                    paths=list(paths) or None,
                    force=force,
                    version=version,
                    live_version=live_version,
                ),
                limits=limits,
            )
        echo(change_json(change))

    @review.command("reject")
    @click.argument("change_id")
    @click.option("--path", "paths", multiple=True, help="Only these files (repeatable).")
    @version_option
    @actor_options
    def review_reject(
        change_id: str,
        paths: tuple[str, ...],
        version: str | None,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """Reject a change, or some of its files."""
        with guard():
            change = acting(
                store_url,
                org,
                actor,
                role,
                lambda a: a.reject(change_id, paths=list(paths) or None, version=version),
            )
        echo(change_json(change))

    @review.command("edit")
    @click.argument("change_id")
    @click.argument("path")
    @click.argument("source", type=click.File("rb"))
    @force_option
    @version_option
    @live_version_option
    @limits_option
    @actor_options
    def review_edit(
        change_id: str,
        path: str,
        source: Any,
        force: bool,
        version: str | None,
        live_version: str | None,
        config_file: Path | None,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """Edit one file of a change (new content from SOURCE, - for stdin), then approve.

        The edit obeys the limits turns have (--config); a stale file needs --force.
        """
        with guard():
            limits = config_limits(config_file)
            # One byte past the file limit is enough to refuse; the rest is never read.
            content = read_at_most(source, limits.max_file_bytes + 1)
            change = acting(
                store_url,
                org,
                actor,
                role,
                lambda a: a.edit(
                    change_id,
                    {path: content},
                    force=force,
                    version=version,
                    live_version=live_version,
                ),
                limits=limits,
            )
        echo(change_json(change))

    @review.command("set")
    @click.argument("space")
    @click.argument("mode", type=click.Choice(list(REVIEW_MODES)))
    @actor_options
    def review_set(
        space: str, mode: Any, store_url: str | None, org: str, actor: str, role: Role
    ) -> None:
        """Set an org space's review: person, after or none (admins)."""
        with guard():
            acting(store_url, org, actor, role, lambda a: a.set_review(space, mode))
        echo({"space": space, "org": org, "review": mode})

    @main.command()
    @click.argument("space")
    @click.argument("path")
    @click.argument("source", type=click.File("rb"))
    @limits_option
    @actor_options
    def put(
        space: str,
        path: str,
        source: Any,
        config_file: Path | None,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """Add or replace a live org file (content from SOURCE, - for stdin); members and admins.

        Live at once, with no review; a new revision by the actor, recorded in
        the audit log. It obeys the limits turns have (--config).
        """
        with guard():
            limits = config_limits(config_file)
            # One byte past the file limit is enough to refuse; the rest is never read.
            content = read_at_most(source, limits.max_file_bytes + 1)
            stored = acting(
                store_url, org, actor, role, lambda a: a.put(space, path, content), limits=limits
            )
        echo(
            {
                "space": space,
                "org": org,
                "path": path,
                "size": len(content),
                "status": stored.status,
                "revision": stored.revisions.get(path),
            }
        )

    @main.command()
    @click.argument("space")
    @click.argument("path")
    @click.option("--user", default=None, help="A person's space (admins).")
    @actor_options
    def history(
        space: str,
        path: str,
        user: str | None,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """Every revision of a file, with where it came from."""
        with guard():
            revisions = acting(
                store_url, org, actor, role, lambda a: a.history(space, path, user=user)
            )
        echo([r.model_dump(mode="json") for r in revisions])

    @main.command()
    @click.argument("space")
    @click.argument("path")
    @click.argument("revision")
    @actor_options
    def restore(
        space: str,
        path: str,
        revision: str,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """Make an earlier revision of an org file live again (a new revision, origin edited)."""
        with guard():
            stored = acting(store_url, org, actor, role, lambda a: a.restore(space, path, revision))
        echo(stored.model_dump(mode="json"))

    @main.command()
    @click.argument("space")
    @click.argument("path")
    @click.option("--user", default=None, help="Forget (purge) a file of this person's space.")
    @actor_options
    def forget(
        space: str,
        path: str,
        user: str | None,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """Forget an org file (kept in history) or purge a person's file (admins)."""
        with guard():
            acting(store_url, org, actor, role, lambda a: a.forget(space, path, user=user))
        reached = None if user is None else tell_daemon(org, user, space=space, path=path)
        echo({"space": space, "org": org, "forgotten": [path], "open_turns": reached})

    @main.command("forget-user")
    @click.argument("user")
    @actor_options
    def forget_user(user: str, store_url: str | None, org: str, actor: str, role: Role) -> None:
        """Remove everything a person's memory holds in the org (admins)."""
        with guard():
            forgot = acting(store_url, org, actor, role, lambda a: a.forget_user(user))
        reached = tell_daemon(org, user)
        echo(
            {
                "org": org,
                "forgotten_spaces": [ref.space for ref in forgot.spaces],
                "forgotten_files": forgot.files,
                "open_turns": reached,
            }
        )

    @main.command()
    @click.option(
        "--verify",
        is_flag=True,
        help="Check the whole log's hash chain (every org) instead of listing; exit 10 and "
        "name the first broken entry if it does not hold.",
    )
    @actor_options
    def audit(verify: bool, store_url: str | None, org: str, actor: str, role: Role) -> None:
        """The audit log of the org (admins)."""
        with guard():
            if verify:
                checked = acting(store_url, org, actor, role, lambda a: a.verify_audit())
                echo({"ok": True, "entries": checked.entries, "head": checked.head})
                return
            entries = acting(store_url, org, actor, role, lambda a: a.audit())
        echo([e.model_dump(mode="json") for e in entries])

    @main.command()
    @click.argument("space", required=False)
    @click.option("--user", default=None, help="Open this person's memory (admins; audited).")
    @actor_options
    def files(
        space: str | None,
        user: str | None,
        store_url: str | None,
        org: str,
        actor: str,
        role: Role,
    ) -> None:
        """An org space's files; with --user, a person's files (opening them is audited);
        without a space, who has memory and how full it is, as the role may see."""
        with guard():
            if user is not None:
                opened = acting(store_url, org, actor, role, lambda a: a.open_person(user))
                sizes = {
                    name: {path: len(c) for path, c in sorted(fs.items())}
                    for name, fs in opened.items()
                }
                echo({"user": user, "org": org, "spaces": sizes})
                return
            if space is None:
                echo(acting(store_url, org, actor, role, lambda a: a.people()))
                return
            live = acting(store_url, org, actor, role, lambda a: a.files(space))
        echo({"space": space, "org": org, "files": {p: len(c) for p, c in sorted(live.items())}})


__all__ = ["register"]
