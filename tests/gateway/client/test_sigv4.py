"""The one client signer: the same headers and signature as botocore's S3SigV4Auth for the
same request, and the canonical paths and queries it expects."""

from __future__ import annotations

import datetime
import hashlib
from unittest import mock

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials as BotoCredentials

from gateway.client.credentials import Credentials
from gateway.client.sigv4 import Signer, object_path, query_string

NOW = datetime.datetime(2024, 2, 29, 23, 59, 58, tzinfo=datetime.UTC)
BASE = "http://127.0.0.1:9000/bucket/"

REQUESTS = [
    ("HEAD", BASE + "dir/file.dat", {}),
    ("PUT", BASE + "dir/file.dat", {"Content-Length": "4096", "x-amz-meta-mode": "33188",
                                    "x-amz-checksum-crc32c": "AAAAAA=="}),
    ("GET", BASE + "a%20b/%C3%BC%2Bx~", {"Range": "bytes=0-99", "If-Match": '"abc"'}),
    ("GET", BASE + "?list-type=2&prefix=a%20b%2F&max-keys=1000&encoding-type=url", {}),
    ("PUT", BASE + "k?partNumber=3&uploadId=x%2By", {"Content-Length": "5"}),
    ("POST", BASE + "k?uploads", {"X-Custom": "  spaced   value "}),
    ("DELETE", "http://Gateway.Example:80/bucket/k", {"User-Agent": "not signed"}),
    ("GET", "https://gw.example:443/_squall/status?workers=all", {}),
    ("GET", "https://gw.example:8443/_squall/qos?bucket=b&user=", {}),
    ("GET", "http://[::1]:9000/bucket", {}),
    ("GET", "http://[::1]/bucket", {}),
    ("GET", "http://127.0.0.1:9000/", {}),
]


def _botocore(method: str, url: str, headers: dict[str, str], body: bytes, *,
              sign_payload: bool, token: str | None, region: str) -> dict[str, str]:
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    request.context["client_config"] = Config(s3={"payload_signing_enabled": sign_payload})
    auth = S3SigV4Auth(BotoCredentials("AKID", "se/cret+key", token), "s3", region)
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW):
        auth.add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize(("method", "url", "headers"), REQUESTS)
@pytest.mark.parametrize(("sign_payload", "token", "region"),
                         [(False, None, "us-east-1"), (True, None, "eu-west-1"),
                          (False, "session/token", "us-east-1")])
def test_same_signature_as_botocore(method: str, url: str, headers: dict[str, str],
                                    sign_payload: bool, token: str | None,
                                    region: str) -> None:
    body = b"hello" if method in ("PUT", "POST") else b""
    signer = Signer(Credentials("AKID", "se/cret+key", token), region,
                    sign_payload=sign_payload, clock=NOW.timestamp)
    ours = signer.sign(method, url, headers, body)
    theirs = _botocore(method, url, headers, body, sign_payload=sign_payload, token=token,
                       region=region)
    assert ours == theirs


def test_the_signing_key_follows_the_day() -> None:
    now = [NOW.timestamp()]
    signer = Signer(Credentials("AKID", "se/cret+key"), clock=lambda: now[0])
    first = signer.sign("GET", BASE)
    now[0] += 2  # past midnight: a new day, a new key
    second = signer.sign("GET", BASE)
    assert "/20240229/" in first["Authorization"] and "/20240301/" in second["Authorization"]
    with mock.patch("botocore.auth.get_current_datetime",
                    return_value=NOW + datetime.timedelta(seconds=2)):
        request = AWSRequest(method="GET", url=BASE, data=b"")
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
        S3SigV4Auth(BotoCredentials("AKID", "se/cret+key"), "s3", "us-east-1").add_auth(request)
    assert second["Authorization"] == request.headers["Authorization"]


def test_unsigned_payload_by_default() -> None:
    headers = Signer(Credentials("AK", "SK")).sign(
        "PUT", "http://127.0.0.1:9000/b/k", {"Content-Length": "3"}, b"abc")
    assert headers["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AK/")
    assert headers["Content-Length"] == "3"


def test_signed_payload_on_request() -> None:
    headers = Signer(Credentials("AK", "SK"), "eu-west-1", sign_payload=True).sign(
        "PUT", "http://127.0.0.1:9000/b/k", None, memoryview(b"abc"))
    assert headers["X-Amz-Content-SHA256"] == hashlib.sha256(b"abc").hexdigest()
    assert "/eu-west-1/s3/aws4_request" in headers["Authorization"]


def test_a_previous_signature_is_replaced() -> None:
    signer = Signer(Credentials("AK", "SK"), clock=NOW.timestamp)
    once = signer.sign("GET", BASE)
    assert signer.sign("GET", BASE, once) == once


def test_an_empty_path_is_signed_as_the_one_sent() -> None:
    # HTTP sends "/" (botocore would sign an empty path)
    signer = Signer(Credentials("AK", "SK"), clock=NOW.timestamp)
    assert signer.sign("GET", "http://h:9000") == signer.sign("GET", "http://h:9000/")


def test_paths_and_queries_are_encoded_for_s3() -> None:
    assert object_path("b") == "/b"
    assert object_path("b", "a dir/ü+x~") == "/b/a%20dir/%C3%BC%2Bx~"
    assert query_string({"prefix": "a b/", "list-type": "2"}) == "list-type=2&prefix=a%20b%2F"
    assert query_string(None) == ""
