"""A process that does not own a key refuses to run its writes (they need its owner's
lock); reads and the keys it owns are unaffected."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from backends.core.base import ObjectInfo, ObjectMeta
from backends.core.streams import body_of
from backends.posix import PosixBackend
from gateway.versioning import VersionedObjects, VersioningStatus
from gateway.versioning.errors import NotKeyOwner


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[PosixBackend]:
    backend = PosixBackend(tmp_path / "root")
    await backend.create_bucket("bkt")
    yield backend
    await backend.aclose()


@pytest.mark.parametrize("status", [VersioningStatus.ENABLED, VersioningStatus.SUSPENDED])
async def test_writes_of_keys_owned_elsewhere_are_refused(store: PosixBackend,
                                                          status: VersioningStatus) -> None:
    objects = VersionedObjects(store, owns=lambda _bucket, key: not key.startswith("theirs"))
    await objects.set_status("bkt", status)

    def writer(key: str, data: bytes):  # type: ignore[no-untyped-def]
        async def write(meta: ObjectMeta) -> ObjectInfo:
            return await store.put_object("bkt", key, body_of(data), meta=meta)
        return write

    mine = await objects.write("bkt", "mine", ObjectMeta(), writer("mine", b"1"))
    await store.put_object("bkt", "theirs", body_of(b"old"), meta=ObjectMeta())
    with pytest.raises(NotKeyOwner) as refused:
        await objects.write("bkt", "theirs", ObjectMeta(), writer("theirs", b"new"))
    assert refused.value.resource == "bkt/theirs"
    with pytest.raises(NotKeyOwner):
        await objects.delete("bkt", "theirs")
    with pytest.raises(NotKeyOwner):
        await objects.delete("bkt", "theirs", version_id="null")
    with pytest.raises(NotKeyOwner):
        await objects.replace_meta("bkt", "theirs", None,
                                   lambda meta: replace(meta, tags={"t": "v"}))
    # nothing was changed, and reads still work
    assert (await objects.head("bkt", "theirs")).size == 3
    assert await objects.records("bkt", "theirs") == []
    outcome = await objects.delete("bkt", "mine")
    assert outcome.delete_marker and mine.version_id is not None


async def test_without_owners_every_key_is_this_process(store: PosixBackend) -> None:
    objects = VersionedObjects(store)
    await objects.set_status("bkt", VersioningStatus.ENABLED)
    assert (await objects.delete("bkt", "theirs")).delete_marker
