"""The aws CLI (v1) against a real gateway: high-level ``s3`` commands and ``s3api`` calls."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.s3api.clients.helpers import (
    Cli,
    MiB,
    file_sha256,
    make_aws,
    md5_b64,
    new_bucket_name,
    payload,
    read_tree,
    sha256,
    write_tree,
)
from tests.support.server import ACCESS_KEY, SquallProcess


def _ls_keys(out: str) -> dict[str, int]:
    """``aws s3 ls --recursive`` lines ``DATE TIME SIZE KEY`` -> {key: size}."""
    keys: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4:
            keys[parts[3]] = int(parts[2])
    return keys


def _json(stdout: str) -> dict[str, Any]:
    return json.loads(stdout) if stdout.strip() else {}


def test_mb_cp_ls_rb(aws: Cli, s3: Any, tmp_path: Path) -> None:
    name = new_bucket_name("cli")
    out = aws("s3", "mb", f"s3://{name}").stdout
    assert f"make_bucket: {name}" in out
    assert name in aws("s3", "ls").stdout

    data = payload(70_000, "mb")
    src = tmp_path / "small.bin"
    src.write_bytes(data)
    aws("s3", "cp", str(src), f"s3://{name}/dir/small.bin")
    got = tmp_path / "back.bin"
    aws("s3", "cp", f"s3://{name}/dir/small.bin", str(got))
    assert file_sha256(got) == sha256(data)

    # A non-empty bucket cannot be removed; the object survives the attempt.
    proc = aws("s3", "rb", f"s3://{name}", ok=False)
    assert "BucketNotEmpty" in proc.stderr
    assert sha256(s3.get_object(Bucket=name, Key="dir/small.bin")["Body"].read()) == sha256(data)

    aws("s3", "rm", f"s3://{name}/dir/small.bin")
    assert f"remove_bucket: {name}" in aws("s3", "rb", f"s3://{name}").stdout
    assert name not in aws("s3", "ls").stdout


def test_cp_large_file_goes_multipart(aws: Cli, s3: Any, bucket: str,
                                      tmp_path: Path) -> None:
    data = payload(20 * MiB, "cp-large")
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    aws("s3", "cp", str(src), f"s3://{bucket}/big.bin", "--content-type", "application/x-big",
        "--metadata", "colour=red,owner=squall")

    head = s3.head_object(Bucket=bucket, Key="big.bin")
    assert head["ContentLength"] == len(data)
    # Headers given when the upload was created belong to the completed object.
    assert head["ContentType"] == "application/x-big"
    assert head["Metadata"] == {"colour": "red", "owner": "squall"}
    # Default aws CLI chunk size is 8 MiB: 8 + 8 + 4 MiB.
    assert head["ETag"].endswith('-3"'), head["ETag"]

    got = tmp_path / "big.out"
    aws("s3", "cp", f"s3://{bucket}/big.bin", str(got))
    assert file_sha256(got) == sha256(data)


def test_cp_stdin_and_stdout(aws: Cli, s3: Any, bucket: str) -> None:
    # From stdin the size is unknown: the CLI streams it (multipart above 8 MiB).
    data = payload(9 * MiB + 17, "stdin")
    aws.binary("s3", "cp", "-", f"s3://{bucket}/piped.bin", stdin=data)
    body = s3.get_object(Bucket=bucket, Key="piped.bin")["Body"].read()
    assert sha256(body) == sha256(data)
    assert sha256(aws.binary("s3", "cp", f"s3://{bucket}/piped.bin", "-")) == sha256(data)


def test_ls_recursive_and_prefixes(aws: Cli, s3: Any, bucket: str) -> None:
    files = {"a.txt": b"a" * 10, "dir/b.txt": b"bb" * 10, "dir/sub/c.txt": b"c" * 31,
             "dir/sub/d.txt": b"", "other/e.txt": b"e" * 5}
    for key, data in files.items():
        s3.put_object(Bucket=bucket, Key=key, Body=data)

    assert _ls_keys(aws("s3", "ls", f"s3://{bucket}", "--recursive").stdout) == {
        k: len(v) for k, v in files.items()}

    top = aws("s3", "ls", f"s3://{bucket}").stdout
    assert "PRE dir/" in top and "PRE other/" in top
    assert _ls_keys(top) == {"a.txt": 10}

    inner = aws("s3", "ls", f"s3://{bucket}/dir/").stdout
    assert "PRE sub/" in inner
    assert _ls_keys(inner) == {"b.txt": 20}

    for key, data in files.items():
        assert sha256(s3.get_object(Bucket=bucket, Key=key)["Body"].read()) == sha256(data)


def test_sync_up_down_and_delete(aws: Cli, bucket: str, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = {f"d{i}/f{j}.bin": payload(1000 * i + j + 1, f"sync{i}{j}")
             for i in range(3) for j in range(3)}
    files["top.txt"] = b"hello sync\n"
    write_tree(src, files)

    out = aws("s3", "sync", str(src), f"s3://{bucket}/tree").stdout
    assert out.count("upload:") == len(files)
    # Nothing changed: a second sync transfers nothing.
    assert "upload:" not in aws("s3", "sync", str(src), f"s3://{bucket}/tree").stdout

    aws("s3", "sync", f"s3://{bucket}/tree", str(dst))
    assert read_tree(dst) == read_tree(src)

    (src / "d0" / "f0.bin").unlink()
    (src / "new.bin").write_bytes(payload(5000, "new"))
    out = aws("s3", "sync", str(src), f"s3://{bucket}/tree", "--delete").stdout
    assert "delete:" in out and "upload:" in out
    aws("s3", "sync", f"s3://{bucket}/tree", str(dst), "--delete")
    assert read_tree(dst) == read_tree(src)


def test_rm_recursive(aws: Cli, s3: Any, bucket: str) -> None:
    keep = payload(123, "keep")
    s3.put_object(Bucket=bucket, Key="keep/x", Body=keep)
    for i in range(12):
        s3.put_object(Bucket=bucket, Key=f"gone/{i:02d}", Body=payload(10 + i, i))
    out = aws("s3", "rm", f"s3://{bucket}/gone/", "--recursive").stdout
    assert out.count("delete:") == 12
    listed = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in listed.get("Contents", [])] == ["keep/x"]
    assert sha256(s3.get_object(Bucket=bucket, Key="keep/x")["Body"].read()) == sha256(keep)


def test_put_object_wrong_content_md5_is_bad_digest(aws: Cli, s3: Any, bucket: str,
                                                    tmp_path: Path) -> None:
    good = payload(4096, "md5-good")
    src = tmp_path / "f.bin"
    src.write_bytes(good)
    aws("s3api", "put-object", "--bucket", bucket, "--key", "k", "--body", str(src),
        "--content-md5", md5_b64(good))

    bad = payload(4096, "md5-bad")
    other = tmp_path / "g.bin"
    other.write_bytes(bad)
    proc = aws("s3api", "put-object", "--bucket", bucket, "--key", "k", "--body", str(other),
               "--content-md5", md5_b64(good), ok=False)
    assert "(BadDigest)" in proc.stderr, proc.stderr
    # The rejected upload did not replace the stored object.
    assert sha256(s3.get_object(Bucket=bucket, Key="k")["Body"].read()) == sha256(good)


def test_head_object_missing_is_404(aws: Cli, bucket: str) -> None:
    proc = aws("s3api", "head-object", "--bucket", bucket, "--key", "nope", ok=False)
    assert "(404)" in proc.stderr, proc.stderr


def test_get_object_range(aws: Cli, s3: Any, bucket: str, tmp_path: Path) -> None:
    data = payload(100_000, "range")
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    out = tmp_path / "part"
    meta = _json(aws("s3api", "get-object", "--bucket", bucket, "--key", "r",
                     "--range", "bytes=1000-1999", str(out)).stdout)
    assert meta["ContentLength"] == 1000
    assert meta["ContentRange"] == f"bytes 1000-1999/{len(data)}"
    assert file_sha256(out) == sha256(data[1000:2000])

    meta = _json(aws("s3api", "get-object", "--bucket", bucket, "--key", "r",
                     "--range", "bytes=-10", str(out)).stdout)
    assert file_sha256(out) == sha256(data[-10:])
    assert meta["ContentRange"] == f"bytes {len(data) - 10}-{len(data) - 1}/{len(data)}"


def test_copy_object(aws: Cli, s3: Any, bucket: str) -> None:
    data = payload(50_000, "copy")
    s3.put_object(Bucket=bucket, Key="src key", Body=data, Metadata={"colour": "blue"})
    meta = _json(aws("s3api", "copy-object", "--bucket", bucket, "--key", "dst/key",
                     "--copy-source", f"{bucket}/src key").stdout)
    assert meta["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="dst/key")
    assert sha256(got["Body"].read()) == sha256(data)
    assert got["Metadata"] == {"colour": "blue"}


def test_object_tagging(aws: Cli, s3: Any, bucket: str) -> None:
    data = payload(333, "tags")
    s3.put_object(Bucket=bucket, Key="t", Body=data)
    tagging = {"TagSet": [{"Key": "project", "Value": "squall"},
                          {"Key": "tier", "Value": "hot cache"}]}
    aws("s3api", "put-object-tagging", "--bucket", bucket, "--key", "t",
        "--tagging", json.dumps(tagging))
    got = _json(aws("s3api", "get-object-tagging", "--bucket", bucket, "--key", "t").stdout)
    assert sorted(got["TagSet"], key=lambda t: t["Key"]) == tagging["TagSet"]
    # Tagging does not touch the data.
    assert sha256(s3.get_object(Bucket=bucket, Key="t")["Body"].read()) == sha256(data)


def test_list_objects_v2_pagination(aws: Cli, s3: Any, bucket: str) -> None:
    keys = [f"p/{i:03d}" for i in range(11)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())

    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        args = ["s3api", "list-objects-v2", "--bucket", bucket, "--prefix", "p/",
                "--max-items", "4", "--page-size", "3"]
        if token:
            args += ["--starting-token", token]
        out = _json(aws(*args).stdout)
        seen += [o["Key"] for o in out.get("Contents", [])]
        pages += 1
        token = out.get("NextToken")
        if not token:
            break
        assert pages < 10
    assert seen == keys
    assert pages == 3
    for k in keys:
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == k.encode()


def test_multipart_wrong_etag_is_invalid_part(aws: Cli, s3: Any, bucket: str,
                                              tmp_path: Path) -> None:
    parts = [payload(5 * MiB, "mp1"), payload(1234, "mp2")]
    upload_id = _json(aws("s3api", "create-multipart-upload", "--bucket", bucket,
                          "--key", "mp").stdout)["UploadId"]
    etags = []
    for n, data in enumerate(parts, start=1):
        f = tmp_path / f"part{n}"
        f.write_bytes(data)
        etags.append(_json(aws("s3api", "upload-part", "--bucket", bucket, "--key", "mp",
                               "--upload-id", upload_id, "--part-number", str(n),
                               "--body", str(f)).stdout)["ETag"])

    wrong = {"Parts": [{"PartNumber": 1, "ETag": etags[0]},
                       {"PartNumber": 2, "ETag": '"0123456789abcdef0123456789abcdef"'}]}
    proc = aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key", "mp",
               "--upload-id", upload_id, "--multipart-upload", json.dumps(wrong), ok=False)
    assert "(InvalidPart)" in proc.stderr, proc.stderr

    # The upload is still there after a failed completion and completes with the right ETags.
    right = {"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, start=1)]}
    aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key", "mp",
        "--upload-id", upload_id, "--multipart-upload", json.dumps(right))
    body = s3.get_object(Bucket=bucket, Key="mp")["Body"].read()
    assert sha256(body) == sha256(b"".join(parts))


@pytest.mark.parametrize("target", ["bucket", "object"])
def test_missing_bucket_is_no_such_bucket(aws: Cli, target: str, tmp_path: Path) -> None:
    name = new_bucket_name("missing")
    if target == "bucket":
        proc = aws("s3api", "list-objects-v2", "--bucket", name, ok=False)
    else:
        f = tmp_path / "x"
        f.write_bytes(payload(10, "x"))
        proc = aws("s3api", "put-object", "--bucket", name, "--key", "x", "--body", str(f),
                   ok=False)
    assert "(NoSuchBucket)" in proc.stderr, proc.stderr


def test_invalid_bucket_name(aws: Cli) -> None:
    # Upper case and underscores pass the client's loose check; the server must refuse them.
    proc = aws("s3api", "create-bucket", "--bucket", "Not_A_Valid_Bucket", ok=False)
    assert "(InvalidBucketName)" in proc.stderr, proc.stderr


def test_wrong_credentials(squall: SquallProcess, s3: Any, bucket: str,
                           tmp_path: Path) -> None:
    data = payload(100, "creds")
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    bad_key = make_aws(squall.endpoint, tmp_path / "k", access_key="NOSUCHKEY0000000")
    assert "(InvalidAccessKeyId)" in bad_key("s3api", "list-buckets", ok=False).stderr
    bad_secret = make_aws(squall.endpoint, tmp_path / "s", access_key=ACCESS_KEY,
                          secret_key="wrong-secret")
    assert "(SignatureDoesNotMatch)" in bad_secret("s3api", "list-buckets", ok=False).stderr
    # Neither could overwrite or delete anything.
    for cli in (bad_key, bad_secret):
        cli("s3", "rm", f"s3://{bucket}/k", ok=False)
    assert sha256(s3.get_object(Bucket=bucket, Key="k")["Body"].read()) == sha256(data)


def test_multipart_bad_completions(aws: Cli, s3: Any, bucket: str, tmp_path: Path) -> None:
    parts = [payload(1 * MiB, "small1"), payload(1 * MiB, "small2")]
    upload_id = _json(aws("s3api", "create-multipart-upload", "--bucket", bucket,
                          "--key", "bad").stdout)["UploadId"]
    listed = []
    for n, data in enumerate(parts, start=1):
        f = tmp_path / f"p{n}"
        f.write_bytes(data)
        etag = _json(aws("s3api", "upload-part", "--bucket", bucket, "--key", "bad",
                         "--upload-id", upload_id, "--part-number", str(n),
                         "--body", str(f)).stdout)["ETag"]
        assert etag == f'"{hashlib.md5(data).hexdigest()}"'
        listed.append({"PartNumber": n, "ETag": etag})

    def complete(parts_doc: list[dict[str, Any]]) -> str:
        return aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key", "bad",
                   "--upload-id", upload_id, "--multipart-upload",
                   json.dumps({"Parts": parts_doc}), ok=False).stderr

    assert "(InvalidPartOrder)" in complete(listed[::-1])
    # Every part but the last must be at least the minimum part size (5 MiB here).
    assert "(EntityTooSmall)" in complete(listed)

    aws("s3api", "abort-multipart-upload", "--bucket", bucket, "--key", "bad",
        "--upload-id", upload_id)
    assert "(NoSuchUpload)" in complete(listed[:1])
    proc = aws("s3api", "upload-part", "--bucket", bucket, "--key", "bad", "--upload-id",
               upload_id, "--part-number", "3", "--body", str(tmp_path / "p1"), ok=False)
    assert "(NoSuchUpload)" in proc.stderr
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_unsatisfiable_range(aws: Cli, s3: Any, bucket: str, tmp_path: Path) -> None:
    data = payload(1000, "short")
    s3.put_object(Bucket=bucket, Key="short", Body=data)
    proc = aws("s3api", "get-object", "--bucket", bucket, "--key", "short",
               "--range", "bytes=5000-", str(tmp_path / "out"), ok=False)
    assert "(InvalidRange)" in proc.stderr, proc.stderr
    assert sha256(s3.get_object(Bucket=bucket, Key="short")["Body"].read()) == sha256(data)


def test_special_key_names(aws: Cli, bucket: str, tmp_path: Path) -> None:
    files = {"with space/a b.bin": payload(1000, 1), "ünïcødé/ß€.bin": payload(1001, 2),
             "plus+eq=amp&pct%25(1).bin": payload(1002, 3), "tilde~star*quote'.bin": b"",
             "semi;colon,comma@at$.bin": payload(1004, 5)}
    src, dst = tmp_path / "src", tmp_path / "dst"
    write_tree(src, files)
    aws("s3", "cp", "--recursive", str(src), f"s3://{bucket}/")
    assert _ls_keys(aws("s3", "ls", f"s3://{bucket}", "--recursive").stdout) == {
        k: len(v) for k, v in files.items()}
    aws("s3", "cp", "--recursive", f"s3://{bucket}/", str(dst))
    assert read_tree(dst) == read_tree(src)
    head = _json(aws("s3api", "head-object", "--bucket", bucket,
                     "--key", "plus+eq=amp&pct%25(1).bin").stdout)
    assert head["ContentLength"] == 1002


def test_rb_with_incomplete_upload(aws: Cli, s3: Any) -> None:
    name = new_bucket_name("cli")
    aws("s3", "mb", f"s3://{name}")
    created = _json(aws("s3api", "create-multipart-upload", "--bucket", name,
                        "--key", "left/over").stdout)
    assert created["UploadId"]
    assert f"remove_bucket: {name}" in aws("s3", "rb", f"s3://{name}").stdout
    assert name not in aws("s3", "ls").stdout


def test_get_and_head_object_part_number(aws: Cli, s3: Any, bucket: str,
                                         tmp_path: Path) -> None:
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    datas = [payload(5 * MiB, "p1"), payload(1000, "p2")]
    parts = [{"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload,
                                                     PartNumber=n, Body=d)["ETag"]}
             for n, d in enumerate(datas, start=1)]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload,
                                 MultipartUpload={"Parts": parts})
    out = tmp_path / "part2"
    got = _json(aws("s3api", "get-object", "--bucket", bucket, "--key", "mp",
                    "--part-number", "2", str(out)).stdout)
    assert (got["PartsCount"], got["ContentLength"]) == (2, 1000)
    assert out.read_bytes() == datas[1]
    head = _json(aws("s3api", "head-object", "--bucket", bucket, "--key", "mp",
                     "--part-number", "1").stdout)
    assert (head["PartsCount"], head["ContentLength"]) == (2, 5 * MiB)
    proc = aws("s3api", "get-object", "--bucket", bucket, "--key", "mp", "--part-number",
               "3", str(out), ok=False)
    assert "InvalidPart" in proc.stderr


def test_presign(aws: Cli, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="dir/pre signed", Body=b"presigned by the CLI")
    url = aws("s3", "presign", f"s3://{bucket}/dir/pre signed", "--expires-in", "300"
              ).stdout.strip()
    response = httpx.get(url)
    assert (response.status_code, response.content) == (200, b"presigned by the CLI")


def test_bucket_tagging_and_list_buckets_prefix(aws: Cli, s3: Any, bucket: str) -> None:
    aws("s3api", "put-bucket-tagging", "--bucket", bucket, "--tagging",
        "TagSet=[{Key=team,Value=hpc},{Key=cost,Value=42}]")
    got = _json(aws("s3api", "get-bucket-tagging", "--bucket", bucket).stdout)
    assert got["TagSet"] == [{"Key": "cost", "Value": "42"}, {"Key": "team", "Value": "hpc"}]
    aws("s3api", "delete-bucket-tagging", "--bucket", bucket)
    proc = aws("s3api", "get-bucket-tagging", "--bucket", bucket, ok=False)
    assert "NoSuchTagSet" in proc.stderr
    listed = _json(aws("s3api", "list-buckets", "--prefix", bucket).stdout)
    assert [b["Name"] for b in listed["Buckets"]] == [bucket]
    paged = _json(aws("s3api", "list-buckets", "--page-size", "1", "--prefix",
                      bucket[:6]).stdout)
    assert bucket in [b["Name"] for b in paged["Buckets"]]


def test_multipart_full_object_checksum(aws: Cli, s3: Any, bucket: str,
                                        tmp_path: Path) -> None:
    parts = [payload(5 * MiB, "fo1"), payload(4321, "fo2")]
    proc = aws("s3api", "create-multipart-upload", "--bucket", bucket, "--key", "fo",
               "--checksum-algorithm", "SHA1", "--checksum-type", "FULL_OBJECT", ok=False)
    assert "(InvalidRequest)" in proc.stderr, proc.stderr
    created = _json(aws("s3api", "create-multipart-upload", "--bucket", bucket, "--key", "fo",
                        "--checksum-algorithm", "CRC32", "--checksum-type",
                        "FULL_OBJECT").stdout)
    assert (created["ChecksumAlgorithm"], created["ChecksumType"]) == ("CRC32", "FULL_OBJECT")
    upload_id = created["UploadId"]
    done = []
    for n, data in enumerate(parts, start=1):
        f = tmp_path / f"fo{n}"
        f.write_bytes(data)
        res = _json(aws("s3api", "upload-part", "--bucket", bucket, "--key", "fo",
                        "--upload-id", upload_id, "--part-number", str(n), "--body", str(f),
                        "--checksum-algorithm", "CRC32").stdout)
        done.append({"PartNumber": n, "ETag": res["ETag"], "ChecksumCRC32": res["ChecksumCRC32"]})
    whole = s3_checksum_crc32(b"".join(parts))

    def complete(*extra: str, ok: bool = False) -> Any:
        return aws("s3api", "complete-multipart-upload", "--bucket", bucket, "--key", "fo",
                   "--upload-id", upload_id, "--multipart-upload",
                   json.dumps({"Parts": done}), *extra, ok=ok)

    wrong = s3_checksum_crc32(b"not the object")
    proc = complete("--checksum-crc32", wrong, "--checksum-type", "FULL_OBJECT")
    assert "(BadDigest)" in proc.stderr, proc.stderr
    res = _json(complete("--checksum-crc32", whole, "--checksum-type", "FULL_OBJECT",
                         ok=True).stdout)
    assert (res["ChecksumCRC32"], res["ChecksumType"]) == (whole, "FULL_OBJECT")
    attrs = _json(aws("s3api", "get-object-attributes", "--bucket", bucket, "--key", "fo",
                      "--object-attributes", "Checksum", "ObjectParts", "ObjectSize").stdout)
    assert attrs["Checksum"] == {"ChecksumCRC32": whole, "ChecksumType": "FULL_OBJECT"}
    assert attrs["ObjectParts"]["TotalPartsCount"] == 2
    assert [p["Size"] for p in attrs["ObjectParts"]["Parts"]] == [len(p) for p in parts]
    assert attrs["ObjectSize"] == sum(len(p) for p in parts)
    body = s3.get_object(Bucket=bucket, Key="fo")["Body"].read()
    assert sha256(body) == sha256(b"".join(parts))


def s3_checksum_crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
