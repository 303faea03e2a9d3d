"""A file open in the mount (shared by all its handles): the state machine that streams or
stages its bytes.

States (changed only under ``lock``):

* ``PRISTINE``  an existing object opened without O_TRUNC, unchanged so far; its content
  is that object version (``version``), read with ranged GETs.
* ``STREAMING`` bytes ``[0, flushed)`` are already at the gateway (a server-side copy of
  the committed version, ``base``, and/or parts of an open multipart upload); bytes
  ``[flushed, size)`` are in a memory buffer. Writes at or after ``flushed`` stay here:
  while the file grows, each full block becomes a part, uploaded in the background with at
  most ``max_inflight`` parts in flight (a file rewritten in place keeps its buffer).
* ``STAGED``    the whole file is in a local staging file (random writes before
  ``flushed``, reads of streamed data, truncation below ``flushed``, or writes into a
  big existing object); ``commit`` uploads it whole.
* ``FAILED``    an upload failed: every later call raises :class:`UploadFailed` (EIO);
  release aborts the upload and the previous version of the object stays.

``commit`` (fsync, flush on close) makes everything written so far the object at the
gateway; the file stays open and writable afterwards.
"""

from __future__ import annotations

import enum
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from backends.core.errors import StorageError
from gateway.fuse_mount.attrs import Attr, metadata_for, parse_mtime
from gateway.fuse_mount.errors import UploadFailed, describe
from gateway.fuse_mount.store import BucketClient, RemoteObject
from gateway.fuse_mount.upload import PartUploader

log = logging.getLogger(__name__)

#: The bytes of one write: a view of libfuse's buffer is valid only during the call, so
#: whatever keeps them copies them.
Written = bytes | memoryview

WRITE_TIME_NS = 2_000_000_000


class State(enum.Enum):
    PRISTINE = "pristine"
    STREAMING = "streaming"
    STAGED = "staged"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class WriteConfig:
    block_size: int
    max_inflight: int = 4
    staging_dir: Path | None = None
    #: the kernel keeps the mtime of written files and sends it with utimens before every
    #: flush and fsync (its writeback cache): a write arriving here does not change it
    kernel_times: bool = False
    #: blocks the buffer may hold beyond a full one while that one still has a hole: the
    #: kernel sends several writes at once and they arrive here in any order
    hold_blocks: int = 2
    #: blocks streamed with a hole that are kept to be patched by a write arriving later
    patch_blocks: int = 2


@dataclass(slots=True)
class _Patchable:
    """A block streamed while it still had holes (zeros of writes not arrived yet)."""

    number: int  # its part number
    data: bytes | bytearray  # the bytes sent (owned by the upload: copied to patch)
    holes: list[tuple[int, int]]  # absolute offsets
    patched: bool = False  # holds bytes the gateway does not have yet


class OpenFile:
    """One open-for-writing file of the mount (shared by every handle of its path)."""

    def __init__(self, store: BucketClient, key: str, *, config: WriteConfig, pool: Executor,
                 existing: RemoteObject | None, truncate: bool,
                 metadata: Mapping[str, str] | None = None) -> None:
        self.lock = threading.RLock()
        self.key = key
        self._store = store
        self._cfg = config
        self._pool = pool
        keep = existing is not None and not truncate
        #: User metadata stored with the content (mode, uid, gid; the mtime is apart).
        self.metadata: dict[str, str] = dict(existing.metadata) if keep and existing else {}
        self.metadata.update(metadata or {})
        self.metadata.pop("mtime", None)
        # What stat shows: an unmodified object keeps its own time (tar compares them);
        # recorded as ``mtime`` at commit.
        self.mtime_ns = (Attr.of_object(existing).mtime_ns if keep and existing
                         else time.time_ns())
        self._mtime_set = keep  # by utimens (or the object's own), not by the last write
        self._existing = existing
        self._buf = bytearray()
        self._flushed = 0
        # Ranges [start, end) of the buffer not written yet (zeros of a write past the end),
        # in order: a block is not streamed while a write out of order may still fill one.
        self._holes: list[tuple[int, int]] = []
        # Streamed blocks that still have holes, by their offset: a write that arrives after
        # its block was sent patches the block, which is uploaded again (same part number).
        self._patchable: dict[int, _Patchable] = {}
        self._base: tuple[str, int] | None = None  # (etag, length) of the committed object
        self._uploader: PartUploader | None = None
        self._staging: int | None = None
        self._error: BaseException | None = None
        self.unlinked = False
        self.released = False
        #: The object version this file's whole content is, while unmodified here (else
        #: None). One attribute, so that it can be read without the lock.
        self.version: RemoteObject | None = None
        #: ETag of the object this file's content is at the gateway (None: not stored as
        #: it is now, or not known).
        self.etag: str | None = existing.etag if keep and existing is not None else None
        if keep and existing is not None:
            self.state, self.size, self.dirty = State.PRISTINE, existing.size, False
            self.version = existing
        else:
            self.state, self.size, self.dirty = State.STREAMING, 0, True

    # -- the calls of the FUSE operations ------------------------------------------------
    def write(self, offset: int, data: Written) -> int:
        """Write ``data`` at ``offset`` (any offset: appends, holes, rewrites). Waits for
        room among the parts in flight after releasing the lock: the other writes of the
        file (the kernel sends several at once) are not held up behind it."""
        written = self._write(offset, data)
        uploader = self._uploader
        if uploader is not None:
            uploader.wait_for_room()
        return written

    def _write(self, offset: int, data: Written) -> int:
        written = len(data)
        with self.lock, self._guard():
            if self.state is State.PRISTINE:
                self._leave_pristine(append=offset == self.size)
            if (self.state is State.STREAMING and offset < self._flushed
                    and self._patch(offset, data)):  # late bytes of streamed blocks
                skip = min(len(data), self._flushed - offset)
                offset, data = offset + skip, data[skip:]
            if data:
                self._store_bytes(offset, data)
            self.dirty = True
            if not self._cfg.kernel_times:
                self.mtime_ns, self._mtime_set = time.time_ns(), False
            return written

    def _store_bytes(self, offset: int, data: Written) -> None:
        if self.state is State.STREAMING and offset < self._flushed:
            log.info("%s: a write at %d, before the %d bytes already streamed, moves "
                     "the file to its staging file", self.key, offset, self._flushed)
            self._stage()
        if self.state is State.STREAMING:
            if offset > self.size:
                self._append_zeros(offset - self.size)
            rel = offset - self._flushed
            if rel == len(self._buf):
                self._buf += data
            elif rel + len(data) <= len(self._buf):  # one copy (a slice assignment makes two)
                with memoryview(self._buf) as view:
                    view[rel:rel + len(data)] = data
            else:
                self._buf[rel:rel + len(data)] = data
            if self._holes:
                self._fill(offset, offset + len(data))
            if offset + len(data) > self.size:  # the file grows: stream full blocks
                self.size = offset + len(data)
                self._drain()
        else:
            assert self._staging is not None
            os.pwrite(self._staging, data, offset)
            self.size = max(self.size, offset + len(data))

    @property
    def failed(self) -> bool:
        """Whether storing the file failed (reported once, when it did)."""
        return self.state is State.FAILED

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` of the content as written here so far."""
        with self.lock:
            if self.state is State.FAILED:
                raise UploadFailed(resource=self.key) from self._error
            end = min(self.size, offset + size)
            if offset >= end:
                return b""
            if self.state is State.PRISTINE and self._existing is not None:
                return self._store.get_range(self.key, offset, end,
                                             if_match=self._existing.etag)
            if self.state is State.STREAMING:
                flushed = self._flushed
                head = b""
                if offset < flushed:  # only the committed prefix can be read back remotely
                    if self._base is None or min(end, flushed) > self._base[1]:
                        return self._read_staged(offset, end)
                    head = self._store.get_range(self.key, offset, min(end, flushed),
                                                 if_match=self._base[0])
                    if end <= flushed:
                        return head
                with memoryview(self._buf) as view:
                    return head + bytes(view[max(offset, flushed) - flushed:end - flushed])
            return self._read_staged(offset, end)

    def truncate(self, length: int) -> None:
        with self.lock, self._guard():
            if self.state is State.PRISTINE and self._existing is not None:
                if length == 0:
                    self._reset()
                elif self._existing.size <= self._cfg.block_size:
                    self._leave_pristine(append=False)
                else:
                    self._staging = self._download(min(length, self.size), self._existing.etag)
                    self.state = State.STAGED
            if self.state is State.STREAMING:
                if length == 0:
                    self._reset()
                elif length < self._flushed:
                    self._stage()
                elif length <= self.size:
                    del self._buf[length - self._flushed:]
                    self._holes = [(s, min(e, length)) for s, e in self._holes if s < length]
                else:
                    self._append_zeros(length - self.size)
            if self.state is State.STAGED:
                assert self._staging is not None
                os.ftruncate(self._staging, length)
            self.version = None
            self.size = length
            self.dirty = True
            self.mtime_ns, self._mtime_set = time.time_ns(), False

    def set_metadata(self, **values: str) -> None:
        """Record attributes (mode, uid, gid, mtime) stored with the next commit."""
        with self.lock:
            mtime = parse_mtime(values.pop("mtime", None))
            if mtime is not None:
                self.mtime_ns, self._mtime_set = mtime, True
            self.metadata.update(values)
            self.dirty = True

    def commit(self, *, final: bool = True) -> None:
        """Make everything written so far the object at the gateway (fsync, close).
        ``final`` is False for fsync (a shared file, ``shared.py``, then stays open)."""
        with self.lock, self._guard():
            if self.unlinked or self.released or not self.dirty:
                return
            etag: str | None = None
            if self.state is State.PRISTINE and self._existing is not None:
                etag = self._store.copy(self.key, self.key,
                                        metadata=self._stored_metadata(final=True))
                self._existing = replace(self._existing, etag=etag)
                self.version = self._existing
            elif self.state is State.STREAMING:
                etag = self._commit_streaming()
            elif self.state is State.STAGED:
                etag = self._upload_staged()
            self.etag = etag or None
            self.dirty = False

    def release(self) -> None:
        """Last handle closed (or unmount): commit if needed, then free everything."""
        with self.lock:
            try:
                if self.state is not State.FAILED:
                    self.commit()
            finally:
                if self._uploader is not None:
                    self._uploader.abort()
                    self._uploader = None
                self._close_staging()
                self.released = True

    def rebind(self, key: str, etag: str) -> None:
        """The committed object was renamed to ``key`` (its copy has ``etag``)."""
        with self.lock:
            self.key = key
            self.etag = etag or None
            if self._base is not None:
                self._base = (etag, self._base[1])
            if self._existing is not None:
                self._existing = replace(self._existing, key=key, etag=etag)
                if self.version is not None:
                    self.version = self._existing

    def detach(self) -> None:
        """The name goes away (unlink, or replaced by a rename) while handles are open:
        the content becomes local (so that they keep working when the object is deleted
        or overwritten) and is never stored again."""
        with self.lock:
            if self.state is State.FAILED or self.released:
                self.unlinked = True
                return
            with self._guard():
                if self.state is State.PRISTINE:
                    self._leave_pristine(append=False)
                elif self.state is State.STREAMING and self._flushed:
                    self._stage()
                if self._uploader is not None:
                    self._uploader.abort()
                    self._uploader = None
            self.unlinked = True

    # -- internals -----------------------------------------------------------------------
    @contextmanager
    def _guard(self) -> Iterator[None]:
        if self.state is State.FAILED:
            raise UploadFailed(resource=self.key) from self._error
        try:
            yield
        except (StorageError, OSError) as exc:
            log.error("writing %s failed; the file's data is not stored: %s", self.key,
                      describe(exc))
            log.debug("the failure of %s", self.key, exc_info=exc)
            self.state = State.FAILED
            self._error = exc
            if self._uploader is not None:
                self._uploader.abort()
                self._uploader = None
            raise

    def _read_staged(self, offset: int, end: int) -> bytes:
        """Bytes ``[offset, end)`` from the staging file (staging the file first)."""
        with self._guard():
            if self.state is State.STREAMING:
                self._stage()
            assert self._staging is not None
            return os.pread(self._staging, end - offset, offset)

    def _leave_pristine(self, *, append: bool) -> None:
        meta = self._existing
        assert meta is not None
        self.version = None
        if meta.size <= self._cfg.block_size:
            self._buf = bytearray(self._store.get_range(self.key, 0, meta.size,
                                                        if_match=meta.etag))
            self.state = State.STREAMING
        elif append:
            self._base = (meta.etag, meta.size)
            self._flushed = meta.size
            self.state = State.STREAMING
        else:
            self._staging = self._download(meta.size, meta.etag)
            self.state = State.STAGED

    def _reset(self) -> None:
        if self._uploader is not None:
            self._uploader.abort()
            self._uploader = None
        self._close_staging()
        self._buf = bytearray()
        self._holes = []
        self._patchable = {}
        self._flushed = 0
        self._base = None
        self.state = State.STREAMING

    def _append_zeros(self, count: int) -> None:
        while count > 0:
            chunk = min(count, self._cfg.block_size)
            self._buf.extend(bytes(chunk))
            if self._holes and self._holes[-1][1] == self.size:
                self._holes[-1] = (self._holes[-1][0], self.size + chunk)
            else:
                self._holes.append((self.size, self.size + chunk))
            self.size += chunk
            count -= chunk
            self._drain()

    def _patch(self, offset: int, data: Written) -> bool:
        """Write the part of ``data`` before ``flushed`` into kept streamed blocks and upload
        them again; False (nothing done) unless those blocks hold every such byte."""
        uploader = self._uploader
        if uploader is None or not self._patchable:
            return False
        end = min(offset + len(data), self._flushed)
        block = self._cfg.block_size
        found: list[tuple[int, _Patchable]] = []
        pos = offset
        while pos < end:
            start = next((s for s in self._patchable if s <= pos < s + block), None)
            if start is None:
                return False
            found.append((start, self._patchable[start]))
            pos = start + block
        for start, kept in found:
            lo, hi = max(offset, start), min(end, start + len(kept.data))
            if not kept.patched:  # the bytes sent may still be read by their upload
                kept.data, kept.patched = bytearray(kept.data), True
            assert isinstance(kept.data, bytearray)
            kept.data[lo - start:hi - start] = data[lo - offset:hi - offset]
            kept.holes = _without(kept.holes, lo, hi)
            if not kept.holes:  # complete: sent again now, once
                del self._patchable[start]
                self._send_patch(uploader, kept)
        return True

    @staticmethod
    def _send_patch(uploader: PartUploader, kept: _Patchable) -> None:
        """Upload a patched block again under its part number (once per block: when its
        holes are all filled, when it is dropped, or at commit)."""
        if kept.patched:
            uploader.replace(kept.number, kept.data)
            kept.patched = False

    def _fill(self, start: int, end: int) -> None:
        """Bytes ``[start, end)`` were written: they are no hole any more."""
        self._holes = _without(self._holes, start, end)

    def _drain(self) -> None:
        block = self._cfg.block_size
        hold = block * (1 + self._cfg.hold_blocks)
        while len(self._buf) >= block:
            if (self._holes and self._holes[0][0] < self._flushed + block
                    and len(self._buf) < hold):
                break  # a write still on its way may fill the hole: wait for it
            if self._uploader is None:
                self._uploader = self._new_uploader()
            if len(self._buf) == block:  # hand the buffer over, no copy
                part, self._buf = self._buf, bytearray()
            else:
                part = self._buf[:block]
                del self._buf[:block]
            start, self._flushed = self._flushed, self._flushed + block
            holes = [(s, min(e, self._flushed)) for s, e in self._holes if s < self._flushed]
            self._holes = [(max(s, self._flushed), e) for s, e in self._holes
                           if e > self._flushed]
            number = self._uploader.add(part, wait=False)
            if holes:
                self._keep_for_patches(start, _Patchable(number, part, holes))
        if self._uploader is not None:
            self._uploader.check()

    def _keep_for_patches(self, start: int, kept: _Patchable) -> None:
        """Keep a block streamed with holes (at most ``patch_blocks``: the oldest goes; a
        write into it later stages the file)."""
        self._patchable[start] = kept
        while len(self._patchable) > self._cfg.patch_blocks:
            dropped = self._patchable.pop(min(self._patchable))
            if self._uploader is not None:
                self._send_patch(self._uploader, dropped)

    def _stored_metadata(self, *, final: bool) -> dict[str, str]:
        """The user metadata to store with the content: the attributes, and the mtime when
        it is known now (``final``: at commit; or set by utimens). A multipart upload
        started before the last write leaves the mtime out: the object's LastModified
        (its completion) is then its time."""
        values = dict(self.metadata)
        if final or self._mtime_set:
            values.update(metadata_for(mtime_ns=self.mtime_ns))
        return values

    def _write_time(self) -> bool:
        """The mtime is the time of the last write, not one a program chose: with the
        kernel's writeback cache the kernel sends its write times with utimens, so a time
        within ``WRITE_TIME_NS`` of now counts as one (stored with the content only; a
        streamed upload then keeps LastModified, its completion, instead)."""
        if not self._mtime_set:
            return True
        return self._cfg.kernel_times and abs(time.time_ns() - self.mtime_ns) < WRITE_TIME_NS

    def _new_uploader(self, *, final: bool = False) -> PartUploader:
        uploader = PartUploader(self._store, self.key, self._stored_metadata(final=final),
                                self._pool, max_inflight=self._cfg.max_inflight)
        if self._base is not None:
            uploader.add_copy(self.key, 0, self._base[1], if_match=self._base[0])
        return uploader

    def _commit_streaming(self) -> str:
        if self._uploader is None and self._base is None:
            return self._store.put(self.key, self._buf, self._stored_metadata(final=True))
        if self._uploader is None:
            self._uploader = self._new_uploader(final=True)
        for kept in self._patchable.values():  # patched blocks with holes left (zeros)
            self._send_patch(self._uploader, kept)
        self._add_tail(self._uploader)
        etag = self._uploader.complete()
        sent, self._uploader = self._uploader.metadata, None
        self._patchable = {}  # its parts are the object now
        wanted = self._stored_metadata(final=False)
        if self._write_time():  # the close time: only worth storing with the content
            wanted.pop("mtime", None)
        if "mtime" not in wanted:
            sent = {k: v for k, v in sent.items() if k != "mtime"}
        if sent != wanted:  # attributes set while uploading
            etag = self._store.copy(self.key, self.key,
                                    metadata=self._stored_metadata(final=True))
        # The buffered tail stays in memory; [0, flushed) is now a prefix of the object.
        self._base = (etag, self._flushed) if self._flushed else None
        return etag

    def _add_tail(self, uploader: PartUploader) -> None:
        """Queue the buffered tail as the last parts, each at most one block (a tail held
        back behind a hole can be longer). complete() returns once they are sent, so a
        tail of one block is not copied."""
        block = self._cfg.block_size
        if len(self._buf) <= block:
            if self._buf:
                uploader.add(self._buf)
            return
        for start in range(0, len(self._buf), block):
            uploader.add(self._buf[start:start + block])

    def _stage(self) -> None:
        """STREAMING -> STAGED: the whole content moves to a local staging file."""
        if self._flushed == 0:
            fd = self._new_staging()
        else:
            etag = self._commit_streaming()
            fd = self._download(self._flushed, etag)
        os.pwrite(fd, self._buf, self._flushed)
        self._buf = bytearray()
        self._holes = []
        self._base = None
        self._staging = fd
        self.state = State.STAGED

    def _new_staging(self) -> int:
        return _anonymous_file(self._cfg.staging_dir)

    def _download(self, length: int, etag: str) -> int:
        fd = self._new_staging()
        try:
            for start in range(0, length, self._cfg.block_size):
                end = min(length, start + self._cfg.block_size)
                os.pwrite(fd, self._store.get_range(self.key, start, end, if_match=etag), start)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _upload_staged(self) -> str:
        assert self._staging is not None
        size, block = self.size, self._cfg.block_size
        if size <= block:
            return self._store.put(self.key, os.pread(self._staging, size, 0),
                                   self._stored_metadata(final=True))
        self._uploader = self._new_uploader(final=True)
        for start in range(0, size, block):
            self._uploader.add(os.pread(self._staging, min(block, size - start), start))
        etag = self._uploader.complete()
        self._uploader = None
        return etag

    def _close_staging(self) -> None:
        if self._staging is not None:
            os.close(self._staging)
            self._staging = None


def _without(holes: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """``holes`` (sorted ranges) less the written bytes ``[start, end)``."""
    left: list[tuple[int, int]] = []
    for s, e in holes:
        if e <= start or s >= end:
            left.append((s, e))
            continue
        if s < start:
            left.append((s, start))
        if e > end:
            left.append((end, e))
    return left


def _anonymous_file(directory: Path | None) -> int:
    """A read-write file descriptor of an unnamed temporary file (gone when closed)."""
    fd, name = tempfile.mkstemp(prefix="squall-mount-", dir=directory)
    os.unlink(name)
    return fd
