"""Fixtures: a real CacheTier (real files, real RocksDB) over a real PosixBackend."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from backends.core.base import Backend, ObjectMeta, ObjectStream, Relay, bare
from backends.throttled import ThrottledBackend, ThrottleSettings
from gateway.cache.settings import CacheSettings, CacheVolumeSettings
from gateway.cache.tier import CacheTier

KiB = 1024
BUCKET = "bkt"


def posix_backend(root: Path, **kwargs: Any) -> Backend:
    from backends.posix import PosixBackend

    kwargs.setdefault("min_part_size", 4 * KiB)
    return PosixBackend(root, **kwargs)


def cache_settings(base: Path, capacity: int = 1 << 20, volumes: int = 1,
                   **overrides: Any) -> CacheSettings:
    values: dict[str, Any] = {
        "volumes": [CacheVolumeSettings(path=base / f"vol{i}", capacity_bytes=capacity)
                    for i in range(volumes)],
        "chunk_size": 4 * KiB,
        "control_interval_s": 0.02,
        "inactivity_delay_s": 3600.0,
        "backpressure_timeout_s": 0.3,
        "flush_retry_max_s": 0.2,
        # Deterministic placement for tests of the cache's own mechanics; the measured
        # routing ("auto", the default) has its own tests (test_admission.py).
        "admission": "cache",
    }
    values.update(overrides)
    return CacheSettings(**values)


def body(data: bytes, chunk: int = 1000) -> Relay:
    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(data), chunk):
            yield data[i:i + chunk]
    return bare(pieces())


async def read_all(stream: ObjectStream) -> bytes:
    async with stream:
        return b"".join([c async for c in stream])


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def payload(n: int, seed: int = 0) -> bytes:
    """Deterministic, incompressible-looking bytes."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


async def until(predicate: Callable[[], bool | Awaitable[bool]], what: str,
                limit_s: float = 30.0) -> None:
    """Wait for ``predicate`` (a guard against hangs, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"gave up waiting for: {what}")
        await asyncio.sleep(0.01)


class Env:
    """Paths and builders of one test's cache + backend."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.backend_root = base / "backend"
        self.index_path = base / "index"
        self.tiers: list[CacheTier] = []

    def backend(self, throttle: ThrottleSettings | None = None, **kwargs: Any) -> Backend:
        inner = posix_backend(self.backend_root, **kwargs)
        return ThrottledBackend(inner, throttle) if throttle else inner

    async def tier(self, settings: CacheSettings | None = None, *,
                   inner: Backend | None = None, create_bucket: bool = True,
                   **kwargs: Any) -> CacheTier:
        kwargs.setdefault("min_part_size", 4 * KiB)
        tier = CacheTier(inner or self.backend(), settings or cache_settings(self.base),
                         index_path=self.index_path, **kwargs)
        await tier.start()
        self.tiers.append(tier)
        if create_bucket:
            with contextlib.suppress(Exception):
                await tier.create_bucket(BUCKET)
        return tier

    async def close(self, tier: CacheTier) -> None:
        if tier in self.tiers:
            self.tiers.remove(tier)
            await tier.aclose()

    def break_bucket(self, bucket: str = BUCKET) -> None:
        """A real backend fault: the bucket directory is replaced by a plain file."""
        path = self.backend_root / bucket
        os.rename(path, self.backend_root / f".{bucket}.aside")
        path.write_bytes(b"not a directory")

    def repair_bucket(self, bucket: str = BUCKET) -> None:
        path = self.backend_root / bucket
        path.unlink()
        os.rename(self.backend_root / f".{bucket}.aside", path)

    def cache_files(self) -> set[str]:
        return {p.name for p in self.base.glob("vol*/data/*/*")}


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e = Env(tmp_path)
    yield e
    for tier in list(e.tiers):
        try:
            await asyncio.wait_for(asyncio.shield(tier.aclose()), 15)
        except TimeoutError:
            for task in asyncio.all_tasks():
                task.print_stack()
            raise


META = ObjectMeta(content_type="application/x-test", user={"k": "v"})
