"""Admission: does a new write go into the cache, or past it to the backend? Is a read
miss copied into the cache?

The cache exists to make writes faster than the backend takes them. When the backend
keeps up, caching a write only adds work (the bytes are written and hashed twice), so
each write is routed by measurement (docs/cache.md, "Admission"):

* the *cache rate* is the per-request throughput of writes acknowledged from the cache
  (bytes / seconds from the request's start to its commit, so it includes the client);
* the *backend rate* is the per-request throughput of writes the backend took: writes
  routed past the cache, and flushes of large objects (not limited by any client);
* both are kept per size class (small objects are latency-bound, large ones
  bandwidth-bound) as exponentially weighted moving averages.

A write goes past the cache when the backend rate of its size class is at least
``margin`` x the cache rate (``large_margin`` for large writes: a cached large write
is written and read again by its flush, on the same disk when the backend shares it, so
only a cache twice as fast repays it): the client would not be faster through the cache. Until the
backend has been measured, large writes are cached (a burst in front of an unknown
backend is absorbed, and the next one measures the backend). Both rates stay current: the path
in use is measured by its own writes, and a path left unmeasured for a while gets the
next write of that size class (a probe: every 5 s for the backend, 30 s for the cache),
and a probe's sample replaces the average it refreshes (the old one describes the
machine as it was, e.g. an idle disk before the burst). Flushes also give an optimistic bound of
the backend (a flush runs alone, with no client to wait for): when even that bound is
below the cache rate, the backend is not probed at all, so a slow backend never makes a
client's write slow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

#: objects below this are "small": their rate is a latency, not a bandwidth
SMALL_OBJECT_BYTES = 1 << 20
#: weight of a new sample in the moving averages
_ALPHA = 0.2
#: a path left unmeasured this long gets the next write of its size class (a probe):
#: the backend often (a probe there costs nothing extra), the cache rarely (a cached
#: write is written twice, which is what the rule avoids)
_BACKEND_PROBE_S = 5.0
_CACHE_PROBE_S = 30.0
#: the margin of large writes: a cached one is written twice (and read once by its flush)
LARGE_MARGIN = 0.5
#: a large miss is copied only when the backend reads slower than this share of the
#: cache: the copy reads the object through the process, writes and hashes it, which
#: only a clearly faster cache repays (a stricter bar than the write rule's margin,
#: which compares two ways of writing the object once)
COPY_MARGIN = 0.5


@dataclass(slots=True)
class RateMeter:
    """Moving averages of per-request throughput (bytes/s), per size class."""

    small: float | None = None
    large: float | None = None

    def observe(self, size: int, seconds: float, *, replace: bool = False) -> None:
        """One request of ``size`` bytes took ``seconds``; ``replace``: the sample
        replaces the average instead of moving it."""
        if size <= 0 or seconds <= 0:
            return
        rate = size / seconds
        if size < SMALL_OBJECT_BYTES:
            self.small = rate if self.small is None or replace else self.small + _ALPHA * (
                rate - self.small)
        else:
            self.large = rate if self.large is None or replace else self.large + _ALPHA * (
                rate - self.large)

    def rate(self, size: int | None) -> float | None:
        """The average for the class of ``size`` (None: unknown, taken as large)."""
        if size is not None and size < SMALL_OBJECT_BYTES:
            return self.small
        return self.large


class Admission:
    """Routes writes between the cache and the backend from measured rates.

    ``mode`` "auto" routes by measurement; "cache" caches every write that fits (the
    backend is only used when the cache cannot take a write).
    """

    def __init__(self, mode: str = "auto", margin: float = 0.75, *,
                 large_margin: float = LARGE_MARGIN,
                 backend_bandwidth: float | None = None) -> None:
        self.mode = mode
        self.margin = margin
        self.large_margin = large_margin
        #: the backend's configured bandwidth (a throttle): no request is faster
        self.backend_bandwidth = backend_bandwidth
        self.cache = RateMeter()
        self.backend = RateMeter()
        #: flushes alone: an optimistic bound of the backend (a lone flush is never slower
        #: than a client's write would be)
        self.flushes = RateMeter()
        self.routed_to_backend = 0
        self.routed_to_cache = 0
        #: backend writes (flushes, writes past the cache) failed since the last success
        self.backend_failures = 0
        # when each path was last measured (or probed), per size class (True: small)
        never = float("-inf")
        self._cache_seen: dict[bool, float] = {True: never, False: never}
        self._backend_seen: dict[bool, float] = {True: never, False: never}
        #: when the cache rate last got a sample, per size class
        self._cache_sampled: dict[bool, float] = {True: never, False: never}
        #: whole-object reads: hits, and misses served without a copy
        self.cache_reads = RateMeter()
        self.backend_reads = RateMeter()
        #: clients' large reads and writes running now (small ones are never scaled)
        self._running: dict[str, int] = {"read": 0, "write": 0}
        self._hit_seen: dict[bool, float] = {True: never, False: never}
        self._miss_seen: dict[bool, float] = {True: never, False: never}

    @property
    def backend_ok(self) -> bool:
        """The backend took the last write sent to it (or none failed yet): a write that
        finds the cache full may go to the backend instead of waiting for room."""
        return self.backend_failures == 0

    def begin(self, kind: str, size: int | None) -> None:
        """A client's ``kind`` ("read" or "write") of ``size`` bytes (None: unknown, taken
        as large) starts; :meth:`end` when it ends."""
        if size is None or size >= SMALL_OBJECT_BYTES:
            self._running[kind] += 1

    def end(self, kind: str, size: int | None) -> None:
        if size is None or size >= SMALL_OBJECT_BYTES:
            self._running[kind] -= 1

    @contextlib.contextmanager
    def writing(self, size: int | None) -> Iterator[None]:
        """A client's write of ``size`` bytes runs (:meth:`begin` .. :meth:`end`)."""
        self.begin("write", size)
        try:
            yield
        finally:
            self.end("write", size)

    def _alone(self, kind: str, size: int, seconds: float) -> float:
        """``seconds`` of a large read or write as if it had run alone: divided by the
        requests of its kind running now. Per-request rates measured while four requests
        share the disk and a probe measured alone then compare like with like."""
        if size < SMALL_OBJECT_BYTES:
            return seconds
        return seconds / max(1, self._running[kind])

    def observe_cache(self, size: int, seconds: float, now: float) -> None:
        """A write of ``size`` bytes was acknowledged from the cache in ``seconds``."""
        small = size < SMALL_OBJECT_BYTES
        stale = now - self._cache_sampled[small] >= _CACHE_PROBE_S
        self.cache.observe(size, self._alone("write", size, seconds), replace=stale)
        self._cache_seen[small] = self._cache_sampled[small] = now

    def observe_backend(self, size: int, seconds: float, now: float, *,
                        flush: bool = False) -> None:
        """The backend took a write of ``size`` bytes in ``seconds``. A flush counts only
        for large objects: a small flush runs alone, while clients' small writes queue
        behind each other, so its latency says nothing of theirs."""
        self.backend_failures = 0
        small = size < SMALL_OBJECT_BYTES
        if flush:
            self.flushes.observe(size, seconds)
            if small:
                return
        self.backend.observe(size, seconds if flush else self._alone("write", size, seconds))
        self._backend_seen[small] = now

    def backend_failed(self) -> None:
        self.backend_failures += 1

    def prefer_backend(self, size: int | None, now: float, *, probe: bool = True) -> bool:
        """True when a write of ``size`` bytes is no slower past the cache. When a path
        went unmeasured for its probe interval (per size class), this write goes there;
        ``probe=False``: never to the backend as a probe (a part of an upload held in
        the cache: sent past, it would make the upload complete on the backend, every
        cached part sent there again while the client waits for its completion)."""
        if self.mode != "auto" or not self.backend_ok:
            return False
        small = size is not None and size < SMALL_OBJECT_BYTES
        cache, backend = self.cache.rate(size), self.backend.rate(size)
        margin = self.margin if small else self.large_margin
        bound = self.flushes.rate(size)
        if self.backend_bandwidth is not None:
            bound = min(bound or self.backend_bandwidth, self.backend_bandwidth)
        if cache is None:
            return False  # this write measures the cache
        if bound is not None and bound < margin * cache:
            return False  # even a lone flush is slower than the cache: no probe either
        if small and backend is None and bound is None:
            return False  # absorbed until a flush bounds the backend (latency unknown)
        if now - self._cache_seen[small] >= _CACHE_PROBE_S:
            self._cache_seen[small] = now
            return False
        if probe and now - self._backend_seen[small] >= _BACKEND_PROBE_S:
            self._backend_seen[small] = now
            return True
        return backend is not None and backend >= margin * cache

    def backend_keeps_up(self, size: int | None) -> bool:
        """Whether the backend is measured to take a write of ``size`` bytes about as fast
        as the cache (the write rule's margin of its size class; a configured bandwidth
        caps the measure); False while either is unmeasured."""
        small = size is not None and size < SMALL_OBJECT_BYTES
        cache, backend = self.cache.rate(size), self.backend.rate(size)
        if self.backend_bandwidth is not None:
            backend = min(backend or self.backend_bandwidth, self.backend_bandwidth)
        if cache is None or backend is None:
            return False
        return backend >= (self.margin if small else self.large_margin) * cache

    # -- reads: keep a read-through copy of a miss? ------------------------------------
    def observe_read(self, size: int, seconds: float, now: float, *, hit: bool) -> None:
        """A whole-object read of ``size`` bytes took ``seconds``: from the cache (a hit)
        or from the backend without keeping a copy."""
        (self.cache_reads if hit else self.backend_reads).observe(
            size, self._alone("read", size, seconds))
        (self._hit_seen if hit else self._miss_seen)[size < SMALL_OBJECT_BYTES] = now

    def keep_copy(self, size: int, now: float) -> bool:
        """Whether a miss of ``size`` bytes is copied into the cache as it streams: only
        when the backend is measured to serve reads slower than ``COPY_MARGIN`` x the
        cache (the copy costs a write and a hash). The cache's read rate, until hits measure it, is
        taken from its write rate (a read of the device is not slower). With nothing
        measured, a miss measures the backend; a miss is copied every ``_CACHE_PROBE_S``
        so that hits can measure the cache, and goes uncopied every ``_BACKEND_PROBE_S``
        to keep the backend measured."""
        small = size < SMALL_OBJECT_BYTES
        if self.mode != "auto" or small:
            return True  # a small copy costs little (and small reads are not timed)
        backend, hits = self.backend_reads.rate(size), self.cache_reads.rate(size)
        cache = hits or self.cache.rate(size)
        if backend is None:
            return False  # this read measures the backend
        if cache is not None and backend < COPY_MARGIN * cache:
            if now - self._miss_seen[small] >= _BACKEND_PROBE_S:
                self._miss_seen[small] = now
                return False
            return True
        if hits is None and now - self._hit_seen[small] >= _CACHE_PROBE_S:
            self._hit_seen[small] = now
            return True  # a probe: a later hit on this copy measures the cache
        return False

    def read_cached(self, size: int, now: float) -> bool:
        """Whether a whole read of a clean cached object of ``size`` bytes is served
        from the cache: not when the backend serves reads as fast (the backend holds the
        same version). Each side is probed now and then to stay measured."""
        if self.mode != "auto" or size < SMALL_OBJECT_BYTES:
            return True
        cache, backend = self.cache_reads.rate(size), self.backend_reads.rate(size)
        if cache is None:
            return True  # this read measures the cache
        if now - self._miss_seen[False] >= _BACKEND_PROBE_S:
            self._miss_seen[False] = now
            return False  # this one the backend
        if backend is None or backend < self.margin * cache:
            return True
        if now - self._hit_seen[False] >= _CACHE_PROBE_S:
            self._hit_seen[False] = now
            return True
        return False

    def count(self, to_backend: bool) -> None:
        if to_backend:
            self.routed_to_backend += 1
        else:
            self.routed_to_cache += 1

    def status(self) -> dict[str, object]:
        """Rates (bytes/s, None when unmeasured) and routing counts for /_squall/status."""
        return {
            "mode": self.mode,
            "cache_rate_small": self.cache.small,
            "cache_rate_large": self.cache.large,
            "backend_rate_small": self.backend.small,
            "backend_rate_large": self.backend.large,
            "flush_rate_small": self.flushes.small,
            "flush_rate_large": self.flushes.large,
            "cache_read_rate_small": self.cache_reads.small,
            "cache_read_rate_large": self.cache_reads.large,
            "backend_read_rate_small": self.backend_reads.small,
            "backend_read_rate_large": self.backend_reads.large,
            "routed_to_cache": self.routed_to_cache,
            "routed_to_backend": self.routed_to_backend,
            "backend_failures": self.backend_failures,
        }
