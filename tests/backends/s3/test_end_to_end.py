"""A Squall gateway on ``--backend s3:`` in front of another Squall, driven with boto3.

What is written through the front gateway is read straight from the upstream.
The front runs without its cache tier (``--cache-size 0``) so every write reaches the
upstream before it is acknowledged, and the test needs no waiting.
"""

from __future__ import annotations

import base64
import hashlib
import io
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig

from backends.registry import FACTORIES
from backends.s3.naming import INTERNAL_UPSTREAM
from tests.backends.conformance import blob
from tests.backends.s3.conftest import boto3_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

pytestmark = pytest.mark.skipif(
    "s3" not in FACTORIES, reason='backends.registry.FACTORIES has no "s3" entry yet')


@pytest.fixture(scope="module")
def front(upstream_squall: SquallProcess, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[SquallProcess]:
    data_dir: Path = tmp_path_factory.mktemp("s3-front") / "data"
    server = SquallProcess(
        data_dir, ["--backend", f"s3:{upstream_squall.endpoint}?region=us-east-1",
                   "--cache-size", "0", "--min-part-size", str(5 << 20)],
        env={"SQUALL_UPSTREAM_ACCESS_KEY": ACCESS_KEY,
             "SQUALL_UPSTREAM_SECRET_KEY": SECRET_KEY}).start()
    yield server
    assert server.stop() == 0, server.log()


def test_writes_through_the_front_are_in_the_upstream(front: SquallProcess,
                                                      squall_s3: Any) -> None:
    s3 = boto3_client(front.endpoint)
    bucket = f"e2e-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    assert squall_s3.head_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200

    small = b"hello through two gateways"
    s3.put_object(Bucket=bucket, Key="dir/small.txt", Body=small, ContentType="text/plain",
                  Metadata={"origin": "front"}, Tagging="tier=hot")
    big = blob(11 * 1024 * 1024 + 5, seed=9)  # boto3 sends it as a 3-part upload
    s3.upload_fileobj(io.BytesIO(big), bucket, "dir/big.bin",
                      Config=TransferConfig(multipart_threshold=5 << 20,
                                            multipart_chunksize=5 << 20))

    direct = squall_s3.get_object(Bucket=bucket, Key="dir/small.txt")
    assert direct["Body"].read() == small
    assert direct["ContentType"] == "text/plain"
    # boto3 sent a CRC32 the front verified; it is kept in Squall's metadata entry.
    crc = base64.b64encode(zlib.crc32(small).to_bytes(4, "big")).decode()
    assert direct["Metadata"] == {"origin": "front", "squall-checksum": f"CRC32:{crc}"}
    assert squall_s3.get_object_tagging(Bucket=bucket, Key="dir/small.txt")["TagSet"] == [
        {"Key": "tier", "Value": "hot"}]
    assert squall_s3.get_object(Bucket=bucket, Key="dir/big.bin")["Body"].read() == big

    # Both gateways agree on what is there and on the ETags.
    front_list = s3.list_objects_v2(Bucket=bucket)["Contents"]
    # The upstream also holds the front's own documents (the bucket's access settings).
    upstream_list = [o for o in squall_s3.list_objects_v2(Bucket=bucket)["Contents"]
                     if not o["Key"].startswith(INTERNAL_UPSTREAM)]
    assert [(o["Key"], o["Size"], o["ETag"]) for o in front_list] == [
        (o["Key"], o["Size"], o["ETag"]) for o in upstream_list]
    assert front_list[1]["ETag"].strip('"') == hashlib.md5(small).hexdigest()
    ranged = s3.get_object(Bucket=bucket, Key="dir/big.bin", Range="bytes=100-199")
    assert ranged["Body"].read() == big[100:200]

    s3.copy_object(Bucket=bucket, Key="copy.txt", CopySource={"Bucket": bucket,
                                                               "Key": "dir/small.txt"})
    assert squall_s3.get_object(Bucket=bucket, Key="copy.txt")["Body"].read() == small
    for key in ("dir/small.txt", "dir/big.bin", "copy.txt"):
        s3.delete_object(Bucket=bucket, Key=key)
    s3.delete_bucket(Bucket=bucket)
    assert bucket not in {b["Name"] for b in squall_s3.list_buckets()["Buckets"]}
