"""Bad inputs on the wire: every one gets the right S3 error and loses nothing."""

from __future__ import annotations

import base64
import hashlib
import re
import time

import httpx
import pytest

from tests.support.server import SquallProcess
from tests.support.signing import send, signed_headers


def error_code(response: httpx.Response) -> str:
    match = re.search(r"<Code>([^<]+)</Code>", response.text)
    return match.group(1) if match else response.headers.get("x-amz-error-code", "")


def test_anonymous_request_is_access_denied(squall: SquallProcess) -> None:
    response = httpx.get(f"{squall.endpoint}/")
    assert response.status_code == 403
    assert error_code(response) == "AccessDenied"
    assert "<RequestId>" in response.text
    assert response.headers["x-amz-request-id"]


def test_unknown_access_key(squall: SquallProcess) -> None:
    response = send("GET", f"{squall.endpoint}/", access_key="NOPE")
    assert (response.status_code, error_code(response)) == (403, "InvalidAccessKeyId")


def test_wrong_secret(squall: SquallProcess) -> None:
    response = send("GET", f"{squall.endpoint}/", secret_key="wrong")
    assert (response.status_code, error_code(response)) == (403, "SignatureDoesNotMatch")


def test_clock_skew(squall: SquallProcess) -> None:
    url = f"{squall.endpoint}/"
    response = httpx.get(url, headers=signed_headers("GET", url, clock_offset_s=-3600))
    assert (response.status_code, error_code(response)) == (403, "RequestTimeTooSkewed")


def test_tampered_body_hash(squall: SquallProcess, bucket: str) -> None:
    url = f"{squall.endpoint}/{bucket}/k"
    headers = signed_headers("PUT", url, b"original")
    response = httpx.put(url, content=b"tampered", headers=headers)
    assert response.status_code in (400, 403)
    assert error_code(response) in ("XAmzContentSHA256Mismatch", "SignatureDoesNotMatch")
    assert send("GET", url).status_code == 404


def test_malformed_xml(squall: SquallProcess, bucket: str) -> None:
    url = f"{squall.endpoint}/{bucket}?delete="
    body = b"<Delete><Object><Key>unterminated"
    response = send("POST", url, body,
                    {"content-md5": base64.b64encode(hashlib.md5(body).digest()).decode()})
    assert (response.status_code, error_code(response)) == (400, "MalformedXML")


def test_xml_entity_expansion_refused(squall: SquallProcess, bucket: str) -> None:
    body = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
            b"<Tagging><TagSet><Tag><Key>&b;</Key><Value>v</Value></Tag></TagSet></Tagging>")
    send("PUT", f"{squall.endpoint}/{bucket}/k", b"x")
    response = send("PUT", f"{squall.endpoint}/{bucket}/k?tagging=", body)
    assert (response.status_code, error_code(response)) == (400, "MalformedXML")


@pytest.mark.parametrize("path", ["%2e%2e/%2e%2e/etc/passwd", "..%2f..%2fcredentials.json",
                                  "a/%2e%2e/%2e%2e/%2e%2e/x"])
def test_traversal_never_leaves_the_bucket(squall: SquallProcess, bucket: str,
                                           path: str) -> None:
    url = f"{squall.endpoint}/{bucket}/{path}"
    assert send("GET", url).status_code == 404
    assert send("PUT", url, b"inside").status_code == 200
    assert send("GET", url).content == b"inside"
    assert not (squall.data_dir.parent / "x").exists()
    assert (squall.data_dir / "credentials.json").exists() is False or \
        b"inside" not in (squall.data_dir / "credentials.json").read_bytes()


def test_unknown_subresource_is_not_implemented(squall: SquallProcess, bucket: str) -> None:
    response = send("GET", f"{squall.endpoint}/{bucket}?website=")
    assert (response.status_code, error_code(response)) == (501, "NotImplemented")


def test_wrong_method_is_method_not_allowed(squall: SquallProcess, bucket: str) -> None:
    response = send("POST", f"{squall.endpoint}/{bucket}/key")
    assert (response.status_code, error_code(response)) == (405, "MethodNotAllowed")


def test_delete_objects_requires_a_digest(squall: SquallProcess, bucket: str) -> None:
    body = b"<Delete><Object><Key>a</Key></Object></Delete>"
    response = send("POST", f"{squall.endpoint}/{bucket}?delete=", body)
    assert response.status_code == 400


def test_missing_bucket_errors(squall: SquallProcess) -> None:
    response = send("GET", f"{squall.endpoint}/no-such-bucket-here/key")
    assert (response.status_code, error_code(response)) == (404, "NoSuchBucket")
    response = send("PUT", f"{squall.endpoint}/no-such-bucket-here/key", b"x")
    assert (response.status_code, error_code(response)) == (404, "NoSuchBucket")


def test_presigned_url_expiry(squall: SquallProcess, s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="p", Body=b"presigned")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"},
                                    ExpiresIn=60)
    assert httpx.get(url).content == b"presigned"
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"},
                                        ExpiresIn=1)
    time.sleep(2.1)
    response = httpx.get(expired)
    assert (response.status_code, error_code(response)) == (403, "AccessDenied")
    tampered = url.replace("Key=p", "Key=q").replace(f"/{bucket}/p", f"/{bucket}/q")
    assert httpx.get(tampered).status_code == 403


def test_virtual_hosted_style(tmp_path) -> None:
    from tests.conftest import make_client

    server = SquallProcess(tmp_path / "vh", ["--domain", "s3.localhost"]).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="vhost")
        s3.put_object(Bucket="vhost", Key="k", Body=b"hosted")
        url = f"http://vhost.s3.localhost:{server.port}/k"
        headers = {**signed_headers("GET", url), "host": f"vhost.s3.localhost:{server.port}"}
        response = httpx.get(f"{server.endpoint}/k", headers=headers)
        assert response.content == b"hosted"
    finally:
        server.stop()
