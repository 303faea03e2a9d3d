"""A directory of more than one listing page (1,000 keys) made through a real mount: creates
there need no request but their PutObject, a name another client adds is seen after the
TTL, and ``ls`` is complete."""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.gateway.fuse_mount.conftest import MountProcess
from tests.gateway.fuse_mount.test_metadata import requests_at
from tests.support.server import SquallProcess

FILES = 2500
# Long enough that fetching the three pages again stays well within one TTL on a loaded
# machine (a fetch slower than the TTL makes the directory go name by name for a while).
TTL = 5.0


def create(path: Path) -> None:
    with open(path, "wb") as f:
        f.write(path.name.encode())


def test_creates_in_a_directory_of_2500_files(squall: SquallProcess, s3, mount_bucket: str,
                                              tmp_path: Path) -> None:
    mount = MountProcess(squall.endpoint, mount_bucket, tmp_path / "mnt",
                         ["--attr-timeout", str(TTL)]).start()
    try:
        directory = mount.path / f"big-{uuid.uuid4().hex[:8]}"
        directory.mkdir()
        names = [f"f-{i:05d}" for i in range(FILES)]
        before = requests_at(squall)
        start = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(create, (directory / n for n in names)))
        elapsed = time.monotonic() - start
        spent = requests_at(squall) - before
        assert spent["PutObject"] == FILES, spent
        # The listing (3 pages) is fetched again about once per TTL, not per create.
        refetches = elapsed / TTL + 2
        assert spent["ListObjectsV2"] <= 3 * refetches, (spent, elapsed)
        assert spent["HeadObject"] <= FILES // 100, spent

        # The mount's own unlinks and renames keep the listing right.
        for n in names[:10]:
            os.unlink(directory / n)
        os.rename(directory / names[10], directory / "renamed")
        gone = set(names[:11])
        assert not any((directory / n).exists() for n in gone)
        assert (directory / "renamed").read_bytes() == names[10].encode()

        # A name another client creates there is seen within about one TTL.
        other = directory / "zz-other"
        assert not other.exists()  # looked up (and answered from the listing) first
        s3.put_object(Bucket=mount_bucket, Key=f"{directory.name}/zz-other", Body=b"boto3")
        put_at = time.monotonic()
        deadline = put_at + 2 * TTL + 5  # TTL, plus slack for a loaded machine
        while not other.exists():
            assert time.monotonic() < deadline, "another client's file never appeared"
            time.sleep(0.05)
        assert other.read_bytes() == b"boto3"

        want = sorted(set(names) - gone | {"renamed", "zz-other"})
        assert sorted(os.listdir(directory)) == want
        listed = [o["Key"].split("/", 1)[1]
                  for page in s3.get_paginator("list_objects_v2").paginate(
                      Bucket=mount_bucket, Prefix=f"{directory.name}/")
                  for o in page.get("Contents", [])]
        assert sorted(n for n in listed if n) == want
    finally:
        mount.kill()
