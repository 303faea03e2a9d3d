"""CORS through boto3 (Put/Get/DeleteBucketCors) and raw HTTP (preflight, real responses)."""

from __future__ import annotations

import base64
import hashlib

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess
from tests.support.signing import send

RULES = [
    {"ID": "site", "AllowedOrigins": ["https://app.example.com"],
     "AllowedMethods": ["GET", "PUT"], "AllowedHeaders": ["Content-*", "x-amz-meta-*"],
     "ExposeHeaders": ["ETag", "x-amz-request-id"], "MaxAgeSeconds": 600},
    {"AllowedOrigins": ["https://*.example.org"], "AllowedMethods": ["HEAD"]},
    {"AllowedOrigins": ["*"], "AllowedMethods": ["DELETE"]},
]


def _preflight(squall: SquallProcess, bucket: str, key: str, origin: str | None,
               method: str | None, headers: str | None = None) -> httpx.Response:
    sent = {}
    if origin is not None:
        sent["Origin"] = origin
    if method is not None:
        sent["Access-Control-Request-Method"] = method
    if headers is not None:
        sent["Access-Control-Request-Headers"] = headers
    return httpx.options(f"{squall.endpoint}/{bucket}/{key}", headers=sent)


def test_put_get_delete_bucket_cors(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_cors(Bucket=bucket)
    assert code_of(exc) == ("NoSuchCORSConfiguration", 404)
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == RULES
    s3.delete_bucket_cors(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_cors(Bucket=bucket)
    assert code_of(exc) == ("NoSuchCORSConfiguration", 404)
    s3.delete_bucket_cors(Bucket=bucket)  # idempotent
    # A bucket with CORS rules (and tags) can still be deleted.
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket=bucket)
    assert code_of(exc) == ("BucketNotEmpty", 409)
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == RULES
    s3.delete_object(Bucket=bucket, Key="k")
    s3.delete_bucket(Bucket=bucket)
    s3.create_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_cors(Bucket=bucket)
    assert code_of(exc) == ("NoSuchCORSConfiguration", 404)


@pytest.mark.parametrize(("rules", "code"), [
    ([{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}], "InvalidRequest"),
    ([{"AllowedOrigins": ["https://*.*.com"], "AllowedMethods": ["GET"]}], "InvalidRequest"),
    ([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "AllowedHeaders": ["a*b*"]}],
     "InvalidRequest"),
    ([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "ID": "x" * 256}],
     "InvalidArgument"),
])
def test_put_bucket_cors_bad_rules(s3, bucket: str, rules: list, code: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})
    assert code_of(exc) == (code, 400)


def test_put_bucket_cors_bad_documents(squall: SquallProcess, s3, bucket: str) -> None:
    url = f"{squall.endpoint}/{bucket}?cors"
    no_rule = b"<CORSConfiguration></CORSConfiguration>"
    no_origin = (b"<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod>"
                 b"</CORSRule></CORSConfiguration>")
    for body in (no_rule, no_origin, b"<nope/>", b"not xml"):
        response = send("PUT", url, body, {"Content-MD5": _md5(body)})
        assert response.status_code == 400, body
        assert b"<Code>MalformedXML</Code>" in response.content
    response = send("PUT", url, no_rule)
    assert response.status_code == 400 and b"Content-MD5" in response.content
    response = send("PUT", f"{squall.endpoint}/no-such-bucket-cors?cors", no_origin,
                    {"Content-MD5": _md5(no_origin)})
    assert response.status_code in (400, 404)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_cors(Bucket="no-such-bucket-cors")
    assert code_of(exc) == ("NoSuchBucket", 404)


def _md5(body: bytes) -> str:
    return base64.b64encode(hashlib.md5(body).digest()).decode()


def test_preflight_answered_from_the_rules(squall: SquallProcess, s3, bucket: str) -> None:
    response = _preflight(squall, bucket, "k", "https://app.example.com", "GET")
    assert response.status_code == 403  # no CORS configuration yet
    assert b"<Code>AccessForbidden</Code>" in response.content
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    ok = _preflight(squall, bucket, "any/key", "https://app.example.com", "PUT",
                    "Content-Type, X-Amz-Meta-Run")
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "https://app.example.com"
    assert ok.headers["access-control-allow-methods"] == "GET, PUT"
    assert ok.headers["access-control-allow-headers"] == "content-type, x-amz-meta-run"
    assert ok.headers["access-control-expose-headers"] == "ETag, x-amz-request-id"
    assert ok.headers["access-control-max-age"] == "600"
    assert ok.headers["access-control-allow-credentials"] == "true"
    assert "Origin" in ok.headers["vary"]
    wildcard = _preflight(squall, bucket, "", "https://shop.example.org", "HEAD")
    assert wildcard.status_code == 200
    assert wildcard.headers["access-control-allow-origin"] == "https://shop.example.org"
    anyone = _preflight(squall, bucket, "k", "http://elsewhere", "DELETE")
    assert anyone.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in anyone.headers
    for origin, method, headers in (
            ("https://app.example.com", "DELETE", None),  # rule 3 needs no header...
            ("https://evil.example.com", "GET", None),
            ("https://app.example.com", "GET", "Authorization"),
            ("https://example.org", "HEAD", None)):
        denied = _preflight(squall, bucket, "k", origin, method, headers)
        if origin == "https://app.example.com" and method == "DELETE":
            assert denied.status_code == 200  # ...and allows any origin
            continue
        assert denied.status_code == 403, (origin, method, headers)
        assert b"<Code>AccessForbidden</Code>" in denied.content


def test_preflight_bad_requests(squall: SquallProcess, bucket: str) -> None:
    missing_origin = _preflight(squall, bucket, "k", None, "GET")
    assert missing_origin.status_code == 400
    assert b"<Code>BadRequest</Code>" in missing_origin.content
    for method in (None, "PATCH"):
        response = _preflight(squall, bucket, "k", "https://a", method)
        assert response.status_code == 400
        assert b"Access-Control-Request-Method" in response.content
    gone = _preflight(squall, "no-such-bucket-cors", "k", "https://a", "GET")
    assert gone.status_code == 404


def test_cors_headers_on_real_responses(squall: SquallProcess, s3, bucket: str) -> None:
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    s3.put_object(Bucket=bucket, Key="k", Body=b"data")
    url = f"{squall.endpoint}/{bucket}/k"
    got = send("GET", url, headers={"Origin": "https://app.example.com"})
    assert got.status_code == 200 and got.content == b"data"
    assert got.headers["access-control-allow-origin"] == "https://app.example.com"
    assert got.headers["access-control-expose-headers"] == "ETag, x-amz-request-id"
    assert got.headers["vary"] == "Origin"
    missing = send("GET", url + "-missing", headers={"Origin": "https://app.example.com"})
    assert missing.status_code == 404
    assert missing.headers["access-control-allow-origin"] == "https://app.example.com"
    other = send("GET", url, headers={"Origin": "https://evil.example.com"})
    assert other.status_code == 200 and "access-control-allow-origin" not in other.headers
    plain = send("GET", url)
    assert "access-control-allow-origin" not in plain.headers
    # An actual request declaring its method is matched with that method, as RGW does.
    declared = send("DELETE", url + "-x", headers={"Origin": "https://app.example.com",
                                                   "Access-Control-Request-Method": "GET"})
    assert declared.headers["access-control-allow-origin"] == "https://app.example.com"
    head = send("HEAD", url, headers={"Origin": "https://a.example.org"})
    assert head.headers["access-control-allow-origin"] == "https://a.example.org"
