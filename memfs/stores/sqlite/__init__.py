"""The SQLite store: the embedded default, a managed store in one database file.

The statements are the shared SQL layer's (:mod:`memfs.stores.sql`); this
package owns the database file:

- :mod:`~memfs.stores.sqlite.schema`: the tables and the migrations (the file format);
- :mod:`~memfs.stores.sqlite.db`: ``SqliteDb``, SQLite's words for what differs;
- :mod:`~memfs.stores.sqlite.store`: ``SqliteStore``, the connection and its transactions.

Every read and write runs in one transaction; a store's conflict check and
its writes run in one ``BEGIN IMMEDIATE`` transaction, so several processes
writing the same file serialize on SQLite's write lock and a conflicting or
failing change set writes nothing.
"""

from memfs.stores.sqlite.schema import MIGRATIONS as MIGRATIONS
from memfs.stores.sqlite.schema import SCHEMA_VERSION as SCHEMA_VERSION
from memfs.stores.sqlite.store import SqliteStore as SqliteStore

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteStore"]
