"""The write guard, and ObjectService.expire_object: an expiration never deletes a version
written after it decided, nor one being written; a hand-over waits for the writes under
way and holds the next ones back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.core.base import ObjectMeta
from backends.posix import PosixBackend
from gateway.cache.keyguard import WriteGuard
from gateway.service.objects import ObjectService
from gateway.versioning import VersioningStatus
from tests.backends.conformance import body_of, read_all


async def test_writers_share_and_expiration_skips_busy_keys() -> None:
    guard = WriteGuard()
    async with guard.writing("k"), guard.writing("k"):  # writers never wait for each other
        async with guard.expiring("k") as alone:
            assert not alone
        async with guard.expiring("other") as alone:
            assert alone
    assert len(guard) == 0


async def test_writes_wait_for_an_expiration_in_progress() -> None:
    guard = WriteGuard()
    order: list[str] = []

    async def writer() -> None:
        async with guard.writing("k"):
            order.append("write")

    async with guard.expiring("k") as alone:
        assert alone
        task = asyncio.create_task(writer())
        await asyncio.sleep(0.01)
        order.append("expired")
    await task
    assert order == ["expired", "write"]
    assert len(guard) == 0


async def test_an_exclusive_hold_waits_for_writes_and_holds_the_next_back() -> None:
    guard = WriteGuard()
    order: list[str] = []
    first_in = asyncio.Event()
    release_first = asyncio.Event()

    async def first() -> None:
        async with guard.writing("k"):
            first_in.set()
            await release_first.wait()
            order.append("first write")

    async def later() -> None:
        async with guard.writing("k"):
            order.append("later write")

    async def hand_over() -> None:
        async with guard.exclusive("k"):
            order.append("handed over")
            await asyncio.sleep(0.01)

    writing = asyncio.create_task(first())
    await first_in.wait()
    moving = asyncio.create_task(hand_over())
    await asyncio.sleep(0.01)
    held = asyncio.create_task(later())
    await asyncio.sleep(0.01)
    assert order == []  # the hand-over waits for the write under way
    release_first.set()
    await asyncio.gather(writing, moving, held)
    assert order == ["first write", "handed over", "later write"]
    assert len(guard) == 0


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ObjectService]:
    backend = PosixBackend(tmp_path / "root")
    yield ObjectService(backend)
    await backend.aclose()


async def test_expire_object_checks_the_version(service: ObjectService) -> None:
    await service.create_bucket("bkt")
    old = await service.put_object("bkt", "k", body_of(b"old"), meta=ObjectMeta())
    new = await service.put_object("bkt", "k", body_of(b"new"), meta=ObjectMeta())
    assert old.etag != new.etag
    # Decided on the old version: the newer one stays.
    assert await service.expire_object("bkt", "k", etag=old.etag, last_modified=old.last_modified,
                                       version_id=None) is None
    assert await read_all(await service.get_object("bkt", "k", byte_range=None)) == b"new"
    assert await service.expire_object("bkt", "k", etag=new.etag, last_modified=new.last_modified,
                                       version_id=None) is not None
    assert await service.expire_object("bkt", "k", etag=new.etag, last_modified=new.last_modified,
                                       version_id=None) is None  # gone already


async def test_expire_object_in_a_versioned_bucket_adds_a_marker(service: ObjectService
                                                                 ) -> None:
    await service.create_bucket("vbk")
    await service.put_bucket_versioning("vbk", VersioningStatus.ENABLED)
    first = await service.put_object("vbk", "k", body_of(b"1"), meta=ObjectMeta())
    second = await service.put_object("vbk", "k", body_of(b"2"), meta=ObjectMeta())
    assert await service.expire_object("vbk", "k", etag=first.etag,
                                       last_modified=first.last_modified,
                                       version_id=first.version_id) is None
    outcome = await service.expire_object("vbk", "k", etag=second.etag,
                                          last_modified=second.last_modified,
                                          version_id=second.version_id)
    assert outcome is not None and outcome.delete_marker
    page = await service.list_object_versions("vbk", prefix="", delimiter="", max_keys=10,
                                              key_marker="", version_id_marker="")
    assert [(e.delete_marker, e.info.version_id) for e in page.entries][1:] == [
        (False, second.version_id), (False, first.version_id)]
