"""Elastic providers: added while running (new chunks stripe over the larger set),
standby providers activated by a write burst, membership kept across restarts."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from backends.blobseer_like.provider import ProviderError
from backends.core.base import ElasticBackend, ObjectMeta
from tests.backends.blobseer_like.conftest import CHUNK, Factory
from tests.backends.blobseer_like.support import chunk_files, get, put
from tests.backends.conformance import blob, body_of


async def test_add_provider_under_load(tmp_path: Path, make: Factory) -> None:
    store = make(providers=4)
    assert isinstance(store, ElasticBackend)
    await store.create_bucket("bkt")
    written: dict[str, bytes] = {}
    added = asyncio.Event()

    async def writer(n: int) -> None:
        for i in range(8):
            data = blob(4 * CHUNK + n, seed=n * 10 + i)
            key = f"w{n}/{i}"
            await store.put_object("bkt", key, body_of(data, 20_000, pause=True),
                                   meta=ObjectMeta())
            written[key] = data
            if i == 3:
                await added.wait()

    async def grow() -> None:
        while len(written) < 8:  # noqa: ASYNC110  a test polling the writers
            await asyncio.sleep(0.005)
        info = await store.add_provider(str(tmp_path / "p4"))
        assert info.state == "active"
        added.set()

    await asyncio.gather(grow(), *(writer(n) for n in range(4)))
    providers = {p.id: p.path for p in store.providers()}
    assert len(providers) == 5
    new_id = next(i for i, path in providers.items() if path.endswith("p4"))
    assert Counter(f.provider for f in chunk_files(store))[new_id] > 0
    for key, data in written.items():
        assert await get(store, key) == data
    await store.aclose()
    # Restarted with the original four directories: the fifth is found again.
    again = make(providers=4)
    again.open()
    assert {p.id for p in again.providers()} == set(providers)
    for key, data in written.items():
        assert await get(again, key) == data


async def test_add_provider_refuses_bad_directories(tmp_path: Path, make: Factory) -> None:
    store = make(providers=2)
    await store.create_bucket("bkt")
    with pytest.raises(ProviderError, match="already a provider"):
        await store.add_provider(str(tmp_path / "p1"))
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "file").write_text("x")
    with pytest.raises(ProviderError, match="not empty"):
        await store.add_provider(str(tmp_path / "foreign"))
    other = make(providers=1, index="other")  # tmp/p0 again: locked by the first store
    with pytest.raises(Exception, match="in use"):
        await other.list_buckets()
    assert len(store.providers()) == 2


async def test_standby_activated_by_a_write_burst(tmp_path: Path, make: Factory) -> None:
    standby = tmp_path / "standby"
    store = make(providers=2, standby=(standby,), burst=1.0, burst_window=0.1)
    store.open()
    registry = CollectorRegistry()
    store.register_metrics(registry)
    await store.create_bucket("bkt")
    states = {p.path: p.state for p in store.providers()}
    assert states[str(standby)] == "standby"
    for i in range(400):  # ingest above 1 B/s for 0.1 s: bounded, not a timing check
        await put(store, f"k{i}", blob(CHUNK, seed=i))
        if store.store.pool.stats.activations:
            break
        await asyncio.sleep(0.005)
    # The activation runs in the background: wait for the membership to change.
    for _ in range(400):
        if {p.path: p.state for p in store.providers()}[str(standby)] == "active":
            break
        await asyncio.sleep(0.005)
    assert {p.path: p.state for p in store.providers()}[str(standby)] == "active"
    assert store.status()["burst_activations"] == 1
    metrics = generate_latest(registry).decode()
    assert "squall_blobseer_burst_activations_total 1.0" in metrics
    assert 'squall_blobseer_providers{state="active"} 3.0' in metrics
    before = len([f for f in chunk_files(store) if str(f.path).startswith(str(standby))])
    for i in range(8):
        await put(store, f"after{i}", blob(2 * CHUNK, seed=i))
    after = len([f for f in chunk_files(store) if str(f.path).startswith(str(standby))])
    assert after > before
    await store.aclose()
    again = make(providers=2, standby=(standby,))  # the activation was persisted
    again.open()
    assert {p.path: p.state for p in again.providers()}[str(standby)] == "active"


async def test_standby_idle_until_activated(tmp_path: Path, make: Factory) -> None:
    standby = tmp_path / "spare"
    store = make(providers=2, standby=(standby,))
    await store.create_bucket("bkt")
    for i in range(10):
        await put(store, f"k{i}", blob(2 * CHUNK, seed=i))
    assert not any(str(f.path).startswith(str(standby)) for f in chunk_files(store))
    info = await store.activate_provider()
    assert info is not None and info.path == str(standby) and info.state == "active"
    assert await store.activate_provider() is None  # no standby left
    await put(store, "big", blob(12 * CHUNK))
    assert any(str(f.path).startswith(str(standby)) for f in chunk_files(store))
