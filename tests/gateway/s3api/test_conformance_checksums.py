"""Checksum cases of S3 conformance suites through boto3 and the aws CLI: a wrong value of
the right form is BadDigest and a malformed one InvalidRequest (PutObject, UploadPart,
CompleteMultipartUpload), ChecksumType in every answer that carries a checksum, SHA-1 and
SHA-256 multipart uploads completed with the checksum the client computed over the
parts' checksums, and GetObjectAttributes of such objects."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.httpchecksum import Sha1Checksum, Sha256Checksum

from tests.gateway.s3api.clients.helpers import Cli, MiB, make_aws, payload
from tests.gateway.s3api.clients.test_boto3_extras import checksum
from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess

BODY = b"hello, checksums"
#: a value of the right form (base64 of the algorithm's digest size) that matches nothing
WRONG = {"CRC32": "AAAAAA==", "CRC32C": "AAAAAA==", "CRC64NVME": "AAAAAAAAAAA=",
         "SHA1": base64.b64encode(b"\0" * 20).decode(),
         "SHA256": base64.b64encode(b"\0" * 32).decode()}
MALFORMED = ["bad", base64.b64encode(b"\0" * 3).decode(), "AAAA AA=="]
HELPERS = {"SHA1": Sha1Checksum, "SHA256": Sha256Checksum}
PARTS = [payload(5 * MiB, "c1"), payload(5 * MiB, "c2"), payload(777, "c3")]


@pytest.fixture
def aws(squall: SquallProcess, tmp_path: Path) -> Cli:
    return make_aws(squall.endpoint, tmp_path / "aws-home")


@pytest.mark.parametrize("algorithm", sorted(WRONG))
def test_wrong_value_is_bad_digest(s3: Any, bucket: str, algorithm: str) -> None:
    field = f"Checksum{algorithm}"
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=BODY, **{field: WRONG[algorithm]})
    assert code_of(exc) == ("BadDigest", 400)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="m",
                                           ChecksumAlgorithm=algorithm)["UploadId"]
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=bucket, Key="m", UploadId=upload_id, PartNumber=1, Body=BODY,
                       **{field: WRONG[algorithm]})
    assert code_of(exc) == ("BadDigest", 400)
    assert s3.list_parts(Bucket=bucket, Key="m", UploadId=upload_id).get("Parts", []) == []
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="k")
    right = s3.put_object(Bucket=bucket, Key="k", Body=BODY,
                          **{field: checksum(algorithm, BODY)})
    assert right[field] == checksum(algorithm, BODY)


@pytest.mark.parametrize("algorithm", ["SHA256", "CRC64NVME", "CRC32"])
@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_value_is_invalid_request(s3: Any, bucket: str, algorithm: str,
                                            value: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=BODY, **{f"Checksum{algorithm}": value})
    assert code_of(exc) == ("InvalidRequest", 400)


def test_wrong_and_malformed_values_through_the_cli(aws: Cli, bucket: str,
                                                   tmp_path: Path) -> None:
    src = tmp_path / "body"
    src.write_bytes(BODY)
    for args, code in ((["--checksum-sha256", WRONG["SHA256"]], "BadDigest"),
                       (["--checksum-algorithm", "SHA256", "--checksum-sha256",
                         WRONG["SHA256"]], "BadDigest"),
                       (["--checksum-crc32", WRONG["CRC32"]], "BadDigest"),
                       (["--checksum-sha256", "bad"], "InvalidRequest")):
        failed = aws("s3api", "put-object", "--bucket", bucket, "--key", "k", "--body",
                     str(src), *args, ok=False)
        assert f"({code})" in failed.stderr, failed.stderr


@pytest.mark.parametrize("algorithm", sorted(WRONG))
def test_checksum_type_in_put_head_and_get(s3: Any, aws: Cli, bucket: str,
                                           algorithm: str) -> None:
    field = f"Checksum{algorithm}"
    put = s3.put_object(Bucket=bucket, Key="k", Body=BODY, ChecksumAlgorithm=algorithm)
    assert (put[field], put["ChecksumType"]) == (checksum(algorithm, BODY), "FULL_OBJECT")
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    got = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    for answer in (head, got):
        assert (answer[field], answer["ChecksumType"]) == (put[field], "FULL_OBJECT")
    plain = s3.head_object(Bucket=bucket, Key="k")  # not asked for: not sent
    assert field not in plain and "ChecksumType" not in plain
    out = json.loads(aws("s3api", "head-object", "--bucket", bucket, "--key", "k",
                         "--checksum-mode", "ENABLED").stdout)
    assert (out[field], out["ChecksumType"]) == (put[field], "FULL_OBJECT")


def client_composite(algorithm: str, part_checksums: list[str]) -> str:
    """What a client computes for a COMPOSITE upload: botocore's checksum class of the
    algorithm over the concatenated raw part checksums."""
    helper = HELPERS[algorithm]()
    for value in part_checksums:
        helper.update(base64.b64decode(value))
    return str(helper.b64digest())


def _upload(s3: Any, bucket: str, key: str, algorithm: str) -> tuple[str, list[dict[str, Any]]]:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key,
                                           ChecksumAlgorithm=algorithm)["UploadId"]
    done = []
    for number, data in enumerate(PARTS, start=1):
        res = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                             Body=data, ChecksumAlgorithm=algorithm)
        done.append({"PartNumber": number, "ETag": res["ETag"],
                     f"Checksum{algorithm}": res[f"Checksum{algorithm}"]})
    return upload_id, done


@pytest.mark.parametrize("algorithm", ["SHA1", "SHA256"])
@pytest.mark.parametrize("suffix", [False, True])
def test_composite_upload_completes_with_the_clients_checksum(
        s3: Any, bucket: str, algorithm: str, suffix: bool) -> None:
    field = f"Checksum{algorithm}"
    upload_id, done = _upload(s3, bucket, "m", algorithm)
    mine = client_composite(algorithm, [p[field] for p in done])
    sent = f"{mine}-{len(PARTS)}" if suffix else mine
    wrong = client_composite(algorithm, [p[field] for p in reversed(done)])
    for bad, code in ((wrong, "BadDigest"), (f"{mine}-{len(PARTS) + 1}", "BadDigest"),
                      (f"{mine}-x", "InvalidRequest"), ("bad", "InvalidRequest")):
        with pytest.raises(ClientError) as exc:
            s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=upload_id,
                                         MultipartUpload={"Parts": done}, **{field: bad})
        assert code_of(exc) == (code, 400)
    res = s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=upload_id,
                                       MultipartUpload={"Parts": done}, **{field: sent})
    expected = f"{mine}-{len(PARTS)}"
    assert (res[field], res["ChecksumType"]) == (expected, "COMPOSITE")
    head = s3.head_object(Bucket=bucket, Key="m", ChecksumMode="ENABLED")
    assert (head[field], head["ChecksumType"]) == (expected, "COMPOSITE")
    attrs = s3.get_object_attributes(Bucket=bucket, Key="m",
                                     ObjectAttributes=["ETag", "Checksum", "ObjectParts",
                                                       "ObjectSize"])
    assert attrs["Checksum"] == {field: expected, "ChecksumType": "COMPOSITE"}
    assert attrs["ObjectSize"] == sum(len(p) for p in PARTS)
    parts = attrs["ObjectParts"]
    assert parts["TotalPartsCount"] == len(PARTS)
    assert [(p["PartNumber"], p["Size"]) for p in parts["Parts"]] == \
        [(n, len(p)) for n, p in enumerate(PARTS, start=1)]
    assert attrs["ETag"] == res["ETag"].strip('"')


def test_composite_upload_through_the_cli(s3: Any, aws: Cli, bucket: str,
                                          tmp_path: Path) -> None:
    upload_id, done = _upload(s3, bucket, "cli", "SHA256")
    mine = client_composite("SHA256", [p["ChecksumSHA256"] for p in done])
    document = tmp_path / "parts.json"
    document.write_text(json.dumps({"Parts": done}))
    failed = aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key", "cli",
                 "--upload-id", upload_id, "--multipart-upload", f"file://{document}",
                 "--checksum-sha256", WRONG["SHA1"], ok=False)  # a SHA-1's size
    assert "(InvalidRequest)" in failed.stderr, failed.stderr
    out = json.loads(aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key",
                         "cli", "--upload-id", upload_id, "--multipart-upload",
                         f"file://{document}", "--checksum-sha256", mine).stdout)
    assert out["ChecksumSHA256"] == f"{mine}-{len(PARTS)}"
    assert out["ChecksumType"] == "COMPOSITE"
    attrs = json.loads(aws("s3api", "get-object-attributes", "--bucket", bucket, "--key",
                           "cli", "--object-attributes", "Checksum", "ObjectParts").stdout)
    assert attrs["Checksum"] == {"ChecksumSHA256": f"{mine}-{len(PARTS)}",
                                 "ChecksumType": "COMPOSITE"}
    assert attrs["ObjectParts"]["TotalPartsCount"] == len(PARTS)


def test_full_object_crc64nvme_complete_with_a_wrong_value(s3: Any, bucket: str) -> None:
    upload_id, done = _upload(s3, bucket, "f", "CRC64NVME")
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="f", UploadId=upload_id,
                                     MultipartUpload={"Parts": done},
                                     ChecksumCRC64NVME=WRONG["CRC64NVME"])
    assert code_of(exc) == ("BadDigest", 400)
    whole = checksum("CRC64NVME", b"".join(PARTS))
    res = s3.complete_multipart_upload(Bucket=bucket, Key="f", UploadId=upload_id,
                                       MultipartUpload={"Parts": done},
                                       ChecksumCRC64NVME=whole)
    assert (res["ChecksumCRC64NVME"], res["ChecksumType"]) == (whole, "FULL_OBJECT")
