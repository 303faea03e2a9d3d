"""A streaming reader of the ``multipart/form-data`` body of a browser upload (POST Object).

The fields before the ``file`` field are read into memory (at most
:data:`MAX_FIELDS_BYTES`, as S3 bounds them); the file's bytes are then an async iterator
that reads the request as it is consumed, so memory stays bounded by the request's chunks
whatever the upload's size. Fields after the file are ignored, as S3 ignores them. The
parsing is python-multipart's push parser, fed chunk by chunk.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from backends.core.errors import IncompleteBody
from gateway.protocol.errors import (
    InvalidArgument,
    MalformedPOSTRequest,
    MaxPostPreDataLengthExceeded,
    PreconditionFailedPost,
)

#: what the fields before the file may weigh together (S3: 20 KB)
MAX_FIELDS_BYTES = 20 * 1024
_FILE_FIELD = "file"
_NOT_FORM = "Bucket POST must be of the enclosure-type multipart/form-data"


@dataclass(slots=True)
class _Part:
    headers: dict[str, str] = field(default_factory=dict)
    name: str = ""
    filename: str | None = None
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class FormUpload:
    """The fields of a browser upload (lowercase names, first occurrence) and its file."""

    fields: dict[str, str]
    names: dict[str, str]  # lowercase name -> the name as the form sent it
    filename: str  # the file part's filename ("" when it has none)
    file: AsyncIterator[bytes]


def boundary_of(content_type: str) -> bytes:
    """The multipart boundary of a ``multipart/form-data`` content type; S3's 412 when the
    body is another kind."""
    kind, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if kind.lower() != b"multipart/form-data" or not boundary:
        raise PreconditionFailedPost(_NOT_FORM)
    return boundary


class _Reader:
    """Feeds the request's chunks to the parser and collects what the callbacks say."""

    def __init__(self, source: AsyncIterator[bytes], boundary: bytes) -> None:
        self._source = source
        self._part: _Part | None = None
        self._header_name = bytearray()
        self._header_value = bytearray()
        self.parts: list[_Part] = []  # finished field parts, in order
        self.file: _Part | None = None  # the file part, once its headers are read
        self.file_data: list[bytes] = []  # its bytes, waiting to be consumed
        self.file_done = False
        self.ended = False
        self.fields_bytes = 0
        self._parser = MultipartParser(boundary, {
            "on_part_begin": self._begin, "on_part_data": self._data,
            "on_part_end": self._end, "on_header_field": self._hname,
            "on_header_value": self._hvalue, "on_header_end": self._hend,
            "on_headers_finished": self._headers_done, "on_end": self._finish,
        }, max_header_count=16, max_header_size=8192)

    # --- parser callbacks ----------------------------------------------------------------
    def _begin(self) -> None:
        self._part = _Part()

    def _hname(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _hvalue(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _hend(self) -> None:
        assert self._part is not None
        self._part.headers[self._header_name.decode("latin-1").lower()] = \
            self._header_value.decode("utf-8", "replace")
        self._header_name.clear()
        self._header_value.clear()

    def _headers_done(self) -> None:
        part = self._part
        assert part is not None
        _, params = parse_options_header(part.headers.get("content-disposition", ""))
        part.name = params.get(b"name", b"").decode("utf-8", "replace")
        raw = params.get(b"filename")
        part.filename = None if raw is None else raw.decode("utf-8", "replace")
        if part.name.lower() == _FILE_FIELD and self.file is None:
            self.file = part

    def _data(self, data: bytes, start: int, end: int) -> None:
        part = self._part
        if part is None or self.file_done:
            return
        if part is self.file:
            self.file_data.append(data[start:end])
            return
        if self.file is not None:
            return  # a field after the file: ignored
        self.fields_bytes += end - start
        if self.fields_bytes > MAX_FIELDS_BYTES:
            raise MaxPostPreDataLengthExceeded()
        part.data += data[start:end]

    def _end(self) -> None:
        part = self._part
        if part is self.file:
            self.file_done = True
        elif part is not None and self.file is None:
            self.parts.append(part)
        self._part = None

    def _finish(self) -> None:
        self.ended = True

    # --- feeding -------------------------------------------------------------------------
    async def feed_more(self) -> bool:
        """Parse the next chunk of the request; False at its end."""
        try:
            chunk = await self._source.__anext__()
        except StopAsyncIteration:
            return False
        try:
            self._parser.write(chunk)
        except MultipartParseError:
            raise MalformedPOSTRequest() from None
        return True


async def read_form(source: AsyncIterator[bytes], content_type: str) -> FormUpload:
    """The fields of the form up to its file field, and the file's bytes as a stream.

    InvalidArgument when the form has no file field; MalformedPOSTRequest when it is not a
    well-formed multipart body; the stream raises IncompleteBody when the request ends
    before the file does.
    """
    reader = _Reader(source, boundary_of(content_type))
    while reader.file is None:
        if not await reader.feed_more():
            if not reader.ended:
                raise MalformedPOSTRequest()
            raise InvalidArgument("POST requires exactly one file upload per request.")
    fields: dict[str, str] = {}
    names: dict[str, str] = {}
    for part in reader.parts:
        lower = part.name.lower()
        if lower not in fields:
            fields[lower] = part.data.decode("utf-8", "replace")
            names[lower] = part.name
    return FormUpload(fields=fields, names=names, filename=reader.file.filename or "",
                      file=_file_stream(reader))


async def _file_stream(reader: _Reader) -> AsyncIterator[bytes]:
    """The file part's bytes as they arrive; the rest of the form is read and ignored."""
    while True:
        while reader.file_data:
            chunk = reader.file_data.pop(0)
            if chunk:
                yield chunk
        if reader.file_done:
            break
        if not await reader.feed_more():
            raise IncompleteBody("The request ended before the file field of the form.")
    while await reader.feed_more():  # the closing boundary, fields after the file
        pass


_FILENAME_DIRS = re.compile(r".*[/\\]")


def base_filename(filename: str) -> str:
    """The name a browser gives a file, without any directory it may have added."""
    return _FILENAME_DIRS.sub("", filename)
