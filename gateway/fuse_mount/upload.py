"""One multipart upload fed part by part, with a bounded number of parts in flight."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait

from gateway.fuse_mount.store import Body, BucketClient, Part

log = logging.getLogger(__name__)


class PartUploader:
    """Uploads parts in the background; ``add`` blocks while ``max_inflight`` are running.

    Memory held is at most ``max_inflight`` parts (plus one per writer between ``add(...,
    wait=False)`` and its ``wait_for_room``). A failed part makes the next ``add``,
    ``check`` or ``complete`` raise its error; ``abort`` discards the upload.
    """

    def __init__(self, store: BucketClient, key: str, metadata: Mapping[str, str],
                 pool: Executor, *, max_inflight: int = 2) -> None:
        self._store = store
        self.key = key
        self._pool = pool
        self._max_inflight = max(1, max_inflight)
        #: The user metadata the object gets (sent when the upload is created).
        self.metadata = dict(metadata)
        self.upload_id = store.create_upload(key, self.metadata)
        self._next = 1
        self._lock = threading.Lock()  # guards _pending (wait_for_room reads it unlocked)
        self._pending: deque[Future[Part]] = deque()
        self._latest: dict[int, Future[Part]] = {}  # the newest upload of each part number
        self._done: list[Part] = []

    @property
    def parts(self) -> int:
        return self._next - 1

    def add(self, data: Body, *, wait: bool = True) -> int:
        """Queue ``data`` as the next part and return its number (waits for room first,
        unless ``wait`` is False: the caller then calls :meth:`wait_for_room` once it holds
        no lock). ``data`` now belongs to the upload: the caller must not change it."""
        if wait:
            self._make_room()
        else:
            self.check()
        number = self._take_number()
        future = self._pool.submit(self._store.upload_part, self.key, self.upload_id, number,
                                   data)
        with self._lock:
            self._pending.append(future)
            self._latest[number] = future
        return number

    def replace(self, number: int, data: Body) -> None:
        """Upload part ``number`` again with ``data`` (a part sent with zeros that a late
        write has since filled). The new upload starts once the earlier one of that number
        is done, so the gateway keeps the new bytes; ``complete`` sends the newest part."""
        self.check()
        with self._lock:
            earlier = self._latest.get(number)

        def upload_again() -> Part:
            if earlier is not None:
                earlier.exception()  # waits; a failure is raised through its own future
            return self._store.upload_part(self.key, self.upload_id, number, data)

        future = self._pool.submit(upload_again)
        with self._lock:
            self._pending.append(future)
            self._latest[number] = future

    def wait_for_room(self) -> None:
        """Wait until at most ``max_inflight`` parts are running (errors are left for the
        next ``add``, ``check`` or ``complete``)."""
        while True:
            with self._lock:
                running = [f for f in self._pending if not f.done()]
            if len(running) <= self._max_inflight:
                return
            wait(running, return_when=FIRST_COMPLETED)

    def add_copy(self, source: str, start: int, end: int, *, if_match: str) -> None:
        """Queue bytes ``[start, end)`` of object ``source`` (version ``if_match``) as a part."""
        self._make_room()
        number = self._take_number()
        future = self._pool.submit(self._store.upload_part_copy, self.key, self.upload_id,
                                   number, source, start, end, if_match=if_match)
        with self._lock:
            self._pending.append(future)

    def check(self) -> None:
        """Raise the error of any part that already failed."""
        while self._pending and self._pending[0].done():
            self._collect()

    def complete(self) -> str:
        """Wait for every part and complete the upload; returns the object's ETag."""
        while self._pending:
            self._collect()
        newest = {part.number: part for part in self._done}  # collected in upload order
        return self._store.complete_upload(self.key, self.upload_id,
                                           [newest[n] for n in sorted(newest)])

    def abort(self) -> None:
        """Wait for running parts (their errors are ignored) and abort the upload."""
        with self._lock:
            pending = list(self._pending)
            self._pending.clear()
        for future in pending:
            future.exception()
        try:
            self._store.abort_upload(self.key, self.upload_id)
        except Exception:  # noqa: BLE001 - already failing; the upload is orphaned at worst
            log.warning("could not abort upload %s of %s", self.upload_id, self.key)

    def _take_number(self) -> int:
        number = self._next
        self._next += 1
        return number

    def _make_room(self) -> None:
        self.check()
        while len(self._pending) >= self._max_inflight:
            self._collect()

    def _collect(self) -> None:
        with self._lock:
            future = self._pending.popleft()
        self._done.append(future.result())
