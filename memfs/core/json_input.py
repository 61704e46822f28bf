"""JSON that someone sent memfs: an object that names a key twice is refused, at any depth.

``json.loads`` keeps the last of a repeated key, so ``{"userId": "a",
"userId": "b"}`` mounted b's memory while anything that read the first (a
proxy, a log, a reviewer, another parser) saw a. Every door that reads JSON
from outside reads it with :func:`loads`: the control API's and the Memory
tab's request bodies (:class:`memfs.api.control.JsonRoute`) and the CLI's
``--extra-body``. Keys are compared as read, so ``"\\u0061"`` repeats ``"a"``.
"""

from __future__ import annotations

import json
from typing import Any


class UnreadableJson(ValueError):
    """JSON that parses, or would, and is refused all the same (the subclasses say why)."""


class TooDeep(UnreadableJson):
    """JSON nested deeper than the reader goes (the interpreter's recursion limit)."""

    def __init__(self) -> None:
        super().__init__("it is nested too deep to read")


class RepeatedKey(UnreadableJson):
    """A JSON object names one key twice; ``key`` is the key, as read."""

    def __init__(self, key: str) -> None:
        # json.dumps: the key shown quoted and escaped, whatever control character it holds.
        super().__init__(f"the key {json.dumps(key)} appears twice in one object")
        self.key = key


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return found


def loads(text: str | bytes) -> Any:
    """``text`` read as JSON: ``json.JSONDecodeError`` if it is not JSON, ``RepeatedKey`` if
    an object in it, at any depth, names a key twice, ``TooDeep`` if it nests past what
    the decoder can follow (a traceback otherwise, however small the text)."""
    try:
        return json.loads(text, object_pairs_hook=_each_key_once)
    except RecursionError:
        raise TooDeep() from None


__all__ = ["RepeatedKey", "TooDeep", "UnreadableJson", "loads"]
