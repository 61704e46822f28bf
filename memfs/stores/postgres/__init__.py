"""The PostgreSQL store: a managed store that many daemons on many hosts share.

Shaped like the SQLite store (:mod:`memfs.stores.sqlite`), one module per part:

- :mod:`~memfs.stores.postgres.schema`: the tables and the versioned migrations;
- :mod:`~memfs.stores.postgres.rows`: spaces, revisions, live files and folders, the cursor;
- :mod:`~memfs.stores.postgres.files`: loads (full and lean), turn stores, puts, restores, history;
- :mod:`~memfs.stores.postgres.review`: org changes held for review;
- :mod:`~memfs.stores.postgres.privacy`: forgetting, and audited reads of a person's memory;
- :mod:`~memfs.stores.postgres.members`: the people who sign in, and their tokens' hashes;
- :mod:`~memfs.stores.postgres.listen`: notices of spaces other processes changed (a hint);
- :mod:`~memfs.stores.postgres.traces` and :mod:`~memfs.stores.postgres.audit`;
- :mod:`~memfs.stores.postgres.store`: ``PostgresStore``, the pool and its transactions.

The rules are memfs.core's and memfs.stores.managed's, as in the SQLite store;
these modules keep only the rows.
"""

from memfs.stores.postgres.schema import MIGRATIONS as MIGRATIONS
from memfs.stores.postgres.schema import SCHEMA_VERSION as SCHEMA_VERSION
from memfs.stores.postgres.store import PostgresStore as PostgresStore

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]
