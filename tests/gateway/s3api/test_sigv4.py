"""SigV4 verification against AWS's published vectors and real signers (botocore, awscrt)."""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from awscrt import auth as crt_auth
from awscrt import http as crt_http
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config
from botocore.credentials import Credentials

from gateway.protocol.errors import (
    AccessDenied,
    AuthorizationHeaderMalformed,
    AuthorizationQueryParametersError,
    ExpiredPresignedRequest,
    InvalidAccessKeyId,
    InvalidArgument,
    InvalidRequest,
    RequestTimeTooSkewed,
    SignatureDoesNotMatch,
)
from gateway.s3api import sigv4
from gateway.s3api.sigv4 import AuthContext, PayloadMode, authenticate

# The credentials and instant of every example in the AWS SigV4 documentation for S3.
DOC_KEY = "AKIAIOSFODNN7EXAMPLE"
DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DOC_NOW = float(calendar.timegm((2013, 5, 24, 0, 0, 0)))
DOC_HOST = "examplebucket.s3.amazonaws.com"
EMPTY = sigv4.EMPTY_SHA256

AK = "SQUALLTESTKEY"
SK = "squall/test+secret"
SECRETS = {AK: SK, DOC_KEY: DOC_SECRET}


def secret_for(key: str) -> str | None:
    return SECRETS.get(key)


# --- a real boto3 client whose requests are captured instead of sent ---------------------


class _EmptyRaw:
    def stream(self, **_: Any) -> Any:
        yield b""


@dataclass
class Wire:
    """One HTTP request as it would leave the client."""

    method: str
    raw_path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def with_header(self, name: str, value: str | None) -> Wire:
        headers = [(k, v) for k, v in self.headers if k != name]
        if value is not None:
            headers.append((name, value))
        return Wire(self.method, self.raw_path, self.query, headers, self.body)

    def auth(self, now: float | None = None, **kw: Any) -> AuthContext:
        return authenticate(method=self.method, raw_path=self.raw_path, query=self.query,
                            headers=self.headers, secret_for=kw.pop("secret_for", secret_for),
                            now=time.time() if now is None else now, **kw)


def _text(value: object) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def wire_from(method: str, url: str, headers: Any, body: Any) -> Wire:
    parts = urlsplit(url)
    pairs = [(k.lower(), _text(v)) for k, v in headers.items()]
    if not any(k == "host" for k, _ in pairs):
        pairs.append(("host", parts.netloc))
    if hasattr(body, "read"):
        body = body.read()
    return Wire(method, parts.path, parts.query, pairs, body or b"")


@dataclass
class BotoCapture:
    """A boto3 S3 client (real signing, real checksums) that records requests, sends none."""

    endpoint: str = "https://s3.example.com"
    region: str = "us-east-1"
    config: dict[str, Any] = field(default_factory=dict)
    sent: list[Wire] = field(default_factory=list)

    def __post_init__(self) -> None:
        options = {"retries": {"max_attempts": 1}, "signature_version": "s3v4", **self.config}
        options["s3"] = {"addressing_style": "path", **options.get("s3", {})}
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=self.region,
            aws_access_key_id=AK, aws_secret_access_key=SK, config=Config(**options))
        self.client.meta.events.register("before-send.s3", self._capture)

    def _capture(self, request: Any, **_: Any) -> AWSResponse:
        self.sent.append(wire_from(request.method, request.url, request.headers, request.body))
        return AWSResponse(request.url, 200, {}, _EmptyRaw())

    def call(self, operation: str, **params: Any) -> Wire:
        self.sent.clear()
        getattr(self.client, operation)(**params)
        assert self.sent, operation
        return self.sent[-1]

    def presign(self, operation: str, expires: int = 3600, **params: Any) -> Wire:
        url = self.client.generate_presigned_url(operation, Params=params, ExpiresIn=expires,
                                                 HttpMethod=None)
        method = {"get_object": "GET", "put_object": "PUT", "head_object": "HEAD",
                  "delete_object": "DELETE", "upload_part": "PUT"}[operation]
        return wire_from(method, url, {}, b"")


def sign_botocore(method: str, url: str, headers: dict[str, str] | None = None,
                  body: bytes = b"", *, signer: type = S3SigV4Auth, region: str = "us-east-1",
                  **kw: Any) -> Wire:
    """Sign a hand-made request with botocore's S3 signer (header or query)."""
    request = AWSRequest(method=method, url=url, headers=headers or {}, data=body)
    signer(Credentials(AK, SK), "s3", region, **kw).add_auth(request)
    return wire_from(method, request.url, request.headers, body)


# --- AWS documentation vectors -------------------------------------------------------------


def doc_wire(method: str, path: str, query: str, headers: dict[str, str],
             signed: str, signature: str) -> Wire:
    auth = (f"AWS4-HMAC-SHA256 Credential={DOC_KEY}/20130524/us-east-1/s3/aws4_request,"
            f"SignedHeaders={signed},Signature={signature}")
    pairs = [("host", DOC_HOST), *headers.items(), ("authorization", auth)]
    return Wire(method, path, query, pairs, b"")


DOC_GET = doc_wire(
    "GET", "/test.txt", "",
    {"range": "bytes=0-9", "x-amz-content-sha256": EMPTY, "x-amz-date": "20130524T000000Z"},
    "host;range;x-amz-content-sha256;x-amz-date",
    "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")

DOC_PUT = doc_wire(
    "PUT", "/test%24file.text", "",
    {"date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-date": "20130524T000000Z",
     "x-amz-storage-class": "REDUCED_REDUNDANCY",
     "x-amz-content-sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"},
    "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
    "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")

DOC_LIFECYCLE = doc_wire(
    "GET", "/", "lifecycle", {"x-amz-date": "20130524T000000Z", "x-amz-content-sha256": EMPTY},
    "host;x-amz-content-sha256;x-amz-date",
    "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")

DOC_LIST = doc_wire(
    "GET", "/", "max-keys=2&prefix=J",
    {"x-amz-date": "20130524T000000Z", "x-amz-content-sha256": EMPTY},
    "host;x-amz-content-sha256;x-amz-date",
    "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")

DOC_CHUNKED = doc_wire(
    "PUT", "/examplebucket/chunkObject.txt", "",
    {"x-amz-date": "20130524T000000Z", "x-amz-storage-class": "REDUCED_REDUNDANCY",
     "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
     "content-encoding": "aws-chunked", "x-amz-decoded-content-length": "66560",
     "content-length": "66824"},
    "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
    "x-amz-decoded-content-length;x-amz-storage-class",
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9")
DOC_CHUNKED = Wire(DOC_CHUNKED.method, DOC_CHUNKED.raw_path, DOC_CHUNKED.query,
                   [("host", "s3.amazonaws.com") if k == "host" else (k, v)
                    for k, v in DOC_CHUNKED.headers], b"")

DOC_PRESIGNED = Wire(
    "GET", "/test.txt",
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2F"
    "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
    "X-Amz-SignedHeaders=host&X-Amz-Signature="
    "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
    [("host", DOC_HOST)], b"")


@pytest.mark.parametrize("wire", [DOC_GET, DOC_PUT, DOC_LIFECYCLE, DOC_LIST],
                         ids=["get-range", "put-escaped-key", "lifecycle", "list"])
def test_documented_header_examples_verify(wire: Wire) -> None:
    ctx = wire.auth(DOC_NOW)
    assert ctx.access_key == DOC_KEY and ctx.region == "us-east-1" and not ctx.presigned
    assert ctx.scope == "20130524/us-east-1/s3/aws4_request"
    assert ctx.amz_date == "20130524T000000Z"


def test_documented_put_reports_the_signed_payload_hash() -> None:
    ctx = DOC_PUT.auth(DOC_NOW)
    assert ctx.payload_mode is PayloadMode.SIGNED
    assert ctx.payload_sha256 == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"


def test_documented_presigned_example_verifies() -> None:
    ctx = DOC_PRESIGNED.auth(DOC_NOW + 3600)
    assert ctx.presigned and ctx.payload_mode is PayloadMode.UNSIGNED
    assert ctx.seed_signature.startswith("aeeed9bb")
    with pytest.raises(ExpiredPresignedRequest):
        DOC_PRESIGNED.auth(DOC_NOW + 86401)


def test_documented_chunked_seed_signature_verifies() -> None:
    ctx = DOC_CHUNKED.auth(DOC_NOW)
    assert ctx.payload_mode is PayloadMode.STREAMING_SIGNED
    assert ctx.seed_signature == "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    assert ctx.signing_key == sigv4.signing_key(DOC_SECRET, "20130524", "us-east-1")


@pytest.mark.parametrize("wire", [DOC_GET, DOC_PUT, DOC_LIST, DOC_PRESIGNED])
def test_documented_examples_reject_a_wrong_secret(wire: Wire) -> None:
    with pytest.raises(SignatureDoesNotMatch):
        wire.auth(DOC_NOW + 1, secret_for=lambda _: "not the secret")


# --- botocore-signed requests --------------------------------------------------------------

ODD_KEYS = ["plain.txt", "a b/c+d~e", "ünïcödé/ключ", "sp ecial!*'();:@&=+$,?#[]%.bin",
            "a//double/slash/", "%2F-literal", "tilde~and.dot-_"]


@pytest.mark.parametrize("key", ODD_KEYS)
@pytest.mark.parametrize("endpoint", ["https://s3.example.com", "http://127.0.0.1:9000"])
def test_boto3_put_object_verifies(endpoint: str, key: str) -> None:
    wire = BotoCapture(endpoint).call("put_object", Bucket="bkt", Key=key, Body=b"hello world",
                                      Metadata={"Tag": "  spaced   value  "})
    ctx = wire.auth()
    assert ctx.access_key == AK and ctx.region == "us-east-1"
    expected = (PayloadMode.STREAMING_UNSIGNED_TRAILER if endpoint.startswith("https")
                else PayloadMode.SIGNED)
    assert ctx.payload_mode is expected


@pytest.mark.parametrize(("operation", "params"), [
    ("get_object", {"Bucket": "bkt", "Key": "k y", "Range": "bytes=0-9"}),
    ("head_object", {"Bucket": "bkt", "Key": "dir/k"}),
    ("list_objects_v2", {"Bucket": "bkt", "Prefix": "a b+c/é*", "Delimiter": "/",
                         "StartAfter": "x=y&z", "MaxKeys": 7}),
    ("list_object_versions", {"Bucket": "bkt", "KeyMarker": "k"}),
    ("delete_objects", {"Bucket": "bkt", "Delete": {"Objects": [{"Key": "a"}]}}),
    ("upload_part", {"Bucket": "bkt", "Key": "k", "UploadId": "u/+=id", "PartNumber": 3,
                     "Body": b"x" * 100}),
    ("copy_object", {"Bucket": "bkt", "Key": "dst", "CopySource": "src/ké y"}),
    ("put_object_tagging", {"Bucket": "bkt", "Key": "k",
                            "Tagging": {"TagSet": [{"Key": "a", "Value": "b"}]}}),
    ("list_buckets", {}),
    ("create_bucket", {"Bucket": "newbkt"}),
])
def test_boto3_operations_verify(operation: str, params: dict[str, Any]) -> None:
    wire = BotoCapture().call(operation, **params)
    assert wire.auth().access_key == AK


def test_any_region_is_accepted_and_reported() -> None:
    wire = BotoCapture(region="eu-west-3").call("get_object", Bucket="b", Key="k")
    ctx = wire.auth()
    assert ctx.region == "eu-west-3" and "/eu-west-3/s3/aws4_request" in ctx.scope


def test_unsigned_payload_when_payload_signing_is_off() -> None:
    wire = BotoCapture(config={"s3": {"payload_signing_enabled": False},
                               "request_checksum_calculation": "when_required"}).call(
        "put_object", Bucket="b", Key="k", Body=b"data")
    assert wire.auth().payload_mode is PayloadMode.UNSIGNED


def test_signed_payload_reports_its_hash() -> None:
    wire = sign_botocore("PUT", "http://127.0.0.1:9000/b/k", body=b"abc")
    ctx = wire.auth()
    assert ctx.payload_mode is PayloadMode.SIGNED
    assert ctx.payload_sha256 == ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f200"
                                  "15ad")


def test_date_header_instead_of_x_amz_date() -> None:
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b/k",
                         headers={"Date": "Thu, 01 Jan 1970 00:00:00 GMT"})
    assert wire.header("x-amz-date") is None and wire.header("date")
    assert wire.auth().amz_date == time.strftime("%Y%m%dT%H%M%SZ",
                                                 time.gmtime(_parse_http_date(wire)))


def _parse_http_date(wire: Wire) -> float:
    return parsedate_to_datetime(wire.header("date") or "").timestamp()


def test_repeated_header_values_are_joined() -> None:
    request = AWSRequest(method="GET", url="http://127.0.0.1:9000/b/k")
    request.headers.add_header("X-Amz-Meta-Multi", "one")
    request.headers.add_header("X-Amz-Meta-Multi", "  two   words ")
    S3SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(request)
    wire = wire_from("GET", request.url, request.headers, b"")
    assert [v for k, v in wire.headers if k == "x-amz-meta-multi"] == ["one", "  two   words "]
    assert wire.auth().access_key == AK


def test_literal_path_signature_is_accepted() -> None:
    # Some clients send and sign reserved characters unencoded; the signature still
    # covers exactly the bytes received.
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b/it's(1)!.txt")
    assert wire.raw_path == "/b/it's(1)!.txt"
    assert wire.auth().access_key == AK


def test_literal_query_signature_is_accepted() -> None:
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b?prefix=a(b)&list-type=2")
    assert wire.auth().access_key == AK


def test_sort_order_of_query_names_that_prefix_each_other() -> None:
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b?a-b=1&a=2&a.c=3&a0=4")
    assert wire.auth().access_key == AK


# --- awscrt (the AWS Common Runtime signer used by the C/C++/Java CRT SDKs) ------------------


def sign_crt(method: str, path: str, headers: list[tuple[str, str]], *,
             body_value: str = crt_auth.AwsSignedBodyValue.EMPTY_SHA256,
             query_params: bool = False, expires: int | None = None,
             when: float | None = None) -> Wire:
    request = crt_http.HttpRequest(method, path, crt_http.HttpHeaders(headers))
    config = crt_auth.AwsSigningConfig(
        algorithm=crt_auth.AwsSigningAlgorithm.V4,
        signature_type=(crt_auth.AwsSignatureType.HTTP_REQUEST_QUERY_PARAMS if query_params
                        else crt_auth.AwsSignatureType.HTTP_REQUEST_HEADERS),
        credentials_provider=crt_auth.AwsCredentialsProvider.new_static(AK, SK),
        region="ap-south-1", service="s3", use_double_uri_encode=False,
        should_normalize_uri_path=False, signed_body_value=body_value,
        signed_body_header_type=(crt_auth.AwsSignedBodyHeaderType.NONE if query_params else
                                 crt_auth.AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256),
        expiration_in_seconds=expires,
        date=None if when is None else datetime.fromtimestamp(when, UTC))
    crt_auth.aws_sign_request(request, config).result()
    raw_path, _, query = request.path.partition("?")
    return Wire(method, raw_path, query, [(k.lower(), v) for k, v in request.headers], b"")


def test_crt_header_signature_verifies() -> None:
    wire = sign_crt("GET", "/b/some%20key/x?list-type=2&prefix=a%2Bb",
                    [("host", "localhost:9000"), ("x-amz-meta-a", "1")])
    ctx = wire.auth()
    assert ctx.region == "ap-south-1" and ctx.payload_mode is PayloadMode.SIGNED


def test_crt_presigned_url_verifies() -> None:
    wire = sign_crt("PUT", "/b/k%C3%A9y", [("host", "localhost:9000")], query_params=True,
                    body_value=crt_auth.AwsSignedBodyValue.UNSIGNED_PAYLOAD, expires=60)
    ctx = wire.auth()
    assert ctx.presigned and ctx.payload_mode is PayloadMode.UNSIGNED


def test_crt_streaming_seed_signature_verifies() -> None:
    wire = sign_crt("PUT", "/b/k", [("host", "h"), ("x-amz-decoded-content-length", "5"),
                                    ("content-encoding", "aws-chunked")],
                    body_value=crt_auth.AwsSignedBodyValue.STREAMING_AWS4_HMAC_SHA256_PAYLOAD)
    assert wire.auth().payload_mode is PayloadMode.STREAMING_SIGNED


# --- presigned URLs --------------------------------------------------------------------------


def test_boto3_default_presign_is_signature_v2_and_unsupported() -> None:
    wire = BotoCapture(config={"signature_version": "s3"}).presign("get_object", Bucket="b",
                                                                   Key="k")
    with pytest.raises(InvalidRequest, match="AWS4-HMAC-SHA256"):
        wire.auth()


def test_presigned_get_and_put_verify() -> None:
    boto = BotoCapture()
    for op in ("get_object", "put_object"):
        wire = boto.presign(op, Bucket="b", Key="dir/ké y+z")
        ctx = wire.auth()
        assert ctx.presigned and ctx.payload_mode is PayloadMode.UNSIGNED


def test_presigned_with_extra_operation_params() -> None:
    wire = BotoCapture().presign("upload_part", Bucket="b", Key="k", UploadId="abc/+=",
                                 PartNumber=2)
    assert "partNumber=2" in wire.query and wire.auth().presigned


def test_presigned_expiry_and_future_dates() -> None:
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b/k", signer=S3SigV4QueryAuth,
                         expires=60)
    now = time.time()
    wire.auth(now + 50)
    with pytest.raises(ExpiredPresignedRequest):
        wire.auth(now + 120)
    with pytest.raises(AccessDenied, match="not valid yet"):
        wire.auth(now - 1000)


@pytest.mark.parametrize(("expires", "message"), [
    ("604801", (r"less than a week \(in seconds\); that is, the given X-Amz-Expires must be "
               "less than 604800 seconds")),
    ("-1000", "must be non-negative"), ("--5", "number"), ("soon", "number")])
def test_presigned_bad_expires(expires: str, message: str) -> None:
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b/k", signer=S3SigV4QueryAuth)
    query = "&".join(p if not p.startswith("X-Amz-Expires=") else f"X-Amz-Expires={expires}"
                     for p in wire.query.split("&"))
    with pytest.raises(AuthorizationQueryParametersError, match=message):
        Wire("GET", wire.raw_path, query, wire.headers, b"").auth()


def test_presigned_zero_expiry_has_expired() -> None:
    """A URL presigned for 0 seconds has expired when it is used: 403 AccessDenied (a
    negative lifetime is out of S3's range: 400, above)."""
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b/k", signer=S3SigV4QueryAuth)
    query = "&".join(p if not p.startswith("X-Amz-Expires=") else "X-Amz-Expires=0"
                     for p in wire.query.split("&"))
    with pytest.raises(ExpiredPresignedRequest):
        Wire("GET", wire.raw_path, query, wire.headers, b"").auth()


def test_presigned_max_expiry_is_accepted() -> None:
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b/k", signer=S3SigV4QueryAuth,
                         expires=604800)
    wire.auth(time.time() + 604000)


def _drop_param(wire: Wire, name: str) -> Wire:
    query = "&".join(p for p in wire.query.split("&") if not p.startswith(name + "="))
    return Wire(wire.method, wire.raw_path, query, wire.headers, b"")


def _replace_param(wire: Wire, name: str, value: str) -> Wire:
    query = "&".join(f"{name}={value}" if p.startswith(name + "=") else p
                     for p in wire.query.split("&"))
    return Wire(wire.method, wire.raw_path, query, wire.headers, b"")


@pytest.fixture
def presigned() -> Wire:
    return sign_botocore("GET", "http://127.0.0.1:9000/b/k?versionId=v1",
                         signer=S3SigV4QueryAuth)


@pytest.mark.parametrize("name", ["X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                                  "X-Amz-SignedHeaders", "X-Amz-Signature"])
def test_presigned_missing_parameter(presigned: Wire, name: str) -> None:
    with pytest.raises(AuthorizationQueryParametersError):
        _drop_param(presigned, name).auth()


@pytest.mark.parametrize(("name", "value", "error"), [
    ("X-Amz-Algorithm", "AWS4-HMAC-SHA1", AuthorizationQueryParametersError),
    ("X-Amz-Credential", "onlykey", AuthorizationQueryParametersError),
    ("X-Amz-Credential", f"{AK}%2F20200101%2Fus-east-1%2Fs3%2Faws4_request",
     AuthorizationQueryParametersError),
    ("X-Amz-Credential", f"{AK}%2F{{d}}%2Fus-east-1%2Fsqs%2Faws4_request",
     AuthorizationQueryParametersError),
    ("X-Amz-Date", "2020-01-01T00:00:00Z", AuthorizationQueryParametersError),
    ("X-Amz-SignedHeaders", "content-type", AuthorizationQueryParametersError),
    ("X-Amz-Signature", "0" * 64, SignatureDoesNotMatch),
    ("X-Amz-Signature", "not-hex", SignatureDoesNotMatch),
    ("versionId", "v2", SignatureDoesNotMatch),
])
def test_presigned_tampered_or_malformed(presigned: Wire, name: str, value: str,
                                         error: type[Exception]) -> None:
    date = next(p for p in presigned.query.split("&") if p.startswith("X-Amz-Date="))[11:19]
    with pytest.raises(error):
        _replace_param(presigned, name, value.replace("{d}", date)).auth()


def test_presigned_repeated_parameter(presigned: Wire) -> None:
    wire = Wire("GET", presigned.raw_path, presigned.query + "&X-Amz-Expires=5",
                presigned.headers, b"")
    with pytest.raises(AuthorizationQueryParametersError):
        wire.auth()


def test_presigned_added_query_parameter_is_rejected(presigned: Wire) -> None:
    wire = Wire("GET", presigned.raw_path, presigned.query + "&acl", presigned.headers, b"")
    with pytest.raises(SignatureDoesNotMatch):
        wire.auth()


def test_presigned_changed_path_is_rejected(presigned: Wire) -> None:
    wire = Wire("GET", "/b/other", presigned.query, presigned.headers, b"")
    with pytest.raises(SignatureDoesNotMatch):
        wire.auth()


def test_presigned_unknown_key(presigned: Wire) -> None:
    with pytest.raises(InvalidAccessKeyId):
        presigned.auth(secret_for=lambda _: None)


def test_presigned_unsigned_amz_header_is_rejected(presigned: Wire) -> None:
    with pytest.raises(AccessDenied, match="not signed"):
        presigned.with_header("x-amz-meta-extra", "1").auth()


def test_presigned_payload_hash_header_is_used() -> None:
    wire = sign_botocore("PUT", "http://127.0.0.1:9000/b/k", signer=S3SigV4QueryAuth,
                         headers={"X-Amz-Content-SHA256": "a" * 64})
    ctx = wire.auth()
    assert ctx.payload_mode is PayloadMode.SIGNED and ctx.payload_sha256 == "a" * 64
    with pytest.raises(SignatureDoesNotMatch):
        wire.with_header("x-amz-content-sha256", "b" * 64).auth()


def test_both_mechanisms_at_once_is_rejected(presigned: Wire) -> None:
    header = sign_botocore("GET", "http://127.0.0.1:9000/b/k")
    wire = Wire("GET", presigned.raw_path, presigned.query,
                [*presigned.headers, ("authorization", header.header("authorization") or "")],
                b"")
    with pytest.raises(InvalidArgument):
        wire.auth()


# --- tampering with header-signed requests ---------------------------------------------------


@pytest.fixture
def signed_put() -> Wire:
    return BotoCapture("http://127.0.0.1:9000").call(
        "put_object", Bucket="bkt", Key="k", Body=b"payload", Metadata={"a": "1"},
        ContentType="text/plain")


@pytest.mark.parametrize(("name", "value"), [
    ("x-amz-meta-a", "2"), ("content-type", "text/html"), ("host", "evil.example.com"),
    ("x-amz-content-sha256", "0" * 64), ("x-amz-date", "20200101T000000Z")])
def test_changed_signed_header_is_rejected(signed_put: Wire, name: str, value: str) -> None:
    wire = signed_put.with_header(name, value)
    with pytest.raises((SignatureDoesNotMatch, AuthorizationHeaderMalformed,
                        RequestTimeTooSkewed)):
        wire.auth()


def test_changed_x_amz_date_within_scope_day_is_a_signature_mismatch(signed_put: Wire) -> None:
    amz = signed_put.header("x-amz-date") or ""
    other = amz[:9] + ("000001" if amz[9:15] != "000001" else "000002") + "Z"
    with pytest.raises((SignatureDoesNotMatch, RequestTimeTooSkewed)):
        signed_put.with_header("x-amz-date", other).auth()


def test_changed_path_method_or_query_is_rejected(signed_put: Wire) -> None:
    for wire in (Wire("PUT", "/bkt/k2", "", signed_put.headers, b""),
                 Wire("POST", "/bkt/k", "", signed_put.headers, b""),
                 Wire("PUT", "/bkt/k", "acl", signed_put.headers, b"")):
        with pytest.raises(SignatureDoesNotMatch):
            wire.auth()


def test_flipped_signature_is_rejected(signed_put: Wire) -> None:
    value = signed_put.header("authorization") or ""
    flipped = value[:-1] + ("0" if value[-1] != "0" else "1")
    with pytest.raises(SignatureDoesNotMatch):
        signed_put.with_header("authorization", flipped).auth()


def test_added_unsigned_amz_header_is_rejected(signed_put: Wire) -> None:
    with pytest.raises(AccessDenied, match="not signed"):
        signed_put.with_header("x-amz-acl", "public-read").auth()


def test_unsigned_non_amz_header_is_tolerated(signed_put: Wire) -> None:
    assert signed_put.with_header("x-forwarded-for", "169.254.0.1").auth().access_key == AK


def test_unknown_access_key(signed_put: Wire) -> None:
    with pytest.raises(InvalidAccessKeyId):
        signed_put.auth(secret_for=lambda _: None)


def test_clock_skew(signed_put: Wire) -> None:
    now = time.time()
    signed_put.auth(now + 800)
    signed_put.auth(now - 800)
    for delta in (1000, -1000):
        with pytest.raises(RequestTimeTooSkewed):
            signed_put.auth(now + delta)
    signed_put.auth(now + 1000, max_skew_seconds=2000)


def test_no_authentication_at_all() -> None:
    with pytest.raises(AccessDenied):
        Wire("GET", "/b/k", "", [("host", "h")], b"").auth()


def test_signature_v2_is_not_supported() -> None:
    with pytest.raises(InvalidRequest, match="AWS4-HMAC-SHA256"):
        Wire("GET", "/b/k", "", [("host", "h"), ("authorization", "AWS AK:c2lnbmF0dXJl")],
             b"").auth()
    with pytest.raises(InvalidRequest, match="AWS4-HMAC-SHA256"):
        Wire("GET", "/b/k", "AWSAccessKeyId=AK&Expires=1&Signature=x", [("host", "h")],
             b"").auth()


def test_missing_content_sha256_header(signed_put: Wire) -> None:
    with pytest.raises(InvalidRequest, match="x-amz-content-sha256"):
        signed_put.with_header("x-amz-content-sha256", None).auth()


@pytest.mark.parametrize("value", ["", "unsigned-payload", "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD",
                                   "SIGNED", "abc", "g" * 64])
def test_bad_content_sha256_value(signed_put: Wire, value: str) -> None:
    with pytest.raises(InvalidArgument):
        signed_put.with_header("x-amz-content-sha256", value).auth()


def test_missing_or_invalid_date(signed_put: Wire) -> None:
    for value in (None, "yesterday", "20201340T000000Z"):
        with pytest.raises(AccessDenied, match="Date"):
            signed_put.with_header("x-amz-date", value).auth()


def _with_auth_field(wire: Wire, transform: Callable[[str], str]) -> Wire:
    return wire.with_header("authorization", transform(wire.header("authorization") or ""))


@pytest.mark.parametrize("transform", [
    lambda a: a.replace("Signature=", "Sig="),
    lambda a: a.split(", Signature=")[0],
    lambda a: a.replace("SignedHeaders=", "Headers="),
    lambda a: a.replace("/us-east-1/s3/aws4_request", "/us-east-1/aws4_request"),
    lambda a: a.replace("/s3/aws4_request", "/ec2/aws4_request"),
    lambda a: a.replace("/aws4_request", "/aws5_request"),
    lambda a: a.replace("Credential=", "Credential=/"),
    lambda a: a.replace("SignedHeaders=", "SignedHeaders=;"),
    lambda a: a.replace(";host;", ";"),
    lambda a: a + ", Signature=" + "0" * 64,
    lambda a: a.replace(", ", " "),
], ids=["no-signature-key", "no-signature", "no-signed-headers", "short-scope",
        "wrong-service", "wrong-terminator", "empty-key", "empty-header-name",
        "host-not-signed", "repeated-component", "no-commas"])
def test_malformed_authorization_header(signed_put: Wire,
                                        transform: Callable[[str], str]) -> None:
    with pytest.raises(AuthorizationHeaderMalformed):
        _with_auth_field(signed_put, transform).auth()


def test_credential_date_must_match_request_date(signed_put: Wire) -> None:
    day = (signed_put.header("x-amz-date") or "")[:8]
    wire = _with_auth_field(signed_put, lambda a: a.replace(f"/{day}/", "/20010101/"))
    with pytest.raises(AuthorizationHeaderMalformed, match="Date"):
        wire.auth()


def test_unsupported_authorization_scheme(signed_put: Wire) -> None:
    with pytest.raises(InvalidArgument):
        signed_put.with_header("authorization", "Bearer token").auth()


def test_repeated_authorization_header(signed_put: Wire) -> None:
    wire = Wire(signed_put.method, signed_put.raw_path, "",
                [*signed_put.headers, ("authorization", signed_put.header("authorization")
                                       or "")], b"")
    with pytest.raises(AuthorizationHeaderMalformed):
        wire.auth()


# --- small pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "mode"), [
    ("UNSIGNED-PAYLOAD", PayloadMode.UNSIGNED),
    ("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", PayloadMode.STREAMING_SIGNED),
    ("STREAMING-UNSIGNED-PAYLOAD-TRAILER", PayloadMode.STREAMING_UNSIGNED_TRAILER),
    ("STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", PayloadMode.STREAMING_SIGNED_TRAILER),
    (EMPTY, PayloadMode.SIGNED), (EMPTY.upper(), PayloadMode.SIGNED)])
def test_payload_modes(value: str, mode: PayloadMode) -> None:
    parsed, sha = sigv4.parse_payload_mode(value)
    assert parsed is mode
    assert sha == (EMPTY if mode is PayloadMode.SIGNED else None)
    assert mode.streaming == value.startswith("STREAMING-")
    assert mode.trailer == value.endswith("-TRAILER")
    assert mode.signed_chunks == value.startswith("STREAMING-AWS4-HMAC")


def test_signing_keys_are_cached() -> None:
    sigv4.signing_key.cache_clear()
    wire = sign_botocore("GET", "http://127.0.0.1:9000/b/k")
    for _ in range(3):
        wire.auth()
    info = sigv4.signing_key.cache_info()
    assert info.misses == 1 and info.hits == 2


@pytest.mark.parametrize("value", ["xà y", "  caf\u00e9  \u00a0 au lait ", "٠١٢", "x\u00a0y"])
def test_utf8_header_values_verify(value: str) -> None:
    """A client that sends UTF-8 header bytes signs its own text: the 0xA0 byte inside
    "à" (C3 A0) is no whitespace there, a real U+00A0 is."""
    request = AWSRequest(method="GET", url="http://127.0.0.1:9000/b/k",
                         headers={"X-Amz-Meta-Name": value})
    S3SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(request)
    wire = wire_from("GET", request.url, request.headers, b"")
    on_the_wire = value.encode("utf-8").decode("latin-1")  # what the server decodes
    wire.headers = [(k, on_the_wire if k == "x-amz-meta-name" else v) for k, v in wire.headers]
    assert wire.auth().access_key == AK
