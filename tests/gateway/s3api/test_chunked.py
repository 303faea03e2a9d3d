"""aws-chunked decoding: AWS's documented example, botocore's writer, hostile framing."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import itertools
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace

import pytest
from awscrt import auth as crt_auth
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum

from backends.core.errors import IncompleteBody
from gateway.protocol.errors import InvalidRequest, SignatureDoesNotMatch
from gateway.s3api import chunked
from gateway.s3api.chunked import MAX_LINE, AwsChunkedDecoder, ChunkParser
from gateway.s3api.sigv4 import EMPTY_SHA256, AuthContext, PayloadMode
from tests.gateway.s3api.test_sigv4 import DOC_CHUNKED, DOC_NOW, sign_crt

DOC_SIGNATURES = ["ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
                  "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
                  "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"]
DOC_BODY = (f"10000;chunk-signature={DOC_SIGNATURES[0]}\r\n".encode() + b"a" * 65536 + b"\r\n"
            + f"400;chunk-signature={DOC_SIGNATURES[1]}\r\n".encode() + b"a" * 1024 + b"\r\n"
            + f"0;chunk-signature={DOC_SIGNATURES[2]}\r\n\r\n".encode())


# --- building bodies with the documented algorithm -------------------------------------------


def _sign(ctx: AuthContext, kind: str, previous: str, digest: str, *extra: str) -> str:
    string_to_sign = "\n".join([kind, ctx.amz_date, ctx.scope, previous, *extra, digest])
    return hmac.new(ctx.signing_key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def encode_signed(ctx: AuthContext, chunks: Iterable[bytes],
                  trailers: list[tuple[str, str]] | None = None) -> bytes:
    """STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] body: chained chunk signatures."""
    previous = ctx.seed_signature
    out = bytearray()
    for data in [*chunks, b""]:
        previous = _sign(ctx, "AWS4-HMAC-SHA256-PAYLOAD", previous,
                         hashlib.sha256(data).hexdigest(), EMPTY_SHA256)
        out += f"{len(data):x};chunk-signature={previous}\r\n".encode()
        if data:
            out += data + b"\r\n"
    if trailers is not None:
        block = "".join(f"{name}:{value}\n" for name, value in trailers).encode()
        out += block.replace(b"\n", b"\r\n")
        signature = _sign(ctx, "AWS4-HMAC-SHA256-TRAILER", previous,
                          hashlib.sha256(block).hexdigest())
        out += f"x-amz-trailer-signature:{signature}\r\n".encode()
    return bytes(out + b"\r\n")


def encode_unsigned(data: bytes, chunk_size: int) -> bytes:
    """STREAMING-UNSIGNED-PAYLOAD-TRAILER body written by botocore (boto3's own writer)."""
    return AwsChunkedWrapper(io.BytesIO(data), checksum_cls=Crc32Checksum,
                             checksum_name="x-amz-checksum-crc32", chunk_size=chunk_size).read()


def streaming_ctx(mode: PayloadMode, path: str = "/b/k") -> AuthContext:
    """An AuthContext from a request really signed (by awscrt) for ``mode``."""
    wire = sign_crt("PUT", path, [("host", "localhost"), ("content-encoding", "aws-chunked"),
                                    ("x-amz-decoded-content-length", "1")],
                    body_value=mode.value)
    ctx = wire.auth()
    assert ctx.payload_mode is mode
    return ctx


SIGNED = PayloadMode.STREAMING_SIGNED
SIGNED_TRAILER = PayloadMode.STREAMING_SIGNED_TRAILER
UNSIGNED_TRAILER = PayloadMode.STREAMING_UNSIGNED_TRAILER


# --- helpers -----------------------------------------------------------------------------------


async def _source(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def decode(parts: Iterable[bytes], ctx: AuthContext,
                 decoded_length: int | None = None) -> tuple[bytes, dict[str, str]]:
    decoder = AwsChunkedDecoder(_source(parts), auth=ctx, decoded_length=decoded_length)
    out = b"".join([piece async for piece in decoder])
    return out, decoder.trailers


def split_at(body: bytes, *positions: int) -> list[bytes]:
    cuts = [0, *sorted(positions), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(cuts) if b > a]


# --- AWS documentation example -----------------------------------------------------------------


@pytest.fixture(scope="module")
def doc_ctx() -> AuthContext:
    return DOC_CHUNKED.auth(DOC_NOW)


async def test_documented_example_decodes(doc_ctx: AuthContext) -> None:
    data, trailers = await decode([DOC_BODY], doc_ctx, 66560)
    assert data == b"a" * 66560 and trailers == {}
    assert len(DOC_BODY) == 66824  # the example's Content-Length


async def test_documented_example_at_every_framing_split(doc_ctx: AuthContext) -> None:
    second = DOC_BODY.index(b"400;chunk")
    last = DOC_BODY.index(b"0;chunk", second + 100)
    framing = [*range(100), *range(second - 4, second + 95), *range(last - 10, len(DOC_BODY))]
    for pos in framing:
        data, _ = await decode(split_at(DOC_BODY, pos), doc_ctx, 66560)
        assert data == b"a" * 66560, pos


async def test_documented_example_in_small_reads(doc_ctx: AuthContext) -> None:
    for size in (1, 7, 64, 4096, 65536):
        parts = [DOC_BODY[i:i + size] for i in range(0, len(DOC_BODY), size)]
        data, _ = await decode(parts, doc_ctx, 66560)
        assert data == b"a" * 66560


@pytest.mark.parametrize("position", [90, 30000, 65620, 66700])
async def test_documented_example_tampered_byte(doc_ctx: AuthContext, position: int) -> None:
    assert DOC_BODY[position:position + 1] == b"a"
    body = DOC_BODY[:position] + b"b" + DOC_BODY[position + 1:]
    with pytest.raises(SignatureDoesNotMatch):
        await decode([body], doc_ctx, 66560)


async def test_documented_example_with_another_seed(doc_ctx: AuthContext) -> None:
    other = replace(doc_ctx, seed_signature="0" * 64)
    with pytest.raises(SignatureDoesNotMatch):
        await decode([DOC_BODY], other, 66560)


# --- signed chunks -----------------------------------------------------------------------------


async def test_signed_body_at_every_split_and_byte_by_byte() -> None:
    ctx = streaming_ctx(SIGNED)
    payload = [b"hello ", b"chunked ", b"world" * 3]
    body = encode_signed(ctx, payload)
    expected = b"".join(payload)
    for pos in range(1, len(body)):
        assert (await decode(split_at(body, pos), ctx, len(expected)))[0] == expected, pos
    assert (await decode([body[i:i + 1] for i in range(len(body))], ctx))[0] == expected


async def test_signed_body_three_way_splits() -> None:
    ctx = streaming_ctx(SIGNED)
    body = encode_signed(ctx, [b"abc", b"de"])
    for a in range(1, len(body)):
        for b in range(a + 1, len(body), 7):
            assert (await decode(split_at(body, a, b), ctx, 5))[0] == b"abcde", (a, b)


async def test_empty_signed_body() -> None:
    ctx = streaming_ctx(SIGNED)
    assert await decode([encode_signed(ctx, [])], ctx, 0) == (b"", {})


async def test_reordered_chunks_break_the_chain() -> None:
    ctx = streaming_ctx(SIGNED)
    body = encode_signed(ctx, [b"AAAA", b"BBBB"])
    first = body.index(b"4;chunk")
    second = body.index(b"4;chunk", first + 1)
    end = body.index(b"0;chunk")
    swapped = body[second:end] + body[first:second] + body[end:]
    with pytest.raises(SignatureDoesNotMatch):
        await decode([swapped], ctx, 8)


async def test_chunk_signature_from_another_request_is_rejected() -> None:
    ctx, other = streaming_ctx(SIGNED), streaming_ctx(SIGNED, "/b/other")
    assert other.seed_signature != ctx.seed_signature
    with pytest.raises(SignatureDoesNotMatch):
        await decode([encode_signed(other, [b"data"])], ctx, 4)


async def test_large_read_is_hashed_off_the_loop_and_still_verified() -> None:
    ctx = streaming_ctx(SIGNED)
    payload = bytes(range(256)) * (chunked.HASH_OFFLOAD_BYTES // 256 + 10)
    body = encode_signed(ctx, [payload])
    assert (await decode([body], ctx, len(payload)))[0] == payload
    bad = body[:500] + bytes([body[500] ^ 1]) + body[501:]
    with pytest.raises(SignatureDoesNotMatch):
        await decode([bad], ctx, len(payload))


# --- trailers ----------------------------------------------------------------------------------


async def test_botocore_unsigned_trailer_body_at_every_split() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    payload = b"The quick brown fox jumps over the lazy dog"
    body = encode_unsigned(payload, chunk_size=10)
    assert body.endswith(b"0\r\nx-amz-checksum-crc32:QU+jOQ==\r\n\r\n")
    for pos in range(len(body) + 1):
        data, trailers = await decode(split_at(body, pos), ctx, len(payload))
        assert data == payload and trailers == {"x-amz-checksum-crc32": "QU+jOQ=="}, pos


async def test_signed_trailer_body_at_every_split() -> None:
    ctx = streaming_ctx(SIGNED_TRAILER)
    body = encode_signed(ctx, [b"0123456789", b"abc"], [("x-amz-checksum-crc32c", "sOO8/Q==")])
    for pos in range(len(body) + 1):
        data, trailers = await decode(split_at(body, pos), ctx, 13)
        assert data == b"0123456789abc" and trailers == {"x-amz-checksum-crc32c": "sOO8/Q=="}


async def test_signed_trailer_value_tampered() -> None:
    ctx = streaming_ctx(SIGNED_TRAILER)
    body = encode_signed(ctx, [b"data"], [("x-amz-checksum-crc32", "AAAAAA==")])
    with pytest.raises(SignatureDoesNotMatch):
        await decode([body.replace(b"AAAAAA==", b"AAAAAB==")], ctx, 4)


async def test_signed_trailer_signature_missing_or_wrong() -> None:
    ctx = streaming_ctx(SIGNED_TRAILER)
    body = encode_signed(ctx, [b"data"], [("x-amz-checksum-crc32", "AAAAAA==")])
    line_start = body.index(b"x-amz-trailer-signature:")
    line_end = body.index(b"\r\n", line_start) + 2
    with pytest.raises(InvalidRequest, match="missing x-amz-trailer-signature"):
        await decode([body[:line_start] + body[line_end:]], ctx, 4)
    wrong = body[:line_start] + b"x-amz-trailer-signature:" + b"0" * 64 + body[line_end - 2:]
    with pytest.raises(SignatureDoesNotMatch):
        await decode([wrong], ctx, 4)


@pytest.mark.parametrize(("mode", "trailer_block"), [
    (SIGNED, b"x-amz-checksum-crc32:AAAAAA==\r\n"),
    (UNSIGNED_TRAILER, b"x-amz-checksum-crc32 AAAAAA==\r\n"),
    (UNSIGNED_TRAILER, b"x-amz-checksum-crc32:a\r\nx-amz-checksum-crc32:b\r\n"),
    (UNSIGNED_TRAILER, b"".join(b"x-amz-t%d:v\r\n" % i for i in range(chunked.MAX_TRAILERS + 1))),
    (UNSIGNED_TRAILER, b"x-amz-trailer-signature:" + b"0" * 64 + b"\r\n"),
    (UNSIGNED_TRAILER, b"bad name:v\r\n"),
    (UNSIGNED_TRAILER, "x-amz-checksum-crc32:\u00e9\r\n".encode()),
])
async def test_malformed_trailers(mode: PayloadMode, trailer_block: bytes) -> None:
    ctx = streaming_ctx(mode)
    if mode is SIGNED:
        body = encode_signed(ctx, [b"data"])[:-2] + trailer_block + b"\r\n"
    else:
        body = b"4\r\ndata\r\n0\r\n" + trailer_block + b"\r\n"
    with pytest.raises(InvalidRequest):
        await decode([body], ctx, 4)


async def test_trailer_after_the_trailer_signature() -> None:
    ctx = streaming_ctx(SIGNED_TRAILER)
    body = encode_signed(ctx, [b"data"], [("x-amz-checksum-crc32", "AAAAAA==")])
    with pytest.raises(InvalidRequest):
        await decode([body[:-2] + b"x-amz-late:1\r\n\r\n"], ctx, 4)


# --- truncation, lengths, hostile framing ------------------------------------------------------


async def test_truncation_anywhere_in_a_signed_body_fails() -> None:
    ctx = streaming_ctx(SIGNED)
    body = encode_signed(ctx, [b"hello", b"world"])
    for cut in range(len(body) - 2):  # only the final empty line may be left out
        with pytest.raises(IncompleteBody):
            await decode([body[:cut]], ctx, 10)
    assert (await decode([body[:-2]], ctx, 10))[0] == b"helloworld"


async def test_truncation_of_a_trailer_body_loses_no_data_silently() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    body = encode_unsigned(b"helloworld", chunk_size=4)
    final = body.index(b"0\r\n") + 3
    for cut in range(len(body)):
        try:
            data, trailers = await decode([body[:cut]], ctx, 10)
        except IncompleteBody:
            continue
        # Accepted only at a trailer line boundary, with the whole payload; body.py then
        # insists on the announced checksum trailer.
        assert cut in (final, len(body) - 2) and data == b"helloworld", cut
        assert ("x-amz-checksum-crc32" in trailers) == (cut == len(body) - 2)


async def test_decoded_length_disagreement() -> None:
    ctx = streaming_ctx(SIGNED)
    body = encode_signed(ctx, [b"hello"])
    with pytest.raises(IncompleteBody, match="shorter"):
        await decode([body], ctx, 6)
    with pytest.raises(IncompleteBody, match="longer"):
        await decode([body], ctx, 4)


async def test_chunk_exceeding_decoded_length_fails_before_its_data() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    decoder = AwsChunkedDecoder(_source([b"ffffff\r\n", b"x" * 100]), auth=ctx,
                                decoded_length=10)
    with pytest.raises(IncompleteBody):
        await decoder.__anext__()


async def test_data_after_the_final_chunk() -> None:
    ctx = streaming_ctx(SIGNED)
    with pytest.raises(InvalidRequest, match="after the final chunk"):
        await decode([encode_signed(ctx, [b"x"]) + b"junk"], ctx, 1)


@pytest.mark.parametrize("header", [
    b"zz\r\n", b"0x4\r\n", b" 4\r\n", b"+4\r\n", b"4 \r\n", b"\r\n", b"1_0\r\n",
    b"11111111111111111\r\n", b"4\n", b"4;chunk-signature=abc\r\n",
    b"4;chunk-signature=" + b"A" * 64 + b"\r\n", b"4;x=" + b"a" * 64 + b"\r\n"])
async def test_malformed_chunk_headers(header: bytes) -> None:
    ctx = streaming_ctx(SIGNED)
    with pytest.raises(InvalidRequest):
        await decode([header + b"data\r\n"], ctx)


async def test_unsigned_chunk_in_signed_mode() -> None:
    ctx = streaming_ctx(SIGNED)
    with pytest.raises(InvalidRequest, match="chunk-signature"):
        await decode([b"4\r\ndata\r\n0\r\n\r\n"], ctx, 4)


async def test_chunk_data_longer_than_declared() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    with pytest.raises(InvalidRequest, match="longer than its declared size"):
        await decode([b"2\r\ndata\r\n0\r\n\r\n"], ctx)


async def test_unsigned_mode_ignores_chunk_extensions() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    assert (await decode([b"4;ext=1\r\ndata\r\n0\r\n\r\n"], ctx, 4))[0] == b"data"


async def test_memory_stays_bounded_without_line_ends() -> None:
    ctx = streaming_ctx(SIGNED)
    reads = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal reads
        while True:
            reads += 1
            yield b"f" * 65536

    decoder = AwsChunkedDecoder(endless(), auth=ctx, decoded_length=None)
    with pytest.raises(InvalidRequest, match="too long"):
        await decoder.__anext__()
    assert reads == 1


def test_partial_line_never_exceeds_max_line() -> None:
    parser = ChunkParser(streaming_ctx(SIGNED), None)
    with pytest.raises(InvalidRequest, match="too long"):
        for _ in range(MAX_LINE + 10):
            parser.feed(b"a")
            assert len(parser._partial) <= MAX_LINE + 1


def test_parser_needs_a_streaming_mode() -> None:
    with pytest.raises(ValueError):
        ChunkParser(replace(streaming_ctx(SIGNED), payload_mode=PayloadMode.UNSIGNED), None)


# --- streaming behaviour -------------------------------------------------------------------------


async def test_payload_is_yielded_before_the_chunk_is_complete() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    release = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield b"100000\r\n" + b"x" * 1000  # a 1 MiB chunk, only 1000 bytes so far
        await release.wait()
        yield b"y" * (0x100000 - 1000) + b"\r\n0\r\n\r\n"

    decoder = AwsChunkedDecoder(slow(), auth=ctx, decoded_length=0x100000)
    first = await decoder.__anext__()
    assert first == b"x" * 1000 and not release.is_set()
    release.set()
    rest = b"".join([piece async for piece in decoder])
    assert len(rest) == 0x100000 - 1000


async def test_reads_inside_chunk_data_are_passed_through_uncopied() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    middle = b"m" * 5000
    parts = [b"3000\r\n" + b"a" * 100, middle, b"b" * (0x3000 - 5100) + b"\r\n0\r\n\r\n"]
    decoder = AwsChunkedDecoder(_source(parts), auth=ctx, decoded_length=0x3000)
    pieces = [piece async for piece in decoder]
    assert any(piece is middle for piece in pieces)


async def test_failure_is_raised_again_on_retry() -> None:
    ctx = streaming_ctx(SIGNED)
    decoder = AwsChunkedDecoder(_source([b"zz\r\n"]), auth=ctx, decoded_length=None)
    for _ in range(2):
        with pytest.raises(InvalidRequest):
            await decoder.__anext__()


async def test_exhausted_decoder_stays_exhausted() -> None:
    ctx = streaming_ctx(UNSIGNED_TRAILER)
    decoder = AwsChunkedDecoder(_source([b"1\r\nx\r\n0\r\n\r\n"]), auth=ctx, decoded_length=1)
    assert [piece async for piece in decoder] == [b"x"]
    with pytest.raises(StopAsyncIteration):
        await decoder.__anext__()


async def test_aclose_closes_the_source() -> None:
    closed = False

    async def source() -> AsyncIterator[bytes]:
        nonlocal closed
        try:
            yield b"1\r\n"
            yield b"x\r\n0\r\n\r\n"
        finally:
            closed = True

    decoder = AwsChunkedDecoder(source(), auth=streaming_ctx(UNSIGNED_TRAILER),
                                decoded_length=1)
    await decoder.__anext__()
    await decoder.aclose()
    assert closed


def test_crt_signed_body_value_constant_matches_mode() -> None:
    assert SIGNED.value == crt_auth.AwsSignedBodyValue.STREAMING_AWS4_HMAC_SHA256_PAYLOAD
