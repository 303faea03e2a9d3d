"""`squall mount` pre-flight errors: one `squall mount: ...` line, no log noise before it.

The bucket check runs before anything is mounted: no FUSE device is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port


def mount(endpoint: str, bucket: str, mountpoint: Path, secret: str = SECRET_KEY,
          *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": secret}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", "mount", endpoint, bucket,
                           str(mountpoint), *options], capture_output=True, text=True,
                          timeout=60, check=False, env=env)


def test_preflight_errors_are_one_line(squall: SquallProcess, bucket: str,
                                       tmp_path: Path) -> None:
    cases = [
        (mount(squall.endpoint, bucket, tmp_path, secret="wrong"),
         f"squall mount: access to bucket {bucket!r} denied: check the credentials"),
        (mount(squall.endpoint, "no-such-bucket-here", tmp_path),
         f"squall mount: bucket 'no-such-bucket-here' does not exist at {squall.endpoint}"),
        (mount(f"http://127.0.0.1:{free_port()}", bucket, tmp_path),
         "squall mount: cannot reach endpoint http://127.0.0.1:"),
        (mount(squall.endpoint, bucket, tmp_path, SECRET_KEY, "--shared-lease", "soon"),
         "squall mount: --shared-lease: not a duration: 'soon'"),
        (mount(squall.endpoint, bucket, tmp_path, SECRET_KEY, "--shared-lease", "1s"),
         "squall mount: --shared-lease must be at least 3 seconds"),
    ]
    for result, message in cases:
        assert result.returncode == 2, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message), result.stderr
        assert "WARNING" not in result.stderr and "403 403" not in result.stderr
