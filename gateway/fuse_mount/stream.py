"""Sequential reads of one object version through one streaming GET.

The body of a GET from a read's offset to the end of the object stays on its socket, and
each read that continues it takes its bytes from the socket straight into the kernel's
buffer (one copy in the mount, no block buffer in between). The socket buffers are the
read-ahead: the gateway sends (sendfile) while the reader copies; it serves one GET
instead of one per block.

Reads arrive on several libfuse threads, a few at a time and nearly in order (the
kernel's read-ahead). A read that starts where the stream is takes the next bytes; one a
little further on waits briefly for the reads before it; a sequential read (one that
continues the previous read) that no stream serves starts a new stream at its offset
(a read that waited in vain for the reads before it skips their bytes on the stream);
any other read is a ranged GET of exactly its bytes. Every GET is ``If-Match`` the
version's ETag: a version replaced by another client reads as ESTALE.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

from gateway.fuse_mount.light import RangeBody
from gateway.fuse_mount.settings import MiB
from gateway.fuse_mount.store import BucketClient, RemoteObject

#: seconds a read a little ahead of the stream waits for the reads before it; then, on
#: an idle stream, it skips the bytes in between (the kernel may not ask for them: their
#: pages are cached)
TURN_WAIT = 0.05
#: how far ahead of the stream's position a read waits for its turn
AHEAD = 8 * MiB


class StreamChunk:
    """The next ``length`` bytes of a stream, reserved for one read: ``copy_to`` reads
    them from the socket into the kernel's buffer (``bytes()`` into a new object,
    ``release`` leaves them unread). A body that breaks off is read again with a ranged
    GET, whose errors (ESTALE for a replaced version) are raised from ``copy_to``."""

    __slots__ = ("_body", "_meta", "_offset", "_owner", "_skip", "length")

    def __init__(self, owner: StreamReads, body: RangeBody, meta: RemoteObject,
                 offset: int, length: int, skip: int = 0) -> None:
        self._owner: StreamReads | None = owner
        self._body = body
        self._meta = meta
        self._offset = offset
        self._skip = skip  # bytes of the body before ``offset``, dropped
        self.length = length

    def copy_to(self, dest: Any, size: int) -> int:
        """Read the bytes into the C buffer ``dest`` of ``size`` bytes; their count."""
        if self.length > size:
            self.release()
            raise ValueError(f"read returned {self.length} bytes, more than {size}")
        address = ctypes.cast(dest, ctypes.c_void_p).value or 0
        self._fill(memoryview((ctypes.c_ubyte * self.length).from_address(address)).cast("B"))
        return self.length

    def __bytes__(self) -> bytes:
        data = bytearray(self.length)
        self._fill(memoryview(data))
        return bytes(data)

    def release(self) -> None:
        """Leave the bytes unread (the stream stays where it is)."""
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.done(self._body, 0)

    def _fill(self, into: memoryview) -> None:
        owner, self._owner = self._owner, None
        if owner is None:
            raise RuntimeError("a stream chunk is read once")
        read = self._body.skip(self._skip) and self._body.read_into(into)
        owner.done(self._body, self._skip + self.length if read else None)
        if not read:  # the body broke off: these bytes again, on their own
            meta = self._meta
            into[:] = owner.store.get_range(meta.key, self._offset, self._offset + self.length,
                                            if_match=meta.etag)


class StreamReads:
    """One handle's reads of an object version (see the module's docstring); the version
    comes with every read, and a stream of another version is dropped."""

    def __init__(self, store: BucketClient) -> None:
        self.store = store
        self._cond = threading.Condition()  # guards the fields below; no I/O under it
        self._body: RangeBody | None = None  # the stream's body, positioned at _pos
        self._pos = 0
        self._opening = False  # a read is opening a stream at _pos
        self._busy = False  # a read is taking bytes from _body (or opening it)
        self._version: tuple[str, str, int] | None = None
        self._generation = 0  # counts the streams dropped
        self._last_end = 0

    def read(self, meta: RemoteObject, offset: int, size: int) -> bytes | StreamChunk:
        end = min(offset + size, meta.size)
        if offset >= end:
            return b""
        deadline = time.monotonic() + TURN_WAIT
        with self._cond:
            if self._version != (meta.key, meta.etag, meta.size):
                self._drop()
                self._version = (meta.key, meta.etag, meta.size)
            sequential, self._last_end = offset == self._last_end, end
            while True:
                near = ((self._body is not None or self._opening)
                        and self._pos <= offset < self._pos + AHEAD)
                body = self._body if not self._busy else None  # an idle stream
                now = time.monotonic()
                if near and body is not None and (self._pos == offset or now >= deadline):
                    self._busy = True
                    return StreamChunk(self, body, meta, offset, end - offset,
                                       skip=offset - self._pos)
                if not near or now >= deadline:
                    break
                self._cond.wait(deadline - now)
            start = (sequential or near) and not self._busy
            if start:
                self._drop()
                self._pos, self._opening, self._busy = offset, True, True
                generation = self._generation
        if not start:
            return self.store.get_range(meta.key, offset, end, if_match=meta.etag)
        body = None
        try:
            body = self.store.open_range(meta.key, offset, meta.size, if_match=meta.etag)
        finally:
            with self._cond:
                self._opening = False
                if body is None:
                    self._busy = False
                    self._cond.notify_all()
                elif generation == self._generation:
                    self._body = body
                # else dropped meanwhile: this read still takes its bytes, then closes it
        if body is None:  # the answer was not a plain 206: what it means, through boto3
            return self.store.get_range(meta.key, offset, end, if_match=meta.etag)
        return StreamChunk(self, body, meta, offset, end - offset)

    def done(self, body: RangeBody, taken: int | None) -> None:
        """A chunk of ``body`` took ``taken`` bytes from it (None: the body broke off)."""
        with self._cond:
            mine = self._body is body
            if mine and taken is not None:
                self._pos += taken
                if not body.left:  # read to its end: its connection went back to the pool
                    self._body = None
            elif mine:
                self._body = None
            self._busy = False
            self._cond.notify_all()
        if not mine:  # dropped while this chunk read from it
            body.close()

    def close(self) -> None:
        with self._cond:
            self._drop()
            self._version = None

    def _drop(self) -> None:
        """Close the stream (a chunk still reading from it closes it when done)."""
        body, self._body = self._body, None
        self._generation += 1
        if body is not None and not self._busy:
            body.close()
