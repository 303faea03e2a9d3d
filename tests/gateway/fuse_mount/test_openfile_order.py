"""Writes that arrive out of order (the kernel's writeback cache sends several 1 MiB writes
at once, served by different threads) stay streamed: nothing is published before the
commit, no zeros are uploaded in place of data that was still on its way."""

from __future__ import annotations

import os
import random
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from gateway.client.credentials import Credentials
from gateway.fuse_mount.openfile import OpenFile, State, WriteConfig
from gateway.fuse_mount.store import BucketClient
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

MiB = 1024 * 1024
BLOCK = 5 * MiB


def absent(s3, bucket: str, key: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError:
        return True
    return False


@pytest.mark.parametrize("seed", [1, 2])
def test_reordered_writes_stay_streamed_and_nothing_is_published_early(
        squall: SquallProcess, s3, bucket: str, seed: int) -> None:
    key = f"reordered-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(4 * BLOCK + 3 * MiB + 11)
    pieces = [(o, data[o:o + MiB]) for o in range(0, len(data), MiB)]
    rng = random.Random(seed)
    for start in range(0, len(pieces), 6):  # shuffled within windows of six writes
        window = pieces[start:start + 6]
        rng.shuffle(window)
        pieces[start:start + 6] = window
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    with ThreadPoolExecutor(4) as pool:
        f = OpenFile(store, key, config=WriteConfig(BLOCK, max_inflight=2), pool=pool,
                     existing=None, truncate=True)
        for offset, piece in pieces:
            f.write(offset, piece)
            assert f.state is State.STREAMING  # never staged (no download, no early commit)
        assert absent(s3, bucket, key)
        f.release()
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_a_hole_never_filled_is_streamed_as_zeros(squall: SquallProcess, s3,
                                                  bucket: str) -> None:
    """A sparse file (a write far past the end) is not held in memory for ever."""
    key = f"sparse-{uuid.uuid4().hex[:8]}.bin"
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    with ThreadPoolExecutor(4) as pool:
        f = OpenFile(store, key, config=WriteConfig(BLOCK, max_inflight=2, hold_blocks=1),
                     pool=pool, existing=None, truncate=True)
        f.write(0, b"head")
        f.write(6 * BLOCK, b"tail")
        assert f.state is State.STREAMING
        f.release()
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == b"head" + bytes(6 * BLOCK - 4) + b"tail"


def test_a_write_arriving_after_its_block_was_streamed_patches_the_part(
        squall: SquallProcess, s3, bucket: str) -> None:
    """The kernel can send a write tens of MiB late: its block already went up with zeros
    in its place. The block is patched and its part uploaded again; the file is not
    staged (no download, no early commit)."""
    key = f"late-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(5 * BLOCK + 123)
    late = [(BLOCK + 4096, 8192), (3 * BLOCK - 10, 20)]  # the second spans two blocks
    gaps = sorted(late)
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    with ThreadPoolExecutor(4) as pool:
        f = OpenFile(store, key, config=WriteConfig(BLOCK, max_inflight=2, hold_blocks=1,
                                                    patch_blocks=3),
                     pool=pool, existing=None, truncate=True)
        pos = 0
        for start, length in gaps:  # everything but the late ranges, in order
            f.write(pos, data[pos:start])
            pos = start + length
        f.write(pos, data[pos:])
        assert f.state is State.STREAMING
        for start, length in late:  # now behind the streamed part
            f.write(start, data[start:start + length])
            assert f.state is State.STREAMING
        assert absent(s3, bucket, key)
        f.release()
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_a_late_write_beyond_the_kept_blocks_stages_the_file(
        squall: SquallProcess, s3, bucket: str) -> None:
    key = f"late-staged-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(6 * BLOCK)
    hole = (100, 50)  # in block 0, which is no longer kept once later holey blocks went up
    later = [(k * BLOCK + 7, 3) for k in (2, 3)]
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    with ThreadPoolExecutor(4) as pool:
        f = OpenFile(store, key, config=WriteConfig(BLOCK, max_inflight=2, hold_blocks=1,
                                                    patch_blocks=2),
                     pool=pool, existing=None, truncate=True)
        pos = 0
        for start, length in [hole, *later]:
            f.write(pos, data[pos:start])
            pos = start + length
        f.write(pos, data[pos:])
        for start, length in later:
            f.write(start, data[start:start + length])
        assert f.state is State.STREAMING
        f.write(hole[0], data[hole[0]:hole[0] + hole[1]])
        assert f.state is State.STAGED
        f.release()
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_a_patched_block_is_sent_once_when_dropped_or_at_commit_with_its_zeros(
        squall: SquallProcess, s3, bucket: str) -> None:
    """A block whose holes are only partly filled goes up again when newer blocks push it
    out, or at commit; the bytes nobody wrote stay zeros (a sparse file)."""
    key = f"patched-{uuid.uuid4().hex[:8]}.bin"
    data = bytearray(os.urandom(4 * BLOCK))
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    with ThreadPoolExecutor(4) as pool:
        f = OpenFile(store, key, config=WriteConfig(BLOCK, max_inflight=2, hold_blocks=1,
                                                    patch_blocks=1),
                     pool=pool, existing=None, truncate=True)
        f.write(0, data[:1000])
        f.write(1300, data[1300:2 * BLOCK + 5000])  # block 0 streamed with its hole
        f.write(1000, data[1000:1100])  # patched, 200 bytes still a hole
        f.write(2 * BLOCK + 5100, data[2 * BLOCK + 5100:])  # block 2 pushes block 0 out
        f.write(2 * BLOCK + 5000, data[2 * BLOCK + 5000:2 * BLOCK + 5050])  # half of it
        assert f.state is State.STREAMING
        f.release()
    data[1100:1300] = bytes(200)
    data[2 * BLOCK + 5050:2 * BLOCK + 5100] = bytes(50)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == bytes(data)


def test_a_tail_held_behind_a_hole_goes_up_in_parts_of_one_block(
        squall: SquallProcess, s3, bucket: str) -> None:
    """The buffer held back behind a hole can be longer than a block at close: it is sent
    as parts of one block each, so a file's part layout does not depend on the order the
    kernel's writes arrived in."""
    key = f"held-tail-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(3 * BLOCK + 1000)
    hole = (BLOCK + 10, 10)  # block 1 waits for it: the rest of the file is held back
    store = BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))
    with ThreadPoolExecutor(4) as pool:
        f = OpenFile(store, key, config=WriteConfig(BLOCK, max_inflight=2, hold_blocks=2),
                     pool=pool, existing=None, truncate=True)
        f.write(0, data[:hole[0]])
        f.write(sum(hole), data[sum(hole):])
        f.write(hole[0], data[hole[0]:sum(hole)])
        f.release()
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == data and got["ETag"].endswith('-4"')
