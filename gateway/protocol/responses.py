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


def error_response(spec: S3ErrorSpec, message: str, *, resource: str, request_id: str,
                   head: bool, extra: Mapping[str, str] | None = None) -> Response:
    headers = dict(extra or {})
    if spec.status == 304:
        return empty_response(304, headers)
    if head:
        # HEAD responses carry no body; the code travels in a header for debugging.
        headers["x-amz-error-code"] = spec.code
        return empty_response(spec.status, headers)
    body = document("Error", [el("Code", spec.code), el("Message", message),
                              el("Resource", resource), el("RequestId", request_id)],
                    namespace=False)
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
