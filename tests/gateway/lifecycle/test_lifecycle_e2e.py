"""Lifecycle rules enforced by a real gateway (a 1-second lifecycle day, a scan every
0.3 s) whose backend is too slow to flush: every object expires while still dirty in
the cache, and nothing a rule does not match is lost. boto3 and the aws CLI."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.s3api.clients.helpers import make_aws
from tests.support.server import SquallProcess

LIFECYCLE = ("--lifecycle-interval", "0.3", "--lifecycle-day-seconds", "1")
SLOW_BACKEND = ("--backend-bandwidth", "2B/s", "--inactivity-delay", "3600",
                "--cache-admission", "cache")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    root = tmp_path_factory.mktemp("lifecycle")
    server = SquallProcess(root / "data", [*LIFECYCLE, *SLOW_BACKEND]).start()
    yield server
    server.kill()  # unflushed data stays in the cache; nothing to wait for


@pytest.fixture(scope="module")
def s3(gateway: SquallProcess) -> Any:
    return make_client(gateway.endpoint)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"lc-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def lifecycle_status(gateway: SquallProcess) -> list[dict[str, Any]]:
    """Every gateway process's lifecycle status."""
    status = httpx.get(f"{gateway.endpoint}/_squall/status?workers=all", timeout=10).json()
    return [w["lifecycle"] for w in status.get("workers", [status])]


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def wait_scans(gateway: SquallProcess, count: int = 2) -> None:
    """Until every process has completed ``count`` more scans."""
    before = [s["scans"] for s in lifecycle_status(gateway)]
    wait_for(lambda: all(s["scans"] >= b + count
                         for s, b in zip(lifecycle_status(gateway), before, strict=True)))


def keys(s3: Any, bucket: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def put_rules(s3: Any, bucket: str, *rules: dict[str, Any]) -> None:
    s3.put_bucket_lifecycle_configuration(Bucket=bucket,
                                          LifecycleConfiguration={"Rules": list(rules)})


def test_prefix_rule_expires_dirty_objects_and_keeps_the_rest(gateway: SquallProcess,
                                                              s3: Any, bucket: str) -> None:
    data = {f"tmp/{i}": f"expiring {i}".encode() for i in range(5)}
    data |= {f"keep/{i}": f"kept {i}".encode() * 50 for i in range(5)}
    for key, body in data.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    status = httpx.get(f"{gateway.endpoint}/_squall/status?workers=all", timeout=10).json()
    dirty = sum(w["dirty_objects"] for w in status.get("workers", [status]))
    assert dirty >= len(data), status  # none of them reached the backend
    before = sum(s["objects_expired"] for s in lifecycle_status(gateway))
    put_rules(s3, bucket, {"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled",
                           "Expiration": {"Days": 1}})
    wait_for(lambda: keys(s3, bucket) == sorted(k for k in data if k.startswith("keep/")))
    for key in keys(s3, bucket):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data[key]
    after = sum(s["objects_expired"] for s in lifecycle_status(gateway))
    assert after - before == 5
    metrics = httpx.get(f"{gateway.endpoint}/_squall/metrics", timeout=10).text
    assert "squall_lifecycle_objects_expired_total" in metrics
    # A key written again after the expiration is new: it lives its own day.
    s3.put_object(Bucket=bucket, Key="tmp/0", Body=b"again")
    assert s3.get_object(Bucket=bucket, Key="tmp/0")["Body"].read() == b"again"


def test_disabled_rule_does_nothing(gateway: SquallProcess, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="k", Body=b"stays")
    put_rules(s3, bucket, {"ID": "off", "Filter": {}, "Status": "Disabled",
                           "Expiration": {"Days": 1}})
    time.sleep(2.2)  # two lifecycle days
    wait_scans(gateway)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"stays"


def test_versioned_current_expiration_makes_a_delete_marker(gateway: SquallProcess,
                                                            s3: Any, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"two")["VersionId"]
    put_rules(s3, bucket, {"ID": "cur", "Filter": {"Prefix": ""}, "Status": "Enabled",
                           "Expiration": {"Days": 1}})

    def marked() -> bool:
        return bool(s3.list_object_versions(Bucket=bucket).get("DeleteMarkers"))
    wait_for(marked)
    listing = s3.list_object_versions(Bucket=bucket)
    (marker,) = listing["DeleteMarkers"]
    assert marker["IsLatest"]
    assert [v["VersionId"] for v in listing["Versions"]] == [v2, v1]
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k")
    assert exc.value.response["Error"]["Code"] == "NoSuchKey"
    assert s3.get_object(Bucket=bucket, Key="k", VersionId=v2)["Body"].read() == b"two"


def test_noncurrent_versions_and_lone_markers(gateway: SquallProcess, s3: Any,
                                              bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    ids = [s3.put_object(Bucket=bucket, Key="nc", Body=f"v{i}".encode())["VersionId"]
           for i in range(4)]
    gone = s3.put_object(Bucket=bucket, Key="lone", Body=b"x")["VersionId"]
    s3.delete_object(Bucket=bucket, Key="lone")
    s3.delete_object(Bucket=bucket, Key="lone", VersionId=gone)
    put_rules(s3, bucket,
              {"ID": "nc", "Filter": {"Prefix": "nc"}, "Status": "Enabled",
               "NoncurrentVersionExpiration": {"NoncurrentDays": 1,
                                               "NewerNoncurrentVersions": 1}},
              {"ID": "markers", "Filter": {"Prefix": "lone"}, "Status": "Enabled",
               "Expiration": {"ExpiredObjectDeleteMarker": True}})

    def versions() -> list[tuple[str, str]]:
        listing = s3.list_object_versions(Bucket=bucket)
        return [(v["Key"], v["VersionId"]) for v in
                listing.get("Versions", []) + listing.get("DeleteMarkers", [])]
    wait_for(lambda: versions() == [("nc", ids[3]), ("nc", ids[2])])
    assert s3.get_object(Bucket=bucket, Key="nc")["Body"].read() == b"v3"


def test_incomplete_uploads_aborted(gateway: SquallProcess, s3: Any, bucket: str,
                                    tmp_path: Path) -> None:
    aws = make_aws(gateway.endpoint, tmp_path / "home")
    config = {"Rules": [{"ID": "mpu", "Filter": {"Prefix": "up/"}, "Status": "Enabled",
                         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]}
    aws("s3api", "put-bucket-lifecycle-configuration", "--bucket", bucket,
        "--lifecycle-configuration", json.dumps(config))
    created = json.loads(aws("s3api", "create-multipart-upload", "--bucket", bucket,
                             "--key", "up/crashed.bin").stdout)
    s3.upload_part(Bucket=bucket, Key="up/crashed.bin", UploadId=created["UploadId"],
                   PartNumber=1, Body=b"p" * 1000)
    kept = s3.create_multipart_upload(Bucket=bucket, Key="other/open.bin")["UploadId"]

    def uploads() -> list[str]:
        return [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)
                .get("Uploads", [])]
    wait_for(lambda: uploads() == [kept])
    with pytest.raises(ClientError) as exc:
        s3.list_parts(Bucket=bucket, Key="up/crashed.bin", UploadId=created["UploadId"])
    assert exc.value.response["Error"]["Code"] == "NoSuchUpload"
    assert sum(s["uploads_aborted"] for s in lifecycle_status(gateway)) >= 1
