"""What a store keeps of a turn's words once a person in it is forgotten.

Forgetting a person empties their words (a prompt, a label) everywhere a
store keeps them and destroys their key. A turn that started before the
forget may still be storing (its store in flight, or its end after): what it
stores and its trace keep none of the words of anyone forgotten since, by
the mark the turn carries (``Provenance.words_since``, ``Trace.words_since``;
``memfs.engine.dating`` says how a turn is dated). Pure: each store passes
when it last forgot a person.
"""

from __future__ import annotations

from collections.abc import Callable

from memfs.core.models import Provenance, Trace


def words_kept(provenance: Provenance, forgotten_at: Callable[[str], int]) -> Provenance:
    """What a store keeps of a turn's ``provenance``: no words of an author forgotten since.

    ``forgotten_at(user)``: when a user of the space's org was last forgotten
    whole (0: never). A forget after the turn started (past the mark its
    ``words_since`` carries) emptied the author's words everywhere and
    destroyed their key; the turn's store, in flight then, must not bring
    them back, nor make them a key again. Without a mark nothing is judged:
    a cursor cannot date a turn over org memory (an org space's cursor is
    its own last revision, however late it was loaded).
    """
    since = provenance.words_since
    if since is None:
        return provenance
    kept = provenance.model_copy(update={"words_since": None})
    author = kept.words_author
    if author is None or not since.isdigit() or forgotten_at(author) <= int(since):
        return kept
    return kept.without_words_of(author)


def trace_kept(trace: Trace, forgotten_at: Callable[[str, str], int]) -> Trace:
    """What a store keeps of ``trace``: nothing of a holder forgotten after the turn's words.

    ``forgotten_at(org, user)``: when they were last forgotten whole (0:
    never). A person whose own space the turn loaded is dated by that load
    (its cursor is at least their last forget once the load saw it); the
    author of a turn over org memory by the mark the turn carries
    (``words_since``); anyone else is kept. A holder forgotten since loses
    their part and the prompt, as ``forget_user`` took them from every trace
    recorded before.
    """
    since, author = trace.words_since, trace.author
    trace = trace.model_copy(update={"words_since": None}) if since is not None else trace
    for org, user in trace.holders():
        own = [
            int(mount.cursor)
            for mount in trace.mounts.values()
            if mount.ref.owned_by(org, user) and mount.cursor is not None and mount.cursor.isdigit()
        ]
        if own:
            dated = min(own)
        elif user == author and since is not None and since.isdigit():
            dated = int(since)
        else:
            continue
        if forgotten_at(org, user) > dated:
            trace = trace.without_words_of(user, org) or trace
    return trace


__all__ = ["trace_kept", "words_kept"]
