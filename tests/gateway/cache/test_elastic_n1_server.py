"""N-1 checkpoints through `squall serve --cache-mode elastic` in front of a slow S3 store
(another gateway, without cache, throttled; its bandwidth is not declared to the admission
rule, as with MinIO): each checkpoint is one multipart upload whose parts are sent in
parallel, as a mount writes a shared file.

Every part must be taken by the attached volume: one part sent to the backend makes the
upload complete there, every cached part sent to the store again while the client waits
for CompleteMultipartUpload, which made the elastic cache slower than no cache. Three
ways a part went there are covered: the admission rule's probe of the backend on the
first burst, a checkpoint written while the previous one still fills the volume (being
flushed), and one written while the previous one's clean copy fills it (evicted by one
writer while the others were diverted)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_client
from tests.gateway.cache.test_elastic_server import status
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

MiB = 1 << 20
PART = 5 * MiB
PARTS = 8  # a checkpoint: 40 MiB, 4 parts in flight; the volume holds one, not two
IN_FLIGHT = 4
VOLUME = 48 * MiB


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SquallProcess]:
    """The slow object store: a gateway without cache, throttled."""
    server = SquallProcess(tmp_path / "store", ["--cache-size", "0", "--backend-bandwidth",
                                                "16MiB/s", "--workers", "1"]).start()
    make_client(server.endpoint).create_bucket(Bucket="store")
    yield server
    server.stop()


@pytest.fixture
def gateway(tmp_path: Path, store: SquallProcess) -> Iterator[SquallProcess]:
    """Elastic, B_b declared (not a cap); a long ID keeps the volume through the test."""
    server = SquallProcess(
        tmp_path / "gateway",
        ["--backend", f"s3:{store.endpoint}?bucket=store", "--cache-mode", "elastic",
         "--cache-size", str(VOLUME), "--backend-bandwidth-estimate", "16MiB/s",
         "--inactivity-delay", "60", "--workers", "1"],
        env={"SQUALL_UPSTREAM_ACCESS_KEY": ACCESS_KEY,
             "SQUALL_UPSTREAM_SECRET_KEY": SECRET_KEY}).start()
    yield server
    server.stop()


def checkpoint(s3: Any, key: str, body: bytes) -> None:
    """One shared file as a mount writes it: a multipart upload, parts in parallel."""
    upload = s3.create_multipart_upload(Bucket="app", Key=key)["UploadId"]

    def send(n: int) -> dict[str, Any]:
        done = s3.upload_part(Bucket="app", Key=key, UploadId=upload, PartNumber=n + 1,
                              Body=body[n * PART:(n + 1) * PART])
        return {"PartNumber": n + 1, "ETag": done["ETag"]}
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        parts = list(pool.map(send, range(PARTS)))
    s3.complete_multipart_upload(Bucket="app", Key=key, UploadId=upload,
                                 MultipartUpload={"Parts": parts})


def wait_clean(server: SquallProcess, limit_s: float = 120.0) -> dict[str, Any]:
    """Poll until nothing is dirty (a guard, not a timing)."""
    deadline = time.monotonic() + limit_s
    while True:
        s = status(server)
        if not s["dirty_bytes"]:
            return s
        assert time.monotonic() < deadline, f"never flushed: {s['dirty_bytes']} bytes"
        time.sleep(0.1)


def absorbed(gateway: SquallProcess, s3: Any, key: str, body: bytes) -> None:
    """Write one checkpoint; every part of it must be cached on the volume."""
    before = status(gateway)
    checkpoint(s3, key, body)
    after = status(gateway)
    assert after["cache_volumes_attached"] == 1
    assert after["admission"]["routed_to_cache"] - before["admission"]["routed_to_cache"] \
        == PARTS, f"{key}: {after['admission']}"
    assert after["admission"]["routed_to_backend"] == before["admission"]["routed_to_backend"]
    assert after["writearound_bytes_total"] == before["writearound_bytes_total"], \
        f"{key}: parts went around the cache"
    assert after["diverted_bytes_total"] == before["diverted_bytes_total"], \
        f"{key}: parts were diverted past the volume"
    assert after["ingest_bytes_total"] - before["ingest_bytes_total"] == len(body)


def test_every_part_of_each_n1_checkpoint_lands_on_the_volume(
        gateway: SquallProcess, store: SquallProcess) -> None:
    s3 = make_client(gateway.endpoint)
    s3.create_bucket(Bucket="app")
    bodies = {f"run/ckpt-{n}.bin": os.urandom(PART * PARTS) for n in range(3)}
    keys = list(bodies)
    start = status(gateway)
    # The first burst: the backend was never measured (no flush yet), yet none of the
    # parts after the first ones measured the cache is a probe of the backend.
    absorbed(gateway, s3, keys[0], bodies[keys[0]])
    # At once the next: the volume is full of the first, being flushed; parts wait for
    # that room rather than going to the store.
    absorbed(gateway, s3, keys[1], bodies[keys[1]])
    # Once that is clean, the third: the volume is full of its clean copy, evicted for
    # the parts (all of them, though they ask for room at the same moment).
    wait_clean(gateway)
    absorbed(gateway, s3, keys[2], bodies[keys[2]])

    done = wait_clean(gateway)
    # Each checkpoint reached the store once, by its flush, and nothing else did.
    assert done["flush_bytes_total"] - start["flush_bytes_total"] \
        == sum(map(len, bodies.values()))
    assert done["writearound_bytes_total"] == start["writearound_bytes_total"]
    assert done["diverted_bytes_total"] == start["diverted_bytes_total"] == 0
    upstream = make_client(store.endpoint)
    for key, body in bodies.items():
        assert s3.get_object(Bucket="app", Key=key)["Body"].read() == body
        assert upstream.get_object(Bucket="store", Key=f"app/{key}")["Body"].read() == body
    assert not upstream.list_multipart_uploads(Bucket="store").get("Uploads")
