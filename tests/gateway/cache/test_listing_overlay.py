"""Listing through the cache (records laid over the backend) against a plain model.

The cache's records are installed straight into the CacheStore (``set_memory``, its own
install path) on a tier that is not started, so no flusher changes them behind the test;
the backend is a real PosixBackend. Flushes and evictions are played by the test.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

from backends.core.base import Backend, ObjectInfo, ObjectMeta
from backends.core.delegating import DelegatingCopying, DelegatingMultipart, DelegatingPartCopying
from gateway.cache.entry import Entry, EntryState
from gateway.cache.tier import CacheTier
from gateway.protocol.listing import prefix_of
from gateway.service.objects import ObjectService
from tests.gateway.cache.conftest import BUCKET, Env, body, cache_settings, md5

ALPHABET = ["a", "b", "/", "-", "0", "é", "\U0010ffff"]
TOMBSTONE = None


def random_keys(rng: random.Random, n: int) -> list[str]:
    keys = {"".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 5))) for _ in range(n)}
    return sorted(k for k in keys if not k.startswith("/"))


class Model:
    """What the backend holds and what the cache holds (etag, or TOMBSTONE)."""

    def __init__(self) -> None:
        self.backend: dict[str, str] = {}
        self.cache: dict[str, str | None] = {}

    def visible(self, key: str) -> str | None:
        if key in self.cache:
            return self.cache[key]
        return self.backend.get(key)

    def listing(self, prefix: str = "", start_after: str = "") -> list[tuple[str, str]]:
        keys = sorted(set(self.backend) | set(self.cache))
        out = []
        for key in keys:
            etag = self.visible(key)
            if etag is not None and key.startswith(prefix) and key > start_after:
                out.append((key, etag))
        return out

    def grouped(self, prefix: str, delimiter: str) -> list[str]:
        out: list[str] = []
        for key, _ in self.listing(prefix):
            item = prefix_of(key, prefix, delimiter) or key
            if not out or out[-1] != item:
                out.append(item)
        return out


class Fixture:
    def __init__(self, env: Env, tier: CacheTier, inner: Backend) -> None:
        self.env, self.tier, self.inner = env, tier, inner
        self.model = Model()
        self.versions = 0

    async def backend_put(self, key: str) -> str:
        self.versions += 1
        data = f"{key}:{self.versions}".encode()
        await self.inner.put_object(BUCKET, key, body(data), meta=ObjectMeta())
        self.model.backend[key] = md5(data)
        return md5(data)

    async def backend_delete(self, key: str) -> None:
        await self.inner.delete_object(BUCKET, key)
        self.model.backend.pop(key, None)

    def install(self, key: str, state: EntryState, *, etag: str | None = None,
                deleted: bool = False) -> None:
        store = self.tier.store
        self.versions += 1
        etag = etag or md5(f"{key}:{self.versions}".encode())
        now = store.now()
        entry = Entry(bucket=BUCKET, key=key, state=state, seq=store.next_seq(), size=1,
                      etag="" if deleted else etag, meta=ObjectMeta(), segments=(),
                      last_modified=now, dirty_since=None if state is EntryState.CLEAN else now,
                      deleted=deleted)
        store.set_memory((BUCKET, key), entry)
        self.model.cache[key] = None if deleted else etag

    def remove(self, key: str) -> None:
        self.tier.store.set_memory((BUCKET, key), None)
        self.model.cache.pop(key, None)


async def make(env: Env, inner: Backend | None = None) -> Fixture:
    backend = inner or env.backend()
    await backend.create_bucket(BUCKET)
    tier = CacheTier(backend, cache_settings(env.base), index_path=env.index_path)
    env.tiers.append(tier)  # closed by the fixture; never started: no flusher runs
    return Fixture(env, tier, backend)


async def populate(fx: Fixture, rng: random.Random) -> None:
    keys = random_keys(rng, 400)
    for key in keys:
        roll = rng.random()
        in_backend = roll < 0.6
        if in_backend:
            etag = await fx.backend_put(key)
        choice = rng.random()
        if choice < 0.25 and in_backend:
            fx.install(key, EntryState.CLEAN, etag=etag)
        elif choice < 0.5:
            fx.install(key, EntryState.DIRTY)
        elif choice < 0.65:
            fx.install(key, EntryState.DIRTY, deleted=True)


async def listed(tier: CacheTier, prefix: str = "", start_after: str = ""
                 ) -> list[tuple[str, str]]:
    return [(i.key, i.etag) async for i in tier.iter_objects(BUCKET, prefix=prefix,
                                                             start_after=start_after)]


async def test_overlay_matches_the_model(env: Env) -> None:
    rng = random.Random(11)
    fx = await make(env)
    await populate(fx, rng)
    assert any(v is None for v in fx.model.cache.values())
    keys = sorted(set(fx.model.backend) | set(fx.model.cache))
    starts = ["", *rng.sample(keys, 10), "a/\U0010ffff", "b\U0010ffff", "zz"]
    for prefix in ["", "a", "a/", "b-", "é", "\U0010ffff", "a\U0010ffff", "nothing"]:
        for start in starts:
            assert await listed(fx.tier, prefix, start) == fx.model.listing(prefix, start), \
                (prefix, start)


async def test_pages_with_delimiters_match_the_model(env: Env) -> None:
    fx = await make(env)
    await populate(fx, random.Random(12))
    service = ObjectService(fx.tier)
    for prefix in ["", "a", "a/", "b"]:
        for delimiter in ["", "/", "-", "\U0010ffff", "a/"]:
            for max_keys in [1, 3, 1000]:
                out: list[str] = []
                after = ""
                while True:
                    page = await service.list_objects(BUCKET, prefix=prefix,
                                                      delimiter=delimiter,
                                                      max_keys=max_keys, after=after)
                    items = sorted([o.key for o in page.objects] + page.common_prefixes)
                    out += items
                    if not page.is_truncated:
                        break
                    assert page.next_marker == items[-1]
                    after = page.next_marker
                assert out == fx.model.grouped(prefix, delimiter), (prefix, delimiter, max_keys)
    assert not fx.tier.store.records._cursors  # pages ended early closed their cursors


async def test_listing_while_records_change(env: Env) -> None:
    """Keys visible all along are listed (also one flushed and evicted while the listing
    runs), keys never visible are not, every key once, in order."""
    rng = random.Random(13)
    fx = await make(env)
    await populate(fx, rng)
    keys = sorted(set(fx.model.backend) | set(fx.model.cache) | set(random_keys(rng, 100)))
    seen: dict[str, set[str | None]] = {k: {fx.model.visible(k)} for k in keys}
    out: list[str] = []
    async for info in fx.tier.iter_objects(BUCKET):
        out.append(info.key)
        for _ in range(3):
            key = rng.choice(keys)
            roll = rng.random()
            cached = fx.model.cache.get(key, "absent")
            if roll < 0.3:
                fx.install(key, EntryState.DIRTY, deleted=rng.random() < 0.3)
            elif roll < 0.7 and cached != "absent":  # the flusher, then an eviction
                if cached is None:
                    await fx.backend_delete(key)
                else:
                    await fx.backend_put(key)
                    fx.install(key, EntryState.CLEAN, etag=fx.model.backend[key])
                fx.remove(key)
            elif cached != "absent" and cached is not None and key in fx.model.backend:
                fx.remove(key)  # a clean copy evicted
            seen[key].add(fx.model.visible(key))
    assert out == sorted(set(out)), "ascending, each key once"
    for key, states in seen.items():
        if None not in states:
            assert key in out, key
        if states == {None}:
            assert key not in out, key
    assert await listed(fx.tier) == fx.model.listing()  # and settled afterwards


class ReadAhead(DelegatingMultipart, DelegatingCopying, DelegatingPartCopying):
    """A backend listing that reads all of its keys at its first step (as a remote
    backend reading a page of 1000 keys ahead does); only what a listing needs."""

    async def iter_objects(self, bucket: str, *, prefix: str = "",
                           start_after: str = "") -> AsyncIterator[ObjectInfo]:
        items = [i async for i in self.inner.iter_objects(bucket, prefix=prefix,
                                                          start_after=start_after)]
        for info in items:
            yield info


async def test_a_dirty_key_flushed_and_evicted_behind_the_backend_read_is_listed(
        env: Env) -> None:
    inner = env.backend()
    fx = await make(env, ReadAhead(inner))
    for i in range(100):
        await fx.backend_put(f"k{i:03d}")
        fx.install(f"k{i:03d}", EntryState.CLEAN, etag=fx.model.backend[f"k{i:03d}"])
    fx.install("k050x", EntryState.DIRTY)  # only in the cache when the listing starts
    listing = fx.tier.iter_objects(BUCKET)
    first = await anext(listing)  # the backend's whole listing is read now
    await fx.backend_put("k050x")  # the flusher writes it ...
    fx.install("k050x", EntryState.CLEAN, etag=fx.model.backend["k050x"])
    fx.remove("k050x")  # ... and it is evicted before the listing reaches it
    rest = [i.key async for i in listing]
    assert [first.key, *rest] == [k for k, _ in fx.model.listing()]
    assert "k050x" in rest
    assert not fx.tier.store.records._cursors  # the listing's cursor was released
