"""``memfs.core.paging``: pages of a growing list, read back from the newest."""

from __future__ import annotations

import pytest

from memfs.core.errors import BadRequest
from memfs.core.paging import latest_before

ITEMS = [f"i{n}" for n in range(7)]


def page(before: str | None, limit: int | None) -> tuple[list[str], bool]:
    return latest_before(ITEMS, str, before, limit, what="item")


def test_a_page_is_the_latest_items_before_the_one_named_oldest_first() -> None:
    assert page(None, 3) == (["i4", "i5", "i6"], True)
    assert page("i4", 3) == (["i1", "i2", "i3"], True)
    assert page("i1", 3) == (["i0"], False)
    assert page("i0", 3) == ([], False)
    assert page(None, None) == (ITEMS, False)


def test_walking_back_page_by_page_sees_every_item_once_in_order() -> None:
    seen: list[str] = []
    before = None
    while True:
        shown, more = page(before, 2)
        seen[:0] = shown
        if not more:
            break
        before = shown[0]
    assert seen == ITEMS


@pytest.mark.parametrize(("before", "limit"), [("i9", 1), ("", 1), (None, 0), (None, -1)])
def test_a_page_before_no_item_or_of_no_items_is_a_bad_request(
    before: str | None, limit: int
) -> None:
    with pytest.raises(BadRequest):
        page(before, limit)
