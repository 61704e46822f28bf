"""The daemon process: one trio nursery holding the FUSE mount, the control API and systemd glue.

Start-up order, as a filesystem daemon should: raise the descriptor limit
to the hard limit (one too low for the daemon is refused), make ``state_dir`` private
(0700; one another user owns is refused), clear a stale mount left by a
crash, open the store, bind the Memory tab's address (``web_listen``: a port
in use or a certificate that does not load stops the start here, before
anything is mounted), mount, bring back open turns, serve the control API
and the Memory tab, then tell systemd ``READY=1``. SIGTERM and SIGINT end
``pyfuse3.main()`` through ``pyfuse3.terminate()``; the Memory tab is then
asked to stop (requests in flight get hypercorn's graceful timeout), the
mount is closed in a ``finally`` and open turns stay on disk for the next
start.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import resource
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyfuse3
import trio
from watchfiles import awatch

from memfs.api.control import DEFAULT_MAX_BODY_BYTES, control_app
from memfs.core.connection import (
    DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_STORE_LOCK_TIMEOUT_SECONDS,
    DEFAULT_STORE_POOL_SIZE,
)
from memfs.core.defaults import DEFAULT_WEB_MAX_BODY_BYTES, DEFAULT_WEB_READ_TIMEOUT_SECONDS
from memfs.core.errors import ConfigError, MemfsError
from memfs.core.models import Limits
from memfs.core.specs import Spec
from memfs.engine.turns import Memory
from memfs.private import REACHABLE_DIR_MODE, make_dirs, secure_state_dir
from memfs.stores.base import ManagedStore, Store
from memfs.stores.keyfile import default_key_file
from memfs.stores.open import open_store
from memfs.stores.postgres import PostgresStore
from memfs.stores.sql.store import SqlStore
from memfs.web.app import web_app
from memfs.web.serve import BoundWeb, bind_web, serve_web
from memfsd.blobs import BlobCache
from memfsd.config import (
    DEFAULT_FORGET_POLL_SECONDS,
    DEFAULT_LISTEN_RETRY_SECONDS,
    DEFAULT_STORE_BATCH_MAX,
)
from memfsd.control import check_socket_path, serve_control, socket_in_use
from memfsd.fs import MemfsOperations, invalidate_inodes, invalidate_names
from memfsd.listen import follow_store
from memfsd.notify import notify, watchdog_interval
from memfsd.overlay import Overlay
from memfsd.service import DaemonService
from memfsd.workspace import OverlayWorkspace

log = logging.getLogger("memfsd")

# Objects allocated between two young collections of the cyclic garbage
# collector (Python's default is 700). The daemon holds large long-lived maps
# (manifests, snapshots) and a turn allocates tens of thousands of objects:
# at 700, 50 sessions x 20 turns cost 1.0 s of the daemon's 17 s of CPU in
# the collector, a full collection (75 ms on the trio thread) every 180
# turns among them; at 10,000, 0.35-0.41 s and no full collection. Garbage
# in reference cycles (trio's tracebacks) waits a little longer.
GC_YOUNG_THRESHOLD = 10_000

# Tasks reading FUSE requests. No handler awaits (``memfsd.fs``: each runs
# whole between two requests), so a second task never has a request to
# serve while the first is busy: pyfuse3's default (up to 99) started one
# anyway and handed the FUSE fd between the two at every request, a task
# switch each time.
FUSE_TASKS = 1


@dataclass(frozen=True)
class Settings:
    """What a running daemon needs, however it was configured."""

    mount_root: Path
    state_dir: Path
    store: str
    specs: list[Spec]
    limits: Limits
    socket: Path
    sync_on_close: bool = False
    control_max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # Seconds between two looks at the store for forgets made by another
    # process (config key forget_poll_seconds); 0: never.
    forget_poll_seconds: float = DEFAULT_FORGET_POLL_SECONDS
    # A shared store: seconds between two tries to listen again for other
    # daemons' changes (config key listen_retry_seconds).
    listen_retry_seconds: float = DEFAULT_LISTEN_RETRY_SECONDS
    # A group-committing store's largest batch (config key store_batch_max).
    store_batch_max: int = DEFAULT_STORE_BATCH_MAX
    # Where the Memory tab listens (config key web_listen); "": nowhere. Off
    # unless given: the config's default (127.0.0.1:8330) is DaemonConfig's,
    # so a daemon run in-process for tests listens on no fixed port.
    web_listen: str = ""
    web_tls_cert: Path | None = None
    web_tls_key: Path | None = None
    web_max_body_bytes: int = DEFAULT_WEB_MAX_BODY_BYTES
    web_read_timeout_seconds: float = DEFAULT_WEB_READ_TIMEOUT_SECONDS
    # True: web_listen was asked for, and a store that cannot serve the
    # Memory tab stops the start; False: it is left off, said in the log.
    web_required: bool = False
    # The store key file (config key store_key_file); None: <state_dir>/store.key.
    store_key_file: Path | None = None
    # A postgresql:// store's connections (config keys store_pool_size,
    # store_connect_timeout_seconds, store_lock_timeout_seconds).
    store_pool_size: int = DEFAULT_STORE_POOL_SIZE
    store_connect_timeout_seconds: float = DEFAULT_STORE_CONNECT_TIMEOUT_SECONDS
    store_lock_timeout_seconds: float = DEFAULT_STORE_LOCK_TIMEOUT_SECONDS


def bind_memory_tab(settings: Settings, store: Store) -> BoundWeb | None:
    """The Memory tab's bound socket, or None when it is off.

    Off when ``web_listen`` is ``""``, or when the store is not managed (the
    folder store keeps no members to sign in, no history and no review)
    and ``web_listen`` was left at its default: the log says so. Asked for
    explicitly over such a store, it is a ``ConfigError`` naming the key.
    """
    if not settings.web_listen:
        return None
    if not isinstance(store, ManagedStore):
        why = (
            f"the store {settings.store} keeps no members, history or review (the Memory tab "
            "needs a managed store: sqlite, postgresql or memory)"
        )
        if settings.web_required:
            raise ConfigError(f'web_listen {settings.web_listen!r}: {why}; set web_listen = ""')
        log.warning("the Memory tab is off: %s", why)
        return None
    web = bind_web(
        settings.web_listen,
        None if settings.web_tls_cert is None else str(settings.web_tls_cert),
        None if settings.web_tls_key is None else str(settings.web_tls_key),
        read_timeout_seconds=settings.web_read_timeout_seconds,
    )
    # hypercorn's lines go to the daemon's log, not to a handler of its own.
    web.config.errorlog = logging.getLogger("hypercorn.error")
    return web


def is_mountpoint(path: Path) -> bool:
    target = os.fsencode(os.path.realpath(path))
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            return any(line.split()[4] == target for line in fh)
    except OSError:
        return os.path.ismount(path)


def clear_stale_mount(mount_root: Path) -> bool:
    """Lazily unmount what a crashed daemon left at ``mount_root``; True if there was one.

    Only a dead FUSE mount ("Transport endpoint is not connected") is stale. A
    live mount there belongs to someone else, and starting is a mistake.
    """
    try:
        # statvfs always reaches the filesystem; stat may be answered from the
        # kernel's attribute cache even when the daemon behind it is dead.
        os.statvfs(mount_root)
    except OSError as exc:
        if exc.errno != errno.ENOTCONN:
            return False
    else:
        if is_mountpoint(mount_root):
            raise ConfigError(
                "something is already mounted there (another memfs daemon?)",
                path=str(mount_root),
            )
        return False
    log.warning("unmounting a stale mount at %s", mount_root)
    done = subprocess.run(
        ["fusermount3", "-u", "-z", str(mount_root)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(mount_root)], capture_output=True, check=False)
    return True


def raise_descriptor_limit() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; return the soft limit now.

    Agents' open files cost the daemon descriptors only while in use (the
    overlay closes idle ones), but the more it may hold, the less often it
    reopens one.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (OSError, ValueError) as exc:
            log.warning("could not raise the descriptor limit from %d to %d: %s", soft, hard, exc)
    return soft


# Descriptors the daemon keeps for itself, outside the pool on agents' files:
# stdio and its log, /dev/fuse, trio's epoll and wakeup sockets, the store's
# database and its -wal and -shm, the control socket and its connections, one
# journal per open turn, and the few a turn start or end opens for a moment
# (a blob being written, a copy-up, done.json). An idle daemon with two open
# turns holds 17.
DAEMON_DESCRIPTORS = 64
# The fewest descriptors on agents' files worth running with: every open
# handle past it costs a close and a reopen at its next read or write.
MIN_POOL_DESCRIPTORS = 16


def data_descriptors(limit: int) -> int:
    """How many descriptors the overlay keeps on data files and blobs, of ``limit`` in all.

    Half of them, but never so many that fewer than ``DAEMON_DESCRIPTORS``
    stay for the rest; a limit too low for ``MIN_POOL_DESCRIPTORS`` as well
    is refused at start (``ConfigError``), not found out when an agent's
    turn end gets EMFILE. ``Limits.max_open_files`` is not bounded by this:
    a handle holds a descriptor of the pool only while it is used.
    """
    pool = min(limit // 2, limit - DAEMON_DESCRIPTORS)
    if pool < MIN_POOL_DESCRIPTORS:
        need = DAEMON_DESCRIPTORS + MIN_POOL_DESCRIPTORS
        raise ConfigError(
            f"the daemon may open only {limit} files (RLIMIT_NOFILE, hard limit); it needs "
            f"at least {need}: raise it (LimitNOFILE= in the systemd unit, ulimit -Hn)"
        )
    return pool


def mount_options() -> set[str]:
    options = set(pyfuse3.default_options)  # default_permissions: the kernel checks modes
    options |= {"fsname=memfs", "subtype=memfs", "noatime"}
    if os.geteuid() == 0:
        options.add("allow_other")  # agents run as other users, one uid per session
    return options


async def serve(
    settings: Settings, *, task_status: trio.TaskStatus[DaemonService] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run the daemon until SIGTERM/SIGINT or ``pyfuse3.terminate()``."""
    # First: everything after opens descriptors, and a limit too low is said by name.
    descriptors = data_descriptors(raise_descriptor_limit())
    check_socket_path(settings.socket)  # else found only once the mount and turns are up
    secure_state_dir(settings.state_dir)  # 0700, or a ConfigError naming it
    if await trio.to_thread.run_sync(socket_in_use, settings.socket):
        raise ConfigError("a memfs daemon is already running", path=str(settings.socket))
    await trio.to_thread.run_sync(clear_stale_mount, settings.mount_root)
    # Agents must reach the mount whatever the daemon's umask (0o077).
    make_dirs(settings.mount_root, REACHABLE_DIR_MODE)
    key_file = settings.store_key_file or default_key_file(settings.state_dir)
    store = open_store(
        settings.store,
        key_file=key_file,
        pool_size=settings.store_pool_size,
        connect_timeout_seconds=settings.store_connect_timeout_seconds,
        lock_timeout_seconds=settings.store_lock_timeout_seconds,
    )
    # A store key that is not the store's stops the start by name; a store
    # that cannot be reached now is started through, as at any other time.
    if isinstance(store, SqlStore):
        try:
            await store.check_at_start()
        except BaseException:
            await store.aclose()
            raise
    overlay = Overlay(
        settings.state_dir,
        BlobCache(settings.state_dir / "blobs"),
        settings.limits,
        sync_on_close=settings.sync_on_close,
        descriptors=descriptors,
    )
    workspace = OverlayWorkspace(
        overlay,
        settings.mount_root,
        invalidate=invalidate_names,
        invalidate_inodes=invalidate_inodes,
    )

    def report(exc: BaseException, space: str) -> None:
        log.warning("memory space %s: %s", space, exc)

    memory = Memory(
        store,
        settings.specs,
        on_error=report,
        limits=settings.limits,
        workspace=workspace,
        seed_record=settings.state_dir / "seeds.json",
        store_batch_max=settings.store_batch_max,
    )
    service = DaemonService(memory, workspace, settings.store, str(settings.state_dir))
    operations = MemfsOperations(overlay, requests=service.requests, mount_root=settings.mount_root)
    try:
        # Bound (and listening) before the mount: a port in use or TLS files
        # that do not load stop the start by name, with nothing mounted.
        web = bind_memory_tab(settings, store)
    except BaseException:
        await store.aclose()
        raise
    try:
        pyfuse3.init(operations, str(settings.mount_root), mount_options())
    except RuntimeError as exc:
        if web is not None:
            web.close()
        await store.aclose()
        raise ConfigError(f"cannot mount at {settings.mount_root}: {exc}") from exc
    try:
        service.recover()
        await service.finish_discards()  # one it cannot finish is logged, by session
        try:
            await service.catch_up_forgets()
        except MemfsError:
            # The store is down: the turn keeps serving what it holds, but the
            # forget still holds in the store, which refuses the turn's write-back.
            log.exception("could not ask the store about forgets made while the daemon was down")
        try:
            await memory.refresh_seeds()  # seed folders changed while the daemon was down
        except Exception:
            log.exception("could not check the seed folders at start")
        async with trio.open_nursery() as nursery:
            app = control_app(service, max_body_bytes=settings.control_max_body_bytes)
            await nursery.start(serve_control, app, settings.socket)
            web_stop, web_done = trio.Event(), trio.Event()
            if web is not None:
                tab = web_app(
                    store, limits=settings.limits, max_body_bytes=settings.web_max_body_bytes
                )
                await nursery.start(_serve_memory_tab, tab, web, web_stop, web_done)
            nursery.start_soon(_stop_on_signals)
            seeds_stop = trio.Event()
            if memory.seed_folders:
                nursery.start_soon(_watch_seeds, memory, seeds_stop)
            interval = watchdog_interval()
            if interval is not None:
                nursery.start_soon(_watchdog, interval)
            if settings.forget_poll_seconds > 0:
                nursery.start_soon(_poll_forgets, service, settings.forget_poll_seconds)
            if isinstance(store, PostgresStore):
                nursery.start_soon(follow_store, service, store, settings.listen_retry_seconds)
            notify("READY=1")
            log.info("memfs mounted at %s; control API on %s", settings.mount_root, settings.socket)
            if web is not None:
                log.info("the Memory tab on %s (sign in at %s/login)", web.url, web.url)
            task_status.started(service)
            await pyfuse3.main(min_tasks=1, max_tasks=FUSE_TASKS)
            seeds_stop.set()  # awatch ends on its stop event; cancelling alone is slow
            if web is not None:
                web_stop.set()
                # Requests in flight finish (hypercorn's graceful_timeout), then it stops.
                with trio.move_on_after(web.config.graceful_timeout + 2):
                    await web_done.wait()
            nursery.cancel_scope.cancel()
    finally:
        if web is not None:
            web.close()  # closed already unless the start failed before serving it
        notify("STOPPING=1")
        overlay.write_held()  # open turns are kept for the next start, reads and all
        pyfuse3.close(unmount=True)
        await store.aclose()
        log.info("memfs unmounted %s", settings.mount_root)


async def _serve_memory_tab(
    app: object,
    web: BoundWeb,
    stop: trio.Event,
    done: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the Memory tab on ``web`` until ``stop`` is set; ``done`` once it has stopped."""
    try:
        await serve_web(app, web, shutdown_trigger=stop.wait, task_status=task_status)
    finally:
        done.set()
    log.info("the Memory tab on %s stopped", web.url)


async def _stop_on_signals() -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("received %s; unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            return


async def _watch_seeds(memory: Memory, stop: trio.Event) -> None:
    """When a seed folder changes, propose the change now, not at the space's next turn."""
    async for _changes in awatch(*memory.seed_folders, stop_event=stop):
        try:
            await memory.refresh_seeds()
        except Exception:
            log.exception("could not bring a changed seed into its spaces")


async def _poll_forgets(service: DaemonService, interval: float) -> None:
    """Every ``interval`` seconds, apply the forgets other processes made to the open turns.

    The CLI tells the daemon of a forget at once (``POST /forgotten``); a
    person forgetting through an app's ``my_memory`` handler, or another
    daemon on a shared store, tells nobody, and the store only refuses the
    turn's write-back. A store that is down is asked again next time.
    """
    while True:
        await trio.sleep(interval)
        try:
            await service.poll_forgets()
        except MemfsError as exc:
            log.warning("could not ask the store about forgets: %s", exc)
        except Exception:
            log.exception("could not apply forgets found in the store")


async def _watchdog(interval: float) -> None:
    while True:
        notify("WATCHDOG=1")
        await trio.sleep(interval)


def run_daemon(config: Any) -> None:
    """Run the daemon in the foreground (as systemd and tests want) from a ``DaemonConfig``."""
    # Nothing the daemon makes is for other users: state_dir's files are the
    # memory itself. Every file and folder there also gets its mode explicitly.
    os.umask(0o077)
    logging.basicConfig(
        level=os.environ.get("MEMFS_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    settings = Settings(
        mount_root=Path(config.mount_root),
        state_dir=Path(config.state_dir),
        store=str(config.store),
        specs=list(config.specs()),
        limits=config.limits,
        socket=Path(config.socket),
        sync_on_close=config.sync_on_close,
        control_max_body_bytes=config.control_max_body_bytes,
        forget_poll_seconds=config.forget_poll_seconds,
        listen_retry_seconds=config.listen_retry_seconds,
        store_batch_max=config.store_batch_max,
        web_listen=config.web_listen,
        web_tls_cert=config.web_tls_cert,
        web_tls_key=config.web_tls_key,
        web_max_body_bytes=config.web_max_body_bytes,
        web_read_timeout_seconds=config.web_read_timeout_seconds,
        web_required=config.web_required,
        store_key_file=config.key_file,
        store_pool_size=config.store_pool_size,
        store_connect_timeout_seconds=config.store_connect_timeout_seconds,
        store_lock_timeout_seconds=config.store_lock_timeout_seconds,
    )
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
    trio.run(serve, settings)


__all__ = [
    "DAEMON_DESCRIPTORS",
    "FUSE_TASKS",
    "GC_YOUNG_THRESHOLD",
    "MIN_POOL_DESCRIPTORS",
    "Settings",
    "bind_memory_tab",
    "clear_stale_mount",
    "data_descriptors",
    "raise_descriptor_limit",
    "run_daemon",
    "serve",
]
