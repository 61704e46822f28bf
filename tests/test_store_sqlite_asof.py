"""The SQLite store's as-of query over a 10,000-file space: right, and from indexes alone."""

from __future__ import annotations

from pathlib import Path

from memfs.core.models import ChangeSet, Provenance, SpaceRef
from memfs.stores.sql.asof import _as_of_query
from memfs.stores.sqlite import SqliteStore
from memfs.stores.sqlite.db import SqliteDb
from tests.test_store_sqlite import raw

RULES = SpaceRef(layer="org", space="rules", org="bank")


async def test_files_as_of_a_cursor_over_ten_thousand_files_reads_indexes_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memfs.db"
    store = SqliteStore(path)
    try:
        files = {f"f/{i:05}.md": b"x" * 100 for i in range(10_000)}
        await store.put(RULES, ChangeSet(created=files), provenance=Provenance())
        then = await store.load(RULES, "s1")
        edited = {f"f/{i:05}.md": b"edited" for i in range(0, 10_000, 10)}
        gone = tuple(f"f/{i:05}.md" for i in range(5, 10_000, 10))
        await store.put(RULES, ChangeSet(updated=edited, deleted=gone), provenance=Provenance())
        assert then.cursor is not None
        as_of = await store.files_as_of(RULES, then.cursor)
        assert {p: f.revision for p, f in as_of.items()} == then.revisions
        assert {f.size for f in as_of.values()} == {100}
        now_ = await store.load(RULES, "s1")
        assert now_.cursor is not None
        assert len(await store.files_as_of(RULES, now_.cursor)) == 9_000
    finally:
        await store.aclose()
    with raw(path) as conn:
        query = _as_of_query(SqliteDb(conn, store_key=b""))
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + query, (1, 1)))
    assert "COVERING INDEX revisions_by_path" in plan
    assert "COVERING INDEX revisions_manifest" in plan
