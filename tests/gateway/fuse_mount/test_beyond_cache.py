"""``cp`` into a mount of a file three times the gateway's cache: the parts that find the
cache full go to the backend, so cp succeeds and the object is the file, byte for byte."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from tests.conftest import make_client
from tests.gateway.fuse_mount.conftest import MountProcess
from tests.gateway.fuse_mount.test_programs import ok
from tests.gateway.s3api.clients.helpers import payload
from tests.support.server import SquallProcess

MiB = 1 << 20
CACHE = 16 * MiB


def test_cp_of_a_file_three_times_the_cache(tmp_path: Path) -> None:
    server = SquallProcess(tmp_path / "data", ["--cache-size", str(CACHE),
                                               "--cache-admission", "cache"]).start()
    try:
        s3 = make_client(server.endpoint)
        bucket = f"fuse-big-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(Bucket=bucket)
        data = payload(3 * CACHE, "fuse-beyond")
        src = tmp_path / "big.bin"
        src.write_bytes(data)
        mount = MountProcess(server.endpoint, bucket, tmp_path / "mnt").start()
        try:
            ok("cp", src, mount.path / "big.bin")
            assert hashlib.sha256((mount.path / "big.bin").read_bytes()).digest() == \
                hashlib.sha256(data).digest()
        finally:
            assert mount.stop() == 0, mount.log()
        got = s3.get_object(Bucket=bucket, Key="big.bin")
        assert got["Body"].read() == data and got["ETag"].endswith('-6"')  # 8 MiB blocks
        assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    finally:
        assert server.stop() == 0, server.log()
