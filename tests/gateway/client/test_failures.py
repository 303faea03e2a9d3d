"""The one error handler of the client commands: each failure one line and its status."""

from __future__ import annotations

import ssl

import httpx
import pytest

from gateway.client.credentials import MissingCredentials
from gateway.client.failures import (
    FAILED,
    USAGE,
    BadAnswer,
    ClientFailure,
    Refused,
    Unreachable,
    exit_status,
    json_of,
    reaching,
    reason,
)
from tests.support.server import free_port


def _answer(status: int, content: bytes = b"", **kw: str) -> httpx.Response:
    return httpx.Response(status, content=content, headers=kw,
                          request=httpx.Request("GET", "http://gw:9000/_squall/x"))


def _run(main: object) -> tuple[int, list[str]]:
    lines: list[str] = []

    def body() -> int:
        if isinstance(main, BaseException):
            raise main
        return int(main)  # type: ignore[call-overload]

    return exit_status("squall x", body, report=lines.append), lines


def test_an_unreachable_gateway_is_named_with_the_systems_reason() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(Unreachable) as caught, reaching(endpoint):
        httpx.get(endpoint + "/_squall/status", timeout=5)
    assert str(caught.value) == f"cannot reach {endpoint}: Connection refused"
    assert caught.value.status == FAILED


def test_an_untrusted_certificate_names_the_ca_bundle_option() -> None:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.reason = "CERTIFICATE_VERIFY_FAILED"
    error.verify_message = "self-signed certificate in certificate chain"
    try:
        try:
            raise error
        except ssl.SSLError as exc:
            raise httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] ...") from exc
    except httpx.ConnectError as exc:
        text = reason(exc)
    assert text.startswith("TLS certificate verify failed: self-signed certificate in "
                           "certificate chain (CERTIFICATE_VERIFY_FAILED)")
    assert "--ca-bundle or AWS_CA_BUNDLE" in text


def test_a_broken_connection_is_lost_not_unreachable() -> None:
    with pytest.raises(Unreachable, match="^lost the connection to http://gw: "), \
            reaching("http://gw"):
        raise httpx.RemoteProtocolError("peer closed connection")


@pytest.mark.parametrize(("answer", "line"), [
    (_answer(403, b'{"error": "AccessDenied", "message": "Access Denied."}'),
     "AccessDenied: Access Denied"),
    (_answer(403, b'{"error": "SignatureDoesNotMatch", "message": "no."}'),
     ("SignatureDoesNotMatch: no (check SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY (or "
     "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY))")),
    (_answer(404, b"<?xml version='1.0'?><Error><Code>NoSuchBucket</Code><Message>The "
                  b"specified bucket does not exist</Message></Error>"),
     "NoSuchBucket: The specified bucket does not exist"),
    (_answer(502, b"<html>\n<body>Bad\n gateway</body></html>"),
     "HTTP 502: <html> <body>Bad gateway</body></html>"),
    (_answer(403), "HTTP 403"),
])
def test_a_refusal_is_its_code_and_message_on_one_line(answer: httpx.Response,
                                                       line: str) -> None:
    assert str(Refused.of(answer)) == line
    with pytest.raises(Refused):
        json_of(answer)


def test_answers_that_are_not_a_gateways() -> None:
    assert json_of(_answer(200, b'{"a": 1}')) == {"a": 1}
    assert json_of(_answer(204)) is None
    with pytest.raises(BadAnswer, match="did not answer JSON"):
        json_of(_answer(200, b"<html>"))


@pytest.mark.parametrize(("failure", "status", "line"), [
    (MissingCredentials("no credentials: set X"), USAGE, "squall x: no credentials: set X"),
    (ValueError("--ca-bundle /x: cannot read it"), USAGE, ("squall x: --ca-bundle /x: "
                                                          "cannot read it")),
    (Refused("NoSuchBucket", "gone"), FAILED, "squall x: NoSuchBucket: gone"),
    (ClientFailure("etcd did not answer"), FAILED, "squall x: etcd did not answer"),
    (FileNotFoundError(2, "No such file or directory", "/out.csv"), FAILED,
     "squall x: No such file or directory: /out.csv"),
    (httpx.ConnectError("[Errno 111] Connection refused",
                        request=httpx.Request("GET", "http://gw:9/_squall/status")),
     FAILED, "squall x: cannot reach http://gw:9: Connection refused"),
    (httpx.HTTPStatusError("", request=_answer(403).request,
                           response=_answer(403, b'{"error": "AccessDenied"}')),
     FAILED, "squall x: AccessDenied"),
])
def test_every_failure_is_one_line_and_its_exit_status(failure: BaseException, status: int,
                                                       line: str) -> None:
    assert _run(failure) == (status, [line])


def test_success_passes_through_and_bugs_are_not_hidden() -> None:
    assert _run(3) == (3, [])
    with pytest.raises(KeyError):
        _run(KeyError("a bug"))
