"""The memory store: what is particular to it, its log of events for ``memfs.testing``.

The store contract itself runs in ``test_store_conformance.py``.
"""

from __future__ import annotations

import pytest

from memfs.core.errors import AuditTampered
from memfs.core.models import By, ChangeSet, Provenance, SpaceRef
from memfs.stores.memory import MemoryStore

ORG = SpaceRef(layer="org", space="lending-rules", org="bank-1")
DANA = SpaceRef(layer="user", space="me", org="bank-1", user="dana")
ADA = By(id="ada", label="Ada", role="admin")
TURN = Provenance(session="s1", turn="t1", prompt="remember my diagnosis")


async def test_restore_and_forget_are_logged_as_a_persons_edits() -> None:
    store = MemoryStore()
    first = await store.put(ORG, ChangeSet(created={"a.md": b"one"}), provenance=TURN)
    await store.forget_file(ORG, "a.md", by=ADA)
    await store.restore(ORG, "a.md", first.revisions["a.md"], by=ADA)
    await store.restore(ORG, "a.md", first.revisions["a.md"], by=ADA)
    _, forgot, restored, again = store.events
    assert forgot.changes == ChangeSet(deleted=("a.md",))
    assert restored.changes == ChangeSet(created={"a.md": b"one"})
    assert again.changes == ChangeSet(updated={"a.md": b"one"})
    for event in (forgot, restored, again):
        assert event.status == "saved"
        assert event.provenance.origin == "edited"
        assert event.provenance.by == ADA


async def test_purging_a_persons_file_scrubs_it_from_the_event_log() -> None:
    store = MemoryStore()
    await store.put(DANA, ChangeSet(created={"health.md": b"secret"}), provenance=TURN)
    await store.put(
        DANA, ChangeSet(updated={"health.md": b"more"}, created={"keep.md": b"k"}), provenance=TURN
    )
    await store.put(ORG, ChangeSet(created={"health.md": b"org rules"}), provenance=TURN)
    await store.forget_file(DANA, "health.md", by=By(id="dana"))
    # The event that touched only the file is gone, prompt and all; the other
    # keeps what it did to other files; another space's file of the name stays.
    kept, org, purged = store.events
    assert (kept.ref, kept.changes) == (DANA, ChangeSet(created={"keep.md": b"k"}))
    assert (org.ref, org.changes) == (ORG, ChangeSet(created={"health.md": b"org rules"}))
    assert (purged.ref, purged.status) == (DANA, "purged")
    assert purged.changes == ChangeSet(deleted=("health.md",))
    assert purged.provenance.by == By(id="dana")


async def test_verify_names_the_first_entry_changed_or_removed_in_the_memory_store() -> None:
    store = MemoryStore()
    admin = By(id="ada", role="admin")
    for user in ("dana", "carol", "erin"):
        await store.open_person(user, "bank-1", by=admin)
    assert (await store.verify_audit()).entries == 3
    entries = list(store._audit)
    store._audit[1] = entries[1].model_copy(update={"target": "someone-else"})
    with pytest.raises(AuditTampered, match="changed") as changed:
        await store.verify_audit()
    assert changed.value.path == entries[1].id
    store._audit[:] = [entries[0], entries[2]]
    with pytest.raises(AuditTampered, match="chain is broken") as removed:
        await store.verify_audit()
    assert removed.value.path == entries[2].id
