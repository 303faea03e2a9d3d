"""HTTP responses for S3: XML documents, errors, and object streams closed on every path."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from backends.core.base import ObjectStream
from gateway.protocol.errors import S3ErrorSpec
from gateway.protocol.xml import document, el

XML_TYPE = "application/xml"
#: the ASGI extension of servers that send file regions with sendfile (gateway.http.zerocopy)
ZEROCOPY = "http.response.zerocopysend"
SMALL_BODY = 256 * 1024


def xml_response(root: str, parts: list[str], *, status: int = 200,
                 headers: Mapping[str, str] | None = None) -> Response:
    return Response(document(root, parts), status_code=status, headers=headers,
                    media_type=XML_TYPE)


def empty_response(status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    response = Response(b"", status_code=status, headers=headers)
    if status in (204, 304) and "content-length" in response.headers:
        del response.headers["content-length"]
    return response


def error_document(spec: S3ErrorSpec, message: str, *, resource: str | None = None,
                   request_id: str | None = None) -> bytes:
    """The S3 error XML of ``spec`` (:func:`gateway.protocol.errors.s3_error_for`): the
    one rendering of an error body, for the application's answers and for those the HTTP
    protocol sends before the application runs (which have no resource or request id)."""
    parts = [el("Code", spec.code), el("Message", message)]
    if resource is not None:
        parts.append(el("Resource", resource))
    if request_id is not None:
        parts.append(el("RequestId", request_id))
    return document("Error", parts, namespace=False)


def error_headers(exc: BaseException, spec: S3ErrorSpec) -> dict[str, str]:
    """The headers an S3 error answer carries besides its body: ``Retry-After`` (the
    error's own, else 1 s for a 503), ``Allow`` for a 405, and those the error names."""
    headers = {}
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    elif spec.status == 503:
        headers["retry-after"] = "1"
    if spec.status == 405:
        headers["allow"] = "GET, PUT, HEAD, DELETE, POST"
    headers.update(getattr(exc, "response_headers", {}))
    return headers


def error_response(spec: S3ErrorSpec, message: str, *, resource: str, request_id: str,
                   head: bool, extra: Mapping[str, str] | None = None) -> Response:
    headers = dict(extra or {})
    if spec.status == 304:
        return empty_response(304, headers)
    if head:
        # HEAD responses carry no body; the code travels in a header for debugging.
        headers["x-amz-error-code"] = spec.code
        return empty_response(spec.status, headers)
    body = error_document(spec, message, resource=resource, request_id=request_id)
    return Response(body, status_code=spec.status, headers=headers, media_type=XML_TYPE)


class ObjectStreamResponse(Response):
    """Streams an :class:`ObjectStream`; the stream is closed however the response ends."""

    def __init__(self, stream: ObjectStream, *, status: int,
                 headers: Mapping[str, str]) -> None:
        super().__init__(None, status_code=status, headers=headers)
        self.stream = stream
        self.headers["content-length"] = str(stream.content_length)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            if scope["method"] == "HEAD":
                await send({"type": "http.response.body", "body": b""})
                return
            if self.stream.content_length > SMALL_BODY and ZEROCOPY in scope.get(
                    "extensions", {}):
                regions = await self.stream.take_regions()
                if regions is not None:  # the kernel sends them (sendfile)
                    for region in regions:
                        await send({"type": ZEROCOPY, "file": region, "offset": region.offset,
                                    "count": region.count, "more_body": True})
                    await send({"type": "http.response.body", "body": b""})
                    return
            if self.stream.content_length <= SMALL_BODY:
                # Nothing worth watching for a disconnect: read it all, send it at once.
                chunks = [chunk async for chunk in self.stream]
                body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                await send({"type": "http.response.body", "body": body})
                return
            sender = asyncio.ensure_future(self._send_body(send))
            watcher = asyncio.ensure_future(_wait_disconnect(receive))
            try:
                done, _ = await asyncio.wait({sender, watcher},
                                             return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (sender, watcher):
                    task.cancel()
                await asyncio.gather(sender, watcher, return_exceptions=True)
            if sender in done:
                sender.result()
        finally:
            await asyncio.shield(self.stream.aclose())

    async def _send_body(self, send: Send) -> None:
        async for chunk in self.stream:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
