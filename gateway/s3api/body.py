"""The request-body pipeline: aws-chunked decoding, length, payload-hash and checksum checks.

:func:`request_body` wraps the raw HTTP body in a :class:`RequestBody`. Every verification
failure (short body, ``x-amz-content-sha256`` mismatch, checksum mismatch, bad chunk
signature) is raised from ``__anext__`` in place of the final ``StopAsyncIteration``, so a
backend that consumes the body never commits one that failed. Once exhausted, ``facts.checksum``
is ``(ALGORITHM, base64)`` when the client sent or asked for an additional checksum; it is
what :func:`backends.core.base.final_meta` picks up.

Error codes follow S3: a checksum value that is not valid base64 of the right size is
``InvalidRequest`` ("Value for x-amz-checksum-crc32 header is invalid."), a mismatch is
``BadDigest`` ("The CRC32 you specified did not match the calculated checksum.").
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from backends.core.base import CHECKSUM_ALGORITHMS, BodyFacts, DescribedBody
from backends.core.blocking import run_blocking
from backends.core.checksums import Hasher, algorithm_from_header_name, decode_value, new_hasher
from backends.core.errors import BadDigest, IncompleteBody
from backends.core.numbers import natural
from gateway.protocol.errors import (
    InvalidArgument,
    InvalidRequest,
    MissingContentLength,
    XAmzContentSHA256Mismatch,
)
from gateway.s3api.chunked import HASH_OFFLOAD_BYTES, AwsChunkedDecoder
from gateway.s3api.sigv4 import AuthContext, PayloadMode

_CHECKSUM_PREFIX = "x-amz-checksum-"
#: ``x-amz-checksum-*`` headers that carry no checksum value
_NOT_VALUES = frozenset({"x-amz-checksum-algorithm", "x-amz-checksum-type",
                         "x-amz-checksum-mode"})
_MULTIPLE = ("Expecting a single x-amz-checksum- header. Multiple checksum Types are not "
             "allowed.")
_UNSUPPORTED = ("Checksum algorithm provided is unsupported. Please try again with any of the "
                "valid types: [" + ", ".join(CHECKSUM_ALGORITHMS) + "]")


@dataclass(frozen=True, slots=True)
class ChecksumPlan:
    """Which additional checksum to compute, and where the client's value comes from."""

    algorithm: str
    expected: bytes | None = None  # raw digest from an x-amz-checksum-* header
    trailer: str | None = None  # trailer name carrying the value (aws-chunked)


class RequestBody(DescribedBody):
    """A verifying ``AsyncIterator[bytes]`` over a request body (see the module docstring)."""

    __slots__ = ("_count", "_decoder", "_expected_length", "_failure", "_finished", "_hasher",
                 "_plan", "_sha", "_sha_expected", "_source")

    def __init__(self, source: AsyncIterator[bytes], *, decoder: AwsChunkedDecoder | None,
                 expected_length: int | None, payload_sha256: str | None,
                 plan: ChecksumPlan | None) -> None:
        super().__init__(BodyFacts(checksum_algorithm=plan.algorithm if plan else None,
                                   declared_length=expected_length))
        self._source = source
        self._decoder = decoder
        self._expected_length = expected_length
        self._count = 0
        self._sha = hashlib.sha256() if payload_sha256 is not None else None
        self._sha_expected = payload_sha256
        self._plan = plan
        self._hasher: Hasher | None = new_hasher(plan.algorithm) if plan else None
        self._failure: Exception | None = None
        self._finished = False

    async def __anext__(self) -> bytes:
        if self._failure is not None:
            raise self._failure
        if self._finished:
            raise StopAsyncIteration
        try:
            try:
                chunk = await self._source.__anext__()
            except StopAsyncIteration:
                self._finish()
                raise
            count = self._count + len(chunk)
            self._count = count
            if self._expected_length is not None and count > self._expected_length:
                raise IncompleteBody("The request body is longer than its Content-Length.")
            hasher = self._hasher
            if self._sha is not None or hasher is not None:
                # SHA-256 and SHA-1 in a worker thread; a CRC costs less than the hop
                slow = self._sha is not None or (hasher is not None and not hasher.cheap)
                if slow and len(chunk) >= HASH_OFFLOAD_BYTES:
                    await run_blocking(self._update, chunk)
                else:
                    self._update(chunk)
            return chunk
        except StopAsyncIteration:
            raise
        except Exception as exc:
            self._failure = exc
            raise

    async def aclose(self) -> None:
        """Close the underlying stream if it can be closed."""
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()

    def _update(self, chunk: bytes) -> None:
        if self._sha is not None:
            self._sha.update(chunk)
        if self._hasher is not None:
            self._hasher.update(chunk)

    def _finish(self) -> None:
        if self._expected_length is not None and self._count != self._expected_length:
            raise IncompleteBody()
        if self._sha is not None and self._sha.hexdigest() != self._sha_expected:
            raise XAmzContentSHA256Mismatch()
        plan = self._plan
        if plan is not None and self._hasher is not None:
            actual = self._hasher.digest()
            expected = plan.expected
            if plan.trailer is not None:
                trailers = self._decoder.trailers if self._decoder is not None else {}
                value = trailers.get(plan.trailer)
                if value is None:
                    raise InvalidRequest(f"The {plan.trailer} trailer announced in "
                                         "x-amz-trailer was not sent.")
                expected = decode_value(plan.algorithm, value)
                if expected is None:
                    raise InvalidRequest(f"Value for {plan.trailer} trailing header is invalid.")
            if expected is not None and expected != actual:
                raise BadDigest(f"The {plan.algorithm} you specified did not match the "
                                "calculated checksum.")
            self.facts.checksum = (plan.algorithm, base64.b64encode(actual).decode("ascii"))
        self._finished = True


def request_body(raw: AsyncIterator[bytes], headers: Mapping[str, str],
                 auth: AuthContext) -> RequestBody:
    """The verifying body for a request whose lowercase headers are ``headers``.

    Header problems found before any byte is read are raised here: MissingContentLength
    (streaming without x-amz-decoded-content-length), InvalidArgument (a length that is not
    a number), InvalidRequest (checksum headers that contradict each other or are invalid).
    """
    mode = auth.payload_mode
    plan = checksum_plan(headers, mode)
    if mode.streaming:
        decoded = headers.get("x-amz-decoded-content-length")
        if decoded is None:
            raise MissingContentLength()
        decoder = AwsChunkedDecoder(raw, auth=auth,
                                    decoded_length=_length(decoded,
                                                           "x-amz-decoded-content-length"))
        body = RequestBody(decoder, decoder=decoder, expected_length=None,
                           payload_sha256=None, plan=plan)
        body.facts.declared_length = _length(decoded, "x-amz-decoded-content-length")
        return body
    length = headers.get("content-length")
    return RequestBody(raw, decoder=None,
                       expected_length=None if length is None else _length(length,
                                                                           "Content-Length"),
                       payload_sha256=auth.payload_sha256 if mode is PayloadMode.SIGNED else None,
                       plan=plan)


def checksum_plan(headers: Mapping[str, str], mode: PayloadMode) -> ChecksumPlan | None:
    """The additional checksum a request asks for, validated the way S3 does; None if none.

    Sources: one ``x-amz-checksum-<alg>`` header, or one trailer named by ``x-amz-trailer``
    (aws-chunked trailer modes only); ``x-amz-sdk-checksum-algorithm`` must agree, and alone
    it asks the server to compute that checksum.
    """
    values: list[tuple[str, str, str]] = []
    for name, value in headers.items():
        if name.startswith(_CHECKSUM_PREFIX) and name not in _NOT_VALUES:
            algorithm = algorithm_from_header_name(name)
            if algorithm is None:  # never ignored: the client asked for a check
                raise InvalidRequest(_UNSUPPORTED)
            values.append((algorithm, name, value))
    trailers: list[tuple[str, str]] = []
    announced = headers.get("x-amz-trailer")
    if announced is not None:
        for item in announced.split(","):
            name = item.strip().lower()
            if not name:
                continue
            algorithm = algorithm_from_header_name(name)
            if algorithm is None:
                raise InvalidRequest("The value specified in the x-amz-trailer header is not "
                                     "supported")
            trailers.append((algorithm, name))
        if trailers and not mode.trailer:
            raise InvalidRequest("x-amz-trailer needs a STREAMING-UNSIGNED-PAYLOAD-TRAILER or "
                                 "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER payload.")
    if len(values) + len(trailers) > 1:
        raise InvalidRequest(_MULTIPLE)
    sdk = headers.get("x-amz-sdk-checksum-algorithm")
    requested = sdk.strip().upper() if sdk is not None else None
    if requested is not None and requested not in CHECKSUM_ALGORITHMS:
        raise InvalidRequest(_UNSUPPORTED)
    if values:
        algorithm, name, value = values[0]
        if requested is not None and requested != algorithm:
            raise InvalidRequest("Value for x-amz-sdk-checksum-algorithm header is invalid.")
        expected = decode_value(algorithm, value)
        if expected is None:
            raise InvalidRequest(f"Value for {name} header is invalid.")
        return ChecksumPlan(algorithm, expected=expected)
    if trailers:
        algorithm, name = trailers[0]
        if requested is not None and requested != algorithm:
            raise InvalidRequest("Value for x-amz-sdk-checksum-algorithm header is invalid.")
        return ChecksumPlan(algorithm, trailer=name)
    if requested is not None:
        return ChecksumPlan(requested)
    return None


def _length(value: str, name: str) -> int:
    length = natural(value.strip())
    if length is None:
        raise InvalidArgument(f"The {name} header is not a valid non-negative integer.")
    return length
