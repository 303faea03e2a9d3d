"""The request-body pipeline end to end: real boto3 requests through authenticate + request_body."""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from typing import Any

import pytest
from botocore import httpchecksum

from backends.core.base import CHECKSUM_ALGORITHMS, ObjectMeta, final_meta
from backends.core.errors import BadDigest, IncompleteBody
from gateway.protocol.errors import (
    InvalidArgument,
    InvalidRequest,
    MissingContentLength,
    XAmzContentSHA256Mismatch,
)
from gateway.s3api import chunked
from gateway.s3api.body import RequestBody, checksum_plan, request_body
from gateway.s3api.sigv4 import AuthContext, PayloadMode
from tests.gateway.s3api.test_chunked import encode_signed, encode_unsigned, streaming_ctx
from tests.gateway.s3api.test_sigv4 import BotoCapture, Wire, sign_botocore


class _Md5Checksum(httpchecksum.BaseChecksum):
    """MD5 as an additional checksum (botocore does not send it; other SDKs list it)."""

    def __init__(self) -> None:
        self._hash = hashlib.md5()

    def update(self, chunk: bytes) -> None:
        self._hash.update(chunk)

    def digest(self) -> bytes:
        return self._hash.digest()


BOTOCORE = {
    "CRC32": httpchecksum.Crc32Checksum,
    "CRC32C": httpchecksum.CrtCrc32cChecksum,
    "CRC64NVME": httpchecksum.CrtCrc64NvmeChecksum,
    "SHA1": httpchecksum.Sha1Checksum,
    "SHA256": httpchecksum.Sha256Checksum,
    "SHA512": httpchecksum.Sha512Checksum,
    "MD5": _Md5Checksum,
    "XXHASH64": httpchecksum.CrtXxhash64Checksum,
    "XXHASH3": httpchecksum.CrtXxhash3Checksum,
    "XXHASH128": httpchecksum.CrtXxhash128Checksum,
}
#: the algorithms botocore itself sends
SENT_BY_BOTO3 = [a for a in CHECKSUM_ALGORITHMS if a != "MD5"]
DATA = b"Squall burst buffer " * 500


def b64(algorithm: str, data: bytes) -> str:
    hasher = BOTOCORE[algorithm]()
    hasher.update(data)
    return hasher.b64digest()


async def _source(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def _pieces(body: bytes, size: int = 1000) -> list[bytes]:
    return [body[i:i + size] for i in range(0, len(body), size)]


def open_body(wire: Wire, ctx: AuthContext | None = None, *, size: int = 1000,
              body: bytes | None = None) -> RequestBody:
    headers: dict[str, str] = {}
    for name, value in wire.headers:
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return request_body(_source(_pieces(wire.body if body is None else body, size)), headers,
                        ctx or wire.auth())


async def drain(body: RequestBody) -> bytes:
    return b"".join([piece async for piece in body])


class Backend:
    """Commits a body only when iterating it ended cleanly, like a real backend."""

    def __init__(self) -> None:
        self.committed: dict[str, tuple[bytes, ObjectMeta]] = {}

    async def put(self, key: str, body: RequestBody) -> None:
        data = b"".join([piece async for piece in body])
        self.committed[key] = (data, final_meta(ObjectMeta(), body))


# --- real boto3 uploads ----------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", SENT_BY_BOTO3)
async def test_boto3_trailer_checksum_upload(algorithm: str) -> None:
    wire = BotoCapture().call("put_object", Bucket="b", Key="k", Body=DATA,
                              ChecksumAlgorithm=algorithm)
    assert wire.header("x-amz-content-sha256") == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    for size in (1, 37, 4096, len(wire.body)):
        if size == 1 and algorithm != "CRC32":
            continue
        body = open_body(wire, size=size)
        assert await drain(body) == DATA
        assert body.facts.checksum == (algorithm, b64(algorithm, DATA))


@pytest.mark.parametrize("algorithm", SENT_BY_BOTO3)
async def test_boto3_header_checksum_with_signed_payload(algorithm: str) -> None:
    wire = BotoCapture("http://127.0.0.1:9000").call("put_object", Bucket="b", Key="k",
                                                     Body=DATA, ChecksumAlgorithm=algorithm)
    ctx = wire.auth()
    assert ctx.payload_mode is PayloadMode.SIGNED
    body = open_body(wire, ctx)
    assert await drain(body) == DATA
    assert body.facts.checksum == (algorithm, b64(algorithm, DATA))


async def test_boto3_upload_part_and_final_meta() -> None:
    wire = BotoCapture().call("upload_part", Bucket="b", Key="k", UploadId="u", PartNumber=1,
                              Body=DATA, ChecksumAlgorithm="CRC32C")
    backend = Backend()
    await backend.put("k", open_body(wire))
    data, meta = backend.committed["k"]
    assert data == DATA and meta.checksum == ("CRC32C", b64("CRC32C", DATA))


async def test_boto3_tampered_payload_is_never_committed() -> None:
    wire = BotoCapture().call("put_object", Bucket="b", Key="k", Body=DATA)
    index = wire.body.index(b"Squall", 100)
    tampered = wire.body[:index] + b"squall" + wire.body[index + 6:]
    backend = Backend()
    with pytest.raises(BadDigest, match="The CRC32 you specified did not match the calculated"):
        await backend.put("k", open_body(wire, body=tampered))
    assert backend.committed == {}


async def test_boto3_tampered_trailer_is_never_committed() -> None:
    wire = BotoCapture().call("put_object", Bucket="b", Key="k", Body=DATA)
    good = b64("CRC32", DATA).encode()
    backend = Backend()
    with pytest.raises(BadDigest):
        await backend.put("k", open_body(wire, body=wire.body.replace(good, b"AAAAAA==")))
    with pytest.raises(InvalidRequest, match="trailing header is invalid"):
        await backend.put("k", open_body(wire, body=wire.body.replace(good, b"AAAA")))
    assert backend.committed == {}


async def test_boto3_missing_trailer_is_rejected() -> None:
    wire = BotoCapture().call("put_object", Bucket="b", Key="k", Body=b"abc")
    start = wire.body.index(b"x-amz-checksum-crc32:")
    stripped = wire.body[:start] + b"\r\n"
    with pytest.raises(InvalidRequest, match="was not sent"):
        await drain(open_body(wire, body=stripped))


async def test_boto3_signed_payload_mismatch() -> None:
    wire = BotoCapture("http://127.0.0.1:9000", config={
        "request_checksum_calculation": "when_required"}).call(
        "put_object", Bucket="b", Key="k", Body=DATA)
    body = open_body(wire, body=DATA[:-1] + b"!")
    pieces = []
    with pytest.raises(XAmzContentSHA256Mismatch):
        async for piece in body:
            pieces.append(piece)
    assert b"".join(pieces) == DATA[:-1] + b"!"  # every byte was handed on; the end was not
    with pytest.raises(XAmzContentSHA256Mismatch):  # and it stays failed
        await body.__anext__()


async def test_boto3_signed_payload_without_checksum() -> None:
    wire = BotoCapture("http://127.0.0.1:9000", config={
        "request_checksum_calculation": "when_required"}).call(
        "put_object", Bucket="b", Key="k", Body=DATA)
    body = open_body(wire)
    assert await drain(body) == DATA and body.facts.checksum is None


# --- signed aws-chunked bodies -----------------------------------------------------------------


async def test_signed_chunks_with_header_checksum() -> None:
    ctx = streaming_ctx(PayloadMode.STREAMING_SIGNED)
    raw = encode_signed(ctx, [DATA[:3000], DATA[3000:]])
    headers = {"x-amz-decoded-content-length": str(len(DATA)),
               "x-amz-checksum-crc32": b64("CRC32", DATA)}
    body = request_body(_source(_pieces(raw, 777)), headers, ctx)
    assert await drain(body) == DATA and body.facts.checksum == ("CRC32", b64("CRC32", DATA))
    headers["x-amz-checksum-crc32"] = b64("CRC32", b"other")
    with pytest.raises(BadDigest):
        await drain(request_body(_source([raw]), headers, ctx))


async def test_signed_chunks_with_signed_checksum_trailer() -> None:
    ctx = streaming_ctx(PayloadMode.STREAMING_SIGNED_TRAILER)
    raw = encode_signed(ctx, [DATA], [("x-amz-checksum-sha256", b64("SHA256", DATA))])
    headers = {"x-amz-decoded-content-length": str(len(DATA)),
               "x-amz-trailer": "x-amz-checksum-sha256", "content-encoding": "aws-chunked"}
    body = request_body(_source(_pieces(raw, 333)), headers, ctx)
    assert await drain(body) == DATA and body.facts.checksum == ("SHA256", b64("SHA256", DATA))


async def test_streaming_requires_decoded_length() -> None:
    ctx = streaming_ctx(PayloadMode.STREAMING_UNSIGNED_TRAILER)
    with pytest.raises(MissingContentLength):
        request_body(_source([]), {"content-encoding": "aws-chunked"}, ctx)
    with pytest.raises(InvalidArgument):
        request_body(_source([]), {"x-amz-decoded-content-length": "-1"}, ctx)


async def test_streaming_length_mismatch_is_raised_from_the_body() -> None:
    ctx = streaming_ctx(PayloadMode.STREAMING_UNSIGNED_TRAILER)
    raw = encode_unsigned(b"hello", 2)
    body = request_body(_source([raw]), {"x-amz-decoded-content-length": "6"}, ctx)
    with pytest.raises(IncompleteBody):
        await drain(body)


# --- plain bodies ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unsigned_ctx() -> AuthContext:
    return replace(streaming_ctx(PayloadMode.STREAMING_SIGNED), payload_mode=PayloadMode.UNSIGNED)


async def test_content_length_is_enforced(unsigned_ctx: AuthContext) -> None:
    ok = request_body(_source([b"abc", b"de"]), {"content-length": "5"}, unsigned_ctx)
    assert await drain(ok) == b"abcde"
    short = request_body(_source([b"abc"]), {"content-length": "5"}, unsigned_ctx)
    with pytest.raises(IncompleteBody):
        await drain(short)
    long = request_body(_source([b"abc", b"def"]), {"content-length": "5"}, unsigned_ctx)
    with pytest.raises(IncompleteBody, match="longer"):
        await drain(long)
    free = request_body(_source([b"abc"]), {}, unsigned_ctx)
    assert await drain(free) == b"abc"


@pytest.mark.parametrize("value", ["x", "1.5", "-3", "", "\u0661"])
def test_invalid_content_length(unsigned_ctx: AuthContext, value: str) -> None:
    with pytest.raises(InvalidArgument):
        request_body(_source([]), {"content-length": value}, unsigned_ctx)


async def test_signed_payload_hash(unsigned_ctx: AuthContext) -> None:
    ctx = replace(unsigned_ctx, payload_mode=PayloadMode.SIGNED,
                  payload_sha256=hashlib.sha256(b"abc").hexdigest())
    assert await drain(request_body(_source([b"a", b"bc"]), {}, ctx)) == b"abc"
    with pytest.raises(XAmzContentSHA256Mismatch):
        await drain(request_body(_source([b"abd"]), {}, ctx))


@pytest.mark.parametrize("algorithm", CHECKSUM_ALGORITHMS)
async def test_header_checksum_each_algorithm(unsigned_ctx: AuthContext, algorithm: str) -> None:
    name = f"x-amz-checksum-{algorithm.lower()}"
    body = request_body(_source([b"123", b"456789"]), {name: b64(algorithm, b"123456789")},
                        unsigned_ctx)
    assert await drain(body) == b"123456789"
    assert body.facts.checksum == (algorithm, b64(algorithm, b"123456789"))
    bad = request_body(_source([b"123456780"]), {name: b64(algorithm, b"123456789")},
                       unsigned_ctx)
    with pytest.raises(BadDigest, match=f"The {algorithm} you specified did not match"):
        await drain(bad)


async def test_large_piece_is_hashed_off_the_loop(unsigned_ctx: AuthContext) -> None:
    big = bytes(range(256)) * (chunked.HASH_OFFLOAD_BYTES // 256 + 1)
    ctx = replace(unsigned_ctx, payload_mode=PayloadMode.SIGNED,
                  payload_sha256=hashlib.sha256(big).hexdigest())
    crc = base64.b64encode((zlib.crc32(big) & 0xFFFFFFFF).to_bytes(4, "big")).decode()
    body = request_body(_source([big]), {"x-amz-checksum-crc32": crc}, ctx)
    assert await drain(body) == big and body.facts.checksum == ("CRC32", crc)


async def test_sdk_algorithm_alone_asks_for_a_computed_checksum(
        unsigned_ctx: AuthContext) -> None:
    body = request_body(_source([b"123456789"]), {"x-amz-sdk-checksum-algorithm": "crc64nvme"},
                        unsigned_ctx)
    assert await drain(body) == b"123456789"
    assert body.facts.checksum == ("CRC64NVME", "rosUhgp5mIg=")


async def test_no_checksum(unsigned_ctx: AuthContext) -> None:
    body = request_body(_source([b"x"]), {"content-type": "text/plain"}, unsigned_ctx)
    assert await drain(body) == b"x" and body.facts.checksum is None
    assert final_meta(ObjectMeta(), body) == ObjectMeta()


async def test_source_errors_propagate_and_stick(unsigned_ctx: AuthContext) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"abc"
        raise IncompleteBody("client went away")

    body = request_body(broken(), {"content-length": "10"}, unsigned_ctx)
    assert await body.__anext__() == b"abc"
    for _ in range(2):
        with pytest.raises(IncompleteBody, match="went away"):
            await body.__anext__()


async def test_aclose_closes_the_source(unsigned_ctx: AuthContext) -> None:
    closed = False

    async def source() -> AsyncIterator[bytes]:
        nonlocal closed
        try:
            yield b"a"
            yield b"b"
        finally:
            closed = True

    body = request_body(source(), {}, unsigned_ctx)
    await body.__anext__()
    await body.aclose()
    assert closed


# --- header validation (before any byte is read) ---------------------------------------------

CRC = b64("CRC32", b"x")


@pytest.mark.parametrize(("headers", "mode", "message"), [
    ({"x-amz-checksum-crc32": "nope"}, PayloadMode.UNSIGNED,
     "Value for x-amz-checksum-crc32 header is invalid."),
    ({"x-amz-checksum-sha256": CRC}, PayloadMode.UNSIGNED,
     "Value for x-amz-checksum-sha256 header is invalid."),
    ({"x-amz-checksum-crc32": CRC, "x-amz-checksum-crc32c": CRC}, PayloadMode.UNSIGNED,
     "Multiple checksum Types"),
    ({"x-amz-checksum-crc32": CRC, "x-amz-trailer": "x-amz-checksum-crc32c"},
     PayloadMode.STREAMING_UNSIGNED_TRAILER, "Multiple checksum Types"),
    ({"x-amz-trailer": "x-amz-checksum-crc32,x-amz-checksum-sha1"},
     PayloadMode.STREAMING_UNSIGNED_TRAILER, "Multiple checksum Types"),
    ({"x-amz-checksum-crc32": CRC, "x-amz-sdk-checksum-algorithm": "SHA256"},
     PayloadMode.UNSIGNED, "x-amz-sdk-checksum-algorithm header is invalid"),
    ({"x-amz-trailer": "x-amz-checksum-crc32", "x-amz-sdk-checksum-algorithm": "CRC32C"},
     PayloadMode.STREAMING_UNSIGNED_TRAILER, "x-amz-sdk-checksum-algorithm header is invalid"),
    ({"x-amz-sdk-checksum-algorithm": "SHA3"}, PayloadMode.UNSIGNED, "unsupported"),
    ({"x-amz-checksum-sha3": CRC}, PayloadMode.UNSIGNED, "unsupported"),
    ({"x-amz-trailer": "x-amz-checksum-sha3"}, PayloadMode.STREAMING_UNSIGNED_TRAILER,
     "x-amz-trailer header is not supported"),
    ({"x-amz-trailer": "content-md5"}, PayloadMode.STREAMING_UNSIGNED_TRAILER,
     "x-amz-trailer header is not supported"),
    ({"x-amz-trailer": "x-amz-checksum-crc32"}, PayloadMode.UNSIGNED, "TRAILER"),
    ({"x-amz-trailer": "x-amz-checksum-crc32"}, PayloadMode.STREAMING_SIGNED, "TRAILER"),
])
def test_invalid_checksum_headers(headers: dict[str, str], mode: PayloadMode,
                                  message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        checksum_plan(headers, mode)


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, None),
    ({"x-amz-checksum-algorithm": "CRC32", "x-amz-checksum-type": "FULL_OBJECT"}, None),
    ({"x-amz-checksum-crc32": CRC, "x-amz-sdk-checksum-algorithm": "crc32"}, "CRC32"),
    ({"x-amz-trailer": " X-Amz-Checksum-CRC32C ,"}, "CRC32C"),
])
def test_valid_checksum_headers(headers: dict[str, str], expected: Any) -> None:
    plan = checksum_plan(headers, PayloadMode.STREAMING_UNSIGNED_TRAILER)
    assert (plan.algorithm if plan else None) == expected


def test_request_body_validates_headers_eagerly() -> None:
    wire = sign_botocore("PUT", "http://127.0.0.1:9000/b/k", body=b"x",
                         headers={"x-amz-checksum-crc32": "AAAA"})
    with pytest.raises(InvalidRequest):
        open_body(wire)
