"""Pages of a list that only grows (the audit log, a session's turns), read back from the newest.

A page is the latest ``limit`` items before the item a reader names
(``before``: the first item of the page it was shown), oldest first, so a
reader walks back page by page and sees every item once. ``before`` must
name an item of the list: a page names one it showed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from memfs.core.errors import BadRequest

T = TypeVar("T")


def check_limit(limit: int, what: str) -> int:
    """A page's ``limit``: at least one ``what`` (each list bounds the rest by name)."""
    if limit < 1:
        raise BadRequest(f"a page holds at least one {what}, not {limit}")
    return limit


def latest_before(
    items: Sequence[T],
    key: Callable[[T], str],
    before: str | None,
    limit: int | None,
    *,
    what: str,
) -> tuple[list[T], bool]:
    """The latest ``limit`` (all, with None) of ``items`` before the one keyed ``before``.

    ``items`` is oldest first, and so is the page; the flag says whether
    earlier items are left. A ``before`` that keys no item is ``BadRequest``.
    """
    end = len(items)
    if before is not None:
        keys = [key(item) for item in items]
        if before not in keys:
            raise BadRequest(f"no {what} has this id", path=before)
        end = keys.index(before)
    start = 0 if limit is None else max(0, end - check_limit(limit, what))
    return list(items[start:end]), start > 0


__all__ = ["check_limit", "latest_before"]
