"""What can go wrong on a client's side of a gateway, and the one handler that turns it into
one line and an exit status, for every ``squall`` command that talks to a gateway and for
the mount's checks before it mounts.

Exit status: 2 for bad input found here (an option, missing credentials, an unreadable CA
bundle: a ``ValueError``); 1 when the gateway cannot be reached, refuses, or answers
something that is not a gateway's answer (a :class:`ClientFailure`), or a local file
cannot be written (``OSError``).

Foreign exceptions are translated at the edge: :func:`reaching` turns httpx's into
:class:`Unreachable`, whose reason comes from the exception chain (a certificate that is
not trusted names ``--ca-bundle``); :meth:`Refused.of` reads the gateway's error answer.
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from xml.etree import ElementTree

import httpx

from gateway.client import credentials

USAGE = 2
FAILED = 1
#: error codes that mean the key pair itself was refused
_BAD_CREDENTIALS = frozenset({"SignatureDoesNotMatch", "InvalidAccessKeyId"})
CREDENTIALS_HINT = f"check {credentials.FROM}"
CA_HINT = "give the CA of its certificate with --ca-bundle or AWS_CA_BUNDLE"


class ClientFailure(Exception):
    """A failure to report in one line, with exit status :data:`FAILED`."""

    status = FAILED


class Unreachable(ClientFailure):
    """The gateway could not be reached (``lost``: the connection broke off after it was
    made)."""

    def __init__(self, endpoint: str, cause: BaseException, *, lost: bool = False) -> None:
        self.endpoint = endpoint
        doing = "lost the connection to" if lost else "cannot reach"
        super().__init__(f"{doing} {endpoint}: {reason(cause)}")


class Refused(ClientFailure):
    """The gateway answered with an error: its code (``HTTP <status>`` without one) and
    message."""

    def __init__(self, code: str, message: str, *, what: str = "") -> None:
        self.code = code
        text = f"{code}: {message}" if message else code
        if code in _BAD_CREDENTIALS:
            text += f" ({CREDENTIALS_HINT})"
        super().__init__(f"{what} refused: {text}" if what else text)

    @classmethod
    def of(cls, response: httpx.Response, *, what: str = "") -> Refused:
        """The refusal of ``response`` (an admin route's JSON error, an S3 XML error, or
        the status and the start of the body)."""
        code, message = error_of(response)
        return cls(code, message, what=what)


class BadAnswer(ClientFailure):
    """The answer is not one a gateway gives (not JSON, an unknown document)."""


def reason(exc: BaseException) -> str:
    """Why a connection failed, from the exception and its causes: a TLS failure, the
    operating system's error (connection refused, unknown host...), else the message."""
    chain = list(_chain(exc))
    for cause in chain:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (f"TLS certificate verify failed: {cause.verify_message} "
                    f"({cause.reason}); {CA_HINT}")
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed: {cause.reason or cause}"
    for cause in chain:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
    text = str(exc) or type(exc).__name__
    return text.split("] ", 1)[-1] if text.startswith("[Errno") else text


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


@contextmanager
def reaching(endpoint: str) -> Iterator[None]:
    """Raise :class:`Unreachable` ``from`` any httpx transport error inside the block."""
    try:
        yield
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise Unreachable(endpoint, exc) from exc
    except httpx.HTTPError as exc:
        raise Unreachable(endpoint, exc, lost=True) from exc


def error_of(response: httpx.Response) -> tuple[str, str]:
    """The code and message of an error answer: an admin route's ``{"error", "message"}``,
    an S3 ``<Error>`` document, else ``HTTP <status>`` and the start of the body."""
    try:
        body = response.json()
        if isinstance(body, dict) and "error" in body:
            return str(body["error"]), str(body.get("message", "")).rstrip(".")
    except ValueError:
        pass
    try:
        root = ElementTree.fromstring(response.content)
        if root.tag == "Error" and root.findtext("Code"):
            return str(root.findtext("Code")), (root.findtext("Message") or "").rstrip(".")
    except ElementTree.ParseError:
        pass
    return f"HTTP {response.status_code}", " ".join(response.text[:200].split())


def checked(response: httpx.Response, *, what: str = "") -> httpx.Response:
    """``response`` if it is a success (2xx); else its :class:`Refused`."""
    if not response.is_success:
        raise Refused.of(response, what=what)
    return response


def json_of(response: httpx.Response) -> Any:
    """The JSON of a successful answer (None for one without a body); :class:`BadAnswer`
    when it is not JSON."""
    if not checked(response).content:
        return None
    try:
        return response.json()
    except ValueError as exc:
        raise BadAnswer(f"{response.request.url} did not answer JSON (not a Squall "
                        "gateway?)") from exc


def exit_status(name: str, main: Callable[[], int], *,
                report: Callable[[str], None] | None = None) -> int:
    """Run a command's ``main`` and return its exit status; a failure is one
    ``name: message`` line (to stderr, or to ``report``) and its status."""
    try:
        return main()
    except ClientFailure as exc:
        status, message = exc.status, str(exc)
    except httpx.HTTPStatusError as exc:
        status, message = FAILED, str(Refused.of(exc.response))
    except httpx.HTTPError as exc:  # outside ``reaching``: the endpoint of its request
        status, message = FAILED, str(Unreachable(_endpoint_of(exc), exc))
    except ValueError as exc:
        status, message = USAGE, str(exc)
    except OSError as exc:  # a local file
        where = f": {exc.filename}" if exc.filename else ""
        status, message = FAILED, f"{exc.strerror or exc}{where}"
    (report or _to_stderr)(f"{name}: {message}")
    return status


def _endpoint_of(exc: httpx.HTTPError) -> str:
    try:
        url = exc.request.url
    except RuntimeError:  # no request attached
        return "the gateway"
    return f"{url.scheme}://{url.netloc.decode()}"


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)
