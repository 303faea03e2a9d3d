"""Files written by several mounts at once (N-1 checkpoints across machines), opt-in with
``--shared-files GLOB``: one multipart upload per file, found through a sidecar object,
completed by the last writer to close (``shared_upload.py``). docs/fuse-mount.md, "N-1
checkpoints", has the design.

* Part ``i`` holds bytes ``[i x P, (i + 1) x P)``. A mount that wrote a part whole uploads it
  as part ``i + 1``, in the background as soon as it is whole; a part it wrote only some
  bytes of goes up at ``fsync`` or close as fragment objects
  ``.squall-shared/<key>.parts/<upload>/<i>-<start>-<end>``.
* The writer whose close leaves no live writer open completes: it builds the missing parts
  from the fragments (zeros where nobody wrote), completes the upload, and deletes the
  fragments and the sidecar. Until then the object keeps its previous version.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import Executor, Future, wait

from backends.core.errors import NoSuchKey
from gateway.fuse_mount.errors import UploadFailed
from gateway.fuse_mount.openfile import OpenFile, State, WriteConfig, Written
from gateway.fuse_mount.shared_upload import (
    DEFAULT_LEASE,
    LeaseRenewer,
    Ranges,
    SharedUpload,
    sidecar_key,
)
from gateway.fuse_mount.store import BucketClient


def being_written(store: BucketClient, key: str) -> bool:
    """Whether some mount writes the shared file ``key`` now (its sidecar exists): the
    file exists for lookups, though not stored yet."""
    try:
        store.head(sidecar_key(key))
    except NoSuchKey:
        return False
    return True


class SharedFile(OpenFile):
    """An open file of the mount written together with other mounts: its bytes are those
    written here (zeros elsewhere, until the others' parts join them at completion), kept in
    a staging file. A part written whole goes up at once in the background (at most one
    upload of a part at a time: a part written again meanwhile waits for ``commit``);
    ``commit`` waits for those, uploads the rest, and the final one leaves the upload."""

    def __init__(self, store: BucketClient, key: str, *, config: WriteConfig, pool: Executor,
                 writer: str, renewer: LeaseRenewer, lease: float = DEFAULT_LEASE,
                 metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(store, key, config=config, pool=pool, existing=None, truncate=True,
                         metadata=metadata)
        self._shared = SharedUpload(store, key, writer=writer, part_size=config.block_size,
                                    lease=lease)
        self._renewer = renewer
        self._ranges = Ranges()
        self._touched: set[int] = set()
        self._sending: dict[int, Future[None]] = {}  # part index -> its upload
        self._staging = self._new_staging()
        self.state = State.STAGED
        self.dirty = False

    def start(self) -> None:
        """Join the file's upload at open: other mounts see the file from now on."""
        with self.lock, self._guard():
            self._join()

    def _join(self) -> None:
        if self._shared.lost:
            raise UploadFailed(resource=self.key)
        if not self._shared.joined:
            self._shared.join()
            self._renewer.add(self._shared)

    def write(self, offset: int, data: Written) -> int:
        with self.lock, self._guard():
            self._join()
            assert self._staging is not None
            os.pwrite(self._staging, data, offset)
            end = offset + len(data)
            self.size = max(self.size, end)
            self._ranges.add(offset, end)
            part = self._shared.part_size
            touched = range(offset // part, (end - 1) // part + 1)
            self._touched.update(touched)
            self.dirty = True
            for i in touched:
                self._send_if_whole(i)
            return len(data)

    def _send_if_whole(self, index: int) -> None:
        """Upload part ``index`` in the background if it is written whole here and no
        upload of it runs."""
        size = self._shared.part_size
        lo, hi = index * size, (index + 1) * size
        running = self._sending.get(index)
        if running is not None and not running.done():
            return
        if self._ranges.within(lo, hi) != [(lo, hi)]:
            return
        if running is not None:
            running.result()  # a failed upload fails the file (_guard)
        assert self._staging is not None
        self._touched.discard(index)
        self._sending[index] = self._pool.submit(self._shared.send_part, self._staging, index)

    def _settle_sending(self, *, check: bool) -> None:
        """Wait for the background uploads; with ``check``, raise the first error."""
        sending, self._sending = list(self._sending.values()), {}
        wait(sending)
        if check:
            for future in sending:
                future.result()

    def truncate(self, length: int) -> None:
        with self.lock:
            if length != self.size:
                super().truncate(length)

    def commit(self, *, final: bool = True) -> None:
        """Upload the parts written here since the last commit; ``final`` (the last close
        here) also leaves the upload, completing it if no other mount still writes."""
        with self.lock, self._guard():
            if self.unlinked or self.released:
                return
            if self.dirty:
                self._join()
            self._settle_sending(check=True)
            if self._touched:
                assert self._staging is not None
                self._shared.send(self._staging, self._ranges, self._touched)
                self._touched = set()
            self.dirty = False
            if final and self._shared.joined:
                self._renewer.remove(self._shared)
                if not self._shared.leave(self._ranges.end):
                    self._renewer.watch(self._shared)  # completed or aborted by others

    def release(self) -> None:
        with self.lock:
            try:
                if self.state is not State.FAILED:
                    self.commit(final=True)
            finally:
                self._renewer.remove(self._shared)
                self._settle_sending(check=False)  # none may read the staging file closed
                self._close_staging()
                self.released = True
