"""The disk of the cache index fills up under a running gateway, then space returns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.support.server import SquallProcess
from tests.support.tmpfs import fill, small_filesystem


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB file system of its own (tmpfs); skipped where mounting is not allowed."""
    with small_filesystem(tmp_path / "disk") as mount:
        yield mount


def test_full_index_disk_is_unhealthy_then_recovers_without_restart(
        tmp_path: Path, small_disk: Path) -> None:
    server = SquallProcess(small_disk / "data", [
        "--cache-dir", str(tmp_path / "cache"), "--backend", f"posix:{tmp_path / 'objects'}",
        "--cache-admission", "cache", "--backend-bandwidth", "1KiB/s"]).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="lab")
        s3.put_object(Bucket="lab", Key="before", Body=b"1" * 1000)
        fill(small_disk / "filler")
        with pytest.raises(ClientError) as refused:
            for i in range(50):  # the WAL's free tail is used up within a few writes
                s3.put_object(Bucket="lab", Key=f"during-{i}", Body=b"2" * 1000)
        answer = refused.value.response
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 503
        # a full disk is the client's cue to retry later; the message names no file
        assert answer["Error"]["Code"] == "SlowDown"
        assert int(answer["ResponseMetadata"]["HTTPHeaders"]["retry-after"]) >= 1
        assert str(small_disk) not in answer["Error"]["Message"]
        health = httpx.get(f"{server.endpoint}/_squall/health")
        assert health.status_code == 503 and "index" in health.json()["reason"]
        assert str(small_disk) not in health.text
        (small_disk / "filler").unlink()
        s3.put_object(Bucket="lab", Key="after", Body=b"3" * 1000)  # no restart needed
        assert httpx.get(f"{server.endpoint}/_squall/health").status_code == 200
        assert s3.get_object(Bucket="lab", Key="before")["Body"].read() == b"1" * 1000
        assert s3.get_object(Bucket="lab", Key="after")["Body"].read() == b"3" * 1000
    finally:
        server.kill()
    server = SquallProcess(small_disk / "data", [
        "--cache-dir", str(tmp_path / "cache"), "--backend",
        f"posix:{tmp_path / 'objects'}"]).start()  # every acknowledged write survived
    try:
        s3 = make_client(server.endpoint)
        for key, body in (("before", b"1" * 1000), ("after", b"3" * 1000)):
            assert s3.get_object(Bucket="lab", Key=key)["Body"].read() == body
    finally:
        server.stop()
