"""The audit chain's rules (pure): the canonical encoding, sealing and verifying a chain."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memfs.core.audit import GENESIS, about_file, canonical, entry_hash, seal, verify_chain
from memfs.core.errors import AuditTampered
from memfs.core.models import AuditEntry, By, SpaceRef, Trace, TraceFile, TraceMount

AT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def chain(n: int) -> list[AuditEntry]:
    entries: list[AuditEntry] = []
    for i in range(1, n + 1):
        entry = AuditEntry(
            id=str(i), at=AT, actor=By(id="ada"), action="open", org="o", target=f"u{i}"
        )
        entries.append(seal(entry, entries[-1].hash if entries else GENESIS))
    return entries


def test_the_canonical_encoding_is_sorted_compact_utf8_and_excludes_the_hash() -> None:
    [entry] = chain(1)
    encoded = canonical(entry.model_copy(update={"target": "zoë"}))
    assert encoded.startswith(b'{"action":"open","actor":{"id":"ada","label":null,"role":null}')
    assert "zoë".encode() in encoded and b'"hash"' not in encoded
    assert b'"at":"2026-12-01T10:00:00+00:00"' in encoded
    assert entry.hash == entry_hash(entry) and len(entry.hash) == 64


def test_a_chain_verifies_and_any_change_names_the_first_broken_entry() -> None:
    entries = chain(4)
    checked = verify_chain(entries)
    assert (checked.entries, checked.head) == (4, entries[-1].hash)
    assert verify_chain([]).head == GENESIS
    changed = [*entries[:2], entries[2].model_copy(update={"target": "x"}), entries[3]]
    with pytest.raises(AuditTampered, match="changed") as caught:
        verify_chain(changed)
    assert caught.value.path == "3"
    with pytest.raises(AuditTampered, match="chain is broken") as caught:
        verify_chain([entries[0], entries[2], entries[3]])
    assert caught.value.path == "3"
    # Resealing a changed entry alone does not help: the next one no longer links.
    resealed = seal(entries[1].model_copy(update={"target": "x"}), entries[0].hash)
    with pytest.raises(AuditTampered) as caught:
        verify_chain([entries[0], resealed, *entries[2:]])
    assert caught.value.path == "3"


def test_entries_about_a_persons_file_carry_a_count_not_the_path() -> None:
    dana = SpaceRef(layer="user", space="me", org="o", user="dana")
    rules = SpaceRef(layer="org", space="rules", org="o")
    assert about_file(dana, "diagnosis.md", "7") == ("dana", "1 file")
    assert about_file(rules, "rules.md", "7") == ("rules.md", "7")


def test_forgetting_one_file_drops_a_rename_from_it_named_like_the_keys() -> None:
    # The daemon's access log names a rename's source NAME/path, as its keys.
    dana = SpaceRef(layer="user", space="me", org="o", user="dana")
    mount = TraceMount(
        ref=dana,
        read_only=False,
        from_last_known_copy=False,
        snapshot={"gone.md": "1"},
        status="saved",
        saved=("kept.md",),
    )
    trace = Trace(
        session="s",
        turn="t",
        prompt="p",
        mounts={"people/me": mount},
        files={"people/me/kept.md": TraceFile(renamed_from="people/me/gone.md", wrote=True)},
    )
    kept = trace.without_file(dana, "gone.md")
    assert kept is not None and "gone.md" not in kept.model_dump_json()
    assert kept.files == {"people/me/kept.md": TraceFile(wrote=True)}


def test_forgetting_one_file_drops_it_from_a_trace_whose_mount_name_has_a_slash() -> None:
    dana = SpaceRef(layer="user", space="me", org="o", user="dana")
    mount = TraceMount(
        ref=dana,
        read_only=False,
        from_last_known_copy=False,
        snapshot={"gone.md": "1", "kept.md": "2"},
        status="saved",
        saved=("gone.md", "kept.md"),
    )
    trace = Trace(
        session="s",
        turn="t",
        prompt="p",
        mounts={"people/me": mount},
        files={
            "people/me/gone.md": TraceFile(read="1"),
            "people/me/kept.md": TraceFile(renamed_from="gone.md"),
        },
    )
    kept = trace.without_file(dana, "gone.md")
    assert kept is not None and "gone.md" not in kept.model_dump_json()
    assert kept.mounts["people/me"].saved == ("kept.md",)
    assert kept.prompt == "p"
    assert kept.without_file(dana, "gone.md") is None  # nothing left to drop
    assert trace.without_user("dana", "o") == kept.model_copy(
        update={"prompt": None, "mounts": {}, "files": {}}
    )
