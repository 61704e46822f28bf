"""Seeds: a folder in the app's repository that is version 1 of an org space.

The first time, the seed's files become the space (origin ``code``). After
that, memfs never overwrites what people approved since: when the folder
changes, only the files that changed *in the code* since the seed memfs last
saw are proposed, each against what is live now, as one change "Changed in
code" that waits for a person like any other.
"""

from __future__ import annotations

from collections.abc import Mapping

from memfs.core.models import ChangeSet, digest

CHANGED_IN_CODE = "Changed in code"


def manifest(files: Mapping[str, bytes]) -> dict[str, str]:
    """What memfs remembers of a seed: each file's content address."""
    return {path: digest(content) for path, content in files.items()}


def code_change(
    previous: Mapping[str, str], seed: Mapping[str, bytes], live: Mapping[str, bytes]
) -> ChangeSet:
    """The change the code proposes: what changed in the seed since ``previous``, against ``live``.

    ``live`` is what the code's conversation sees: the live files with its
    own waiting change over them. A file the seed did not change is never
    proposed, so an approved edit to it stands. A file the seed changed is
    proposed as the seed has it (or as a deletion, if the seed dropped it),
    unless what the conversation sees already says so; so a change the seed
    takes back before anyone approved it is proposed back in the waiting
    change, which then makes live nothing the code no longer says.
    """
    created: dict[str, bytes] = {}
    updated: dict[str, bytes] = {}
    deleted: list[str] = []
    for path in sorted(set(previous) | set(seed)):
        now = seed.get(path)
        if (None if now is None else digest(now)) == previous.get(path):
            continue  # unchanged in the code
        current = live.get(path)
        if now is None:
            if current is not None:
                deleted.append(path)
        elif current is None:
            created[path] = now
        elif current != now:
            updated[path] = now
    return ChangeSet(created=created, updated=updated, deleted=tuple(deleted))


__all__ = ["CHANGED_IN_CODE", "code_change", "manifest"]
