"""The operator's commands for a store's database: ``memfs db status|migrate|rotate-key``.

``status`` shows which versioned migrations the store's database has applied
and which this memfs would apply, changing nothing (a SQLite file that does
not exist yet is not made); ``migrate`` applies the pending ones now, as the
next daemon to open the store would, under the same locks, so two at once
migrate once. Both print JSON (see ``memfs.stores.migrations.SchemaStatus``).
A database newer than this memfs is shown by ``status`` and refused by
``migrate`` (exit 78). ``rotate-key`` seals the store under a new store key
(``memfs.stores.sql.sealed``), which ends every backup taken before once the
old key file is destroyed; a failed rotation says which key opens the store
now, and one run again after its answer was lost says it is done.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from memfs.cli_manage import connection_options, key_file_option
from memfs.core.errors import ConfigError, MemfsError, StoreUnavailable


def register(main: click.Group, echo: Callable[[Any], None], guard: Callable[[], Any]) -> None:
    """Add ``db`` to ``main``; ``echo`` prints JSON, ``guard`` reports memfs errors."""

    store_option = click.option(
        "--store",
        "store_url",
        default=None,
        help="Store URL (sqlite:///... or postgresql://...).",
        show_default="$MEMFS_STORE, else the SQLite file in $MEMFS_STATE_DIR",
    )

    @main.group()
    def db() -> None:
        """The store's schema: its versioned migrations."""

    @db.command("status")
    @store_option
    @connection_options
    def db_status(store_url: str | None) -> None:
        """Show the migrations the store's database has applied and those pending.

        Of the connection settings only ``--store-connect-timeout-seconds``
        matters here: one connection, no writes.
        """
        from memfs.cli_manage import default_store, store_connection
        from memfs.stores.migrations import schema_status

        with guard():
            timeout = store_connection()["connect_timeout_seconds"]
            echo(
                schema_status(
                    store_url or default_store(), connect_timeout_seconds=timeout
                ).as_json()
            )

    @db.command("migrate")
    @store_option
    @key_file_option
    @connection_options
    def db_migrate(store_url: str | None) -> None:
        """Apply the pending migrations now; prints the status after.

        A SQLite store opens with its key (``--store-key-file``): rows an older
        memfs wrote in people's spaces in the clear are sealed here.
        """
        from memfs.cli_manage import default_store, store_connection, store_key_file
        from memfs.stores.migrations import migrate

        with guard():
            done = migrate(
                store_url or default_store(), key_file=store_key_file(), **store_connection()
            )
            echo(done.as_json())

    @db.command("rotate-key")
    @store_option
    @key_file_option
    @connection_options
    @click.option(
        "--new-key-file",
        type=click.Path(dir_okay=False, path_type=Path),
        required=True,
        help="The store key to seal under from now on (made 0600 with a fresh key if missing).",
    )
    def db_rotate_key(store_url: str | None, new_key_file: Path) -> None:
        """Seal the store under a new store key; prints how many people's keys moved.

        Stop every daemon on the store first. The store opens with its key now
        (``--store-key-file``); afterwards only ``--new-key-file`` opens it:
        give every host that file as its ``store_key_file`` and start the
        daemons again. A backup taken before opens only with the old key, so
        destroying the old key file ends every such copy, people forgotten
        since included. If it fails, keep both key files and run it again with
        the same ones: a rotation already done is reported as done.
        """
        import trio

        from memfs.cli_manage import default_store, store_connection, store_key_file
        from memfs.stores.open import open_store
        from memfs.stores.sql.store import SqlStore

        new = new_key_file.absolute()

        async def rotate() -> dict[str, object]:
            url, options = store_url or default_store(), store_connection()
            store = open_store(url, key_file=store_key_file(), **options)
            try:
                if not isinstance(store, SqlStore):
                    raise ConfigError(
                        "only sqlite and postgresql stores seal under a store key",
                        path=url,
                    )
                old = store.key_file
                try:
                    await store.spaces()  # opens the store: a key it is not sealed under is refused
                except ConfigError:
                    if await _exists(new) and await _opens_with(url, new, options):
                        # A rotation done before, whose answer was lost (a kill, a closed terminal).
                        return {"rotated": 0, "store_key_file": str(new), "already_rotated": True}
                    raise
                except StoreUnavailable as exc:
                    # Before anything is made or written: this run changed nothing. But
                    # a new key file already there may be what an earlier run, whose
                    # answer was "cannot tell" or lost, sealed the store under.
                    message = f"the store key was not rotated: {exc.message}"
                    if await _exists(new):
                        message += (
                            f"; this run changed nothing, but keep {new}: an earlier run "
                            "may have sealed the store under it"
                        )
                    raise StoreUnavailable(message, path=exc.path) from exc
                try:
                    rotated = await store.rotate_key(new)
                except ConfigError as exc:
                    # The new key file could not be made or read, or holds the key now: nothing
                    # was written.
                    raise ConfigError(
                        f"the store key was not rotated: {exc.message}", path=exc.path
                    ) from exc
                except StoreUnavailable as exc:
                    raise await _not_rotated(url, old, new, exc, options) from exc
                return {"rotated": rotated, "store_key_file": str(new)}
            finally:
                await store.aclose()

        with guard():
            echo(trio.run(rotate))


async def _exists(path: Path) -> bool:
    import trio

    return await trio.to_thread.run_sync(path.exists)


async def _opens_with(url: str, key_file: Path, options: dict[str, Any]) -> bool | None:
    """Whether the store is sealed under the key in ``key_file`` (None: it cannot be told now)."""
    from memfs.stores.open import open_store
    from memfs.stores.sql.store import SqlStore

    store = open_store(url, key_file=key_file, **options)
    try:
        assert isinstance(store, SqlStore)  # the store rotate-key opened, under another key
        await store.spaces()
    except ConfigError:
        return False
    except MemfsError:
        return None
    finally:
        await store.aclose()
    return True


async def _not_rotated(
    url: str, old: Path, new: Path, exc: StoreUnavailable, options: dict[str, Any]
) -> StoreUnavailable:
    """A rotation whose transaction failed, as the operator must hear it: which key opens now.

    Neither key file is removed: a commit that failed may still have reached
    the database (a write-ahead log's last frame), and a store sealed under a
    key file that is gone is lost. The database is asked again instead.
    """
    if await _opens_with(url, old, options):
        return StoreUnavailable(
            f"the store key was not rotated ({exc}); the store opens with {old} as before. "
            f"Keep {new} too and run this command again with the same files once that is "
            "fixed",
            path=str(new),
        )
    if await _exists(new) and await _opens_with(url, new, options):
        return StoreUnavailable(
            f"the store key is rotated: only {new} opens the store now, but then: {exc}",
            path=str(new),
        )
    return StoreUnavailable(
        f"the store key may or may not be rotated ({exc}), and the store cannot tell now. "
        f"Keep both {old} and {new}, and run this command again with the same files once "
        "the store is back: a rotation already done is reported as done",
        path=str(new),
    )
