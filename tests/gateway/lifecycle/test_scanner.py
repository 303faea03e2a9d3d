"""The scanner over a real posix backend and ObjectService, with a clock it is given."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.core.base import ObjectMeta
from backends.core.errors import NoSuchKey
from backends.posix import PosixBackend
from gateway.lifecycle.rules import DAY, Filter, Rule
from gateway.lifecycle.scanner import LifecycleScanner
from gateway.service.objects import ObjectService
from gateway.versioning import VersioningStatus
from tests.backends.conformance import body_of


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ObjectService]:
    backend = PosixBackend(tmp_path / "root", min_part_size=0)
    yield ObjectService(backend)
    await backend.aclose()


async def _put(service: ObjectService, bucket: str, key: str, data: bytes = b"x") -> str:
    info = await service.put_object(bucket, key, body_of(data), meta=ObjectMeta())
    return info.version_id or "null"


async def _keys(service: ObjectService, bucket: str) -> list[str]:
    page = await service.list_objects(bucket, prefix="", delimiter="", max_keys=1000, after="")
    return [o.key for o in page.objects]


async def _versions(service: ObjectService, bucket: str) -> list[tuple[str, bool, str]]:
    page = await service.list_object_versions(bucket, prefix="", delimiter="", max_keys=1000,
                                              key_marker="", version_id_marker="")
    return [(e.info.key, e.delete_marker, e.info.version_id or "") for e in page.entries]


async def test_expiration_by_prefix_and_size(service: ObjectService) -> None:
    await service.create_bucket("plain")
    for key in ("tmp/a", "tmp/b", "keep/c"):
        await _put(service, "plain", key)
    await _put(service, "plain", "tmp/big", b"y" * 100)
    await service.put_bucket_lifecycle("plain", [
        Rule(id="tmp", enabled=True, filter=Filter(form="and", prefix="tmp/",
                                                   size_less_than=50), expiration_days=1),
        Rule(id="off", enabled=False, filter=Filter(), expiration_days=1)])
    clock = Clock()
    scanner = LifecycleScanner(service, interval=3600, clock=clock)
    await scanner.scan()
    assert await _keys(service, "plain") == ["keep/c", "tmp/a", "tmp/b", "tmp/big"]
    clock.now += 2 * DAY
    await scanner.scan()
    assert await _keys(service, "plain") == ["keep/c", "tmp/big"]
    assert scanner.counts.objects_expired == 2
    assert scanner.status()["objects_expired"] == 2


async def test_versioned_current_noncurrent_and_markers(service: ObjectService) -> None:
    await service.create_bucket("vers")
    await service.put_bucket_versioning("vers", VersioningStatus.ENABLED)
    v1 = await _put(service, "vers", "nc/k", b"1")
    v2 = await _put(service, "vers", "nc/k", b"2")
    v3 = await _put(service, "vers", "nc/k", b"3")
    v4 = await _put(service, "vers", "nc/k", b"4")
    cur = await _put(service, "vers", "cur/k", b"c")
    lone = await _put(service, "vers", "lone/k", b"l")
    await service.delete_object("vers", "lone/k")
    await service.delete_object("vers", "lone/k", version_id=lone)
    await service.put_bucket_lifecycle("vers", [
        Rule(id="nc", enabled=True, filter=Filter(form="prefix", prefix="nc/"),
             noncurrent_days=1, newer_noncurrent_versions=1),
        Rule(id="cur", enabled=True, filter=Filter(form="prefix", prefix="cur/"),
             expiration_days=1),
        Rule(id="lone", enabled=True, filter=Filter(form="prefix", prefix="lone/"),
             expired_object_delete_marker=True)])
    clock = Clock()
    scanner = LifecycleScanner(service, interval=3600, clock=clock)
    await scanner.scan()  # nothing old enough yet, but the lone marker goes at once
    assert [v for v in await _versions(service, "vers") if v[0] == "lone/k"] == []
    clock.now += 2 * DAY
    await scanner.scan()
    versions = await _versions(service, "vers")
    cur_versions = [v for v in versions if v[0] == "cur/k"]
    assert [(m, vid) for _, m, vid in cur_versions][1:] == [(False, cur)]
    assert cur_versions[0][1]  # a delete marker is now the latest
    with pytest.raises(NoSuchKey):
        await service.head_object("vers", "cur/k")
    # v4 current; v3 is the one noncurrent version kept; v2 and v1 are gone.
    assert [vid for k, _, vid in versions if k == "nc/k"] == [v4, v3]
    assert scanner.counts.versions_expired == 2
    assert scanner.counts.objects_expired == 1
    assert scanner.counts.delete_markers_expired == 1
    assert v1 and v2


async def test_uploads_aborted_by_their_owner_only(service: ObjectService) -> None:
    await service.create_bucket("mpu")
    mine = await service.create_multipart_upload("mpu", "up/mine", meta=ObjectMeta())
    theirs = await service.create_multipart_upload("mpu", "up/theirs", meta=ObjectMeta())
    other = await service.create_multipart_upload("mpu", "other/x", meta=ObjectMeta())
    await service.put_bucket_lifecycle("mpu", [
        Rule(id="mpu", enabled=True, filter=Filter(form="prefix", prefix="up/"),
             abort_days=1)])
    clock = Clock()
    scanner = LifecycleScanner(service, interval=3600, clock=clock,
                               owns=lambda bucket, key: key != "up/theirs")
    await scanner.scan()
    clock.now += 2 * DAY
    await scanner.scan()
    page = await service.list_multipart_uploads("mpu", prefix="", delimiter="",
                                                max_uploads=100, key_marker="",
                                                upload_id_marker="")
    assert sorted(u.upload_id for u in page.uploads) == sorted([theirs.upload_id,
                                                                other.upload_id])
    assert scanner.counts.uploads_aborted == 1
    assert mine.upload_id not in {u.upload_id for u in page.uploads}
