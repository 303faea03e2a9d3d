"""`squall serve --cache-mode elastic` over a slow store: three write bursts separated by
idle gaps (the volume drained and detached between them), written as a checkpointing
program through a mount writes them (multipart uploads with parallel parts) and as
single PUTs. Each burst must be absorbed by a volume attached for it, none written
around the cache, though the controller's B (``--backend-bandwidth-estimate``) overstates
the store 8x and no single part is large against it."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.conftest import make_client
from tests.gateway.cache.test_elastic_server import status, wait_detached
from tests.support.server import SquallProcess

MiB = 1 << 20
PART = 5 * MiB
# The store: posix throttled to 8 MB/s; the controller is told 64 MB/s (UT x B = 19 MB/s,
# above what one 5 MiB part spread over a control interval asks for).
ARGS = ["--cache-mode", "elastic", "--cache-size", "64MiB", "--backend-bandwidth", "8MB/s",
        "--backend-bandwidth-estimate", "64MB/s", "--inactivity-delay", "1",
        "--workers", "1"]


def multipart(s3: Any, bucket: str, key: str, body: bytes) -> None:
    """One object as a mount writes it: a multipart upload, its parts sent in parallel."""
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    chunks = [body[i:i + PART] for i in range(0, len(body), PART)]

    def send(n: int) -> dict[str, Any]:
        done = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n + 1,
                              Body=chunks[n])
        return {"PartNumber": n + 1, "ETag": done["ETag"]}
    with ThreadPoolExecutor(len(chunks)) as pool:
        parts = list(pool.map(send, range(len(chunks))))
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                 MultipartUpload={"Parts": parts})


def write_burst(s3: Any, n: int) -> dict[str, bytes]:
    """Burst ``n``: two 10 MiB objects by multipart, one 4 MiB PUT, all at once."""
    objects = {f"ckpt-{n}/rank-{r}": os.urandom(10 * MiB) for r in range(2)}
    single = {f"ckpt-{n}/meta": os.urandom(4 * MiB)}
    with ThreadPoolExecutor(3) as pool:
        jobs = [pool.submit(multipart, s3, "ckpt", k, v) for k, v in objects.items()]
        jobs += [pool.submit(s3.put_object, Bucket="ckpt", Key=k, Body=v)
                 for k, v in single.items()]
        for job in jobs:
            job.result()
    return {**objects, **single}


def test_every_burst_is_absorbed_by_a_volume_attached_for_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = SquallProcess(data_dir, ARGS).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="ckpt")
        written: dict[str, bytes] = {}
        for n in range(3):
            before = wait_detached(server)  # the idle gap: the last burst's volume is gone
            objects = write_burst(s3, n)
            after = status(server)
            size = sum(map(len, objects.values()))
            assert after["elastic"]["attaches_total"] == before["elastic"]["attaches_total"] + 1
            assert after["ingest_bytes_total"] - before["ingest_bytes_total"] == size
            assert after["writearound_bytes_total"] == before["writearound_bytes_total"], \
                f"burst {n} went around the cache: {after['admission']}"
            assert after["admission"]["routed_to_backend"] \
                == before["admission"]["routed_to_backend"]
            written.update(objects)
        done = wait_detached(server)
        bursts = done["elastic"]["bursts"]
        assert len(bursts) == 3 and all(b["used_peak_bytes"] > 0 for b in bursts)
        assert done["diverted_bytes_total"] == 0
        for key, body in written.items():
            assert s3.get_object(Bucket="ckpt", Key=key)["Body"].read() == body
            assert (data_dir / "objects" / "ckpt" / key).read_bytes() == body  # flushed
    finally:
        server.stop()
