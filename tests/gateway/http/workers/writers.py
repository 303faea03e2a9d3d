"""Writers for the crash tests: threads writing new keys through one-attempt clients,
and the check that every acknowledged write reads back and is listed."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import boto3
from botocore.config import Config

from tests.support.server import ACCESS_KEY, SECRET_KEY

WRITERS = 4


def one_attempt_client(endpoint: str) -> Any:
    # One attempt: a write is acknowledged only if this call returned.
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}, connect_timeout=5,
                                      read_timeout=30, s3={"addressing_style": "path"}))


class Writers:
    """Threads writing new keys through their own connections; ``acked`` holds what was
    acknowledged."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        self.acked: dict[str, bytes] = {}
        self.failed = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(endpoint, bucket, n),
                                          daemon=True)  # a failed test must not hang
                         for n in range(WRITERS)]

    def _run(self, endpoint: str, bucket: str, n: int) -> None:
        s3 = one_attempt_client(endpoint)
        i = 0
        while not self._stop.is_set():
            key = f"w{n}/obj-{i:05d}"
            body = os.urandom(8 * 1024 + i)
            i += 1
            try:
                s3.put_object(Bucket=bucket, Key=key, Body=body)
            except Exception:  # noqa: BLE001 - the crash interrupts requests in flight
                with self._lock:
                    self.failed += 1
                time.sleep(0.05)
                continue
            with self._lock:
                self.acked[key] = body

    def start(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"{len(self.acked)} writes acknowledged"
            time.sleep(0.01)

    def stop(self) -> dict[str, bytes]:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        return dict(self.acked)


def check_all(endpoint: str, bucket: str, acked: dict[str, bytes]) -> None:
    s3 = one_attempt_client(endpoint)
    for key, body in acked.items():
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    listed = {o["Key"] for page in pages for o in page.get("Contents", [])}
    assert set(acked) <= listed
