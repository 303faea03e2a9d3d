"""A file the gateway refuses to store: the program gets the errno, the mount's log says
so once, with S3's message, and shows no traceback above debug level."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import uuid
from pathlib import Path

from tests.conftest import make_client
from tests.gateway.auth.test_policy_access_e2e import add_user
from tests.gateway.fuse_mount.conftest import MountProcess
from tests.support.server import SquallProcess


def test_a_refused_file_is_reported_once_with_s3s_message(squall: SquallProcess,
                                                          tmp_path: Path) -> None:
    user = add_user(squall)
    name = user["name"]
    admin = make_client(squall.endpoint)
    bucket = f"refused-{uuid.uuid4().hex[:12]}"
    admin.create_bucket(Bucket=bucket)
    admin.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": name}, "Action": "s3:*",
                       "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]},
                      {"Effect": "Deny", "Principal": {"AWS": name}, "Action": "s3:PutObject",
                       "Resource": f"arn:aws:s3:::{bucket}/denied-*"}]}))
    mount = MountProcess(squall.endpoint, bucket, tmp_path / "mnt", env={
        "SQUALL_ACCESS_KEY": user["access_key"],
        "SQUALL_SECRET_KEY": user["secret_key"]}).start()
    try:
        dd = subprocess.run(["dd", "if=/dev/zero", f"of={mount.path}/denied-big.bin",
                             "bs=1M", "count=40"], capture_output=True, text=True, timeout=120,
                            check=False)
        # (the kernel's writeback cache may report the failure at close as EIO)
        assert dd.returncode != 0, dd.stderr
        (mount.path / "allowed.txt").write_bytes(b"still writable")
    finally:
        mount.stop()
    assert admin.get_object(Bucket=bucket, Key="allowed.txt")["Body"].read() == \
        b"still writable"
    log = mount.log_path.read_text(errors="replace")
    loud = [line for line in log.splitlines()
            if re.search(r" (WARNING|ERROR|CRITICAL) ", line) and "denied-big.bin" in line]
    assert len(loud) == 1, log[-4000:]
    assert "403 AccessDenied: " in loud[0], loud
    lines = log.splitlines()
    with_traceback = [line for line, after in itertools.pairwise(lines)
                      if after.startswith("Traceback")
                      and re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert len(with_traceback) <= 1 and all(" DEBUG " in line for line in with_traceback), \
        log[-4000:]
