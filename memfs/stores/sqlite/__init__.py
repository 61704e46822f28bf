"""The SQLite store: the embedded default, a managed store in one database file.

The package owns the database file and everything in it, one module per part:

- :mod:`~memfs.stores.sqlite.schema`: the tables and the migrations (the file format);
- :mod:`~memfs.stores.sqlite.rows`: spaces, revisions, live files and folders, the cursor;
- :mod:`~memfs.stores.sqlite.files`: loads (full and lean), turn stores, puts, restores, history;
- :mod:`~memfs.stores.sqlite.review`: org changes held for review;
- :mod:`~memfs.stores.sqlite.privacy`: forgetting, and audited reads of a person's memory;
- :mod:`~memfs.stores.sqlite.members`: the people who sign in, and their tokens' hashes;
- :mod:`~memfs.stores.sqlite.traces` and :mod:`~memfs.stores.sqlite.audit`;
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
