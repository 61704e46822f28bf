"""The operator's commands for a store's database: ``memfs db status|migrate|rotate-key``.

``status`` shows which versioned migrations the store's database has applied
and which this memfs would apply, changing nothing (a SQLite file that does
not exist yet is not made); ``migrate`` applies the pending ones now, as the
next daemon to open the store would, under the same locks, so two at once
migrate once. Both print JSON (see ``memfs.stores.migrations.SchemaStatus``).
A database newer than this memfs is shown by ``status`` and refused by
``migrate`` (exit 78). ``rotate-key`` seals the store under a new store key
(``memfs.stores.sql.sealed``), which ends every backup taken before once the
old key file is destroyed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from memfs.cli_manage import connection_options, key_file_option
from memfs.core.errors import ConfigError


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
        since included.
        """
        import trio

        from memfs.cli_manage import default_store, store_connection, store_key_file
        from memfs.stores.open import open_store
        from memfs.stores.sql.store import SqlStore

        new = new_key_file.absolute()

        async def rotate() -> dict[str, object]:
            store = open_store(
                store_url or default_store(), key_file=store_key_file(), **store_connection()
            )
            try:
                if not isinstance(store, SqlStore):
                    raise ConfigError(
                        "only sqlite and postgresql stores seal under a store key",
                        path=store_url or default_store(),
                    )
                rotated = await store.rotate_key(new)
                return {"rotated": rotated, "store_key_file": str(new)}
            finally:
                await store.aclose()

        with guard():
            echo(trio.run(rotate))
