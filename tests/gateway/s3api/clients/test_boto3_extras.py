"""boto3 behaviour that spans operations: flexible checksums, managed transfers, presigning."""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from awscrt import checksums as crt
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.s3api.clients.helpers import (
    MiB,
    file_sha256,
    multipart_etag,
    parse_error,
    payload,
    sha256,
)

_DIGESTS: dict[str, Callable[[bytes], bytes]] = {
    "CRC32": lambda d: zlib.crc32(d).to_bytes(4, "big"),
    "CRC32C": lambda d: crt.crc32c(d).to_bytes(4, "big"),
    "CRC64NVME": lambda d: crt.crc64nvme(d).to_bytes(8, "big"),
    "SHA1": lambda d: hashlib.sha1(d).digest(),
    "SHA256": lambda d: hashlib.sha256(d).digest(),
}
from tests.support.server import SquallProcess


def checksum(algorithm: str, data: bytes) -> str:
    """The base64 value S3 reports for ``algorithm`` over ``data``."""
    return base64.b64encode(_DIGESTS[algorithm](data)).decode()


def composite(algorithm: str, parts: list[bytes]) -> str:
    """S3's COMPOSITE multipart checksum: checksum of the raw part checksums, ``-N``."""
    raw = b"".join(_DIGESTS[algorithm](p) for p in parts)
    return f"{checksum(algorithm, raw)}-{len(parts)}"


class _WireLog:
    """Records the signing mode and checksum headers of every request a client sends."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []

    def __call__(self, request: Any, **_: Any) -> None:
        self.requests.append({k.lower(): v.decode() if isinstance(v, bytes) else str(v)
                              for k, v in request.headers.items()})


def _force_trailer(context: dict[str, Any], **_: Any) -> None:
    # botocore sends flexible checksums as an aws-chunked trailer only over TLS; the test
    # endpoint is plain HTTP, so flip the resolved location to what a TLS client would send.
    algorithm = context.get("checksum", {}).get("request_algorithm")
    if isinstance(algorithm, dict):
        algorithm["in"] = "trailer"


@pytest.fixture(scope="module")
def trailer_s3(squall: SquallProcess) -> tuple[Any, _WireLog]:
    """boto3 that uploads with ``STREAMING-UNSIGNED-PAYLOAD-TRAILER`` and a checksum trailer,
    and the log of what it sent."""
    client = make_client(squall.endpoint)
    log = _WireLog()
    for op in ("PutObject", "UploadPart"):
        client.meta.events.register(f"before-call.s3.{op}", _force_trailer)
        client.meta.events.register(f"before-send.s3.{op}", log)
    return client, log


def _body(resp: dict[str, Any]) -> bytes:
    return resp["Body"].read()


def test_default_checksum_is_crc32(squall: SquallProcess, bucket: str) -> None:
    client = make_client(squall.endpoint)
    log = _WireLog()
    client.meta.events.register("before-send.s3.PutObject", log)
    data = payload(200_000, "default-crc")
    res = client.put_object(Bucket=bucket, Key="k", Body=data)
    assert log.requests[-1]["x-amz-checksum-crc32"] == checksum("CRC32", data)
    assert res["ChecksumCRC32"] == checksum("CRC32", data)

    got = client.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == checksum("CRC32", data)
    assert sha256(_body(got)) == sha256(data)


@pytest.mark.parametrize("algorithm", [None, "CRC32", "CRC32C", "SHA256"])
def test_checksum_trailer_upload(trailer_s3: tuple[Any, _WireLog], bucket: str,
                                 algorithm: str | None) -> None:
    client, log = trailer_s3
    data = payload(1 * MiB + 3, f"trailer-{algorithm}")
    extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
    res = client.put_object(Bucket=bucket, Key="t", Body=data, **extra)
    algorithm = algorithm or "CRC32"

    sent = log.requests[-1]
    assert sent["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert sent["x-amz-trailer"] == f"x-amz-checksum-{algorithm.lower()}"
    assert "aws-chunked" in sent["content-encoding"]
    assert sent["x-amz-decoded-content-length"] == str(len(data))

    assert res["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    assert res[f"Checksum{algorithm}"] == checksum(algorithm, data)
    got = client.get_object(Bucket=bucket, Key="t", ChecksumMode="ENABLED")
    assert got["ContentLength"] == len(data)
    assert got[f"Checksum{algorithm}"] == checksum(algorithm, data)
    # The aws-chunked framing is not part of the stored object.
    assert "aws-chunked" not in got.get("ContentEncoding", "")
    assert sha256(_body(got)) == sha256(data)


@pytest.mark.parametrize("algorithm", ["SHA256", "CRC32C", "SHA1", "CRC64NVME"])
def test_put_object_checksum_algorithm(s3: Any, bucket: str, algorithm: str) -> None:
    data = payload(333_333, f"alg-{algorithm}")
    res = s3.put_object(Bucket=bucket, Key="c", Body=data, ChecksumAlgorithm=algorithm)
    expected = checksum(algorithm, data)
    assert res[f"Checksum{algorithm}"] == expected

    head = s3.head_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == expected
    got = s3.get_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == expected
    assert sha256(_body(got)) == sha256(data)
    # Without ChecksumMode the checksum is not required to be returned, but the data is.
    assert sha256(_body(s3.get_object(Bucket=bucket, Key="c"))) == sha256(data)


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA256"])
def test_wrong_checksum_is_bad_digest(s3: Any, bucket: str, algorithm: str) -> None:
    good = payload(10_000, "good")
    s3.put_object(Bucket=bucket, Key="k", Body=good)
    bad = payload(10_000, "bad")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="k", Body=bad,
                      **{f"Checksum{algorithm}": checksum(algorithm, good)})
    assert err.value.response["Error"]["Code"] == "BadDigest"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert sha256(_body(s3.get_object(Bucket=bucket, Key="k"))) == sha256(good)


def test_multipart_composite_checksum(s3: Any, bucket: str) -> None:
    parts = [payload(5 * MiB, "cc1"), payload(5 * MiB, "cc2"), payload(10, "cc3")]
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="m",
                                           ChecksumAlgorithm="CRC32C")["UploadId"]
    done = []
    for n, data in enumerate(parts, start=1):
        res = s3.upload_part(Bucket=bucket, Key="m", UploadId=upload_id, PartNumber=n,
                             Body=data, ChecksumAlgorithm="CRC32C")
        assert res["ChecksumCRC32C"] == checksum("CRC32C", data)
        done.append({"PartNumber": n, "ETag": res["ETag"],
                     "ChecksumCRC32C": res["ChecksumCRC32C"]})
    res = s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=upload_id,
                                       MultipartUpload={"Parts": done})
    assert res["ETag"] == multipart_etag(parts)
    assert res["ChecksumCRC32C"] == composite("CRC32C", parts)
    got = s3.get_object(Bucket=bucket, Key="m", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32C"] == composite("CRC32C", parts)
    assert sha256(_body(got)) == sha256(b"".join(parts))


def test_upload_download_file_multipart_concurrent(s3: Any, bucket: str,
                                                   tmp_path: Path) -> None:
    data = payload(17 * MiB + 1, "transfer")
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB,
                            max_concurrency=4, use_threads=True,
                            preferred_transfer_client="classic")
    s3.upload_file(str(src), bucket, "dir/file.bin", Config=config)

    part = 5 * MiB
    head = s3.head_object(Bucket=bucket, Key="dir/file.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == multipart_etag([data[i:i + part] for i in range(0, len(data), part)])

    dst = tmp_path / "dst.bin"
    s3.download_file(bucket, "dir/file.bin", str(dst), Config=config)
    assert file_sha256(dst) == sha256(data)
    buf = io.BytesIO()
    s3.download_fileobj(bucket, "dir/file.bin", buf, Config=config)
    assert sha256(buf.getvalue()) == sha256(data)


def _presigner(endpoint: str) -> Any:
    # Without an explicit signature version botocore may presign with SigV2 until its first
    # request; the gateway speaks SigV4 only.
    return make_client(endpoint, signature_version="s3v4")


def test_presigned_get_and_put(squall: SquallProcess, bucket: str) -> None:
    s3 = _presigner(squall.endpoint)
    data = payload(250_000, "presign")
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "p q"},
                                        ExpiresIn=300)
    r = httpx.put(put_url, content=data)
    assert r.status_code == 200, r.text
    assert r.headers["etag"] == f'"{hashlib.md5(data).hexdigest()}"'

    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p q"},
                                        ExpiresIn=300)
    r = httpx.get(get_url)
    assert r.status_code == 200, r.text
    assert sha256(r.content) == sha256(data)

    r = httpx.get(get_url, headers={"Range": "bytes=10-19"})
    assert r.status_code == 206
    assert r.content == data[10:20]


def test_presigned_url_tampering_is_refused(squall: SquallProcess, bucket: str) -> None:
    s3 = _presigner(squall.endpoint)
    data = payload(1000, "tamper")
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"},
                                    ExpiresIn=300)
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    sig = query["X-Amz-Signature"]
    query["X-Amz-Signature"] = ("0" if sig[0] != "0" else "1") + sig[1:]
    r = httpx.get(urlunsplit(parts._replace(query=urlencode(query))))
    err = parse_error(r.status_code, r.headers, r.content)
    assert (err.status, err.code) == (403, "SignatureDoesNotMatch")

    query["X-Amz-Signature"] = sig
    query["X-Amz-Expires"] = "600"  # signed for 300
    r = httpx.get(urlunsplit(parts._replace(query=urlencode(query))))
    err = parse_error(r.status_code, r.headers, r.content)
    assert (err.status, err.code) == (403, "SignatureDoesNotMatch")

    # A presigned GET does not authorise a PUT on the same URL.
    r = httpx.put(url, content=b"overwrite")
    assert r.status_code == 403
    assert sha256(httpx.get(url).content) == sha256(data)
