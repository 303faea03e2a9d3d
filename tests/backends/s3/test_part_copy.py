"""UploadPartCopy on the S3 backend is an upstream UploadPartCopy: no byte passes through
Squall (checked with the upstream Squall's own request counters)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.core.base import CompletedPart, ObjectMeta, PartCopyingBackend, RangeRequest
from backends.core.errors import InvalidRange, NoSuchKey, NoSuchUpload, PreconditionFailed
from backends.s3 import S3Backend, S3Config
from tests.backends.conformance import blob, body_of, md5_hex, read_all
from tests.backends.s3.conftest import MIN_PART
from tests.backends.s3.test_s3_backend import requests_of
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

PART = 256 * 1024


@pytest.fixture
async def backend(upstream_squall: SquallProcess, tmp_path: Path) -> AsyncIterator[S3Backend]:
    store = S3Backend(S3Config(endpoint=upstream_squall.endpoint, access_key=ACCESS_KEY,
                               secret_key=SECRET_KEY, part_size=PART, min_part_size=MIN_PART),
                      spool_dir=tmp_path / "spool")
    yield store
    await store.aclose()


@pytest.fixture
async def bucket(backend: S3Backend) -> str:
    name = f"s3pc-{uuid.uuid4().hex[:12]}"
    await backend.create_bucket(name)
    return name


async def test_part_copies_are_made_upstream(backend: S3Backend, bucket: str,
                                             upstream_squall: SquallProcess) -> None:
    assert isinstance(backend, PartCopyingBackend)
    data = blob(2 * PART + 7, seed=11)  # above part_size: stored upstream as multipart
    src = await backend.put_object(bucket, "src", body_of(data), meta=ObjectMeta())
    up = await backend.create_multipart_upload(bucket, "dst", meta=ObjectMeta())
    ops = ("UploadPartCopy", "GetObject", "UploadPart", "PutObject")
    counts = {op: requests_of(upstream_squall, op) for op in ops}
    whole = await backend.upload_part_copy(bucket, "src", bucket, "dst", up.upload_id, 1,
                                           src_etag=src.etag)
    suffix = await backend.upload_part_copy(bucket, "src", bucket, "dst", up.upload_id, 2,
                                            byte_range=RangeRequest(suffix=100))
    assert {op: requests_of(upstream_squall, op) for op in ops} == \
        {**counts, "UploadPartCopy": counts["UploadPartCopy"] + 2}
    assert (whole.etag, whole.size) == (md5_hex(data), len(data))
    assert (suffix.etag, suffix.size) == (md5_hex(data[-100:]), 100)
    assert [p.etag for p in await backend.list_parts(bucket, "dst", up.upload_id)] == \
        [whole.etag, suffix.etag]
    await backend.complete_multipart_upload(bucket, "dst", up.upload_id,
                                            [CompletedPart(1, whole.etag),
                                             CompletedPart(2, suffix.etag)])
    assert await read_all(await backend.get_object(bucket, "dst")) == data + data[-100:]


async def test_part_copy_errors(backend: S3Backend, bucket: str) -> None:
    await backend.put_object(bucket, "src", body_of(b"source bytes"), meta=ObjectMeta())
    up = await backend.create_multipart_upload(bucket, "dst", meta=ObjectMeta())
    uid = up.upload_id
    with pytest.raises(PreconditionFailed):
        await backend.upload_part_copy(bucket, "src", bucket, "dst", uid, 1,
                                       src_etag=md5_hex(b"other"))
    with pytest.raises(InvalidRange):
        await backend.upload_part_copy(bucket, "src", bucket, "dst", uid, 1,
                                       byte_range=RangeRequest(first=12))
    with pytest.raises(NoSuchKey):
        await backend.upload_part_copy(bucket, "absent", bucket, "dst", uid, 1)
    with pytest.raises(NoSuchUpload):
        await backend.upload_part_copy(bucket, "src", bucket, "other", uid, 1)
    assert await backend.list_parts(bucket, "dst", uid) == []
