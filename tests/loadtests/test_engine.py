"""Workload runs against real targets: a posix directory, and an S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.client.credentials import Credentials
from gateway.client.sigv4 import Signer
from loadtests.bench.engine import run_workload
from loadtests.bench.targets import PosixTarget, S3Target, TargetError
from loadtests.bench.workloads import Workload
from tests.loadtests.conftest import ACCESS_KEY, SECRET_KEY


def files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


async def test_posix_put_is_bounded_by_count_and_cleaned_up(tmp_path: Path) -> None:
    target = PosixTarget(tmp_path, clients=3)
    try:
        m = await run_workload(target, Workload("put", 1000, 3, 10, 60.0), "run")
    finally:
        await target.close()
    assert (m.ops, m.nbytes, m.errors) == (10, 10_000, 0)
    assert m.seconds > 0 and len(m.latencies) == 10
    assert files(tmp_path) == []  # every object written was deleted afterwards


async def test_posix_put_writes_whole_files_by_rename(tmp_path: Path) -> None:
    target = PosixTarget(tmp_path, clients=1)
    try:
        await target.put("a/b", b"x" * 5000)
        assert (tmp_path / "a" / "b").read_bytes() == b"x" * 5000
        assert [p.name for p in (tmp_path / "a").iterdir()] == ["b"]  # no temp file left
        assert await target.get("a/b") == 5000
        assert await target.stat("a/b") == 5000
        await target.delete("a/b")
        with pytest.raises(TargetError):
            await target.get("a/b")
        with pytest.raises(TargetError, match="escapes"):
            await target.put("../outside", b"")
    finally:
        await target.close()


async def test_posix_get_and_mixed(tmp_path: Path) -> None:
    target = PosixTarget(tmp_path, clients=4)
    try:
        get = await run_workload(target, Workload("get", 2048, 4, 40, 60.0, 8), "g")
        mixed = await run_workload(target, Workload("mixed", 2048, 4, 200, 60.0, 8, "ops/s"), "m")
    finally:
        await target.close()
    assert (get.ops, get.nbytes, get.errors) == (40, 40 * 2048, 0)
    assert mixed.ops == 200 and mixed.errors == 0  # deletes never race with reads
    assert 0 < mixed.nbytes < 200 * 2048  # stats and deletes move no bytes
    assert files(tmp_path) == []


async def test_s3_target_runs_the_same_workloads(endpoint: str) -> None:
    signer = Signer(Credentials(ACCESS_KEY, SECRET_KEY))
    target = S3Target(endpoint, "engine-test", signer, clients=4)
    try:
        await target.create_bucket()
        await target.create_bucket()  # an existing bucket of ours is fine
        put = await run_workload(target, Workload("put", 100_000, 4, 12, 60.0), "p")
        get = await run_workload(target, Workload("get", 100_000, 4, 12, 60.0, 4), "g")
        mixed = await run_workload(target, Workload("mixed", 4096, 4, 60, 60.0, 8, "ops/s"), "m")
        with pytest.raises(TargetError, match="404"):
            await target.get("no/such/key")
    finally:
        await target.close()
    assert (put.ops, put.nbytes, put.errors) == (12, 1_200_000, 0)
    assert (get.ops, get.nbytes, get.errors) == (12, 1_200_000, 0)
    assert (mixed.ops, mixed.errors) == (60, 0)


async def test_s3_target_reports_refused_connections() -> None:
    signer = Signer(Credentials(ACCESS_KEY, SECRET_KEY))
    target = S3Target("http://127.0.0.1:9", "b", signer, clients=1)
    try:
        m = await run_workload(target, Workload("put", 10, 1, 3, 60.0), "x")
    finally:
        await target.close()
    assert (m.ops, m.errors) == (0, 3)
    assert m.first_error is not None and "TargetError" in m.first_error
