"""The PostgreSQL store: a managed store that many daemons on many hosts share.

The statements are the shared SQL layer's (:mod:`memfs.stores.sql`), as
the SQLite store's are; this package owns the database side:

- :mod:`~memfs.stores.postgres.schema`: the tables and the versioned migrations;
- :mod:`~memfs.stores.postgres.db`: ``PostgresDb``, PostgreSQL's words for what differs;
- :mod:`~memfs.stores.postgres.listen`: notices of spaces other processes changed (a hint);
- :mod:`~memfs.stores.postgres.store`: ``PostgresStore``, the pool and its transactions.
"""

from memfs.stores.postgres.schema import MIGRATIONS as MIGRATIONS
from memfs.stores.postgres.schema import SCHEMA_VERSION as SCHEMA_VERSION
from memfs.stores.postgres.store import PostgresStore as PostgresStore

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]
