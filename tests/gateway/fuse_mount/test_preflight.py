"""`squall mount` pre-flight errors: one `squall mount: ...` line, no log noise before it;
exit status 1 when the gateway cannot be reached or refuses, 2 for bad input (as every
client command).

The bucket check runs before anything is mounted: no FUSE device is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port


def mount(endpoint: str, bucket: str, mountpoint: Path, secret: str = SECRET_KEY,
          *options: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    if secret:
        env |= {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": secret}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", "mount", endpoint, bucket,
                           str(mountpoint), *options], capture_output=True, text=True,
                          timeout=60, check=False, env=env)


def test_preflight_errors_are_one_line(squall: SquallProcess, bucket: str,
                                       tmp_path: Path) -> None:
    cases = [
        (mount(squall.endpoint, bucket, tmp_path, secret="wrong"), 1,
         f"squall mount: access to bucket {bucket!r} denied: check the credentials"),
        (mount(squall.endpoint, "no-such-bucket-here", tmp_path), 1,
         f"squall mount: bucket 'no-such-bucket-here' does not exist at {squall.endpoint}"),
        (mount(f"http://127.0.0.1:{free_port()}", bucket, tmp_path), 1,
         "squall mount: cannot reach http://127.0.0.1:"),
        (mount(squall.endpoint, bucket, tmp_path, ""), 2,
         "squall mount: no credentials: set SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY"),
        (mount(squall.endpoint, bucket, tmp_path, SECRET_KEY, "--shared-lease", "soon"), 2,
         "squall mount: --shared-lease: not a duration: 'soon'"),
        (mount(squall.endpoint, bucket, tmp_path, SECRET_KEY, "--shared-lease", "1s"), 2,
         "squall mount: --shared-lease must be at least 3 seconds"),
        (mount(squall.endpoint, bucket, tmp_path / "nowhere"), 2,
         f"squall mount: mountpoint {tmp_path / 'nowhere'} does not exist"),
    ]
    for result, status, message in cases:
        assert result.returncode == status, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message), result.stderr
        assert "WARNING" not in result.stderr and "403 403" not in result.stderr
