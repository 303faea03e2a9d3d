"""S3 error answers the HTTP protocol writes itself (requests refused before, or relayed
past, the application), rendered as the application renders its own."""

from __future__ import annotations

from http import HTTPStatus

from gateway.protocol.errors import s3_error_for
from gateway.protocol.responses import XML_TYPE, error_document, error_headers


def error_answer(error: BaseException) -> tuple[int, list[tuple[str, str]], bytes]:
    """The status, headers and body of the S3 answer to ``error``, as the one mapping
    (:mod:`gateway.protocol.errors`) and its renderer (:mod:`gateway.protocol.responses`)
    make them for the application's answers."""
    spec, message = s3_error_for(error)
    body = error_document(spec, message)
    headers = [("content-type", XML_TYPE), ("content-length", str(len(body))),
               ("server", "Squall"), *error_headers(error, spec).items()]
    return spec.status, headers, body


def closing_answer(error: BaseException) -> bytes:
    """A whole HTTP/1.1 response to ``error`` that closes the connection."""
    status, headers, body = error_answer(error)
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
            *(f"{name}: {value}" for name, value in headers), "connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body
