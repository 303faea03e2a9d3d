"""Cache volumes on a real small device (a tmpfs mount): capacity follows the device."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.core.errors import SlowDown
from tests.gateway.cache.conftest import (
    BUCKET,
    META,
    Env,
    body,
    cache_settings,
    payload,
    read_all,
)
from tests.support.tmpfs import small_filesystem

MiB = 1 << 20


@pytest.fixture
def small_device(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB file system of its own (tmpfs); skipped where mounting is not allowed."""
    with small_filesystem(tmp_path / "device") as mount:
        yield mount


async def test_capacity_larger_than_the_device_is_clamped(
        env: Env, small_device: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = cache_settings(env.base, capacity=1 << 30)
    settings = settings.model_copy(update={"volumes": [
        settings.volumes[0].model_copy(update={"path": small_device / "cache"})]})
    with caplog.at_level(logging.WARNING, logger="gateway.cache.device"):
        tier = await env.tier(settings)
    capacity = tier.status()["cache_capacity_bytes"]
    assert 8 * MiB < capacity <= 16 * MiB
    assert "exceeds what its device can hold" in caplog.text
    await tier.put_object(BUCKET, "k", body(payload(MiB, 1)), meta=META)
    assert tier.store.get(BUCKET, "k") is not None


def _fill(path: Path, leave: int) -> None:
    """Fill ``path``'s file system but ``leave`` bytes."""
    import os

    st = os.statvfs(path.parent)
    room = st.f_bavail * st.f_frsize - leave
    with open(path, "wb") as f:
        while room > 0:
            n = min(room, MiB)
            f.write(b"\0" * n)
            room -= n


async def test_full_device_evicts_clean_data_instead_of_refusing_forever(
        env: Env, small_device: Path) -> None:
    settings = cache_settings(env.base, capacity=16 * MiB, admission="cache")
    settings = settings.model_copy(update={"volumes": [
        settings.volumes[0].model_copy(update={"path": small_device / "cache"})]})
    tier = await env.tier(settings)
    for i in range(4):  # 4 MiB of clean data the cache may evict
        await tier.put_object(BUCKET, f"clean{i}", body(payload(MiB, i), 65536), meta=META)
    await tier.wait_flushed()
    _fill(small_device / "filler", leave=256 * 1024)  # another program takes the rest
    data = payload(2 * MiB, 9)
    with pytest.raises(SlowDown):  # the device, not the quota, is full: retry later
        await tier.put_object(BUCKET, "new", body(data, 65536), meta=META)
    # The volume now holds no more than it does: the retry evicts clean data to fit.
    await tier.put_object(BUCKET, "new", body(data, 65536), meta=META)
    assert tier.status()["evictions"] >= 2
    assert tier.store.get(BUCKET, "new") is not None
    assert await read_all(await tier.get_object(BUCKET, "new")) == data
