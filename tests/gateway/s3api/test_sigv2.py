"""SigV2 verification against botocore's own V2 signers (header and query string)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from urllib.parse import urlsplit

import pytest
from botocore.auth import HmacV1Auth, HmacV1QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.protocol.errors import (
    AccessDenied,
    AuthorizationQueryParametersError,
    ExpiredPresignedRequest,
    InvalidAccessKeyId,
    InvalidArgument,
    RequestTimeTooSkewed,
    SignatureDoesNotMatch,
)
from gateway.s3api.sigv2 import authenticate_v2, canonical_resource, is_sigv2, parse_query
from gateway.s3api.sigv4 import AuthContext, PayloadMode

AK = "SQUALLTESTKEY"
SK = "squall/test+secret"


def secret_for(key: str) -> str | None:
    return SK if key == AK else None


def _headers(request: AWSRequest) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        out.setdefault(name.lower(), []).append(value)
    return out


def verify(request: AWSRequest, *, now: float | None = None,
           virtual_bucket: str | None = None) -> AuthContext:
    url = urlsplit(request.url)
    return authenticate_v2(method=request.method, raw_path=url.path, query=url.query,
                           headers=_headers(request), virtual_bucket=virtual_bucket,
                           secret_for=secret_for, now=time.time() if now is None else now,
                           region="eu-west-3")


def signed(method: str, url: str, headers: dict[str, str] | None = None,
           secret: str = SK, auth_path: str | None = None) -> AWSRequest:
    request = AWSRequest(method=method, url=url, headers=dict(headers or {}))
    if auth_path is not None:
        request.auth_path = auth_path  # type: ignore[attr-defined]
    HmacV1Auth(Credentials(AK, secret)).add_auth(request)
    return request


def presigned(method: str, url: str, expires: int = 3600) -> AWSRequest:
    request = AWSRequest(method=method, url=url, headers={})
    HmacV1QueryAuth(Credentials(AK, SK), expires=expires).add_auth(request)
    return request


@pytest.mark.parametrize("url", [
    "http://h/b/k", "http://h/b/dir/k%C3%A9%20y%2Bz", "http://h/", "http://h/b",
    "http://h/b/k?uploads", "http://h/b/k?uploadId=abc&partNumber=3",
    "http://h/b/k?versionId=v1&response-content-type=text/plain",
    "http://h/b?list-type=2&prefix=a&max-keys=3", "http://h/b?tagging",
])
def test_header_signatures_of_botocore_verify(url: str) -> None:
    for method in ("GET", "PUT", "HEAD", "DELETE"):
        request = signed(method, url, {"Content-Type": "text/plain", "Content-MD5": "abc=",
                                       "x-amz-meta-Run": " 42 ", "X-Amz-Tagging": "a=b"})
        auth = verify(request)
        assert (auth.access_key, auth.region, auth.presigned) == (AK, "eu-west-3", False)
        assert auth.payload_mode is PayloadMode.UNSIGNED


def test_virtual_hosted_resource_names_the_bucket() -> None:
    request = signed("GET", "http://b.example.com/k", auth_path="/b/k")
    verify(request, virtual_bucket="b")
    with pytest.raises(SignatureDoesNotMatch):
        verify(request)
    assert canonical_resource("/k", parse_query("acl&x=1"), "b") == "/b/k?acl"


def test_presigned_urls_of_botocore_verify() -> None:
    for url in ("http://h/b/k", "http://h/b/k%20x?versionId=v", "http://h/b/k?uploads"):
        for method in ("GET", "PUT"):
            auth = verify(presigned(method, url))
            assert auth.presigned and auth.access_key == AK


def test_tampering_is_a_signature_mismatch() -> None:
    request = signed("PUT", "http://h/b/k", {"Content-Type": "a/b"})
    for name, value in (("Content-Type", "a/c"), ("Content-MD5", "x"),
                        ("x-amz-meta-added", "1")):
        changed = signed("PUT", "http://h/b/k", {"Content-Type": "a/b"})
        changed.headers[name] = value
        with pytest.raises(SignatureDoesNotMatch):
            verify(changed)
    request.method = "DELETE"
    with pytest.raises(SignatureDoesNotMatch):
        verify(request)
    with pytest.raises(SignatureDoesNotMatch):
        verify(signed("GET", "http://h/b/k", secret="wrong"))
    url = presigned("GET", "http://h/b/k").url
    tampered = AWSRequest(method="GET", url=url.replace("/b/k", "/b/other"))
    with pytest.raises(SignatureDoesNotMatch):
        verify(tampered)


def test_clock_skew_and_dates() -> None:
    request = signed("GET", "http://h/b/k")
    verify(request, now=time.time() + 14 * 60)
    with pytest.raises(RequestTimeTooSkewed):
        verify(request, now=time.time() + 16 * 60)
    with pytest.raises(RequestTimeTooSkewed):
        verify(request, now=time.time() - 16 * 60)
    del request.headers["Date"]
    with pytest.raises(AccessDenied, match="Date"):
        verify(request)
    request.headers["Date"] = "not a date"
    with pytest.raises(AccessDenied, match="Date"):
        verify(request)


def test_x_amz_date_replaces_date_in_the_string_to_sign() -> None:
    request = AWSRequest(method="GET", url="http://h/b/k", headers={})
    HmacV1Auth(Credentials(AK, SK)).add_auth(request)
    # Re-sign by hand as S3 documents it: an empty Date line, x-amz-date in the amz headers.
    stamp = request.headers["Date"]
    text = f"GET\n\n\n\nx-amz-date:{stamp}\n/b/k"
    sig = base64.b64encode(hmac.digest(SK.encode(), text.encode(), hashlib.sha1)).decode()
    manual = AWSRequest(method="GET", url="http://h/b/k",
                        headers={"x-amz-date": stamp, "Authorization": f"AWS {AK}:{sig}"})
    verify(manual)


def test_presigned_expiry() -> None:
    request = presigned("GET", "http://h/b/k", expires=60)
    with pytest.raises(ExpiredPresignedRequest):
        verify(request, now=time.time() + 61)
    far = presigned("GET", "http://h/b/k", expires=8 * 86400)
    with pytest.raises(AuthorizationQueryParametersError, match="week"):
        verify(far)
    verify(presigned("GET", "http://h/b/k", expires=7 * 86400))


@pytest.mark.parametrize("drop", ["AWSAccessKeyId", "Signature", "Expires"])
def test_presigned_missing_parameter(drop: str) -> None:
    url = urlsplit(presigned("GET", "http://h/b/k").url)
    query = "&".join(p for p in url.query.split("&") if not p.startswith(drop + "="))
    request = AWSRequest(method="GET", url=f"http://h/b/k?{query}")
    with pytest.raises(AccessDenied, match="requires"):
        verify(request)


def test_presigned_bad_expires_and_unknown_key() -> None:
    with pytest.raises(AccessDenied, match="Invalid date"):
        verify(AWSRequest(method="GET",
                          url=f"http://h/b/k?AWSAccessKeyId={AK}&Signature=x&Expires=soon"))
    request = AWSRequest(method="GET", url="http://h/b/k", headers={
        "Date": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
        "Authorization": "AWS NOBODY:c2ln"})
    with pytest.raises(InvalidAccessKeyId):
        verify(request)


@pytest.mark.parametrize("value", ["AWS ", "AWS nocolon", "AWS :sig", "AWS key:"])
def test_malformed_authorization_header(value: str) -> None:
    request = AWSRequest(method="GET", url="http://h/b/k", headers={"Authorization": value})
    with pytest.raises(InvalidArgument):
        verify(request)


def test_header_and_query_at_once_is_rejected() -> None:
    url = presigned("GET", "http://h/b/k").url
    request = signed("GET", url)
    with pytest.raises(InvalidArgument, match="Only one auth mechanism"):
        verify(request)


def test_detection() -> None:
    assert is_sigv2({"authorization": ["AWS a:b"]}, "")
    assert not is_sigv2({"authorization": ["AWS4-HMAC-SHA256 Credential=..."]}, "")
    assert is_sigv2({}, "AWSAccessKeyId=a&Signature=b&Expires=1")
    assert not is_sigv2({}, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=x")
    assert not is_sigv2({}, "prefix=a")
