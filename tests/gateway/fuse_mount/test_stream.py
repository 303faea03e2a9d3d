"""The mount's streamed reads (stream.py) against the real gateway: sequential reads of
any size from one GET, reads that arrive out of order on several threads, a version
replaced by another client, a body that breaks off, and the edges."""

from __future__ import annotations

import ctypes
import errno
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends.core import errors as se
from gateway.client.credentials import Credentials
from gateway.fuse_mount.errors import errno_for
from gateway.fuse_mount.light import RangeBody
from gateway.fuse_mount.store import BucketClient, RemoteObject
from gateway.fuse_mount.stream import AHEAD, StreamChunk, StreamReads
from tests.gateway.fuse_mount.test_light import _truncating_server, light
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


class CountedStore(BucketClient):
    """The real client, counting the GETs it sends for streams and for single ranges."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        super().__init__(endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY),
                         max_attempts=1)
        self.streams_opened: list[int] = []
        self.ranges: list[tuple[int, int]] = []

    def open_range(self, key: str, start: int, end: int, *,
                   if_match: str | None = None) -> RangeBody | None:
        self.streams_opened.append(start)
        return super().open_range(key, start, end, if_match=if_match)

    def get_range(self, key: str, start: int, end: int, *,
                  if_match: str | None = None) -> bytes:
        self.ranges.append((start, end))
        return super().get_range(key, start, end, if_match=if_match)


@pytest.fixture
def store(squall: SquallProcess, bucket: str) -> CountedStore:
    return CountedStore(squall.endpoint, bucket)


def upload(s3, bucket: str, key: str, body: bytes) -> RemoteObject:  # type: ignore[no-untyped-def]
    etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
    return RemoteObject(key, len(body), etag, 0.0)


def copied(data: bytes | StreamChunk, size: int) -> bytes:
    """What the mount hands the kernel: ``copy_to`` into a C buffer of ``size`` bytes."""
    if isinstance(data, bytes):
        return data
    buf = (ctypes.c_byte * size)()
    n = data.copy_to(ctypes.cast(buf, ctypes.POINTER(ctypes.c_byte)), size)
    return bytes(buf)[:n]


@pytest.mark.parametrize("step", [4096, 131_072, 1_000_003])
def test_sequential_reads_come_from_one_get(s3, bucket: str, store: CountedStore,
                                            step: int) -> None:
    body = os.urandom(3 * 1024 * 1024 + 777)
    meta = upload(s3, bucket, "seq.bin", body)
    reads = StreamReads(store)
    out = b"".join(copied(reads.read(meta, offset, step), step)
                   for offset in range(0, len(body), step))
    assert out == body
    assert store.streams_opened == [0]
    assert store.ranges == []
    assert reads.read(meta, len(body), step) == b""


def test_reads_arriving_out_of_order_wait_for_their_turn(
        s3, bucket: str, store: CountedStore) -> None:
    """The kernel's read-ahead sends a few reads at once on several threads: each gets its
    own bytes, all from the one stream."""
    size = 256 * 1024
    body = os.urandom(40 * size)
    meta = upload(s3, bucket, "ooo.bin", body)
    reads = StreamReads(store)
    assert copied(reads.read(meta, 0, size), size) == body[:size]
    out: dict[int, bytes] = {}

    def read(offset: int) -> None:
        out[offset] = copied(reads.read(meta, offset, size), size)

    for group in range(1, 40, 4):
        offsets = [(group + i) * size for i in range(4) if group + i < 40]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(read, reversed(offsets)))
    assert b"".join(out[o] for o in sorted(out)) == body[size:]
    assert store.streams_opened == [0]
    # A thread that starts more than TURN_WAIT late (a loaded machine) reads on its own.
    assert len(store.ranges) <= 2


def test_other_reads_are_ranged_gets_of_their_bytes(s3, bucket: str,
                                                    store: CountedStore) -> None:
    body = os.urandom(4 * AHEAD)
    meta = upload(s3, bucket, "random.bin", body)
    reads = StreamReads(store)
    assert copied(reads.read(meta, 0, 4096), 4096) == body[:4096]
    far = 2 * AHEAD + 5
    assert reads.read(meta, far, 100) == body[far:far + 100]  # far ahead: its own GET
    assert store.ranges == [(far, far + 100)]
    # A read that continues the previous one starts a stream there.
    assert copied(reads.read(meta, far + 100, 4096), 4096) == body[far + 100:far + 4196]
    assert store.streams_opened == [0, far + 100]
    assert reads.read(meta, 10, 20) == body[10:30]  # behind the stream


def test_a_gap_the_kernel_does_not_ask_for_is_skipped_on_the_stream(
        s3, bucket: str, store: CountedStore) -> None:
    """Pages already cached are not asked for: a read a little ahead of an idle stream
    waits for them in vain, then drops the bytes in between instead of sending a new GET;
    a read that arrives for the skipped bytes afterwards is a ranged GET of its own."""
    body = os.urandom(2 * 1024 * 1024)
    meta = upload(s3, bucket, "gap.bin", body)
    reads = StreamReads(store)
    assert copied(reads.read(meta, 0, 4096), 4096) == body[:4096]
    gap = 700_000
    assert copied(reads.read(meta, gap, 4096), 4096) == body[gap:gap + 4096]
    assert copied(reads.read(meta, gap + 4096, 4096), 4096) == body[gap + 4096:gap + 8192]
    assert store.streams_opened == [0]
    assert store.ranges == []
    assert reads.read(meta, 4096, 4096) == body[4096:8192]
    assert store.ranges == [(4096, 8192)]


def test_a_chunk_left_unread_keeps_the_stream_in_place(s3, bucket: str,
                                                       store: CountedStore) -> None:
    body = os.urandom(300_000)
    meta = upload(s3, bucket, "unread.bin", body)
    reads = StreamReads(store)
    assert copied(reads.read(meta, 0, 1000), 1000) == body[:1000]
    chunk = reads.read(meta, 1000, 1000)
    assert isinstance(chunk, StreamChunk)
    chunk.release()
    assert bytes(reads.read(meta, 1000, 5000)) == body[1000:6000]  # type: ignore[arg-type]
    assert store.streams_opened == [0]
    with pytest.raises(RuntimeError):
        bytes(chunk)


def test_a_chunk_larger_than_the_buffer_is_refused(s3, bucket: str,
                                                  store: CountedStore) -> None:
    body = os.urandom(100_000)
    meta = upload(s3, bucket, "big.bin", body)
    reads = StreamReads(store)
    with pytest.raises(ValueError):
        copied(reads.read(meta, 0, 8192), 4096)
    assert copied(reads.read(meta, 0, 8192), 8192) == body[:8192]


def test_a_version_replaced_by_another_client_reads_as_estale(
        s3, bucket: str, store: CountedStore) -> None:
    """The open stream keeps serving the version it was opened on (never a mix); a new
    GET for the old version fails with ESTALE."""
    old = os.urandom(600_000)
    meta = upload(s3, bucket, "swap.bin", old)
    reads = StreamReads(store)
    assert copied(reads.read(meta, 0, 100_000), 100_000) == old[:100_000]
    upload(s3, bucket, "swap.bin", os.urandom(600_000))
    assert copied(reads.read(meta, 100_000, 100_000), 100_000) == old[100_000:200_000]
    with pytest.raises(se.PreconditionFailed) as stale:
        StreamReads(store).read(meta, 0, 4096)
    assert errno_for(stale.value) == errno.ESTALE


def test_a_missing_object_reads_as_enoent(bucket: str, store: CountedStore) -> None:
    with pytest.raises(se.NoSuchKey) as missing:
        StreamReads(store).read(RemoteObject("absent", 10, '"x"', 0.0), 0, 10)
    assert errno_for(missing.value) == errno.ENOENT


def test_reads_of_an_empty_object_and_past_the_end(s3, bucket: str,
                                                   store: CountedStore) -> None:
    meta = upload(s3, bucket, "empty.bin", b"")
    reads = StreamReads(store)
    assert reads.read(meta, 0, 4096) == b""
    body = b"tiny"
    meta = upload(s3, bucket, "tiny.bin", body)
    assert copied(reads.read(meta, 0, 4096), 4096) == body  # a new version: a new stream
    assert reads.read(meta, 4, 4096) == b""
    assert reads.read(meta, 99, 1) == b""


def test_a_body_that_breaks_off_is_read_again_with_ranged_gets(
        squall: SquallProcess, s3, bucket: str) -> None:
    """Fault injected (the real gateway does not cut a body short on demand): the stream
    comes from a loopback server that sends part of the body and closes; the reads past
    the cut are then ranged GETs through boto3 to the gateway, and the next sequential
    read starts a stream again."""
    body = os.urandom(400_000)
    meta = upload(s3, bucket, "cut.bin", body)
    server, url = _truncating_server(body[:150_000], len(body))
    with server:
        store = CountedStore(squall.endpoint, bucket)
        store._light = light(url, bucket)  # the fault injected
        reads = StreamReads(store)
        step = 100_000
        out = b"".join(copied(reads.read(meta, offset, step), step)
                       for offset in range(0, len(body), step))
    assert out == body
    assert store.ranges[0] == (step, 2 * step)
    assert store.streams_opened[:2] == [0, 2 * step]


def test_close_while_a_read_takes_its_bytes(s3, bucket: str, store: CountedStore) -> None:
    """A handle released while one of its reads still copies: that read gets its bytes,
    and the stream's connection is closed after it."""
    body = os.urandom(500_000)
    meta = upload(s3, bucket, "closing.bin", body)
    reads = StreamReads(store)
    chunk = reads.read(meta, 0, 200_000)
    assert isinstance(chunk, StreamChunk)
    reads.close()
    assert bytes(chunk) == body[:200_000]
    assert copied(reads.read(meta, 200_000, 1000), 1000) == body[200_000:201_000]
    assert store.streams_opened == [0, 200_000]

