"""s3cmd (SigV4, path style, plain HTTP) against a real gateway."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx

from tests.gateway.s3api.clients.helpers import (
    Cli,
    MiB,
    file_sha256,
    make_s3cmd,
    new_bucket_name,
    payload,
    read_tree,
    sha256,
    write_tree,
)
from tests.support.server import ACCESS_KEY, SquallProcess


def _ls_objects(out: str) -> dict[str, int]:
    """``s3cmd ls``/``la`` lines ``DATE TIME SIZE s3://b/key`` -> {uri: size}."""
    found: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[3].startswith("s3://") and parts[2].isdigit():
            found[parts[3]] = int(parts[2])
    return found


def test_mb_put_get_ls_info_del_rb(s3cmd: Cli, tmp_path: Path) -> None:
    name = new_bucket_name("s3cmd")
    s3cmd("mb", f"s3://{name}")
    assert f"s3://{name}" in s3cmd("ls").stdout

    data = payload(200_000, "s3cmd-small")
    src = tmp_path / "small.bin"
    src.write_bytes(data)
    s3cmd("put", str(src), f"s3://{name}/dir/small.bin")

    got = tmp_path / "got.bin"
    s3cmd("get", f"s3://{name}/dir/small.bin", str(got))
    assert file_sha256(got) == sha256(data)

    top = s3cmd("ls", f"s3://{name}").stdout
    assert ["DIR", f"s3://{name}/dir/"] in [line.split() for line in top.splitlines()], top
    assert _ls_objects(s3cmd("ls", f"s3://{name}/dir/").stdout) == {
        f"s3://{name}/dir/small.bin": len(data)}
    assert _ls_objects(s3cmd("ls", "--recursive", f"s3://{name}").stdout) == {
        f"s3://{name}/dir/small.bin": len(data)}
    everything = _ls_objects(s3cmd("la", "--recursive").stdout)
    assert everything[f"s3://{name}/dir/small.bin"] == len(data)

    info = s3cmd("info", f"s3://{name}/dir/small.bin").stdout
    assert f"File size: {len(data)}" in info
    assert hashlib.md5(data).hexdigest() in info

    # Not empty yet: the bucket survives rb.
    proc = s3cmd("rb", f"s3://{name}", ok=False)
    assert "409" in proc.stderr and "BucketNotEmpty" in proc.stderr, proc.stderr

    s3cmd("del", f"s3://{name}/dir/small.bin")
    assert _ls_objects(s3cmd("ls", "--recursive", f"s3://{name}").stdout) == {}
    s3cmd("rb", f"s3://{name}")
    assert f"s3://{name}" not in s3cmd("ls").stdout


def test_multipart_put(s3cmd: Cli, s3: Any, bucket: str, tmp_path: Path) -> None:
    data = payload(12 * MiB, "s3cmd-mp")
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    s3cmd("put", "--multipart-chunk-size-mb=5", str(src), f"s3://{bucket}/big.bin")

    head = s3.head_object(Bucket=bucket, Key="big.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].endswith('-3"'), head["ETag"]  # 5 + 5 + 2 MiB

    got = tmp_path / "big.out"
    s3cmd("get", f"s3://{bucket}/big.bin", str(got))
    assert file_sha256(got) == sha256(data)


def test_sync_tree(s3cmd: Cli, bucket: str, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = {"a.txt": b"alpha\n", "b/c.bin": payload(70_000, "c"),
             "b/d/e.bin": payload(3, "e"), "b/d/empty": b""}
    write_tree(src, files)

    s3cmd("sync", f"{src}/", f"s3://{bucket}/tree/")
    dst.mkdir()
    s3cmd("sync", f"s3://{bucket}/tree/", f"{dst}/")
    assert read_tree(dst) == read_tree(src)

    (src / "b" / "c.bin").write_bytes(payload(70_001, "c2"))
    (src / "a.txt").unlink()
    s3cmd("sync", "--delete-removed", f"{src}/", f"s3://{bucket}/tree/")
    s3cmd("sync", "--delete-removed", f"s3://{bucket}/tree/", f"{dst}/")
    assert read_tree(dst) == read_tree(src)


def test_special_key_names(s3cmd: Cli, s3: Any, bucket: str, tmp_path: Path) -> None:
    data = payload(5000, "s3cmd-special")
    src = tmp_path / "in"
    src.write_bytes(data)
    key = "dir with space/ünï+plus=eq&pct%25(1).bin"
    s3cmd("put", str(src), f"s3://{bucket}/{key}")
    assert sha256(s3.get_object(Bucket=bucket, Key=key)["Body"].read()) == sha256(data)
    out = tmp_path / "out"
    s3cmd("get", f"s3://{bucket}/{key}", str(out))
    assert file_sha256(out) == sha256(data)
    assert _ls_objects(s3cmd("ls", "--recursive", f"s3://{bucket}").stdout) == {
        f"s3://{bucket}/{key}": len(data)}


def test_missing_bucket(s3cmd: Cli, tmp_path: Path) -> None:
    name = new_bucket_name("missing")
    f = tmp_path / "x"
    f.write_bytes(payload(10, "x"))
    proc = s3cmd("put", str(f), f"s3://{name}/x", ok=False)
    assert "404" in proc.stderr and "NoSuchBucket" in proc.stderr, proc.stderr


def test_wrong_credentials(squall: SquallProcess, s3: Any, bucket: str, tmp_path: Path) -> None:
    data = payload(100, "s3cmd-creds")
    s3.put_object(Bucket=bucket, Key="k", Body=data)

    bad_key = make_s3cmd(squall.endpoint, tmp_path / "k", access_key="NOSUCHKEY0000000")
    proc = bad_key("ls", f"s3://{bucket}", ok=False)
    assert "403" in proc.stderr and "InvalidAccessKeyId" in proc.stderr, proc.stderr

    bad_secret = make_s3cmd(squall.endpoint, tmp_path / "s", access_key=ACCESS_KEY,
                            secret_key="wrong-secret")
    proc = bad_secret("del", f"s3://{bucket}/k", ok=False)
    assert "403" in proc.stderr and "SignatureDoesNotMatch" in proc.stderr, proc.stderr
    assert sha256(s3.get_object(Bucket=bucket, Key="k")["Body"].read()) == sha256(data)


def test_signature_v2_session_and_signurl(squall: SquallProcess, s3: Any, bucket: str,
                                          tmp_path: Path) -> None:
    """s3cmd with ``signature_v2 = True``, and ``signurl`` (always SigV2)."""
    cli = make_s3cmd(squall.endpoint, tmp_path / "v2-home")
    config = tmp_path / "v2-home" / "s3cfg"
    config.write_text(config.read_text().replace("signature_v2 = False",
                                                 "signature_v2 = True"))
    src = tmp_path / "v2.bin"
    data = payload(40_000, "v2")
    src.write_bytes(data)
    cli("put", str(src), f"s3://{bucket}/v2/obj")
    assert f"s3://{bucket}/v2/obj" in _ls_objects(cli("ls", f"s3://{bucket}/v2/").stdout)
    back = tmp_path / "back.bin"
    cli("get", f"s3://{bucket}/v2/obj", str(back))
    assert file_sha256(back) == sha256(data)
    url = cli("signurl", f"s3://{bucket}/v2/obj", "+300").stdout.strip()
    assert "AWSAccessKeyId=" in url and "Signature=" in url
    response = httpx.get(url)
    assert response.status_code == 200 and sha256(response.content) == sha256(data)
    expired = cli("signurl", f"s3://{bucket}/v2/obj", "1000000000").stdout.strip()
    assert httpx.get(expired).status_code == 403
    cli("del", f"s3://{bucket}/v2/obj")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_setcors_info_delcors(s3cmd: Cli, s3: Any, bucket: str, tmp_path: Path) -> None:
    rules = tmp_path / "cors.xml"
    rules.write_text(
        "<CORSConfiguration><CORSRule><AllowedOrigin>https://app.example.com</AllowedOrigin>"
        "<AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>30</MaxAgeSeconds></CORSRule>"
        "</CORSConfiguration>")
    s3cmd("setcors", str(rules), f"s3://{bucket}")
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == [{
        "AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["GET"],
        "MaxAgeSeconds": 30}]
    assert "https://app.example.com" in s3cmd("info", f"s3://{bucket}").stdout
    s3cmd("delcors", f"s3://{bucket}")
    assert "CORSRules" not in str(s3cmd("info", f"s3://{bucket}").stdout)
