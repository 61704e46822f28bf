"""The ``memfs`` command line.

Commands print JSON (or, for the demo, readable sections) on stdout; errors
go to stderr as one line and exit with the error's ``exit_code``. Commands
are sync: ``daemon`` and ``demo`` call ``trio.run`` themselves, the rest talk
to a running daemon through :class:`memfs.Client` on its control socket.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TypeVar

import click

from memfs.cli_db import register as register_db
from memfs.cli_manage import connection_options, key_file_option, read_at_most, register
from memfs.cli_people import register as register_people
from memfs.core import json_input
from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
)
from memfs.core.defaults import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_STATE_DIR,
    DEFAULT_WEB_LISTEN,
    DEFAULT_WEB_MAX_BODY_BYTES,
    DEFAULT_WEB_READ_TIMEOUT_SECONDS,
    MAX_ID,
    SOCKET_NAME,
)
from memfs.core.errors import BadRequest, MemfsError, TooLarge, sole_memfs_error

# Commands import what they run (the client, trio, the daemon) when they run,
# so `memfs --help` loads neither the daemon, the control API nor the client.
if TYPE_CHECKING:
    from pydantic import BaseModel

    from memfs.client import Client

F = TypeVar("F", bound=Callable[..., Any])


def fail(exc: MemfsError) -> NoReturn:
    click.echo(f"memfs: error: {exc}", err=True)
    sys.exit(exc.exit_code)


def emit(model: BaseModel) -> None:
    click.echo(json.dumps(model.model_dump(mode="json"), indent=2))


@contextmanager
def reported() -> Iterator[None]:
    """Turn a memfs error (also one a trio nursery wrapped) into ``fail``."""
    try:
        yield
    except MemfsError as exc:
        fail(exc)
    except BaseExceptionGroup as group:
        found = sole_memfs_error(group)
        if found is None:
            raise
        fail(found)


def socket_option(command: F) -> F:
    """``--socket PATH``, shared by every command that talks to the daemon."""
    return click.option(
        "--socket",
        "socket_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        show_default=(
            f"$MEMFS_SOCKET, else {SOCKET_NAME} in $MEMFS_STATE_DIR or {DEFAULT_STATE_DIR}"
        ),
        help="The daemon's control socket.",
    )(command)


def call(socket_path: Path | None, action: Callable[[Client], BaseModel]) -> None:
    """Run one control-API call and print its answer as JSON."""
    from memfs.client import Client

    with reported(), Client(socket_path) as client:
        result = action(client)
    emit(result)


@click.group()
@click.version_option(package_name="memfs")
def main() -> None:
    """memfs: persistent, governed memory for shell-using AI agents, as real directories."""


@main.command()
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=lambda: os.environ.get("MEMFS_STATE_DIR", DEFAULT_STATE_DIR),
    show_default=f"$MEMFS_STATE_DIR or {DEFAULT_STATE_DIR}",
    help="Where the embedded SQLite store and the turns' working folders live.",
)
@click.option(
    "--store", "store_url", default=None, help="Store URL (default: sqlite in --state-dir)."
)
@click.option(
    "--copy-mode",
    is_flag=True,
    help="Run without FUSE: copy the spaces into folders instead of mounting them.",
)
@click.option(
    "--web-listen",
    default=DEFAULT_WEB_LISTEN,
    show_default=True,
    metavar="HOST:PORT",
    help='Where the daemon serves the Memory tab (loopback); "" serves none.',
)
@click.option(
    "--exit",
    "exit_after",
    is_flag=True,
    help="Stop the daemon and exit once the story is told, instead of keeping it "
    "(and the Memory tab) running until Ctrl-C or SIGTERM.",
)
def demo(
    state_dir: Path, store_url: str | None, copy_mode: bool, web_listen: str, exit_after: bool
) -> None:
    """Start the daemon on the embedded store and run two scripted bash agent turns in it.

    Prints each turn's note, what the agent's shell printed, the commit result
    and the access log, then the history of the file the agent wrote; then
    makes Ada, the reviewer, a member who may sign in, prints the Memory tab's
    address with her token, and keeps the daemon running until Ctrl-C or
    SIGTERM (--exit: stops it at once). --copy-mode runs the turns without
    FUSE and without a daemon, so with no Memory tab.
    """
    import trio

    from memfs.demo import run_copy_demo, run_daemon_demo
    from memfs.stores.keyfile import default_key_file
    from memfs.stores.open import parse_store_url

    state_dir = state_dir.absolute()
    state_dir.mkdir(parents=True, exist_ok=True)
    url = store_url or f"sqlite://{state_dir / 'memfs.db'}"

    def say(title: str, body: Any) -> None:
        click.echo(f"==> {title}")
        click.echo(str(body).rstrip("\n"))
        click.echo()

    click.echo(f"memfs demo: store {url}, {'copy mode' if copy_mode else 'FUSE daemon'}\n")
    try:
        parse_store_url(url)
        if copy_mode:
            key_file = default_key_file(state_dir)
            trio.run(run_copy_demo, url, key_file, state_dir / "turns", say)
        else:
            run_daemon_demo(state_dir, url, say, web_listen=web_listen, keep_running=not exit_after)
    except MemfsError as exc:
        fail(exc)


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="MEMFS_CONFIG",
    default=None,
    help="A memfs.toml (also $MEMFS_CONFIG). Without one, defaults and MEMFS_* variables.",
)
@click.option(
    "--mount-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where sessions are mounted (overrides mount_root and $MEMFS_MOUNT_ROOT).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Blob cache, open turns, SQLite store and control socket "
    "(overrides state_dir and $MEMFS_STATE_DIR).",
)
@click.option(
    "--store", "store_url", default=None, help="Store URL (overrides store and $MEMFS_STORE)."
)
@click.option(
    "--store-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The store key that seals people's memory (overrides store_key_file and "
    "$MEMFS_STORE_KEY_FILE; default <state_dir>/store.key).",
)
@click.option(
    "--store-pool-size",
    type=int,
    default=None,
    help="Connections to a postgresql:// store, at most (overrides store_pool_size and "
    f"$MEMFS_STORE_POOL_SIZE; default {DEFAULT_STORE_POOL_SIZE}).",
)
@click.option(
    "--store-connect-timeout-seconds",
    type=float,
    default=None,
    help="Seconds to wait to connect to a postgresql:// store, or for a free connection "
    "(overrides store_connect_timeout_seconds and $MEMFS_STORE_CONNECT_TIMEOUT_SECONDS; "
    f"default {DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS:g}).",
)
@click.option(
    "--store-lock-timeout-seconds",
    type=float,
    default=None,
    help="Seconds a write to a postgresql:// store waits for its write lock (overrides "
    "store_lock_timeout_seconds and $MEMFS_STORE_LOCK_TIMEOUT_SECONDS; "
    f"default {DEFAULT_STORE_LOCK_TIMEOUT_SECONDS:g}).",
)
@click.option(
    "--app",
    default=None,
    metavar="MODULE:ATTR",
    help="Python memory specs: a list of specs, a memfs.Memory, or a function returning one.",
)
@click.option(
    "--web-listen",
    default=None,
    metavar="HOST:PORT",
    help=f"Where the Memory tab listens (web_listen, $MEMFS_WEB_LISTEN; default "
    f'{DEFAULT_WEB_LISTEN}); "" serves none. Anything but loopback needs TLS.',
)
@click.option(
    "--web-tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate for the Memory tab (web_tls_cert, $MEMFS_WEB_TLS_CERT).",
)
@click.option(
    "--web-tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Its PEM private key (web_tls_key, $MEMFS_WEB_TLS_KEY).",
)
@click.option(
    "--foreground",
    is_flag=True,
    help="Accepted for clarity: the daemon always runs in the foreground (no fork), "
    "as systemd's Type=notify expects.",
)
def daemon(
    config_file: Path | None,
    mount_root: Path | None,
    state_dir: Path | None,
    store_url: str | None,
    store_key_file: Path | None,
    store_pool_size: int | None,
    store_connect_timeout_seconds: float | None,
    store_lock_timeout_seconds: float | None,
    app: str | None,
    web_listen: str | None,
    web_tls_cert: Path | None,
    web_tls_key: Path | None,
    foreground: bool,
) -> None:
    """Run the memfs daemon: the FUSE mount, the control API and the Memory tab, in the foreground.

    Settings come from --config, then the MEMFS_* variables (MEMFS_MOUNT_ROOT,
    MEMFS_STATE_DIR, MEMFS_STORE, MEMFS_WEB_LISTEN, ...), then these flags.
    Stops on SIGTERM or SIGINT, keeping open turns for the next start.
    """
    from memfsd.config import load_config

    overrides = {
        "mount_root": None if mount_root is None else mount_root.absolute(),
        "state_dir": None if state_dir is None else state_dir.absolute(),
        "store": store_url,
        "store_key_file": None if store_key_file is None else store_key_file.absolute(),
        "store_pool_size": store_pool_size,
        "store_connect_timeout_seconds": store_connect_timeout_seconds,
        "store_lock_timeout_seconds": store_lock_timeout_seconds,
        "app": app,
        "web_listen": web_listen,
        "web_tls_cert": None if web_tls_cert is None else web_tls_cert.absolute(),
        "web_tls_key": None if web_tls_key is None else web_tls_key.absolute(),
    }
    with reported():
        config = load_config(config_file, overrides=overrides)
        # Imported here: the mount needs pyfuse3, which the other commands do not.
        from memfsd.main import run_daemon

        run_daemon(config)


@main.command()
@click.option(
    "--store",
    "store_url",
    default=None,
    help="Store URL.",
    show_default="$MEMFS_STORE, else the SQLite file in $MEMFS_STATE_DIR",
)
@click.option(
    "--listen",
    default=DEFAULT_WEB_LISTEN,
    show_default=True,
    help="HOST:PORT; anything but loopback needs --tls-cert and --tls-key.",
)
@click.option("--tls-cert", default=None, help="PEM certificate (web_tls_cert).")
@click.option("--tls-key", default=None, help="PEM private key (web_tls_key).")
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_WEB_MAX_BODY_BYTES,
    show_default=True,
    help="The largest request body the API reads (web_max_body_bytes); past it 413.",
)
@click.option(
    "--read-timeout-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_WEB_READ_TIMEOUT_SECONDS,
    show_default=True,
    help="Hang up on a client silent this long mid-request (web_read_timeout_seconds).",
)
@key_file_option
@connection_options
def web(
    store_url: str | None,
    listen: str,
    tls_cert: str | None,
    tls_key: str | None,
    max_body_bytes: int,
    read_timeout_seconds: float,
) -> None:
    """Serve the Memory tab's API over a store, without FUSE (a review host)."""
    with reported():
        from memfs.cli_manage import default_store, store_connection, store_key_file
        from memfs.core.listen import require_tls

        require_tls(listen, tls_cert, tls_key)  # before the web stack is even imported
        connection = store_connection()  # a bad setting, too, before anything is bound
        from memfs.web.serve import run_web

        run_web(
            store_url or default_store(),
            listen,
            tls_cert=tls_cert,
            tls_key=tls_key,
            max_body_bytes=max_body_bytes,
            read_timeout_seconds=read_timeout_seconds,
            key_file=store_key_file(),
            **connection,
        )


@main.group()
def turn() -> None:
    """Start, end and commit agent turns on the running daemon."""


@turn.command("start")
@click.argument("session")
@click.option(
    "--extra-body",
    default=None,
    metavar="JSON|-",
    help='The sign-in identity as a JSON object, e.g. \'{"userId": "u1", "role": "underwriter"}\'; '
    '"-" reads it from stdin, so it never shows in the process list.',
)
@click.option("--prompt", default=None, help="What the person asked; kept with every revision.")
@click.option(
    "--prompt-file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default=None,
    metavar="PATH|-",
    help="Read the prompt (UTF-8) from PATH, or from stdin with -, instead of --prompt.",
)
@click.option(
    "--max-input-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Read at most this much from --extra-body - and --prompt-file (the daemon's "
    "control_max_body_bytes refuses more anyway; raise both together).",
)
@click.option(
    "--uid", type=click.IntRange(min=0, max=MAX_ID), default=None, help="Owner of the session dir."
)
@click.option(
    "--gid", type=click.IntRange(min=0, max=MAX_ID), default=None, help="Group of the session dir."
)
@socket_option
def turn_start(
    session: str,
    extra_body: str | None,
    prompt: str | None,
    prompt_file: Path | None,
    max_input_bytes: int,
    uid: int | None,
    gid: int | None,
    socket_path: Path | None,
) -> None:
    """Mount SESSION's spaces for its next turn; prints the mounts and the note.

    Any local user can read a process's arguments (/proc/PID/cmdline), so give
    a real identity and prompt with --extra-body - and --prompt-file, not inline.
    """
    if prompt is not None and prompt_file is not None:
        fail(BadRequest("give the prompt with --prompt or --prompt-file, not both"))
    if extra_body == "-" and prompt_file == Path("-"):
        fail(BadRequest("only one of --extra-body and --prompt-file can read stdin"))
    if extra_body == "-":
        extra_body = read_stdin("--extra-body -", max_input_bytes)
    body = parse_extra_body(extra_body)
    if prompt_file is not None:
        prompt = read_prompt(prompt_file, max_input_bytes)
    call(socket_path, lambda c: c.start_turn(session, body, prompt=prompt, uid=uid, gid=gid))


def read_stdin(what: str, limit: int) -> str:
    return decode_input(what, "stdin", read_bounded(sys.stdin.buffer, what, limit))


def read_prompt(path: Path, limit: int) -> str:
    if path == Path("-"):
        return read_stdin("--prompt-file -", limit)
    try:
        with open(path, "rb") as source:
            data = read_bounded(source, "--prompt-file", limit)
    except OSError as exc:
        fail(BadRequest(f"--prompt-file: cannot read {path}: {exc.strerror or exc}"))
    return decode_input("--prompt-file", str(path), data)


def read_bounded(source: BinaryIO, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``source``; more (``/dev/zero``, an endless pipe) is refused.

    One byte past the limit is read to tell "exactly the limit" from "more",
    and nothing after it, so no input can make this process grow past it.
    """
    data = read_at_most(source, limit + 1)
    if len(data) > limit:
        fail(
            TooLarge(
                f"{what}: the input is over {limit} bytes (--max-input-bytes; the daemon's "
                "control_max_body_bytes limits the whole request)"
            )
        )
    return data


def decode_input(what: str, where: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(BadRequest(f"{what}: {where} is not valid UTF-8 at byte {exc.start}"))


def parse_extra_body(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        body = json_input.loads(text)
    except (json.JSONDecodeError, json_input.UnreadableJson) as exc:
        fail(BadRequest(f"--extra-body is not valid JSON: {exc}"))
    if not isinstance(body, dict):
        fail(BadRequest(f"--extra-body must be a JSON object, not {type(body).__name__}"))
    return body


@turn.command("end")
@click.argument("session")
@socket_option
def turn_end(session: str, socket_path: Path | None) -> None:
    """End SESSION's open turn: commit its changes; prints what it saved and touched."""
    call(socket_path, lambda c: c.end_turn(session))


@turn.command("discard")
@click.argument("session")
@socket_option
def turn_discard(session: str, socket_path: Path | None) -> None:
    """Drop what SESSION's open turn holds unsaved (spaces a failed store kept) and end it."""
    call(socket_path, lambda c: c.discard_turn(session))


@turn.command("kept")
@click.argument("session")
@click.argument("name", required=False)
@click.argument("path", required=False)
@socket_option
def turn_kept(session: str, name: str | None, path: str | None, socket_path: Path | None) -> None:
    """List the files SESSION's failed store kept; with NAME and PATH, print one's content."""
    if name is None:
        call(socket_path, lambda c: c.kept(session))
        return
    if path is None:
        fail(BadRequest("give both NAME (the mount) and PATH, or neither"))
    from memfs.client import Client

    with reported(), Client(socket_path) as client:
        content = client.kept_file(session, name, path)
    sys.stdout.buffer.write(content)
    sys.stdout.flush()


@turn.command("commit")
@click.argument("session")
@click.argument("turn_id", metavar="TURN")
@socket_option
def turn_commit(session: str, turn_id: str, socket_path: Path | None) -> None:
    """Commit what TURN of SESSION left in commit = "manual" spaces."""
    call(socket_path, lambda c: c.commit_turn(session, turn_id))


@main.group()
def session() -> None:
    """Manage sessions on the running daemon."""


@session.command("close")
@click.argument("session_id", metavar="SESSION")
@socket_option
def session_close(session_id: str, socket_path: Path | None) -> None:
    """Close SESSION: its directory leaves the mount."""
    call(socket_path, lambda c: c.close_session(session_id))


@main.command()
@socket_option
def status(socket_path: Path | None) -> None:
    """Show the daemon, its store and its open sessions."""
    call(socket_path, lambda c: c.status())


def _echo(value: object) -> None:
    click.echo(json.dumps(value, indent=2))


register(main, _echo, reported)
register_people(main, _echo, reported)
register_db(main, _echo, reported)


if __name__ == "__main__":  # pragma: no cover
    main()
