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

from gateway.fuse_mount.openfile import OpenFile, State, WriteConfig
from gateway.fuse_mount.store import BucketClient, GatewayCredentials
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
    store = BucketClient(squall.endpoint, bucket, GatewayCredentials(ACCESS_KEY, SECRET_KEY))
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
    store = BucketClient(squall.endpoint, bucket, GatewayCredentials(ACCESS_KEY, SECRET_KEY))
    with ThreadPoolExecutor(4) as pool:
        f = OpenFile(store, key, config=WriteConfig(BLOCK, max_inflight=2, hold_blocks=1),
                     pool=pool, existing=None, truncate=True)
        f.write(0, b"head")
        f.write(6 * BLOCK, b"tail")
        assert f.state is State.STREAMING
        f.release()
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == b"head" + bytes(6 * BLOCK - 4) + b"tail"
