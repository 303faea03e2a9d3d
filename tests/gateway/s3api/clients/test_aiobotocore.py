"""aiobotocore (async) against a real gateway: concurrency, streaming, multipart, paging."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.clients.helpers import (
    MiB,
    multipart_etag,
    new_bucket_name,
    payload,
    sha256,
)


async def _get(client: Any, bucket: str, key: str) -> bytes:
    resp = await client.get_object(Bucket=bucket, Key=key)
    async with resp["Body"] as body:
        return await body.read()


async def test_concurrent_small_puts_and_gets(aio_s3: Any, bucket: str) -> None:
    objects = {f"many/{i:03d}": payload(100 + 37 * i, f"aio{i}") for i in range(64)}
    results = await asyncio.gather(*(aio_s3.put_object(Bucket=bucket, Key=k, Body=v)
                                     for k, v in objects.items()))
    for (key, data), res in zip(objects.items(), results, strict=True):
        assert res["ETag"] == f'"{hashlib.md5(data).hexdigest()}"', key

    bodies = await asyncio.gather(*(_get(aio_s3, bucket, k) for k in objects))
    for (key, data), body in zip(objects.items(), bodies, strict=True):
        assert sha256(body) == sha256(data), key

    # Concurrent overwrites of one key: the last acknowledged write is one of them, whole.
    versions = [payload(5000, f"race{i}") for i in range(8)]
    await asyncio.gather(*(aio_s3.put_object(Bucket=bucket, Key="race", Body=v)
                           for v in versions))
    assert sha256(await _get(aio_s3, bucket, "race")) in {sha256(v) for v in versions}


async def test_stream_large_download_in_chunks(aio_s3: Any, bucket: str) -> None:
    data = payload(30 * MiB, "aio-30m")
    await aio_s3.put_object(Bucket=bucket, Key="big", Body=data)

    resp = await aio_s3.get_object(Bucket=bucket, Key="big")
    assert resp["ContentLength"] == len(data)
    digest, total, chunks = hashlib.sha256(), 0, 0
    async with resp["Body"] as body:
        async for chunk in body.iter_chunks(256 * 1024):
            digest.update(chunk)
            total += len(chunk)
            chunks += 1
    assert total == len(data)
    assert chunks > 1
    assert digest.hexdigest() == sha256(data)

    # A ranged read in the middle of the big object, also streamed.
    start, end = 13 * MiB + 11, 17 * MiB - 1
    resp = await aio_s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={start}-{end}")
    assert resp["ContentRange"] == f"bytes {start}-{end}/{len(data)}"
    got = bytearray()
    async with resp["Body"] as body:
        async for chunk in body.iter_chunks(100_000):
            got += chunk
    assert sha256(bytes(got)) == sha256(data[start:end + 1])


async def test_multipart_parts_uploaded_concurrently(aio_s3: Any, bucket: str) -> None:
    parts = [payload(5 * MiB, f"aio-part{i}") for i in range(4)] + [payload(777, "tail")]
    mpu = await aio_s3.create_multipart_upload(Bucket=bucket, Key="mpu")
    upload_id = mpu["UploadId"]

    async def upload(n: int, data: bytes) -> dict[str, Any]:
        res = await aio_s3.upload_part(Bucket=bucket, Key="mpu", UploadId=upload_id,
                                       PartNumber=n, Body=data)
        assert res["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
        return {"PartNumber": n, "ETag": res["ETag"]}

    # Started in reverse order, finished in whatever order the loop gives.
    done = await asyncio.gather(*(upload(n, parts[n - 1]) for n in range(len(parts), 0, -1)))
    listed = await aio_s3.list_parts(Bucket=bucket, Key="mpu", UploadId=upload_id)
    assert [p["PartNumber"] for p in listed["Parts"]] == [1, 2, 3, 4, 5]
    assert [p["Size"] for p in listed["Parts"]] == [len(p) for p in parts]

    res = await aio_s3.complete_multipart_upload(
        Bucket=bucket, Key="mpu", UploadId=upload_id,
        MultipartUpload={"Parts": sorted(done, key=lambda p: p["PartNumber"])})
    assert res["ETag"] == multipart_etag(parts)
    head = await aio_s3.head_object(Bucket=bucket, Key="mpu")
    assert head["ContentLength"] == sum(map(len, parts))
    assert head["ETag"] == multipart_etag(parts)
    assert sha256(await _get(aio_s3, bucket, "mpu")) == sha256(b"".join(parts))

    with pytest.raises(ClientError) as err:
        await aio_s3.list_parts(Bucket=bucket, Key="mpu", UploadId=upload_id)
    assert err.value.response["Error"]["Code"] == "NoSuchUpload"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


async def test_list_objects_v2_paginator(aio_s3: Any, bucket: str) -> None:
    keys = sorted([f"pg/{i:02d}" for i in range(23)] + ["pg/sub/x", "pg/sub/y", "top"])
    await asyncio.gather(*(aio_s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
                           for k in keys))

    paginator = aio_s3.get_paginator("list_objects_v2")
    seen, pages = [], 0
    async for page in paginator.paginate(Bucket=bucket, PaginationConfig={"PageSize": 5}):
        pages += 1
        assert page["KeyCount"] == len(page.get("Contents", [])) <= 5
        seen += [o["Key"] for o in page.get("Contents", [])]
    assert seen == keys
    assert pages == 6

    seen, prefixes = [], []
    async for page in paginator.paginate(Bucket=bucket, Prefix="pg/", Delimiter="/",
                                         PaginationConfig={"PageSize": 7}):
        seen += [o["Key"] for o in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    assert seen == [k for k in keys if k.startswith("pg/") and "/sub/" not in k]
    assert prefixes == ["pg/sub/"]

    bodies = await asyncio.gather(*(_get(aio_s3, bucket, k) for k in keys))
    assert bodies == [k.encode() for k in keys]


async def test_delete_objects(aio_s3: Any, bucket: str) -> None:
    keep = payload(500, "aio-keep")
    await aio_s3.put_object(Bucket=bucket, Key="keep", Body=keep)
    keys = [f"del/{i}" for i in range(30)]
    await asyncio.gather(*(aio_s3.put_object(Bucket=bucket, Key=k, Body=b"x") for k in keys))

    res = await aio_s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys + ["del/absent"]]})
    assert sorted(d["Key"] for d in res["Deleted"]) == sorted(keys + ["del/absent"])
    assert res.get("Errors", []) == []

    listed = await aio_s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in listed["Contents"]] == ["keep"]
    assert sha256(await _get(aio_s3, bucket, "keep")) == sha256(keep)

    res = await aio_s3.delete_objects(Bucket=bucket,
                                      Delete={"Objects": [{"Key": "keep"}], "Quiet": True})
    assert res.get("Deleted", []) == [] and res.get("Errors", []) == []
    assert (await aio_s3.list_objects_v2(Bucket=bucket))["KeyCount"] == 0


async def test_missing_bucket_and_key(aio_s3: Any, bucket: str) -> None:
    data = payload(10, "aio-missing")
    await aio_s3.put_object(Bucket=bucket, Key="k", Body=data)
    with pytest.raises(ClientError) as err:
        await aio_s3.get_object(Bucket=new_bucket_name("missing"), Key="k")
    assert err.value.response["Error"]["Code"] == "NoSuchBucket"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as err:
        await aio_s3.get_object(Bucket=bucket, Key="absent")
    assert err.value.response["Error"]["Code"] == "NoSuchKey"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert await _get(aio_s3, bucket, "k") == data
