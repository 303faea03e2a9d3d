"""Copies of small writes sent to a mirror together: one peer request, and at the
mirror one group commit, for the writes that arrive while the previous request is out.

A copy for a member with no request in flight goes at once (alone, or with the copies
queued in the same turn of the event loop); the copies queued while a request is out go
in the next one, up to :data:`MAX_BATCH_COPIES` copies or about
:data:`gateway.cluster.wire.MAX_BATCH_BYTES` per request. Each caller gets its own copy's
outcome: durable at the mirror, or the error the mirror gave it (a failed request fails
every copy in it). Durability is per copy, as with one request each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from backends.core.errors import StorageError
from gateway.cluster.wire import MAX_BATCH_BYTES, MirrorCopy

#: copies sent in one request at most
MAX_BATCH_COPIES = 64
#: headroom for the JSON head of a batch within MAX_BATCH_BYTES
_HEAD_BYTES = 64 << 10

Send = Callable[[str, Sequence[MirrorCopy]], Awaitable[list[StorageError | None]]]
_Queued = tuple[MirrorCopy, "asyncio.Future[None]"]


class MirrorBatches:
    """Queues of copies by member; ``send(member, copies)`` keeps them at ``member`` and
    says what each got (an exception: every copy of the request failed with it)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._queues: dict[str, list[_Queued]] = {}
        self._sending: dict[str, asyncio.Task[None]] = {}  # the drain of each member
        self.requests = 0
        self.copies = 0

    async def put(self, member: str, copy: MirrorCopy) -> None:
        """Return once ``member`` keeps ``copy`` durably; its error otherwise."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(member, []).append((copy, done))
        if member not in self._sending:
            self._sending[member] = asyncio.ensure_future(self._drain(member))
        await done

    async def _drain(self, member: str) -> None:
        try:
            while self._queues.get(member):
                batch = self._take(member)
                try:
                    results = await self._send(member, [c for c, _ in batch])
                except BaseException as exc:  # every copy of it failed
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                self.requests += 1
                self.copies += len(batch)
                for (_, done), result in zip(batch, results, strict=True):
                    if done.done():
                        continue
                    if result is None:
                        done.set_result(None)
                    else:
                        done.set_exception(result)
        finally:
            self._sending.pop(member, None)
            if self._queues.get(member):  # queued as the loop was stopping
                for _, done in self._queues.pop(member):
                    if not done.done():
                        done.cancel()

    def _take(self, member: str) -> list[_Queued]:
        queue = self._queues[member]
        size = 0
        for count, (copy, _) in enumerate(queue):
            size += len(copy.body)
            if count and (count >= MAX_BATCH_COPIES
                          or size > MAX_BATCH_BYTES - _HEAD_BYTES):
                taken, self._queues[member] = queue[:count], queue[count:]
                return taken
        del self._queues[member]
        return queue
