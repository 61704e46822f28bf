"""The turn journal's record format (``memfsd.journal``): what a replay reads back."""

from __future__ import annotations

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
