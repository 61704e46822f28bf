"""The operator's commands for a store's schema: ``memfs db status`` and ``memfs db migrate``.

``status`` shows which versioned migrations the store's database has applied
and which this memfs would apply, changing nothing (a SQLite file that does
not exist yet is not made); ``migrate`` applies the pending ones now, as the
next daemon to open the store would, under the same locks, so two at once
migrate once. Both print JSON (see ``memfs.stores.migrations.SchemaStatus``).
A database newer than this memfs is shown by ``status`` and refused by
``migrate`` (exit 78).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from memfs.cli_manage import connection_options, key_file_option


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
