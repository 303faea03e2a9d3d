from __future__ import annotations

import hashlib

import pytest
from botocore.credentials import Credentials

from loadtests.sigv4 import MissingCredentials, Signer, load_credentials, object_path, query_string


def test_credentials_prefer_squall_variables() -> None:
    env = {"SQUALL_ACCESS_KEY": "sq", "SQUALL_SECRET_KEY": "sqs",
           "AWS_ACCESS_KEY_ID": "aws", "AWS_SECRET_ACCESS_KEY": "awss"}  # fmt: skip
    assert load_credentials(env).access_key == "sq"
    only_aws = {k: v for k, v in env.items() if k.startswith("AWS")}
    creds = load_credentials(only_aws)
    assert (creds.access_key, creds.secret_key) == ("aws", "awss")
    with pytest.raises(MissingCredentials, match="SQUALL_ACCESS_KEY"):
        load_credentials({"SQUALL_ACCESS_KEY": "half"})


def test_paths_and_queries_are_encoded_for_s3() -> None:
    assert object_path("b") == "/b"
    assert object_path("b", "a dir/ü+x~") == "/b/a%20dir/%C3%BC%2Bx~"
    assert query_string({"prefix": "a b/", "list-type": "2"}) == "list-type=2&prefix=a%20b%2F"
    assert query_string(None) == ""


def test_unsigned_payload_by_default() -> None:
    signer = Signer(Credentials("AK", "SK"))
    headers = signer.sign("PUT", "http://127.0.0.1:9000/b/k", {"Content-Length": "3"}, b"abc")
    assert headers["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AK/")
    assert "/us-east-1/s3/aws4_request" in headers["Authorization"]
    assert headers["Content-Length"] == "3"


def test_signed_payload_on_request() -> None:
    signer = Signer(Credentials("AK", "SK"), "eu-west-1", sign_payload=True)
    headers = signer.sign("PUT", "http://127.0.0.1:9000/b/k", None, b"abc")
    assert headers["X-Amz-Content-SHA256"] == hashlib.sha256(b"abc").hexdigest()
    assert "/eu-west-1/s3/aws4_request" in headers["Authorization"]


def test_signature_depends_on_the_secret() -> None:
    url = "http://127.0.0.1:9000/b/k?x=1"
    one = Signer(Credentials("AK", "one")).sign("GET", url)["Authorization"]
    two = Signer(Credentials("AK", "two")).sign("GET", url)["Authorization"]
    assert one.split("Signature=")[1] != two.split("Signature=")[1]
