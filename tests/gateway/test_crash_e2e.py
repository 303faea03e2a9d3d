"""SIGKILL the real gateway mid-work: every acknowledged write survives, then flushes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SquallProcess
from tests.support.server import run_sync as _sync

SLOW_BACKEND = ["--backend-bandwidth", "256KiB/s", "--inactivity-delay", "3600"]


def _writer(s3, bucket: str, acked: dict[str, bytes], stop: threading.Event) -> None:  # type: ignore[no-untyped-def]
    i = 0
    while not stop.is_set():
        key = f"obj-{i:05d}"
        body = os.urandom(64 * 1024 + i)
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        except Exception:  # noqa: BLE001 - the crash interrupts the request in flight
            return
        acked[key] = body
        i += 1


def test_kill_during_a_write_burst_loses_no_acknowledged_write(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = SquallProcess(data, SLOW_BACKEND).start()
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="burst")
    acked: dict[str, bytes] = {}
    stop = threading.Event()
    writers = [threading.Thread(target=_writer, args=(s3, "burst", acked, stop))
               for _ in range(1)]
    for w in writers:
        w.start()
    while len(acked) < 40:
        time.sleep(0.01)
    status = httpx.get(f"{server.endpoint}/_squall/status").json()
    assert status["dirty_bytes"] > 0  # the slow backend is behind: data is only in the cache
    server.kill()
    stop.set()
    for w in writers:
        w.join(30)
    server = SquallProcess(data).start()  # restarted without the throttle
    s3 = make_client(server.endpoint)
    for key, body in acked.items():
        assert s3.get_object(Bucket="burst", Key=key)["Body"].read() == body, key
    listed = {o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="burst")
              for o in page.get("Contents", [])}
    assert set(acked) <= listed
    result = _sync(server)
    assert result.returncode == 0, result.stderr
    assert httpx.get(f"{server.endpoint}/_squall/status").json()["dirty_bytes"] == 0
    root = data / "objects" / "burst"
    for key, body in acked.items():
        assert hashlib.md5((root / key).read_bytes()).digest() == hashlib.md5(body).digest()
    assert server.stop() == 0


def test_kill_during_a_multipart_upload(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = SquallProcess(data, SLOW_BACKEND).start()
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="mpu")
    s3.put_object(Bucket="mpu", Key="ckpt", Body=b"previous checkpoint")
    upload = s3.create_multipart_upload(Bucket="mpu", Key="ckpt")["UploadId"]
    part = os.urandom(5 * 1024 * 1024)
    etag = s3.upload_part(Bucket="mpu", Key="ckpt", UploadId=upload, PartNumber=1,
                          Body=part)["ETag"]
    server.kill()  # parts acknowledged, upload not completed
    server = SquallProcess(data, SLOW_BACKEND).start()
    s3 = make_client(server.endpoint)
    # Nothing half-written is visible: the previous version is still the object.
    assert s3.get_object(Bucket="mpu", Key="ckpt")["Body"].read() == b"previous checkpoint"
    # The acknowledged part survived and the upload can be completed.
    s3.complete_multipart_upload(Bucket="mpu", Key="ckpt", UploadId=upload,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    server.kill()  # completed (acknowledged) but not flushed through the slow backend
    server = SquallProcess(data).start()
    s3 = make_client(server.endpoint)
    assert s3.get_object(Bucket="mpu", Key="ckpt")["Body"].read() == part
    assert _sync(server).returncode == 0
    assert (data / "objects" / "mpu" / "ckpt").read_bytes() == part
    assert server.stop() == 0


def test_status_and_sync_report_durability(squall: SquallProcess, s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    s3.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000)
    status = httpx.get(f"{squall.endpoint}/_squall/status").json()
    for field in ("dirty_bytes", "cache_used_bytes", "cache_capacity_bytes",
                  "oldest_dirty_age_s", "flush_phase"):
        assert field in status
    result = _sync(squall)
    assert result.returncode == 0 and "flushed" in result.stdout
    assert httpx.get(f"{squall.endpoint}/_squall/status").json()["dirty_bytes"] == 0
    metrics = httpx.get(f"{squall.endpoint}/_squall/metrics").text
    assert "squall_cache_dirty_bytes" in metrics


def test_sync_refuses_bad_credentials(squall: SquallProcess) -> None:
    result = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync", "--endpoint",
                             squall.endpoint], capture_output=True, text=True, timeout=60,
                            check=False, env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                                              "SQUALL_SECRET_KEY": "wrong"})
    assert result.returncode == 1 and "SignatureDoesNotMatch" in result.stderr
    env = {k: v for k, v in os.environ.items()
           if k not in ("SQUALL_ACCESS_KEY", "SQUALL_SECRET_KEY", "AWS_ACCESS_KEY_ID",
                        "AWS_SECRET_ACCESS_KEY")}
    result = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync"], capture_output=True,
                            text=True, timeout=60, check=False, env=env)
    assert result.returncode == 2 and "no credentials" in result.stderr
