"""The turn journal's record format (``memfsd.journal``): what a replay reads back."""

from __future__ import annotations

import json

from memfsd import journal


def test_records_round_trip_through_the_journal_bytes() -> None:
    records = [
        journal.holds_data("me", "a.md", 3),
        journal.holds_blob("me", "b.md", "0" * 64, 12, "7"),
        journal.attributes("me", "a.md", 0o100755, 1, 2),
        journal.renamed("me", "c.md", "b.md"),
        journal.cut("me", "a.md", "too large"),
        journal.access_entry("me", "a.md", {"wrote": True}),
    ]
    assert list(journal.decode(journal.encode(records))) == records
    assert all(record.keys() >= {"o", "m", "p"} for record in records)


def test_a_torn_last_line_ends_the_journal_and_everything_before_it_stands() -> None:
    whole = journal.encode([journal.holds_data("me", "a.md", 1), journal.written("me", "a.md")])
    torn = whole + b'{"o":"x","m":"me","p":"a'
    assert list(journal.decode(torn)) == list(journal.decode(whole))
    assert [r["o"] for r in journal.decode(whole)] == ["f", "w"]


def test_a_line_that_is_json_but_no_record_ends_the_journal_too() -> None:
    body = journal.encode([journal.removed("me", "a.md")]) + b"[1, 2]\n"
    assert [r["o"] for r in journal.decode(body)] == ["x"]


def test_only_read_records_may_be_held_back() -> None:
    assert journal.is_read(journal.read("me", "a.md", "4"))
    assert not journal.is_read(journal.written("me", "a.md"))


def test_read_records_are_the_json_lines_the_general_encoder_writes() -> None:
    # Read records are spelled out by hand (one per first open); the bytes must
    # be the ones json writes, for any name a mount, path or revision can hold.
    names = ["notes/a.md", 'q"uote\\back', "ünï/cødé 😀", "tab\tnl\nnul\x00", "\u2028"]
    records = [
        journal.read(mount, path, revision)
        for mount in ("me", "é")
        for path in names
        for revision in (None, "7", "rév")
    ]
    for record in records:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        assert journal.encode([record]) == line.encode()
    mixed = [journal.written("me", "a.md"), *records[:3], journal.removed("me", "b")]
    assert list(journal.decode(journal.encode(mixed))) == mixed


def test_a_read_record_built_in_another_key_order_is_still_written_as_json_writes_it() -> None:
    record = {"o": "r", "p": "a.md", "m": "me", "r": None}
    assert journal.encode([record]) == (json.dumps(record, separators=(",", ":")) + "\n").encode()
    odd = {"o": "r", "m": "me", "p": "a.md", "x": 1}  # not the read record's fields
    assert list(journal.decode(journal.encode([odd]))) == [odd]
