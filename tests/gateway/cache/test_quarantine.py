"""A flush the backend refuses for good is quarantined: kept, reported, retried rarely."""

from __future__ import annotations

from backends.core.errors import NoSuchBucket, SlowDown
from gateway.cache.quarantine import Quarantine
from tests.gateway.cache.conftest import (
    BUCKET,
    META,
    Env,
    body,
    cache_settings,
    payload,
    read_all,
    until,
)


def test_only_permanent_errors_repeated_are_quarantined() -> None:
    current = {("b", "k"): 7}
    held = Quarantine(current.get, after_attempts=3, retry_s=60)
    assert held.failed(("b", "k"), 7, SlowDown(), attempts=5) is None  # transient
    assert held.failed(("b", "k"), 7, NoSuchBucket("b"), attempts=2) is None  # not yet
    assert held.failed(("b", "k"), 7, NoSuchBucket("b"), attempts=3) == 60
    assert held.holds(("b", "k"), 7) and not held.holds(("b", "k"), 8)
    assert [q.key for q in held.items("b")] == ["k"] and held.items("other") == []
    current[("b", "k")] = 8  # a newer write replaced the refused record
    assert held.items() == []


async def test_refused_flush_is_reported_and_kept_until_the_backend_takes_it(
        env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, quarantine_attempts=3))
    data = payload(5000, 1)
    await tier.put_object(BUCKET, "k", body(data), meta=META)
    env.break_bucket()  # the backend answers NoSuchBucket to every flush
    await until(lambda: tier.status()["quarantined_objects"] == 1, "quarantined")
    status = tier.status()
    assert status["quarantined"][0]["key"] == "k"
    assert "NoSuchBucket" in status["quarantined"][0]["error"]
    refused = await tier.wait_flushed()  # one more try, then it reports instead of waiting
    assert [(q.bucket, q.key) for q in refused] == [(BUCKET, "k")]
    assert refused[0].attempts == 4
    assert await read_all(await tier.get_object(BUCKET, "k")) == data  # still served
    assert tier.store.get(BUCKET, "k").dirty  # type: ignore[union-attr]
    env.repair_bucket()
    assert await tier.wait_flushed() == []  # a sync retries it at once: flushed now
    assert tier.status()["quarantined_objects"] == 0
    assert await read_all(await env.backend().get_object(BUCKET, "k")) == data
