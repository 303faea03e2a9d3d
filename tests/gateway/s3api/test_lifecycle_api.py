"""Put/Get/DeleteBucketLifecycleConfiguration through boto3, the aws CLI and raw signed
requests (every refused document answers S3's code and status)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.clients.helpers import make_aws
from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess
from tests.support.signing import send

RULES = [
    {"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled",
     "Expiration": {"Days": 30}},
    {"ID": "old-versions", "Filter": {}, "Status": "Disabled",
     "NoncurrentVersionExpiration": {"NoncurrentDays": 7, "NewerNoncurrentVersions": 3}},
    {"ID": "uploads", "Filter": {"Prefix": ""}, "Status": "Enabled",
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    {"ID": "markers", "Filter": {"ObjectSizeGreaterThan": 10}, "Status": "Enabled",
     "Expiration": {"ExpiredObjectDeleteMarker": True}},
    {"ID": "tagged", "Filter": {"And": {"Prefix": "tmp/", "Tags": [
        {"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}}, "Status": "Enabled",
     "Expiration": {"Days": 2}},
    {"ID": "tag", "Filter": {"Tag": {"Key": "t", "Value": "v"}}, "Status": "Enabled",
     "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
    {"ID": "small", "Filter": {"ObjectSizeLessThan": 1000}, "Status": "Enabled",
     "Expiration": {"Days": 5}},
]


def _md5(body: bytes) -> str:
    return base64.b64encode(hashlib.md5(body).digest()).decode()


def test_round_trip_and_delete(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code_of(exc) == ("NoSuchLifecycleConfiguration", 404)
    s3.put_bucket_lifecycle_configuration(Bucket=bucket,
                                          LifecycleConfiguration={"Rules": RULES})
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert got == RULES
    # A new document replaces the old one entirely.
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        {"ID": "date", "Filter": {"Prefix": "a"}, "Status": "Enabled",
         "Expiration": {"Date": "2030-01-01T00:00:00Z"}}]})
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert len(got) == 1 and got[0]["Expiration"]["Date"].year == 2030
    s3.delete_bucket_lifecycle(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code_of(exc) == ("NoSuchLifecycleConfiguration", 404)
    s3.delete_bucket_lifecycle(Bucket=bucket)  # idempotent
    # The configuration goes with the bucket.
    s3.put_bucket_lifecycle_configuration(Bucket=bucket,
                                          LifecycleConfiguration={"Rules": RULES[:1]})
    s3.delete_bucket(Bucket=bucket)
    s3.create_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert code_of(exc) == ("NoSuchLifecycleConfiguration", 404)


def test_missing_bucket(s3) -> None:
    for call in (s3.get_bucket_lifecycle_configuration, s3.delete_bucket_lifecycle):
        with pytest.raises(ClientError) as exc:
            call(Bucket="no-such-bucket-lc")
        assert code_of(exc) == ("NoSuchBucket", 404)
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_lifecycle_configuration(Bucket="no-such-bucket-lc",
                                              LifecycleConfiguration={"Rules": RULES})
    assert code_of(exc) == ("NoSuchBucket", 404)


def test_legacy_prefix_and_generated_id(squall: SquallProcess, s3, bucket: str) -> None:
    body = (b"<LifecycleConfiguration><Rule><Prefix>old/</Prefix><Status>Enabled</Status>"
            b"<Expiration><Days>3</Days></Expiration></Rule></LifecycleConfiguration>")
    url = f"{squall.endpoint}/{bucket}?lifecycle"
    assert send("PUT", url, body, {"Content-MD5": _md5(body)}).status_code == 200
    (rule,) = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert rule["Prefix"] == "old/" and "Filter" not in rule
    assert rule["ID"]  # S3 gives a rule without ID one


def _rule(inner: str, *, status: str = "Enabled", filter_: str = "<Filter></Filter>",
          ident: str = "<ID>r</ID>") -> str:
    return f"<Rule>{ident}{filter_}<Status>{status}</Status>{inner}</Rule>"


def _doc(*rules: str) -> bytes:
    return f"<LifecycleConfiguration>{''.join(rules)}</LifecycleConfiguration>".encode()


EXPIRE = "<Expiration><Days>1</Days></Expiration>"
TAGGED = "<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>"
BAD = [
    (b"<LifecycleConfiguration><Rule>", "MalformedXML", 400),
    (b"<CORSConfiguration></CORSConfiguration>", "MalformedXML", 400),
    (_doc(), "MalformedXML", 400),
    (_doc(*[_rule(EXPIRE, ident=f"<ID>r{i}</ID>") for i in range(1001)]), "MalformedXML", 400),
    (_doc(_rule(EXPIRE), _rule(EXPIRE)), "InvalidArgument", 400),  # duplicate IDs
    (_doc(_rule(EXPIRE, ident=f"<ID>{'x' * 256}</ID>")), "InvalidArgument", 400),
    (_doc(_rule(EXPIRE, status="On")), "MalformedXML", 400),
    (_doc(_rule(EXPIRE, filter_="")), "MalformedXML", 400),  # neither Filter nor Prefix
    (_doc(_rule(EXPIRE, filter_="<Prefix>a</Prefix><Filter></Filter>")), "MalformedXML", 400),
    (_doc(_rule(EXPIRE, filter_="<Filter><Prefix>a</Prefix>"
                                "<ObjectSizeLessThan>5</ObjectSizeLessThan></Filter>")),
     "MalformedXML", 400),
    (_doc(_rule(EXPIRE, filter_="<Filter><And><Prefix>a</Prefix></And></Filter>")),
     "MalformedXML", 400),
    (_doc(_rule(EXPIRE, filter_="<Filter><And><ObjectSizeGreaterThan>9"
                                "</ObjectSizeGreaterThan><ObjectSizeLessThan>5"
                                "</ObjectSizeLessThan></And></Filter>")), "InvalidRequest", 400),
    (_doc(_rule("")), "InvalidRequest", 400),  # no action
    (_doc(_rule("<Expiration><Days>0</Days></Expiration>")), "InvalidArgument", 400),
    (_doc(_rule("<Expiration><Days>-3</Days></Expiration>")), "InvalidArgument", 400),
    (_doc(_rule("<Expiration><Days>two</Days></Expiration>")), "MalformedXML", 400),
    (_doc(_rule("<Expiration></Expiration>")), "MalformedXML", 400),
    (_doc(_rule("<Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration>")),
     "MalformedXML", 400),
    (_doc(_rule("<Expiration><Date>2030-01-01T12:00:00Z</Date></Expiration>")),
     "InvalidArgument", 400),
    (_doc(_rule("<Expiration><Date>2030-13-01T00:00:00Z</Date></Expiration>")),
     "InvalidArgument", 400),
    (_doc(_rule("<Expiration><ExpiredObjectDeleteMarker>maybe</ExpiredObjectDeleteMarker>"
                "</Expiration>")), "MalformedXML", 400),
    (_doc(_rule("<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker>"
                "</Expiration>", filter_=TAGGED)), "InvalidRequest", 400),
    (_doc(_rule("<NoncurrentVersionExpiration></NoncurrentVersionExpiration>")),
     "MalformedXML", 400),
    (_doc(_rule("<NoncurrentVersionExpiration><NoncurrentDays>0</NoncurrentDays>"
                "</NoncurrentVersionExpiration>")), "InvalidArgument", 400),
    (_doc(_rule("<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
                "<NewerNoncurrentVersions>101</NewerNoncurrentVersions>"
                "</NoncurrentVersionExpiration>")), "InvalidArgument", 400),
    (_doc(_rule("<AbortIncompleteMultipartUpload><DaysAfterInitiation>0"
                "</DaysAfterInitiation></AbortIncompleteMultipartUpload>")),
     "InvalidArgument", 400),
    (_doc(_rule("<AbortIncompleteMultipartUpload></AbortIncompleteMultipartUpload>")),
     "MalformedXML", 400),
    (_doc(_rule("<AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
                "</DaysAfterInitiation></AbortIncompleteMultipartUpload>", filter_=TAGGED)),
     "InvalidRequest", 400),
    (_doc(_rule("<Transition><Days>1</Days><StorageClass>GLACIER</StorageClass>"
                "</Transition>")), "NotImplemented", 501),
]


@pytest.mark.parametrize(("body", "code", "status"), BAD,
                         ids=[f"{i}-{c}" for i, (_, c, _s) in enumerate(BAD)])
def test_bad_documents(squall: SquallProcess, s3, bucket: str, body: bytes, code: str,
                       status: int) -> None:
    s3.put_bucket_lifecycle_configuration(Bucket=bucket,
                                          LifecycleConfiguration={"Rules": RULES[:1]})
    response = send("PUT", f"{squall.endpoint}/{bucket}?lifecycle", body,
                    {"Content-MD5": _md5(body)})
    assert response.status_code == status, response.text
    assert f"<Code>{code}</Code>".encode() in response.content
    # A refused document leaves the configuration as it was.
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"] == RULES[:1]


def test_integrity_header_required(squall: SquallProcess, bucket: str) -> None:
    body = _doc(_rule(EXPIRE))
    response = send("PUT", f"{squall.endpoint}/{bucket}?lifecycle", body)
    assert response.status_code == 400
    assert b"<Code>InvalidRequest</Code>" in response.content
    assert b"Content-MD5" in response.content


def test_aws_cli_round_trip(squall: SquallProcess, bucket: str, tmp_path: Path) -> None:
    aws = make_aws(squall.endpoint, tmp_path / "home")
    config = {"Rules": [{"ID": "mpu", "Filter": {"Prefix": ""}, "Status": "Enabled",
                         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]}
    aws("s3api", "put-bucket-lifecycle-configuration", "--bucket", bucket,
        "--lifecycle-configuration", json.dumps(config))
    got = json.loads(aws("s3api", "get-bucket-lifecycle-configuration", "--bucket",
                         bucket).stdout)
    assert got["Rules"] == config["Rules"]
    aws("s3api", "delete-bucket-lifecycle", "--bucket", bucket)
    proc = aws("s3api", "get-bucket-lifecycle-configuration", "--bucket", bucket, ok=False)
    assert "NoSuchLifecycleConfiguration" in proc.stderr
