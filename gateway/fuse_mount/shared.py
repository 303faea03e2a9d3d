"""Files written by several mounts at once (N-1 checkpoints across machines), opt-in with
``--shared-files GLOB``: one multipart upload per file, found through a sidecar object,
completed by the last writer to close. docs/fuse-mount.md, "N-1 checkpoints", has the design.

* The sidecar ``.squall-shared/<key>.json`` names the upload, the part size and the writers
  (mount ids: open or closed, and the end of what each wrote). It is only ever replaced by
  a compare-and-swap: ``PutObject`` with ``If-None-Match: *`` (create) or ``If-Match`` its
  ETag, retried on 412.
* Part ``i`` holds bytes ``[i x P, (i + 1) x P)``. A mount that wrote a part whole uploads it
  as part ``i + 1``; a part it wrote only some bytes of goes up as fragment objects
  ``.squall-shared/<key>.parts/<upload>/<i>-<start>-<end>``.
* The writer whose close leaves no writer open completes: it builds the missing parts from
  the fragments (zeros where nobody wrote), completes the upload, and deletes the
  fragments and the sidecar. Until then the object keeps its previous version.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from concurrent.futures import Executor
from fnmatch import fnmatchcase
from typing import Any

from backends.errors import NoSuchKey, PreconditionFailed
from gateway.fuse_mount.errors import UploadFailed
from gateway.fuse_mount.openfile import OpenFile, State, WriteConfig
from gateway.fuse_mount.store import BucketClient, Part

SHARED_PREFIX = ".squall-shared/"
CAS_ATTEMPTS = 100


def sidecar_key(key: str) -> str:
    return f"{SHARED_PREFIX}{key}.json"


def being_written(store: BucketClient, key: str) -> bool:
    """Whether some mount writes the shared file ``key`` now (its sidecar exists): the
    file exists for lookups, though not stored yet."""
    try:
        store.head(sidecar_key(key))
    except NoSuchKey:
        return False
    return True


def fragment_prefix(key: str, upload_id: str) -> str:
    return f"{SHARED_PREFIX}{key}.parts/{upload_id}/"


class Ranges:
    """A set of byte ranges ``[start, end)``, merged."""

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int]] = []

    def add(self, start: int, end: int) -> None:
        merged: list[tuple[int, int]] = []
        for s, e in self._ranges:
            if e < start or s > end:
                merged.append((s, e))
            else:
                start, end = min(s, start), max(e, end)
        merged.append((start, end))
        self._ranges = sorted(merged)

    def within(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of the set inside ``[start, end)``."""
        return [(max(s, start), min(e, end)) for s, e in self._ranges if s < end and e > start]

    @property
    def end(self) -> int:
        return self._ranges[-1][1] if self._ranges else 0


class SharedUpload:
    """This mount's share of the one multipart upload of a shared file."""

    def __init__(self, store: BucketClient, key: str, *, writer: str, part_size: int) -> None:
        self._store = store
        self.key = key
        self._writer = writer
        self._sidecar = sidecar_key(key)
        self.upload_id = ""
        self.part_size = part_size
        self.joined = False

    def join(self) -> None:
        """Become an open writer of the file's upload (creating both if needed)."""
        for _ in range(CAS_ATTEMPTS):
            try:
                body, etag = self._store.get_small(self._sidecar)
            except NoSuchKey:
                upload = self._store.create_upload(self.key, {})
                state = {"upload_id": upload, "part_size": self.part_size,
                         "writers": {self._writer: {"open": True, "end": 0}}}
                try:
                    self._store.put_if(self._sidecar, _dump(state), if_none_match="*")
                except PreconditionFailed:
                    self._store.abort_upload(self.key, upload)
                    continue
                self.upload_id, self.joined = upload, True
                return
            state = json.loads(body)
            state["writers"][self._writer] = {"open": True, "end": 0}
            if self._swap(state, etag):
                self.upload_id, self.part_size = state["upload_id"], int(state["part_size"])
                self.joined = True
                return
        raise UploadFailed(resource=self.key)

    def send(self, fd: int, ranges: Ranges, indexes: set[int]) -> None:
        """Upload what this mount wrote of parts ``indexes`` (read from ``fd``)."""
        size = self.part_size
        for i in sorted(indexes):
            lo, hi = i * size, (i + 1) * size
            pieces = ranges.within(lo, hi)
            if pieces == [(lo, hi)]:
                self._store.upload_part(self.key, self.upload_id, i + 1,
                                        os.pread(fd, size, lo))
                continue
            for start, end in pieces:
                name = f"{fragment_prefix(self.key, self.upload_id)}{i:06d}-{start}-{end}"
                self._store.put(name, os.pread(fd, end - start, start), {})

    def leave(self, end: int) -> bool:
        """This mount closed the file (it wrote up to ``end``); completes the upload when
        no writer is left. Returns True if this call completed it."""
        for _ in range(CAS_ATTEMPTS):
            body, etag = self._store.get_small(self._sidecar)
            state = json.loads(body)
            writers = state["writers"]
            ended = max(end, int(writers.get(self._writer, {}).get("end", 0)))
            writers[self._writer] = {"open": False, "end": ended}
            last = not any(w["open"] for w in writers.values())
            if self._swap(state, etag):
                self.joined = False
                if last:
                    self._complete(max(int(w["end"]) for w in writers.values()))
                return last
        raise UploadFailed(resource=self.key)

    def _complete(self, size: int) -> None:
        part = self.part_size
        count = max(1, -(-size // part))
        uploaded = {p.number: p for p in self._store.list_parts(self.key, self.upload_id)}
        prefix = fragment_prefix(self.key, self.upload_id)
        fragments: dict[int, list[tuple[int, int, str]]] = {}
        for page in self._store.list_dir(prefix, delimiter=""):
            for o in page.objects:
                index, start, end = (int(x) for x in o.key[len(prefix):].split("-"))
                fragments.setdefault(index, []).append((start, end, o.key))
        parts: list[Part] = []
        for i in range(count):
            if i + 1 in uploaded:  # written whole by one mount (then nobody else wrote it)
                parts.append(uploaded[i + 1])
                continue
            lo = i * part
            buf = bytearray(min(size, lo + part) - lo)
            for start, end, name in fragments.get(i, []):
                buf[start - lo:end - lo] = self._store.get_range(name, 0, end - start)
            parts.append(self._store.upload_part(self.key, self.upload_id, i + 1, buf))
        self._store.complete_upload(self.key, self.upload_id, parts)
        for names in fragments.values():
            for _, _, name in names:
                self._store.delete(name)
        self._store.delete(self._sidecar)

    def _swap(self, state: Mapping[str, Any], etag: str) -> bool:
        try:
            self._store.put_if(self._sidecar, _dump(state), if_match=etag)
        except (PreconditionFailed, NoSuchKey):
            time.sleep(0.005)
            return False
        return True


def _dump(state: Mapping[str, Any]) -> bytes:
    return json.dumps(state, sort_keys=True).encode()


class SharedFile(OpenFile):
    """An open file of the mount written together with other mounts: its bytes are those
    written here (zeros elsewhere, until the others' parts join them at completion), kept in
    a staging file; ``commit`` uploads them, and the final one leaves the upload."""

    def __init__(self, store: BucketClient, key: str, *, config: WriteConfig, pool: Executor,
                 writer: str, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(store, key, config=config, pool=pool, existing=None, truncate=True,
                         metadata=metadata)
        self._shared = SharedUpload(store, key, writer=writer, part_size=config.block_size)
        self._ranges = Ranges()
        self._touched: set[int] = set()
        self._staging = self._new_staging()
        self.state = State.STAGED
        self.dirty = False

    def start(self) -> None:
        """Join the file's upload at open: other mounts see the file from now on."""
        with self.lock, self._guard():
            if not self._shared.joined:
                self._shared.join()

    def write(self, offset: int, data: bytes) -> int:
        with self.lock, self._guard():
            if not self._shared.joined:
                self._shared.join()
            assert self._staging is not None
            os.pwrite(self._staging, data, offset)
            end = offset + len(data)
            self.size = max(self.size, end)
            self._ranges.add(offset, end)
            part = self._shared.part_size
            self._touched.update(range(offset // part, (end - 1) // part + 1))
            self.dirty = True
            return len(data)

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
            if self.dirty and not self._shared.joined:
                self._shared.join()
            if self._touched:
                assert self._staging is not None
                self._shared.send(self._staging, self._ranges, self._touched)
                self._touched = set()
            self.dirty = False
            if final and self._shared.joined:
                self._shared.leave(self._ranges.end)

    def release(self) -> None:
        with self.lock:
            try:
                if self.state is not State.FAILED:
                    self.commit(final=True)
            finally:
                self._close_staging()
                self.released = True


def is_shared(key: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``key`` is a shared file (matches one of the ``--shared-files`` globs)."""
    return any(fnmatchcase(key, p) for p in patterns)
