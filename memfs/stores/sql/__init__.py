"""The managed stores' shared SQL: one set of tables and statements for SQLite and PostgreSQL.

Each module owns one part of what a managed store keeps; both stores run
exactly these functions, over a ``Db`` (:mod:`~memfs.stores.sql.db`) that
says the little that differs between the two databases:

- :mod:`~memfs.stores.sql.rows`: spaces, revisions, live files and folders, the cursor;
- :mod:`~memfs.stores.sql.files`: loads (full and lean), turn stores, puts, restores, history;
- :mod:`~memfs.stores.sql.review`: org changes held for review;
- :mod:`~memfs.stores.sql.privacy`: forgetting, and audited reads of a person's memory;
- :mod:`~memfs.stores.sql.sealed`: a person's memory sealed under a key of its own;
- :mod:`~memfs.stores.sql.members`: the people who sign in, and their tokens' hashes;
- :mod:`~memfs.stores.sql.traces`, :mod:`~memfs.stores.sql.asof` and :mod:`~memfs.stores.sql.audit`;
- :mod:`~memfs.stores.sql.lean`: lean loads' manifests by space version;
- :mod:`~memfs.stores.sql.store`: ``SqlStore``, the store methods over one transaction each.

The rules are :mod:`memfs.core`'s and :mod:`memfs.stores.managed`'s; these
modules keep only the rows. The tables themselves, their migrations and the
connection are each store's own (:mod:`memfs.stores.sqlite`,
:mod:`memfs.stores.postgres`), and each schema module documents the format.
"""
