"""Cache volumes on a real small device (a tmpfs mount): capacity follows the device."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.cache.conftest import BUCKET, META, Env, body, cache_settings, payload

MiB = 1 << 20


@pytest.fixture
def small_device(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB file system of its own (tmpfs); skipped where mounting is not allowed."""
    mount = tmp_path / "device"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


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
