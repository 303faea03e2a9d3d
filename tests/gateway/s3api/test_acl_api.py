"""The wire shapes of the ACL, ownership controls and public access block documents, and
what an unsigned request gets, on the session gateway (the admin signs)."""

from __future__ import annotations

from typing import Any

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from defusedxml import ElementTree

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
XSI_TYPE = "{http://www.w3.org/2001/XMLSchema-instance}type"


def signed(squall: SquallProcess, method: str, path: str, body: bytes = b"") -> httpx.Response:
    url = f"{squall.endpoint}{path}"
    request = AWSRequest(method=method, url=url, data=body)
    S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    return httpx.request(method, url, content=body, headers=dict(request.headers.items()),
                         timeout=10)


def test_get_bucket_acl_is_an_access_control_policy(squall: SquallProcess, bucket: str,
                                                    s3: Any) -> None:
    response = signed(squall, "GET", f"/{bucket}?acl")
    assert response.status_code == 200 and response.headers["content-type"] == \
        "application/xml"
    root = ElementTree.fromstring(response.content)
    assert root.tag == f"{NS}AccessControlPolicy"
    owner = root.find(f"{NS}Owner")
    assert owner is not None and owner.findtext(f"{NS}DisplayName") == "admin"
    admin_id = s3.list_buckets()["Owner"]["ID"]
    assert owner.findtext(f"{NS}ID") == admin_id
    grants = root.findall(f"{NS}AccessControlList/{NS}Grant")
    assert len(grants) == 1
    grantee = grants[0].find(f"{NS}Grantee")
    assert grantee is not None and grantee.get(XSI_TYPE) == "CanonicalUser"
    assert grantee.findtext(f"{NS}ID") == admin_id
    assert grants[0].findtext(f"{NS}Permission") == "FULL_CONTROL"


def test_ownership_and_public_access_block_documents(squall: SquallProcess,
                                                     bucket: str) -> None:
    controls = ElementTree.fromstring(signed(squall, "GET", f"/{bucket}?ownershipControls")
                                      .content)
    assert controls.findtext(f"{NS}Rule/{NS}ObjectOwnership") == "BucketOwnerEnforced"
    block = ElementTree.fromstring(signed(squall, "GET", f"/{bucket}?publicAccessBlock")
                                   .content)
    assert block.tag == f"{NS}PublicAccessBlockConfiguration"
    assert [child.tag[len(NS):] for child in block] == [
        "BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"]
    assert {child.text for child in block} == {"true"}
    bad = signed(squall, "PUT", f"/{bucket}?publicAccessBlock",
                 b"<PublicAccessBlockConfiguration><BlockPublicAcls>yes</BlockPublicAcls>"
                 b"</PublicAccessBlockConfiguration>")
    assert bad.status_code == 400 and "<Code>MalformedXML</Code>" in bad.text
    bad = signed(squall, "PUT", f"/{bucket}?ownershipControls",
                 b"<OwnershipControls><Rule><ObjectOwnership>Mine</ObjectOwnership></Rule>"
                 b"</OwnershipControls>")
    assert bad.status_code == 400 and "<Code>MalformedXML</Code>" in bad.text
    assert signed(squall, "POST", f"/{bucket}?acl").status_code == 405


def test_unsigned_requests_to_a_private_bucket(squall: SquallProcess, bucket: str,
                                               s3: Any) -> None:
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    for method, path in (("GET", f"/{bucket}/k"), ("GET", f"/{bucket}"),
                         ("GET", f"/{bucket}?acl"), ("PUT", f"/{bucket}/k"),
                         ("DELETE", f"/{bucket}/k"), ("GET", "/")):
        response = httpx.request(method, f"{squall.endpoint}{path}", timeout=10)
        assert response.status_code == 403, (method, path, response.text)
        assert "<Code>AccessDenied</Code>" in response.text
    head = httpx.head(f"{squall.endpoint}/{bucket}/k", timeout=10)
    assert head.status_code == 403 and head.content == b""
    missing = httpx.get(f"{squall.endpoint}/no-such-bucket-{bucket}", timeout=10)
    assert missing.status_code == 404 and "<Code>NoSuchBucket</Code>" in missing.text
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
