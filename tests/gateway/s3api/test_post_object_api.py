"""Browser uploads (POST Object): forms made by boto3's generate_presigned_post (SigV4) and by
hand (SigV2, anonymous), sent with httpx to a real gateway; good and bad inputs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
import xml.etree.ElementTree as ET
from typing import Any

import httpx
import pytest

from tests.gateway.s3api.clients.helpers import parse_error, payload
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def _post(squall: SquallProcess, bucket: str, fields: dict[str, Any], data: bytes,
          filename: str = "upload.bin") -> httpx.Response:
    """The form as a browser sends it: the fields in order, then the file."""
    files = [(name, (None, str(value))) for name, value in fields.items()]
    files.append(("file", (filename, data, "application/octet-stream")))
    return httpx.post(f"{squall.endpoint}/{bucket}", files=files, timeout=60)


def _error(resp: httpx.Response) -> tuple[int, str, str]:
    err = parse_error(resp.status_code, resp.headers, resp.content)
    return err.status, err.code, err.message


def _presigned(s3: Any, bucket: str, key: str, **kwargs: Any) -> dict[str, Any]:
    post: dict[str, Any] = s3.generate_presigned_post(bucket, key, **kwargs)
    return post["fields"]


def test_presigned_post_stores_the_file_with_its_fields(s3, squall: SquallProcess,
                                                        bucket: str) -> None:
    data = payload(300_000, "post")
    fields = _presigned(s3, bucket, "up/${filename}", Fields={
        "Content-Type": "image/png", "x-amz-meta-colour": "blue",
        "success_action_status": "201"}, Conditions=[
        ["starts-with", "$key", "up/"], {"Content-Type": "image/png"},
        {"x-amz-meta-colour": "blue"}, {"success_action_status": "201"},
        ["content-length-range", 1, 1_000_000]])
    resp = _post(squall, bucket, fields, data, filename="C:\\photos\\cat.png")
    assert resp.status_code == 201, resp.text
    root = ET.fromstring(resp.content)
    ns = ""  # S3's PostResponse carries no namespace
    assert root.tag == "PostResponse"
    assert root.findtext(f"{ns}Key") == "up/cat.png"
    assert root.findtext(f"{ns}Bucket") == bucket
    assert root.findtext(f"{ns}Location") == f"{squall.endpoint}/{bucket}/up/cat.png"
    etag = root.findtext(f"{ns}ETag")
    assert etag == f'"{hashlib.md5(data).hexdigest()}"' == resp.headers["etag"]
    got = s3.get_object(Bucket=bucket, Key="up/cat.png")
    assert got["Body"].read() == data
    assert got["ContentType"] == "image/png"
    assert got["Metadata"] == {"colour": "blue"}


def test_default_answer_is_204_and_200_on_request(s3, squall: SquallProcess,
                                                  bucket: str) -> None:
    resp = _post(squall, bucket, _presigned(s3, bucket, "a"), b"x")
    assert resp.status_code == 204 and resp.content == b""
    assert resp.headers["location"] == f"{squall.endpoint}/{bucket}/a"
    fields = _presigned(s3, bucket, "b", Fields={"success_action_status": "200"},
                        Conditions=[{"success_action_status": "200"}])
    assert _post(squall, bucket, fields, b"y").status_code == 200
    # Any other status is 204, as S3 answers.
    fields = _presigned(s3, bucket, "c", Fields={"success_action_status": "404"},
                        Conditions=[{"success_action_status": "404"}])
    assert _post(squall, bucket, fields, b"z").status_code == 204
    assert s3.get_object(Bucket=bucket, Key="c")["Body"].read() == b"z"


def test_success_action_redirect(s3, squall: SquallProcess, bucket: str) -> None:
    target = "https://app.example.com/done?x=1"
    fields = _presigned(s3, bucket, "r k", Fields={"success_action_redirect": target},
                        Conditions=[{"success_action_redirect": target}])
    resp = _post(squall, bucket, fields, b"data")
    assert resp.status_code == 303
    etag = hashlib.md5(b"data").hexdigest()
    assert resp.headers["location"] == \
        f"{target}&bucket={bucket}&key=r%20k&etag=%22{etag}%22"


def test_large_file_streams(s3, squall: SquallProcess, bucket: str) -> None:
    data = payload(12 * 1024 * 1024, "big-post")
    fields = _presigned(s3, bucket, "big", Conditions=[
        ["content-length-range", 0, 20 * 1024 * 1024]])
    resp = _post(squall, bucket, fields, data)
    assert resp.status_code == 204, resp.text
    head = s3.head_object(Bucket=bucket, Key="big")
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'


def test_content_length_range_is_enforced(s3, squall: SquallProcess, bucket: str) -> None:
    fields = _presigned(s3, bucket, "sized", Conditions=[["content-length-range", 10, 100]])
    assert _error(_post(squall, bucket, fields, b"x" * 101)) == (
        400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
    assert _error(_post(squall, bucket, fields, b"x" * 9)) == (
        400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size")
    # Too large found while streaming, long after the first chunk: nothing is stored.
    fields = _presigned(s3, bucket, "sized", Conditions=[["content-length-range", 0, 100_000]])
    assert _error(_post(squall, bucket, fields, payload(3_000_000, "x")))[1] == \
        "EntityTooLarge"
    with pytest.raises(s3.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key="sized")
    assert _post(squall, bucket, fields, b"x" * 100_000).status_code == 204


def test_condition_failures_are_access_denied(s3, squall: SquallProcess, bucket: str) -> None:
    fields = _presigned(s3, bucket, "user/eric/${filename}", Fields={
        "Content-Type": "text/plain"}, Conditions=[
        ["starts-with", "$key", "user/eric/"], ["starts-with", "$Content-Type", "text/"]])
    ok = _post(squall, bucket, fields, b"fine", filename="notes.txt")
    assert ok.status_code == 204
    bad_key = {**fields, "key": "user/other/x"}
    assert _error(_post(squall, bucket, bad_key, b"no")) == (
        403, "AccessDenied",
        ('Invalid according to Policy: Policy Condition failed: ["starts-with", "$key", '
        '"user/eric/"]'))
    bad_type = {**fields, "Content-Type": "image/png"}
    assert _error(_post(squall, bucket, bad_type, b"no"))[2].endswith(
        '["starts-with", "$Content-Type", "text/"]')
    extra = {**fields, "x-amz-meta-sneaky": "1"}
    assert _error(_post(squall, bucket, extra, b"no")) == (
        403, "AccessDenied", ("Invalid according to Policy: Extra input fields: "
        "x-amz-meta-sneaky"))
    # x-ignore-* fields need no condition.
    assert _post(squall, bucket, {**fields, "x-ignore-note": "1"}, b"ok").status_code == 204
    # The policy names the bucket: another bucket refuses it.
    other = f"t-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=other)
    assert _error(_post(squall, other, fields, b"no"))[:2] == (403, "AccessDenied")


def test_expired_policy(s3, squall: SquallProcess, bucket: str) -> None:
    fields = _presigned(s3, bucket, "late", ExpiresIn=-10)
    assert _error(_post(squall, bucket, fields, b"x")) == (
        403, "AccessDenied", "Invalid according to Policy: Policy expired.")


def test_bad_signatures(s3, squall: SquallProcess, bucket: str) -> None:
    fields = _presigned(s3, bucket, "sig")
    forged = {**fields, "x-amz-signature": "0" * 64}
    assert _error(_post(squall, bucket, forged, b"x"))[:2] == (403, "SignatureDoesNotMatch")
    # The policy changed after it was signed.
    document = json.loads(base64.b64decode(fields["policy"]))
    document["conditions"].append(["content-length-range", 0, 10**12])
    changed = {**fields, "policy": base64.b64encode(json.dumps(document).encode()).decode()}
    assert _error(_post(squall, bucket, changed, b"x"))[:2] == (403, "SignatureDoesNotMatch")
    unknown = {**fields, "x-amz-credential": "NOBODY" + fields["x-amz-credential"][16:]}
    assert _error(_post(squall, bucket, unknown, b"x"))[:2] == (403, "InvalidAccessKeyId")


def test_missing_fields_are_invalid_argument(s3, squall: SquallProcess, bucket: str) -> None:
    fields = _presigned(s3, bucket, "k")
    no_key = {k: v for k, v in fields.items() if k != "key"}
    assert _error(_post(squall, bucket, no_key, b"x"))[:2] == (400, "InvalidArgument")
    no_sig = {k: v for k, v in fields.items() if k != "x-amz-signature"}
    status, code, message = _error(_post(squall, bucket, no_sig, b"x"))
    assert (status, code) == (400, "InvalidArgument") and "X-Amz-Signature" in message
    no_policy = {k: v for k, v in fields.items() if k != "policy"}
    assert _error(_post(squall, bucket, no_policy, b"x"))[:2] == (400, "InvalidArgument")
    # No file field at all.
    resp = httpx.post(f"{squall.endpoint}/{bucket}",
                      files=[(n, (None, v)) for n, v in fields.items()])
    assert _error(resp) == (400, "InvalidArgument",
                            "POST requires exactly one file upload per request.")
    # Not a form.
    resp = httpx.post(f"{squall.endpoint}/{bucket}", content=b"key=a",
                      headers={"content-type": "application/x-www-form-urlencoded"})
    assert _error(resp)[:2] == (412, "PreconditionFailed")


def _v2_form(bucket: str, conditions: list[Any], **extra: str) -> dict[str, str]:
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
    policy = base64.b64encode(json.dumps({"expiration": expires,
                                          "conditions": conditions}).encode()).decode()
    signature = base64.b64encode(hmac.digest(SECRET_KEY.encode(), policy.encode(),
                                             hashlib.sha1)).decode()
    return {"AWSAccessKeyId": ACCESS_KEY, "policy": policy, "signature": signature, **extra}


def test_sigv2_policy_and_bad_documents(s3, squall: SquallProcess, bucket: str) -> None:
    conditions = [{"bucket": bucket}, ["starts-with", "$key", "v2/"],
                  ["eq", "$acl", "private"]]
    form = {"key": "v2/a", **_v2_form(bucket, conditions), "acl": "private"}
    assert _post(squall, bucket, form, b"two").status_code == 204
    assert s3.get_object(Bucket=bucket, Key="v2/a")["Body"].read() == b"two"
    # A bucket no condition names is an extra field (the bucket is always one).
    form = {"key": "v2/a", **_v2_form(bucket, conditions[1:]), "acl": "private"}
    assert _error(_post(squall, bucket, form, b"x"))[2] == \
        "Invalid according to Policy: Extra input fields: bucket"
    for document, message in (
            ([{}], ("Invalid Policy: Invalid Simple-Condition: Simple-Conditions must have "
                   "exactly one property specified.")),
            ([["content-length-range", 0]], None),
            ([["between", "$key", "a"]], None)):
        form = {"key": "v2/b", **_v2_form(bucket, document)}
        status, code, text = _error(_post(squall, bucket, form, b"x"))
        assert (status, code) == (400, "InvalidPolicyDocument")
        assert message is None or text == message


def test_anonymous_upload_needs_a_public_bucket(s3, squall: SquallProcess,
                                                bucket: str) -> None:
    assert _error(_post(squall, bucket, {"key": "anon"}, b"x"))[:2] == (403, "AccessDenied")
    public = f"t-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=public, ObjectOwnership="ObjectWriter")
    s3.put_public_access_block(Bucket=public, PublicAccessBlockConfiguration={
        "BlockPublicAcls": False, "IgnorePublicAcls": False, "BlockPublicPolicy": False,
        "RestrictPublicBuckets": False})
    s3.put_bucket_acl(Bucket=public, ACL="public-read-write")
    resp = _post(squall, public, {"key": "anon", "success_action_status": "201"}, b"x")
    assert resp.status_code == 201, resp.text
    assert s3.get_object(Bucket=public, Key="anon")["Body"].read() == b"x"


def test_checksum_field_is_verified(s3, squall: SquallProcess, bucket: str) -> None:
    good = base64.b64encode(hashlib.sha256(b"sum").digest()).decode()
    # A checksum field needs no condition (it only narrows what is accepted).
    fields = {**_presigned(s3, bucket, "sum"), "x-amz-checksum-sha256": good}
    assert _post(squall, bucket, fields, b"sum").status_code == 204
    resp = _post(squall, bucket, fields, b"not the sum")
    assert _error(resp)[:2] == (400, "BadDigest")
    assert s3.get_object(Bucket=bucket, Key="sum")["Body"].read() == b"sum"


def test_upload_from_a_page_gets_the_cors_headers(s3, squall: SquallProcess,
                                                  bucket: str) -> None:
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["POST"],
         "ExposeHeaders": ["ETag", "Location"]}]})
    fields = _presigned(s3, bucket, "from-page")
    files = [(name, (None, str(value))) for name, value in fields.items()]
    files.append(("file", ("a.txt", b"page", "text/plain")))
    resp = httpx.post(f"{squall.endpoint}/{bucket}", files=files,
                      headers={"Origin": "https://app.example.com"})
    assert resp.status_code == 204, resp.text
    assert resp.headers["access-control-allow-origin"] == "https://app.example.com"
    assert resp.headers["access-control-expose-headers"] == "ETag, Location"
    refused = httpx.post(f"{squall.endpoint}/{bucket}", files=files,
                         headers={"Origin": "https://evil.example.com"})
    assert refused.status_code == 204
    assert "access-control-allow-origin" not in refused.headers
