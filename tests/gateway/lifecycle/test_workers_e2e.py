"""Lifecycle on ``squall serve --workers 2``: every worker scans, each acts only on the
keys it owns, so each expiring object is deleted exactly once (one delete marker per key
in a versioned bucket) and each upload is aborted once."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import make_client
from tests.gateway.http.workers.conftest import keys_of
from tests.gateway.lifecycle.test_lifecycle_e2e import (
    LIFECYCLE,
    SLOW_BACKEND,
    lifecycle_status,
    put_rules,
    wait_for,
)
from tests.support.server import SquallProcess


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    root = tmp_path_factory.mktemp("lifecycle-workers")
    server = SquallProcess(root / "data", ["--workers", "2", *LIFECYCLE,
                                           *SLOW_BACKEND]).start()
    yield server
    server.kill()


def test_each_key_expired_once_by_its_owner(gateway: SquallProcess) -> None:
    s3: Any = make_client(gateway.endpoint)
    bucket = f"lw-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    expiring = {w: keys_of(w, bucket, 4, prefix="exp/k") for w in (0, 1)}
    kept = keys_of(0, bucket, 2, prefix="keep/k") + keys_of(1, bucket, 2, prefix="keep/k")
    uploads = {w: keys_of(w, bucket, 1, prefix="up/u")[0] for w in (0, 1)}
    for key in [*expiring[0], *expiring[1], *kept]:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    for key in uploads.values():
        s3.create_multipart_upload(Bucket=bucket, Key=key)
    before = lifecycle_status(gateway)
    put_rules(s3, bucket,
              {"ID": "exp", "Filter": {"Prefix": "exp/"}, "Status": "Enabled",
               "Expiration": {"Days": 1}},
              {"ID": "up", "Filter": {"Prefix": "up/"}, "Status": "Enabled",
               "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}})

    def markers() -> Counter[str]:
        listing = s3.list_object_versions(Bucket=bucket)
        return Counter(m["Key"] for m in listing.get("DeleteMarkers", []))
    wanted = Counter([*expiring[0], *expiring[1]])

    def done() -> bool:
        pending = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        return markers() == wanted and not pending
    wait_for(done, timeout=20)
    # More scans change nothing: still exactly one marker per expired key.
    scans = [s["scans"] for s in lifecycle_status(gateway)]
    wait_for(lambda: all(s["scans"] >= n + 2
                         for s, n in zip(lifecycle_status(gateway), scans, strict=True)))
    assert markers() == wanted
    listing = s3.list_objects_v2(Bucket=bucket)
    assert sorted(o["Key"] for o in listing.get("Contents", [])) == sorted(kept)
    for key in kept:
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode()
    after = lifecycle_status(gateway)
    for worker in (0, 1):  # each worker expired exactly the keys it owns
        assert after[worker]["objects_expired"] - before[worker]["objects_expired"] == 4
        assert after[worker]["uploads_aborted"] - before[worker]["uploads_aborted"] == 1
