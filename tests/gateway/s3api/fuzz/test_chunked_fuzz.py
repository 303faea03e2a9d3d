"""Property tests of the aws-chunked decoder: encode -> decode round-trips for any chunking
and any split into network reads; damaged or arbitrary bodies fail only with S3 errors."""

from __future__ import annotations

import asyncio
import base64
import itertools
import zlib
from collections.abc import AsyncIterator

from hypothesis import example, given
from hypothesis import strategies as st

from gateway.s3api.chunked import AwsChunkedDecoder, ChunkParser
from gateway.s3api.sigv4 import AuthContext, PayloadMode
from tests.gateway.s3api.fuzz.common import UNIT, only_s3_errors
from tests.gateway.s3api.test_chunked import encode_signed, encode_unsigned, streaming_ctx

MODES = list(PayloadMode.__members__.values())
STREAMING = [m for m in MODES if m.streaming]
#: one signed context per streaming mode (signing is the slow part, and not under test here)
CONTEXTS: dict[PayloadMode, AuthContext] = {}


def _ctx(mode: PayloadMode) -> AuthContext:
    if mode not in CONTEXTS:
        CONTEXTS[mode] = streaming_ctx(mode)
    return CONTEXTS[mode]


def _crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def _encode(mode: PayloadMode, chunks: list[bytes]) -> bytes:
    payload = b"".join(chunks)
    if mode is PayloadMode.STREAMING_SIGNED:
        return encode_signed(_ctx(mode), chunks)
    if mode is PayloadMode.STREAMING_SIGNED_TRAILER:
        return encode_signed(_ctx(mode), chunks, [("x-amz-checksum-crc32", _crc32(payload))])
    size = max((len(c) for c in chunks), default=1) or 1  # botocore's writer: even chunks
    return encode_unsigned(payload, size)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


def _decode(mode: PayloadMode, reads: list[bytes], decoded_length: int | None
            ) -> tuple[bytes, dict[str, str]]:
    parser = ChunkParser(_ctx(mode), decoded_length)
    out = b"".join(b"".join(parser.feed(r)) for r in reads)
    parser.finish()
    return out, parser.trailers


CHUNKS = st.lists(st.binary(min_size=1, max_size=300), max_size=6)
CUTS = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


@UNIT
@given(st.sampled_from(STREAMING), CHUNKS, CUTS, st.booleans())
def test_encode_then_decode_gives_the_payload_back(mode: PayloadMode, chunks: list[bytes],
                                                    cuts: list[int], declared: bool) -> None:
    payload = b"".join(chunks)
    body = _encode(mode, chunks)
    decoded, trailers = _decode(mode, _split(body, cuts), len(payload) if declared else None)
    assert decoded == payload
    if mode.trailer:
        assert trailers == {"x-amz-checksum-crc32": _crc32(payload)}


@UNIT
@given(st.sampled_from(STREAMING), CHUNKS, CUTS)
def test_the_async_decoder_gives_the_payload_back(mode: PayloadMode, chunks: list[bytes],
                                                  cuts: list[int]) -> None:
    payload = b"".join(chunks)
    reads = _split(_encode(mode, chunks), cuts)

    async def source() -> AsyncIterator[bytes]:
        for r in reads:
            yield r

    async def drain() -> bytes:
        decoder = AwsChunkedDecoder(source(), auth=_ctx(mode), decoded_length=len(payload))
        return b"".join([piece async for piece in decoder])

    assert asyncio.run(drain()) == payload


EDITS = st.lists(st.tuples(st.sampled_from(["flip", "insert", "delete", "cut"]),
                           st.integers(min_value=0, max_value=10_000),
                           st.binary(min_size=1, max_size=8)), min_size=1, max_size=3)


def _damage(body: bytes, edits: list[tuple[str, int, bytes]]) -> bytes:
    data = bytearray(body)
    for kind, at, junk in edits:
        at %= len(data) + 1
        if kind == "flip" and at < len(data):
            data[at] ^= junk[0] or 1
        elif kind == "insert":
            data[at:at] = junk
        elif kind == "delete":
            del data[at:at + len(junk)]
        elif kind == "cut":
            del data[at:]
    return bytes(data)


@UNIT
@given(st.sampled_from(STREAMING), CHUNKS, EDITS, CUTS, st.booleans())
def test_a_damaged_body_fails_with_an_s3_error(mode: PayloadMode, chunks: list[bytes],
                                               edits: list[tuple[str, int, bytes]],
                                               cuts: list[int], declared: bool) -> None:
    payload = b"".join(chunks)
    damaged = _damage(_encode(mode, chunks), edits)
    with only_s3_errors():
        decoded, _ = _decode(mode, _split(damaged, cuts), len(payload) if declared else None)
        if mode.signed_chunks:
            assert decoded == payload  # every chunk is signed: damage cannot go unnoticed


GARBAGE = st.one_of(
    st.binary(max_size=200),
    st.lists(st.one_of(st.sampled_from([b"0", b"ffffffffffffffff", b"10000000000000000", b";",
                                        b"chunk-signature=", b"\r\n", b"\n", b"\r", b":",
                                        b"x-amz-checksum-crc32", b"x-amz-trailer-signature",
                                        b"a" * 64, b"-1", b"0x10", b"\xff", b" "]),
                       st.binary(max_size=8)), max_size=30).map(b"".join))


@UNIT
@given(st.sampled_from(STREAMING), GARBAGE, CUTS,
       st.one_of(st.none(), st.integers(min_value=0, max_value=2**64)))
@example(PayloadMode.STREAMING_UNSIGNED_TRAILER, b"ffffffffffffffff\r\n", [], None)
@example(PayloadMode.STREAMING_UNSIGNED_TRAILER, b"0\r\nx-amz-checksum-crc32:\xff\r\n\r\n", [],
         None)
@example(PayloadMode.STREAMING_UNSIGNED_TRAILER, b"1" * 5000, [4097], None)
def test_arbitrary_bytes_fail_with_an_s3_error(mode: PayloadMode, body: bytes,
                                               cuts: list[int], decoded: int | None) -> None:
    with only_s3_errors():
        _decode(mode, _split(body, cuts), decoded)
