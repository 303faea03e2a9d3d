"""A real ``squall serve`` whose cache is a third of an upload: boto3's ``upload_file``, the
aws CLI and the FUSE client's streaming writer upload it (no SlowDown, no retries allowed)
and it reads back byte for byte; UploadPartCopy on blobseer_like shares chunks, with and
without the cache. (A ``cp`` through a kernel mount: tests/gateway/fuse_mount.)"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from gateway.client.credentials import Credentials
from gateway.fuse_mount.openfile import OpenFile, WriteConfig
from gateway.fuse_mount.store import BucketClient
from tests.conftest import make_client
from tests.gateway.s3api.clients.helpers import file_sha256, make_aws, multipart_etag, payload
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

MiB = 1 << 20
CACHE = 16 * MiB
PART = 8 * MiB
SIZE = 3 * CACHE  # six parts


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    """Parts are cached while they fit (admission "cache"), then go to the backend."""
    data_dir = tmp_path_factory.mktemp("beyond") / "data"
    gateway = SquallProcess(data_dir, ["--cache-size", str(CACHE),
                                       "--cache-admission", "cache"]).start()
    yield gateway
    assert gateway.stop() == 0, gateway.log()


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("files") / "big.bin"
    path.write_bytes(payload(SIZE, "beyond"))
    return path


def expected_etag(path: Path) -> str:
    data = path.read_bytes()
    return multipart_etag([data[i:i + PART] for i in range(0, len(data), PART)])


def new_bucket(s3: Any) -> str:
    name = f"big-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def test_boto3_upload_file_of_three_times_the_cache(server: SquallProcess, big_file: Path,
                                                   tmp_path: Path) -> None:
    s3 = make_client(server.endpoint)  # one attempt: a SlowDown would fail the test
    bucket = new_bucket(s3)
    before = server.counter("writearound_bytes_total")
    s3.upload_file(str(big_file), bucket, "big.bin",
                   Config=TransferConfig(multipart_threshold=PART, multipart_chunksize=PART,
                                         max_concurrency=4))
    assert s3.head_object(Bucket=bucket, Key="big.bin")["ETag"] == expected_etag(big_file)
    assert server.counter("writearound_bytes_total") - before >= PART  # past the cache
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    back = tmp_path / "back.bin"
    s3.download_file(bucket, "big.bin", str(back))
    assert file_sha256(back) == file_sha256(big_file)


def test_aws_cli_cp_of_three_times_the_cache(server: SquallProcess, big_file: Path,
                                             tmp_path: Path) -> None:
    aws = make_aws(server.endpoint, tmp_path / "aws-home")
    Path(aws.env["AWS_CONFIG_FILE"]).write_text(
        f"[default]\ns3 =\n  multipart_threshold = {PART}\n  multipart_chunksize = {PART}\n"
        "  max_concurrent_requests = 4\n")
    bucket = new_bucket(make_client(server.endpoint))
    aws("s3", "cp", str(big_file), f"s3://{bucket}/cli/big.bin")
    head = aws("s3api", "head-object", "--bucket", bucket, "--key", "cli/big.bin").stdout
    assert expected_etag(big_file).replace('"', '\\"') in head
    back = tmp_path / "back.bin"
    aws("s3", "cp", f"s3://{bucket}/cli/big.bin", str(back))
    assert file_sha256(back) == file_sha256(big_file)
    listed = aws("s3api", "list-multipart-uploads", "--bucket", bucket).stdout
    assert "UploadId" not in listed


def test_fuse_client_streams_a_file_of_three_times_the_cache(server: SquallProcess,
                                                            big_file: Path) -> None:
    """What ``cp`` into a mount does, minus the kernel: 128 KiB writes into an open file,
    streamed as 8 MiB parts (four in flight), then close."""
    s3 = make_client(server.endpoint)
    bucket = new_bucket(s3)
    store = BucketClient(server.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY),
                         max_attempts=1)
    data = big_file.read_bytes()
    with ThreadPoolExecutor(8) as pool:
        opened = OpenFile(store, "fuse/big.bin", config=WriteConfig(block_size=PART,
                                                                   max_inflight=4),
                          pool=pool, existing=None, truncate=True)
        for offset in range(0, len(data), 128 * 1024):
            opened.write(offset, data[offset:offset + 128 * 1024])
        opened.release()
    got = s3.get_object(Bucket=bucket, Key="fuse/big.bin")
    assert got["ETag"] == expected_etag(big_file)
    assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(data).digest()


# -- UploadPartCopy on blobseer_like ----------------------------------------------------

def provider_bytes(root: Path) -> int:
    """Bytes on the providers' disks (chunks and records)."""
    return sum(p.stat().st_size for i in range(2) for p in (root / f"p{i}").rglob("*")
               if p.is_file())


@pytest.mark.parametrize("cache", ["0", "4MiB"])
def test_part_copy_on_blobseer_shares_chunks(tmp_path: Path, cache: str) -> None:
    root = tmp_path / "providers"
    backend = "blobseer_like:" + ",".join(str(root / f"p{i}") for i in range(2)) + \
        "?gc_interval=0"
    gateway = SquallProcess(tmp_path / "data", ["--backend", backend, "--cache-size", cache,
                                                "--min-part-size", str(5 * MiB)]).start()
    try:
        s3 = make_client(gateway.endpoint)
        bucket = new_bucket(s3)
        source = payload(6 * MiB, "copy-source")  # larger than the cache: on the backend
        s3.put_object(Bucket=bucket, Key="src", Body=source)
        upload_id = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
        before = provider_bytes(root)
        copied = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=upload_id,
                                     PartNumber=1, CopySource={"Bucket": bucket, "Key": "src"})
        grown = provider_bytes(root) - before
        assert grown < MiB, grown  # records only: the part shares the source's chunks
        etag = f'"{hashlib.md5(source).hexdigest()}"'
        assert copied["CopyPartResult"]["ETag"] == etag
        src = {"Bucket": bucket, "Key": "src"}
        for extra, code in (({"CopySourceIfMatch": '"0123"'}, "PreconditionFailed"),
                            ({"CopySourceIfNoneMatch": etag}, "PreconditionFailed"),
                            ({"CopySourceRange": f"bytes={len(source)}-{len(source) + 9}"},
                             "InvalidRange"),
                            ({"UploadId": "0" * 32}, "NoSuchUpload"),
                            ({"CopySource": {"Bucket": bucket, "Key": "absent"}},
                             "NoSuchKey")):
            params = {"Bucket": bucket, "Key": "dst", "UploadId": upload_id,
                      "PartNumber": 3, "CopySource": src, **extra}
            with pytest.raises(ClientError) as caught:
                s3.upload_part_copy(**params)
            assert caught.value.response["Error"]["Code"] == code, extra
        tail = s3.upload_part(Bucket=bucket, Key="dst", UploadId=upload_id, PartNumber=2,
                              Body=b"tail")
        s3.complete_multipart_upload(Bucket=bucket, Key="dst", UploadId=upload_id,
                                     MultipartUpload={"Parts": [
                                         {"PartNumber": 1,
                                          "ETag": copied["CopyPartResult"]["ETag"]},
                                         {"PartNumber": 2, "ETag": tail["ETag"]}]})
        assert provider_bytes(root) - before < MiB
        assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == source + b"tail"
        assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    finally:
        assert gateway.stop() == 0, gateway.log()
