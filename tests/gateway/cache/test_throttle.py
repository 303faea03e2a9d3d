"""Token buckets and ThrottledBackend: accounting of bytes and operations."""

from __future__ import annotations

import pytest

from backends.core.base import RangeRequest
from backends.throttle import TokenBucket
from backends.throttled import ThrottledBackend, ThrottleSettings
from tests.gateway.cache.conftest import META, Env, body, payload, posix_backend, read_all


class FakeTime:
    """A clock that advances only when the bucket sleeps."""

    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


async def test_token_bucket_rate_is_exact() -> None:
    fake = FakeTime()
    bucket = TokenBucket(rate=1000.0, capacity=100.0, clock=fake.clock, sleep=fake.sleep)
    for _ in range(50):
        await bucket.acquire(37)
    # 1850 tokens at 1000/s with a 100-token head start: 1.75 s of (virtual) waiting.
    assert bucket.consumed == 1850
    assert fake.t == pytest.approx(1.75)
    fake.t += 10  # idle time refills only up to the capacity
    await bucket.acquire(100)
    assert fake.t == pytest.approx(11.75)
    await bucket.acquire(500)  # larger than the bucket: waits, at the same rate
    assert fake.t == pytest.approx(12.25)


def test_token_bucket_rejects_bad_rates() -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=0, capacity=1)


async def test_throttled_backend_counts_bytes_and_operations(env: Env) -> None:
    throttled = ThrottledBackend(posix_backend(env.backend_root),
                                 ThrottleSettings.model_validate(
                                     {"bandwidth_bytes_per_s": "50MiB/s", "iops": 10_000}))
    await throttled.create_bucket("b")
    data = payload(123_456)
    await throttled.put_object("b", "k", body(data), meta=META)
    assert throttled.bytes_sent == len(data) and throttled.operations == 2
    assert await read_all(await throttled.get_object("b", "k")) == data
    assert throttled.bytes_received == len(data)
    part = await read_all(await throttled.get_object("b", "k",
                                                     byte_range=RangeRequest(first=0, last=99)))
    assert part == data[:100] and throttled.bytes_received == len(data) + 100
    await throttled.head_object("b", "k")
    assert [i.key async for i in throttled.iter_objects("b")] == ["k"]
    assert throttled.operations == 6
    assert throttled._bytes is not None and throttled._bytes.consumed == len(data) * 2 + 100
    # A stream opened and closed unread is closed underneath too (no leak), no bytes.
    stream = await throttled.get_object("b", "k")
    await stream.aclose()
    assert throttled.bytes_received == len(data) + 100
    await throttled.aclose()


def test_throttle_settings_parse_rates() -> None:
    settings = ThrottleSettings.model_validate({"bandwidth_bytes_per_s": "20MiB/s",
                                                "iops": "100"})
    assert settings.bandwidth_bytes_per_s == 20 * 1024 * 1024 and settings.iops == 100
    assert not ThrottleSettings().enabled
    with pytest.raises(ValueError, match="expected a rate such as 20MiB/s"):
        ThrottleSettings.model_validate({"bandwidth_bytes_per_s": "fast"})
    with pytest.raises(ValueError):
        ThrottleSettings(iops=-5)
