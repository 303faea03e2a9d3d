"""Uploads with the aws CLI's and boto3's default checksums (CRC32, aws-chunked trailers)
through every route a body takes to a backend: throttled (bandwidth, operations), the cache
admitting it or bypassed, each backend, ``--workers 2`` (requests handed to the key's
worker) and a cluster (requests forwarded to the key's owner).

Each upload must succeed, read back byte for byte and keep its checksum: HeadObject with
``ChecksumMode=ENABLED`` answers the CRC32 the client sent (the value of a single PUT; the
composite ``-N`` value of a multipart upload).
"""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig

from tests.conftest import make_client
from tests.gateway.routes import Route, route_fixture  # noqa: F401 (the fixture)
from tests.gateway.s3api.clients.helpers import make_aws, new_bucket_name, payload

MiB = 1024 * 1024
PART = 8 * MiB
LARGE = 2 * PART + 3 * MiB  # three parts, for boto3 and the aws CLI alike (8 MiB chunks)


def crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def composite_crc32(data: bytes, part: int) -> str:
    raw = b"".join(zlib.crc32(data[i:i + part]).to_bytes(4, "big")
                   for i in range(0, len(data), part))
    return f"{crc32(raw)}-{-(-len(data) // part)}"


def _checksum_of(head: dict[str, Any]) -> tuple[str | None, str | None]:
    return head.get("ChecksumCRC32"), head.get("ChecksumType")


@pytest.mark.timeout(300)
def test_default_checksums_survive_every_route(route: Route, tmp_path: Path) -> None:
    s3 = make_client(route.endpoint)
    bucket = new_bucket_name("crc")
    s3.create_bucket(Bucket=bucket)
    small, large = payload(300 * 1024, "small"), payload(LARGE, "large")

    # boto3 PutObject: a CRC32 trailer on an aws-chunked body.
    put_key = route.key(bucket, "put")
    s3.put_object(Bucket=bucket, Key=put_key, Body=small)
    head = s3.head_object(Bucket=bucket, Key=put_key, ChecksumMode="ENABLED")
    assert _checksum_of(head) == (crc32(small), "FULL_OBJECT")

    # boto3's managed upload: a multipart upload whose parts each carry a CRC32.
    source = tmp_path / "large.bin"
    source.write_bytes(large)
    upload_key = route.key(bucket, "upload")
    s3.upload_file(str(source), bucket, upload_key,
                   Config=TransferConfig(multipart_threshold=PART, multipart_chunksize=PART))
    head = s3.head_object(Bucket=bucket, Key=upload_key, ChecksumMode="ENABLED")
    assert head["ContentLength"] == LARGE
    assert head.get("ChecksumCRC32") is not None, head
    got = s3.get_object(Bucket=bucket, Key=upload_key)["Body"].read()
    assert got == large

    # The aws CLI's `s3 cp` (multipart, 8 MiB parts, CRC32 by default) and s3api put-object.
    aws = make_aws(route.endpoint, tmp_path / "aws-home")
    cli_key = route.key(bucket, "cli")
    aws("s3", "cp", str(source), f"s3://{bucket}/{cli_key}", "--no-progress")
    head = json.loads(aws("s3api", "head-object", "--bucket", bucket, "--key", cli_key,
                          "--checksum-mode", "ENABLED").stdout)
    assert (head.get("ChecksumCRC32"), head.get("ChecksumType")) == (
        composite_crc32(large, PART), "COMPOSITE")
    assert aws.binary("s3", "cp", f"s3://{bucket}/{cli_key}", "-") == large
    small_file = tmp_path / "small.bin"
    small_file.write_bytes(small)
    cli_put = route.key(bucket, "cli-put")
    aws("s3api", "put-object", "--bucket", bucket, "--key", cli_put, "--body",
        str(small_file))
    head = json.loads(aws("s3api", "head-object", "--bucket", bucket, "--key", cli_put,
                          "--checksum-mode", "ENABLED").stdout)
    assert head.get("ChecksumCRC32") == crc32(small)
