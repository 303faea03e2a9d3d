"""A posix backend on a really full file system (a 2 MiB tmpfs). No cache tier: writers
get 503 SlowDown with Retry-After, counted, and nothing stored before is lost. Behind the
cache tier: the health check says degraded, and why, while flushes meet the full disk."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.support.server import SquallProcess
from tests.support.tmpfs import fill, small_filesystem


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "small", "2m") as mount:
        yield mount


def test_a_full_backend_slows_writers_down(tmp_path: Path, small_disk: Path) -> None:
    server = SquallProcess(tmp_path / "data", ["--cache-size", "0",
                                               "--backend", f"posix:{small_disk}"]).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="full")
        kept = {}
        refused = None
        for i in range(40):  # 40 x 256 KiB > 2 MiB
            body = bytes([i]) * (256 * 1024)
            try:
                s3.put_object(Bucket="full", Key=f"k{i}", Body=body)
            except ClientError as exc:
                refused = exc.response
                break
            kept[f"k{i}"] = body
        assert refused is not None, "the 2 MiB file system never filled up"
        assert refused["Error"]["Code"] == "SlowDown"
        assert refused["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert int(refused["ResponseMetadata"]["HTTPHeaders"]["retry-after"]) >= 1
        assert server.counter("slowdowns") >= 1
        for key, body in kept.items():  # nothing acknowledged was lost
            assert s3.get_object(Bucket="full", Key=key)["Body"].read() == body
        listed = {o["Key"] for o in s3.list_objects_v2(Bucket="full").get("Contents", [])}
        assert listed == set(kept)
        # Space freed: writes succeed again.
        for key in list(kept)[:3]:
            s3.delete_object(Bucket="full", Key=key)
        s3.put_object(Bucket="full", Key="again", Body=b"z" * 1000)
    finally:
        assert server.stop() == 0, server.log()


def test_a_full_backend_behind_the_cache_makes_health_degraded(tmp_path: Path,
                                                               small_disk: Path) -> None:
    """Writes land in the cache; every flush meets ENOSPC on the 2 MiB backend: the health
    check says degraded and why (as for a store that cannot be reached), until space is
    freed and the flushes go through."""
    server = SquallProcess(tmp_path / "data", ["--cache-admission", "cache",
                                               "--backend", f"posix:{small_disk}"]).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="full")
        filler = small_disk / "filler"
        fill(filler)  # another tool fills the backend's file system
        for i in range(8):
            s3.put_object(Bucket="full", Key=f"k{i}", Body=bytes([i]) * (256 * 1024))
        health = _wait_health(server, lambda h: h.status_code == 503)
        body = health.json()
        assert body["status"] == "degraded", body
        assert "no space left on the backend" in body["reason"], body
        filler.unlink()  # space freed: the flushes go through, healthy again
        health = _wait_health(server, lambda h: h.status_code == 200)
        assert health.json() == {"status": "ok"}
        for i in range(8):
            assert s3.get_object(Bucket="full", Key=f"k{i}")["Body"].read() == \
                bytes([i]) * (256 * 1024)
    finally:
        assert server.stop() == 0, server.log()


def _wait_health(server: SquallProcess, done: Callable[[httpx.Response], bool]
                 ) -> httpx.Response:
    """The health answer once ``done`` holds (polled; not a timing assertion: the bound
    only keeps a broken build from hanging)."""
    deadline = time.monotonic() + 300
    while True:
        answer = httpx.get(f"{server.endpoint}/_squall/health", timeout=30)
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)
