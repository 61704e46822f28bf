"""Group commit: concurrent turn ends' stores and traces go to the store in one call.

A store that commits each ``store`` and each ``record_trace`` in a
transaction of its own syncs its disk for every one of them: two disk
flushes per turn end, one after the other under the store's write lock. A
store that implements :class:`~memfs.stores.base.GroupCommitStore` takes many
at once and commits them together. :class:`GroupCommit` forms those batches.

No timer: the first caller with nobody committing sends its item alone at
once, through the store's own ``store`` or ``record_trace`` (a turn alone
waits for nobody and takes the path it would without group commit), or, for
a store that carries its turn's trace (``StoreRequest.trace``), as a batch
of one, so the two commit once. While
a batch commits, the items that arrive queue; when it is done, the first of
them sends the queue (up to ``max_items``) as the next batch, and so on.
So batches are as large as
the load makes them, and a turn's answer waits at most for the batch before
its own. Each caller gets its own item's answer only once the batch holding
it has returned, i.e. once the store says it is durable: a turn end that
answers "saved" is committed. An item the store fails (its answer is an
exception) fails only that caller; a batch that fails whole fails every
caller in it, and none of it was committed. Callers then keep their spaces
as for any failed store (see :mod:`memfs.engine.turns`), so nothing is lost.

Once sent, an item is not withdrawn: the wait for its answer is shielded
from cancellation, as a store running in a worker thread is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from memfs.core.errors import StoreUnavailable
from memfs.core.models import ChangeSet, Provenance, SpaceRef, Stored, Trace
from memfs.core.review import ReviewMode
from memfs.stores.base import GroupCommitStore, StoreRequest

# A batch's items, at most: one transaction holds the store's write lock
# for all of them, and other writers (memfs web, the CLI) wait that long.
DEFAULT_MAX_ITEMS = 32


@dataclass(eq=False)
class _Slot:
    item: StoreRequest | Trace
    # Set when the answer is in, or when this caller is to send the next batch.
    wake: trio.Event = field(default_factory=trio.Event)
    answered: bool = False
    answer: Stored | Exception | None = None


class GroupCommit:
    """Batches of stores and traces for one :class:`GroupCommitStore`.

    ``batches`` and ``items`` count what was sent (for tests and the benchmark).
    """

    def __init__(self, store: GroupCommitStore, *, max_items: int = DEFAULT_MAX_ITEMS) -> None:
        if max_items < 1:
            raise ValueError("a batch holds at least one item")
        self.store = store
        self.max_items = max_items
        self._queue: list[_Slot] = []
        self._sending = False
        self.batches = 0
        self.items = 0

    @property
    def queued(self) -> int:
        """Items waiting for the next batch."""
        return len(self._queue)

    async def store_changes(
        self,
        ref: SpaceRef,
        changes: ChangeSet,
        *,
        cursor: str | None,
        provenance: Provenance,
        review: ReviewMode = "none",
        trace: Callable[[Stored], Trace] | None = None,
    ) -> Stored:
        """``store`` through the next batch: what the store's own ``store`` would answer.

        ``trace``: the turn's trace from this answer, recorded in the same
        transaction (``StoreRequest.trace``); if either fails, this raises.
        """
        answer = await self._submit(StoreRequest(ref, changes, cursor, provenance, review, trace))
        if not isinstance(answer, Stored):
            # A store breaking its own contract: the space is kept, as for any failed store.
            raise StoreUnavailable("the store answered a store with no result", path=ref.space)
        return answer

    async def record_trace(self, trace: Trace) -> None:
        """``record_trace`` through the next batch."""
        await self._submit(trace)

    async def _submit(self, item: StoreRequest | Trace) -> Stored | None:
        slot = _Slot(item)
        self._queue.append(slot)
        with trio.CancelScope(shield=True):
            if self._sending:
                await slot.wake.wait()  # answered, or handed the next batch
            else:
                self._sending = True
            if not slot.answered:
                try:
                    while not slot.answered:
                        await self._send_next()
                finally:
                    # Whoever is first in the queue now sends the next batch.
                    if self._queue:
                        self._queue[0].wake.set()
                    else:
                        self._sending = False
        if isinstance(slot.answer, Exception):
            raise slot.answer
        return slot.answer

    async def _send_next(self) -> None:
        batch = self._queue[: self.max_items]
        del self._queue[: len(batch)]
        self.batches += 1
        self.items += len(batch)
        answers: list[Stored | Exception | None]
        if len(batch) == 1:
            # Alone: the store's own call, as for a store that cannot batch.
            answers = [await self._one(batch[0].item)]
        else:
            answers = await self._many(batch)
        for slot, answer in zip(batch, answers, strict=True):
            slot.answer = answer
            slot.answered = True
            slot.wake.set()

    async def _one(self, item: StoreRequest | Trace) -> Stored | Exception | None:
        try:
            if isinstance(item, Trace):
                await self.store.record_trace(item)  # type: ignore[attr-defined]
                return None
            if item.trace is not None:
                # With its trace: one transaction for both, as in a batch.
                [answer] = await self.store.store_batch([item])
                return answer
            stored: Stored = await self.store.store(
                item.ref,
                item.changes,
                cursor=item.cursor,
                provenance=item.provenance,
                review=item.review,
            )
            return stored
        except Exception as exc:
            return exc

    async def _many(self, batch: list[_Slot]) -> list[Stored | Exception | None]:
        answers: list[Stored | Exception | None]
        try:
            answers = await self.store.store_batch([slot.item for slot in batch])
            if len(answers) != len(batch):
                raise StoreUnavailable(
                    f"the store answered {len(answers)} of a batch of {len(batch)} items"
                )
        except Exception as exc:
            # Nothing of the batch was committed: every caller's store failed with it.
            answers = [_failed(exc, slot.item) for slot in batch]
        return answers


def _failed(exc: Exception, item: StoreRequest | Trace) -> Exception:
    """A batch's failure as one caller sees it: an exception of its own, the batch's its cause."""
    where = item.ref.space if isinstance(item, StoreRequest) else item.session
    failed = StoreUnavailable(f"the store's batch commit failed: {exc}", path=where)
    failed.__cause__ = exc
    return failed


__all__ = ["DEFAULT_MAX_ITEMS", "GroupCommit"]
