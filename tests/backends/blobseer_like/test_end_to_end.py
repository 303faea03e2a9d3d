"""A real gateway on ``--backend blobseer_like:...`` driven with boto3, the admin endpoint
and CLI, and a SIGKILL in the middle of uploads."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from tests.backends.conformance import blob
from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

MiB = 1 << 20


def spec(root: Path, count: int = 4) -> str:
    return "blobseer_like:" + ",".join(str(root / f"p{i}") for i in range(count)) + \
        "?chunk=256KiB&gc_interval=0"


def squall_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, env=env)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("blobseer-e2e")


@pytest.fixture(scope="module")
def gateway(root: Path) -> Iterator[SquallProcess]:
    server = SquallProcess(root / "data", ["--backend", spec(root), "--cache-size", "0",
                                           "--min-part-size", str(5 * MiB)]).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def s3(gateway: SquallProcess) -> Any:
    return make_client(gateway.endpoint)


def test_objects_through_the_gateway(s3: Any, root: Path) -> None:
    bucket = f"e2e-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    small = b"hello blobseer"
    s3.put_object(Bucket=bucket, Key="dir/small.txt", Body=small, ContentType="text/plain",
                  Metadata={"origin": "e2e"})
    big = blob(13 * MiB + 7, seed=3)
    s3.upload_fileobj(io.BytesIO(big), bucket, "dir/big.bin",
                      Config=TransferConfig(multipart_threshold=5 * MiB,
                                            multipart_chunksize=5 * MiB))
    got = s3.get_object(Bucket=bucket, Key="dir/small.txt")
    assert got["Body"].read() == small and got["Metadata"] == {"origin": "e2e"}
    assert s3.get_object(Bucket=bucket, Key="dir/big.bin")["Body"].read() == big
    ranged = s3.get_object(Bucket=bucket, Key="dir/big.bin", Range="bytes=5242870-5242890")
    assert ranged["Body"].read() == big[5242870:5242891]
    s3.copy_object(Bucket=bucket, Key="copy.bin", CopySource={"Bucket": bucket,
                                                              "Key": "dir/big.bin"})
    assert s3.head_object(Bucket=bucket, Key="copy.bin")["ContentLength"] == len(big)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="parts.bin")
    part = s3.upload_part_copy(Bucket=bucket, Key="parts.bin", UploadId=upload["UploadId"],
                               PartNumber=1, CopySource={"Bucket": bucket, "Key": "copy.bin"},
                               CopySourceRange="bytes=0-5242879")
    s3.complete_multipart_upload(
        Bucket=bucket, Key="parts.bin", UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1,
                                    "ETag": part["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="parts.bin")["Body"].read() == big[:5 * MiB]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["copy.bin", "dir/big.bin", "dir/small.txt", "parts.bin"]
    s3.delete_object(Bucket=bucket, Key="dir/small.txt")
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=bucket, Key="dir/small.txt")
    assert caught.value.response["Error"]["Code"] == "NoSuchKey"
    # The bytes are striped over the four providers.
    for i in range(4):
        assert any((root / f"p{i}" / "chunks").rglob("*"))


def test_corruption_is_an_error_not_data(s3: Any, root: Path) -> None:
    bucket = f"bad-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"precious" * 1000)
    files = sorted((p for p in root.rglob("chunks/*/*") if p.is_file()),
                   key=lambda p: p.stat().st_mtime_ns)
    victim = files[-1]
    raw = bytearray(victim.read_bytes())
    raw[40] ^= 0xFF
    victim.write_bytes(bytes(raw))
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=bucket, Key="k")
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def test_providers_admin(gateway: SquallProcess, s3: Any, root: Path) -> None:
    unsigned = httpx.post(f"{gateway.endpoint}/_squall/providers",
                          params={"path": str(root / "p9")})
    assert unsigned.status_code == 403
    assert not (root / "p9").exists()
    listed = squall_cli("providers", "list", "--endpoint", gateway.endpoint)
    assert listed.returncode == 0 and listed.stdout.count("active") == 4
    added = squall_cli("providers", "add", str(root / "p4"), "--endpoint", gateway.endpoint)
    assert added.returncode == 0, added.stderr
    assert str(root / "p4") in added.stdout
    again = squall_cli("providers", "add", str(root / "p4"), "--endpoint", gateway.endpoint)
    assert again.returncode == 1 and "already a provider" in again.stderr
    missing = squall_cli("providers", "add", "--endpoint", gateway.endpoint)
    assert missing.returncode == 2
    bucket = f"grow-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    data = blob(4 * MiB, seed=8)
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    assert any((root / "p4" / "chunks").rglob("*"))
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == data
    metrics = httpx.get(f"{gateway.endpoint}/_squall/metrics").text
    assert 'squall_blobseer_providers{state="active"} 5.0' in metrics
    assert "squall_blobseer_providers_added_total 1.0" in metrics
    status = httpx.get(f"{gateway.endpoint}/_squall/status").json()
    assert len(status["store"]["providers"]) == 5


def test_sigkill_mid_upload_loses_nothing_acknowledged(tmp_path: Path) -> None:
    server = SquallProcess(tmp_path / "data", ["--backend", spec(tmp_path), "--cache-size",
                                               "0"]).start()
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="crash")
    kept = {f"kept/{i}": blob(MiB + i, seed=i) for i in range(4)}
    for key, data in kept.items():
        s3.put_object(Bucket="crash", Key=key, Body=data)
    started = threading.Event()

    def upload() -> None:
        body = blob(64 * MiB, seed=99)

        def chunks() -> Iterator[bytes]:
            for offset in range(0, len(body), MiB):
                if offset == 8 * MiB:
                    started.set()
                yield body[offset:offset + MiB]

        try:
            client = make_client(server.endpoint)
            client.put_object(Bucket="crash", Key="torn", Body=b"".join(chunks()))
        except Exception:  # noqa: BLE001,S110 - the server is killed under it
            pass

    uploader = threading.Thread(target=upload)
    uploader.start()
    started.wait(30)
    # Let some chunks of the torn upload reach the providers, then SIGKILL.
    for _ in range(200):
        if sum(1 for p in tmp_path.rglob("chunks/*/*")) > 24:
            break
        threading.Event().wait(0.02)
    server.kill()
    uploader.join(60)
    orphan_chunks = sum(1 for _ in tmp_path.rglob("chunks/*/*"))
    check = squall_cli("fsck", "--backend", spec(tmp_path), "--data-dir",
                       str(tmp_path / "data"), "--verify-data", "--gc")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "store is consistent" in check.stdout
    assert sum(1 for _ in tmp_path.rglob("chunks/*/*")) <= orphan_chunks
    server = SquallProcess(tmp_path / "data", ["--backend", spec(tmp_path), "--cache-size",
                                               "0"], port=server.port).start()
    try:
        s3 = make_client(server.endpoint)
        for key, data in kept.items():
            assert s3.get_object(Bucket="crash", Key=key)["Body"].read() == data
        keys = {o["Key"] for o in s3.list_objects_v2(Bucket="crash")["Contents"]}
        assert set(kept) <= keys <= {*kept, "torn"}
    finally:
        assert server.stop() == 0, server.log()


def test_behind_the_cache_tier(tmp_path: Path) -> None:
    server = SquallProcess(tmp_path / "data", ["--backend", spec(tmp_path, 2),
                                               "--cache-size", "256MiB"]).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="cached")
        data = blob(3 * MiB, seed=4)
        s3.put_object(Bucket="cached", Key="k", Body=data)
        synced = squall_cli("sync", "--endpoint", server.endpoint)
        assert synced.returncode == 0, synced.stderr
        assert sum(f.stat().st_size for f in tmp_path.rglob("chunks/*/*")) >= len(data)
        assert s3.get_object(Bucket="cached", Key="k")["Body"].read() == data
    finally:
        assert server.stop() == 0, server.log()


def test_providers_of_a_posix_gateway(squall: SquallProcess) -> None:
    listed = squall_cli("providers", "list", "--endpoint", squall.endpoint)
    assert listed.returncode == 1 and "NotImplemented: The backend has no providers" in listed.stderr
