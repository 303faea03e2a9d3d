"""The mount's read stream (reader.py) against the real gateway: sequential reads from
reused block buffers, reads spanning blocks, chunks kept intact while the stream moves on,
a version replaced by another client, and the edges (past EOF, an empty object)."""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends.core import errors as se
from gateway.client.credentials import Credentials
from gateway.fuse_mount.errors import errno_for
from gateway.fuse_mount.reader import Chunk, ReadAhead
from gateway.fuse_mount.store import BucketClient, RemoteObject
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

BLOCK = 64 * 1024
WINDOW = 2


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as executor:
        yield executor


@pytest.fixture
def store(squall: SquallProcess, bucket: str) -> BucketClient:
    return BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY),
                        max_attempts=1)


def upload(s3, bucket: str, key: str, body: bytes) -> RemoteObject:  # type: ignore[no-untyped-def]
    etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
    return RemoteObject(key, len(body), etag, 0.0)


def as_bytes(data: bytes | Chunk) -> bytes:
    return bytes(data)


def copied(data: bytes | Chunk, size: int) -> bytes:
    """What the mount hands the kernel: ``copy_to`` into a C buffer of ``size`` bytes."""
    assert isinstance(data, Chunk)
    buf = (ctypes.c_byte * size)()
    n = data.copy_to(ctypes.cast(buf, ctypes.POINTER(ctypes.c_byte)), size)
    return bytes(buf)[:n]


@pytest.mark.parametrize("step", [4096, 50_000, BLOCK - 1000])
def test_sequential_reads_are_the_object_from_reused_buffers(
        s3, bucket: str, store: BucketClient, pool: ThreadPoolExecutor, step: int) -> None:
    """Reads of any size, some spanning two blocks, give the object's bytes; at most
    window + 2 block buffers are ever allocated for the whole object."""
    body = os.urandom(20 * BLOCK + 999)
    meta = upload(s3, bucket, "seq.bin", body)
    stream = ReadAhead(store, block_size=BLOCK, window=WINDOW, pool=pool)
    buffers: dict[int, bytearray] = {}  # kept: no id is reused by a new buffer
    out = bytearray()
    for offset in range(0, len(body), step):
        chunk = stream.read(meta, offset, step)
        size = min(step, len(body) - offset)
        out += copied(chunk, step) if offset % 2 else as_bytes(chunk)
        assert len(out) == offset + size
        buffers.update((id(b.buffer), b.buffer) for b in stream._blocks.values())
        assert len(stream._blocks) + len(stream._free) <= WINDOW + 2
    assert out == body
    assert len(buffers) <= WINDOW + 2
    assert stream.read(meta, len(body), step) == b""  # at EOF
    stream.close()


def test_a_chunk_keeps_its_bytes_while_the_stream_moves_on(
        s3, bucket: str, store: BucketClient, pool: ThreadPoolExecutor) -> None:
    """A read not copied yet keeps its blocks from reuse, even once the stream has dropped
    them; once copied, their buffers serve later blocks."""
    body = os.urandom(12 * BLOCK)
    meta = upload(s3, bucket, "held.bin", body)
    stream = ReadAhead(store, block_size=BLOCK, window=WINDOW, pool=pool)
    assert as_bytes(stream.read(meta, 0, BLOCK - 100)) == body[:BLOCK - 100]
    held = stream.read(meta, BLOCK - 100, 200)  # spans blocks 0 and 1
    for offset in range(BLOCK + 100, len(body), BLOCK):
        assert as_bytes(stream.read(meta, offset, BLOCK)) == body[offset:offset + BLOCK]
    assert copied(held, 200) == body[BLOCK - 100:BLOCK + 100]
    assert stream.read(meta, 0, 10) == body[:10]  # not sequential: one ranged GET, bytes
    stream.close()


def test_a_chunk_larger_than_the_buffer_is_refused(
        s3, bucket: str, store: BucketClient, pool: ThreadPoolExecutor) -> None:
    meta = upload(s3, bucket, "big.bin", os.urandom(BLOCK))
    stream = ReadAhead(store, block_size=BLOCK, window=WINDOW, pool=pool)
    chunk = stream.read(meta, 0, 1000)
    with pytest.raises(ValueError, match="more than 10"):
        copied(chunk, 10)
    assert stream._blocks[0].readers == 0  # released all the same
    stream.close()


def test_a_version_replaced_by_another_client_reads_as_estale(
        s3, bucket: str, store: BucketClient, pool: ThreadPoolExecutor) -> None:
    """Blocks fetched before the replacement still serve the pinned version; a read needing
    any other block fails with PreconditionFailed (ESTALE), never another version's bytes."""
    body = os.urandom(10 * BLOCK)
    meta = upload(s3, bucket, "replaced.bin", body)
    stream = ReadAhead(store, block_size=BLOCK, window=WINDOW, pool=pool)
    assert as_bytes(stream.read(meta, 0, 4096)) == body[:4096]
    for block in list(stream._blocks.values()):  # the window is fetched: wait for it
        assert block.future is not None
        block.future.result()
    s3.put_object(Bucket=bucket, Key="replaced.bin", Body=os.urandom(len(body)))
    fetched = (WINDOW + 1) * BLOCK
    assert as_bytes(stream.read(meta, 4096, fetched - 4096)) == body[4096:fetched]
    with pytest.raises(se.PreconditionFailed) as caught:
        stream.read(meta, fetched, 4096)
    assert errno_for(caught.value) == errno.ESTALE
    with pytest.raises(se.PreconditionFailed):  # a random read too
        stream.read(meta, 7 * BLOCK + 5, 10)
    stream.close()


def test_reads_past_the_end_and_of_an_empty_object(
        s3, bucket: str, store: BucketClient, pool: ThreadPoolExecutor) -> None:
    body = os.urandom(BLOCK + 10)
    meta = upload(s3, bucket, "short.bin", body)
    empty = upload(s3, bucket, "empty.bin", b"")
    stream = ReadAhead(store, block_size=BLOCK, window=WINDOW, pool=pool)
    assert stream.read(empty, 0, 4096) == b""
    assert stream.read(meta, len(body) + 5, 4096) == b""
    assert as_bytes(stream.read(meta, BLOCK, 4096)) == body[BLOCK:]  # the short last block
    assert as_bytes(stream.read(meta, 0, 4096)) == body[:4096]
    stream.close()
    assert not stream._blocks and not stream._free


def test_a_missing_object_reads_as_enoent(bucket: str, store: BucketClient,
                                          pool: ThreadPoolExecutor) -> None:
    stream = ReadAhead(store, block_size=BLOCK, window=WINDOW, pool=pool)
    gone = RemoteObject("gone.bin", 3 * BLOCK, '"0123456789abcdef0123456789abcdef"', 0.0)
    with pytest.raises(se.NoSuchKey) as caught:
        stream.read(gone, 0, 4096)
    assert errno_for(caught.value) == errno.ENOENT
    assert 0 not in stream._blocks  # a failed block is not kept
    stream.close()


def test_concurrent_reads_of_one_stream_get_their_own_bytes(
        s3, bucket: str, store: BucketClient, pool: ThreadPoolExecutor) -> None:
    """Four threads reading one stream at once, as the kernel's read-ahead requests do
    (each in order, all interleaved): every read gets its bytes while buffers are dropped
    and reused under them."""
    body = os.urandom(24 * BLOCK + 77)
    meta = upload(s3, bucket, "shared.bin", body)
    stream = ReadAhead(store, block_size=BLOCK, window=WINDOW, pool=pool)
    step = 16 * 1024

    def reader(first: int) -> int:
        checked = 0
        for offset in range(first * step, len(body), 4 * step):
            data = stream.read(meta, offset, step)  # bytes when it looked random
            got = copied(data, step) if isinstance(data, Chunk) else data
            assert got == body[offset:offset + step]
            checked += 1
        return checked

    with ThreadPoolExecutor(4) as readers:
        counts = list(readers.map(reader, range(4)))
    assert sum(counts) == -(-len(body) // step)
    stream.close()
