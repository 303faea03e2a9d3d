"""aws-chunked request bodies: streaming decoding with chunk and trailer signature checks.

Wire format (AWS S3 API reference, "sigv4-streaming" and "sigv4-streaming-trailers")::

    signed chunks:   <hex size>;chunk-signature=<sig>\\r\\n<data>\\r\\n ... 0;chunk-signature=<sig>\\r\\n
    unsigned chunks: <hex size>\\r\\n<data>\\r\\n ... 0\\r\\n
    then trailers:   [<name>:<value>\\r\\n ...] [x-amz-trailer-signature:<sig>\\r\\n] \\r\\n

Chunk ``n`` is signed over ``AWS4-HMAC-SHA256-PAYLOAD, date, scope, signature(n-1),
sha256(""), sha256(data n)``, the chain starting at the request's seed signature; the
trailer signature is over ``AWS4-HMAC-SHA256-TRAILER, date, scope, signature(final chunk),
sha256(trailer lines, each ending in "\\n")``.

Payload bytes are handed on as they arrive (a read that lies inside one chunk is passed
through without a copy). Memory is bounded: besides the read being parsed, at most one
partial header or trailer line (:data:`MAX_LINE` bytes) is kept.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
from collections.abc import AsyncIterator

from backends.core.blocking import run_blocking
from backends.core.errors import IncompleteBody
from gateway.protocol.errors import InvalidRequest, SignatureDoesNotMatch
from gateway.s3api.sigv4 import EMPTY_SHA256, AuthContext, PayloadMode, sign_hex

MAX_LINE = 4096  # longest chunk-header or trailer line accepted, without its CRLF
MAX_TRAILERS = 16
#: chunks at least this large are hashed in a worker thread, smaller ones on the event
#: loop. Measured: SHA-256 of 64 KiB takes ~33 us, MD5 ~77 us, a thread hop ~27 us of CPU;
#: the server hands the body in reads of up to 256 KiB, so large bodies do go to threads.
HASH_OFFLOAD_BYTES = 64 * 1024

_HEX_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
_SIGNATURE = re.compile(rb"[0-9a-f]{64}")
_TRAILER_NAME = re.compile(rb"[a-z0-9!#$%&'*+.^_`|~-]+")
_CHUNK_SIGNATURE = b"chunk-signature="
_TRAILER_SIGNATURE = b"x-amz-trailer-signature"


class _State(enum.Enum):
    HEADER = "chunk header line"
    DATA = "chunk data"
    DATA_END = "CRLF after chunk data"
    TRAILER = "trailer line"
    DONE = "done"


_HEADER = _State.HEADER
_DATA = _State.DATA
_DATA_END = _State.DATA_END
_TRAILER = _State.TRAILER
_DONE = _State.DONE


def _malformed(what: str) -> InvalidRequest:
    return InvalidRequest(f"Malformed aws-chunked body: {what}.")


class ChunkParser:
    """Incremental aws-chunked parser: :meth:`feed` network reads, get payload pieces back.

    Raises SignatureDoesNotMatch on a bad chunk or trailer signature, IncompleteBody when
    the payload length disagrees with ``decoded_length`` or the body is cut short, and
    InvalidRequest on malformed framing.
    """

    __slots__ = ("_decoded_length", "_expected", "_hash", "_key", "_mode", "_partial",
                 "_prefix", "_previous", "_remaining", "_state", "_total", "_trailer_hash",
                 "_trailer_signature", "trailers")

    def __init__(self, auth: AuthContext, decoded_length: int | None) -> None:
        self._mode = auth.payload_mode
        if not self._mode.streaming:
            raise ValueError(f"not an aws-chunked payload mode: {self._mode}")
        self._decoded_length = decoded_length
        self._key = auth.signing_key
        self._previous = auth.seed_signature
        self._prefix = f"{auth.amz_date}\n{auth.scope}\n"
        self._state = _HEADER
        self._partial = bytearray()
        self._remaining = 0
        self._total = 0
        self._expected = ""
        self._hash: hashlib._Hash | None = None
        self._trailer_hash = (hashlib.sha256()
                              if self._mode is PayloadMode.STREAMING_SIGNED_TRAILER else None)
        self._trailer_signature: str | None = None
        self.trailers: dict[str, str] = {}

    @property
    def hashing(self) -> bool:
        """Chunk data is hashed (signed chunks): large reads are worth a worker thread."""
        return self._mode.signed_chunks

    @property
    def done(self) -> bool:
        return self._state is _DONE

    def feed(self, data: bytes) -> list[bytes]:
        """Parse one read; the payload pieces it contained, in order (possibly none)."""
        out: list[bytes] = []
        pos = 0
        end = len(data)
        while pos < end:
            if self._state is _DATA:
                remaining = self._remaining
                take = min(end - pos, remaining)
                piece = data if take == end else data[pos:pos + take]
                chunk_hash = self._hash
                if chunk_hash is not None:
                    chunk_hash.update(piece)
                out.append(piece)
                pos += take
                remaining -= take
                self._remaining = remaining
                if remaining == 0:
                    if chunk_hash is not None:
                        self._verify_chunk(chunk_hash.hexdigest())
                    self._state = _DATA_END
            elif self._state is _DONE:
                raise _malformed("data after the final chunk")
            else:
                pos = self._feed_line(data, pos, end)
        return out

    def finish(self) -> None:
        """The body ended: raise unless it ended where aws-chunked allows it to."""
        if self._state is _DONE:
            return
        if self._state is _TRAILER and not self._partial:
            self._on_trailer_line(b"")  # tolerate a missing final empty line
            return
        raise IncompleteBody("The aws-chunked body ended before its final chunk.")

    # --- lines -----------------------------------------------------------------------------

    def _feed_line(self, data: bytes, pos: int, end: int) -> int:
        partial = self._partial
        room = MAX_LINE + 1 - len(partial)  # line + its CR may still take this many bytes
        nl = data.find(b"\n", pos, min(end, pos + room + 1))
        if nl < 0:
            if end - pos > room:
                raise _malformed(f"{self._state.value} too long")
            partial += data[pos:end]
            return end
        if partial:
            partial += data[pos:nl]
            line = bytes(partial)
            partial.clear()
        else:
            line = data[pos:nl]
        if not line.endswith(b"\r"):
            raise _malformed(f"{self._state.value} not terminated by CRLF")
        line = line[:-1]
        state = self._state
        if state is _HEADER:
            self._on_header(line)
        elif state is _DATA_END:
            if line:
                raise _malformed("chunk data longer than its declared size")
            self._state = _HEADER
        else:
            self._on_trailer_line(line)
        return nl + 1

    def _on_header(self, line: bytes) -> None:
        size_text, _, extension = line.partition(b";")
        if not _HEX_SIZE.fullmatch(size_text):
            raise _malformed("invalid chunk size")
        size = int(size_text, 16)
        if self._mode.signed_chunks:
            if (not extension.startswith(_CHUNK_SIGNATURE)
                    or not _SIGNATURE.fullmatch(extension, len(_CHUNK_SIGNATURE))):
                raise _malformed("missing or invalid chunk-signature")
            self._expected = extension[len(_CHUNK_SIGNATURE):].decode("ascii")
        total = self._total + size
        if self._decoded_length is not None and total > self._decoded_length:
            raise IncompleteBody("The aws-chunked body is longer than "
                                 "x-amz-decoded-content-length.")
        self._total = total
        if size == 0:
            if self._mode.signed_chunks:
                self._verify_chunk(EMPTY_SHA256)
            self._state = _TRAILER
            return
        self._remaining = size
        self._hash = hashlib.sha256() if self._mode.signed_chunks else None
        self._state = _DATA

    def _on_trailer_line(self, line: bytes) -> None:
        if not line:
            self._end_of_trailers()
            return
        if not self._mode.trailer:
            raise _malformed("trailing headers need a STREAMING-*-TRAILER x-amz-content-sha256")
        raw_name, colon, raw_value = line.partition(b":")
        name = raw_name.strip().lower()
        value = raw_value.strip()
        if not colon or not _TRAILER_NAME.fullmatch(name) or not value.isascii():
            raise _malformed("invalid trailer line")
        if name == _TRAILER_SIGNATURE:
            if self._trailer_hash is None or self._trailer_signature is not None:
                raise _malformed("unexpected x-amz-trailer-signature")
            if not _SIGNATURE.fullmatch(value):
                raise _malformed("invalid x-amz-trailer-signature")
            self._trailer_signature = value.decode("ascii")
            return
        if self._trailer_signature is not None:
            raise _malformed("trailer after x-amz-trailer-signature")
        key = name.decode("ascii")
        if key in self.trailers or len(self.trailers) >= MAX_TRAILERS:
            raise _malformed("repeated or too many trailers")
        self.trailers[key] = value.decode("ascii")
        if self._trailer_hash is not None:
            self._trailer_hash.update(line)
            self._trailer_hash.update(b"\n")

    def _end_of_trailers(self) -> None:
        if self._trailer_hash is not None:
            if self._trailer_signature is None:
                raise _malformed("missing x-amz-trailer-signature")
            string_to_sign = (f"AWS4-HMAC-SHA256-TRAILER\n{self._prefix}{self._previous}\n"
                              f"{self._trailer_hash.hexdigest()}")
            if not hmac.compare_digest(sign_hex(self._key, string_to_sign),
                                       self._trailer_signature):
                raise SignatureDoesNotMatch()
        if self._decoded_length is not None and self._total != self._decoded_length:
            raise IncompleteBody("The aws-chunked body is shorter than "
                                 "x-amz-decoded-content-length.")
        self._state = _DONE

    def _verify_chunk(self, data_sha256: str) -> None:
        string_to_sign = (f"AWS4-HMAC-SHA256-PAYLOAD\n{self._prefix}{self._previous}\n"
                          f"{EMPTY_SHA256}\n{data_sha256}")
        signature = sign_hex(self._key, string_to_sign)
        if not hmac.compare_digest(signature, self._expected):
            raise SignatureDoesNotMatch()
        self._previous = signature


class AwsChunkedDecoder:
    """The decoded payload of an aws-chunked body, as ``AsyncIterator[bytes]``.

    Every framing or signature failure is raised from ``__anext__`` (never swallowed into a
    clean end), and raised again if iteration is retried. ``trailers`` (lowercase names) is
    filled once the body is exhausted.
    """

    __slots__ = ("_failure", "_finished", "_parser", "_pending", "_source", "trailers")

    def __init__(self, source: AsyncIterator[bytes], *, auth: AuthContext,
                 decoded_length: int | None) -> None:
        self._source = source
        self._parser = ChunkParser(auth, decoded_length)
        self._pending: list[bytes] = []  # pieces of the last read, in reverse order
        self._failure: Exception | None = None
        self._finished = False
        self.trailers: dict[str, str] = {}

    def __aiter__(self) -> AwsChunkedDecoder:
        return self

    async def __anext__(self) -> bytes:
        if self._pending:
            return self._pending.pop()
        if self._failure is not None:
            raise self._failure
        if self._finished:
            raise StopAsyncIteration
        parser = self._parser
        try:
            while True:
                try:
                    data = await self._source.__anext__()
                except StopAsyncIteration:
                    parser.finish()
                    self.trailers = parser.trailers
                    self._finished = True
                    raise
                if type(data) is not bytes:
                    data = bytes(data)
                if len(data) >= HASH_OFFLOAD_BYTES and parser.hashing:
                    pieces = await run_blocking(parser.feed, data)
                else:
                    pieces = parser.feed(data)
                if len(pieces) == 1:
                    return pieces[0]
                if pieces:
                    pieces.reverse()
                    self._pending = pieces
                    return pieces.pop()
        except StopAsyncIteration:
            raise
        except Exception as exc:
            self._failure = exc
            raise

    async def aclose(self) -> None:
        """Close the underlying source if it can be closed."""
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()
