"""Group commit: concurrent index writes share one RocksDB write (and one WAL sync).

Each ``write(batch, sync=...)`` joins a queue. One writer at a time takes the whole
queue, applies it as one WriteBatch in one worker-thread call (synced when any batch of
the group asks for it), and only after that call returned resolves every waiter of the
group (a failure fails them all: the merged batch is atomic, so none of it was applied).
Writes arriving while a group is being written form the next group, so a lone write
waits for nothing and a busy one shares its thread hop and its fsync with everything
that queued meanwhile (with ``--durability none`` no write is synced, and the hop is
what is shared).

Order: batches are applied in arrival order, across groups too (a later put of the same
RocksDB key wins, e.g. the sequence high-water mark). Two commits of one object key
are never in flight together (the key lock), so merging keeps per-key order. An
unsynced write returns once it is in the WAL; any synced write queued after it is
behind it in the WAL (or in the same synced group), which is what
``CacheStore.barrier`` relies on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from backends.core.blocking import run_cache_blocking

B = TypeVar("B")  # a batch of index changes (gateway.cache.index.Batch)


class GroupCommit(Generic[B]):
    """Queues index writes and applies each queue in one RocksDB write.

    ``write_many(batches, sync)`` is the blocking write of several batches as one
    WriteBatch. Use from one event loop. ``groups`` and ``batches`` count what was
    written (the mean group size is their ratio).
    """

    def __init__(self, write_many: Callable[[Sequence[B], bool], None]) -> None:
        self._write_many = write_many
        self._queue: list[tuple[B, bool, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.groups = 0
        self.batches = 0

    async def write(self, batch: B, *, sync: bool) -> None:
        """Apply ``batch`` atomically; with ``sync``, return once the WAL holding it is
        on stable storage."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((batch, sync, done))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._run())
        # The group is written whatever happens to this caller (like a write already
        # handed to a thread): cancelling the caller does not unqueue the batch.
        await asyncio.shield(done)

    async def _run(self) -> None:
        try:
            while self._queue:
                group, self._queue = self._queue, []
                sync = any(s for _, s, _ in group)
                try:
                    await run_cache_blocking(self._write_many, [b for b, _, _ in group], sync)
                except Exception as exc:  # noqa: BLE001 - handed to every waiter
                    for _, _, done in group:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                except BaseException:
                    for _, _, done in group:
                        done.cancel()
                    raise
                self.groups += 1
                self.batches += len(group)
                for _, _, done in group:
                    if not done.done():
                        done.set_result(None)
        finally:
            self._writer = None
            for _, _, done in self._queue:  # only if this task itself was cancelled
                done.cancel()
            self._queue = []
