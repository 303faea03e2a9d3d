"""Dynamic two-phase writeback (adaptive block caching, section III-A.2).

* phase 1 (``phase1``): writes are absorbed by the cache; dirty data is flushed only
  with spare backend bandwidth (one flush at a time; on a disk the cache shares with the
  backend, the cache's ingest takes that bandwidth too), or at full concurrency when
  room is needed (ahead of need only while nothing else takes the backend), a writer
  waits for space, ``wait_flushed`` is draining, or an entry's dirty age passed
  ``max_dirty_age_s`` (a deadline overriding phase 1).
* phase 2 (``phase2``): once ingest has stayed below UT x B for ID seconds, where B is
  the backend bandwidth (configured throttle rate, else the measured flush throughput,
  else unknown -> only zero ingest counts as "below"), flushing runs at full concurrency
  and new writes go straight to the backend until the cache is clean (-> ``idle``), or
  back to phase 1 if ingest rises to UT x B again.
* ``idle``: nothing dirty; the next write to the cache starts phase 1.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable

from gateway.cache.settings import CacheSettings
from gateway.cache.store import CacheStore

_ROOM_FRACTION = 0.8  # dirty bytes above this share of capacity: flush to make room
_BANDWIDTH_DECAY = 0.95  # per tick, for the measured flush throughput (tracks peaks)


class Phase(enum.Enum):
    IDLE = "idle"
    PHASE1 = "phase1"
    PHASE2 = "phase2"


class WritebackPolicy:
    """Measures ingest and flush throughput every tick and decides the phase and how
    many flushes may run. Pure bookkeeping: no I/O, driven by :meth:`tick`."""

    def __init__(self, store: CacheStore, settings: CacheSettings,
                 backend_bandwidth: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 shares_disk: Callable[[], bool] = lambda: False) -> None:
        self._store = store
        self._shares_disk = shares_disk
        self._settings = settings
        self.configured_bandwidth = backend_bandwidth
        self.measured_bandwidth: float | None = None
        self.phase = Phase.PHASE1 if store.dirty_count else Phase.IDLE
        self.ingest_rate = 0.0
        self.client_backend_rate = 0.0
        self.deadline_due = False
        self.history: deque[Phase] = deque([self.phase], maxlen=64)  # recent phases
        self._clock = clock
        self._last = clock()
        self._last_ingest = store.stats.ingest_bytes_total
        self._last_client = store.stats.backend_client_bytes_total
        self._last_flush = store.stats.flush_bytes_total
        self._below_since: float | None = self._last

    @property
    def bandwidth(self) -> float | None:
        return self.configured_bandwidth or self.measured_bandwidth

    @property
    def write_around(self) -> bool:
        """New writes go past the cache: phase 2 while anything is dirty (a cache made
        clean between two ticks is idle already)."""
        return self.phase is Phase.PHASE2 and self._store.dirty_count > 0

    def resume(self) -> None:
        """A burst resumes (the elastic controller saw demand): phase 2 -> phase 1, and
        the quiet period starts again."""
        self._below_since = None
        if self.phase is Phase.PHASE2:
            self.phase = Phase.PHASE1
            self.history.append(self.phase)

    def tick(self) -> bool:
        """Update rates and phase; True if the phase changed."""
        now = self._clock()
        dt = max(now - self._last, 1e-6)
        stats = self._store.stats
        self.ingest_rate = (stats.ingest_bytes_total - self._last_ingest) / dt
        self.client_backend_rate = (stats.backend_client_bytes_total - self._last_client) / dt
        flushed = stats.flush_bytes_total - self._last_flush
        if flushed > 0:
            sample = flushed / dt
            previous = (self.measured_bandwidth or 0.0) * _BANDWIDTH_DECAY
            self.measured_bandwidth = max(sample, previous)
        self._last, self._last_ingest = now, stats.ingest_bytes_total
        self._last_client, self._last_flush = stats.backend_client_bytes_total, \
            stats.flush_bytes_total
        oldest = self._store.oldest_dirty_since()
        self.deadline_due = (oldest is not None
                             and self._store.now() - oldest >= self._settings.max_dirty_age_s)

        bandwidth = self.bandwidth
        threshold = self._settings.utilization_threshold * bandwidth if bandwidth else 0.0
        below = self.ingest_rate <= threshold
        if not below:
            self._below_since = None
        elif self._below_since is None:
            self._below_since = now
        dirty = self._store.dirty_count > 0
        old = self.phase
        if self.phase is Phase.PHASE2:
            if not below:
                self.phase = Phase.PHASE1 if dirty else Phase.IDLE
            elif not dirty:
                self.phase = Phase.IDLE
        elif dirty:
            quiet = (self._below_since is not None
                     and now - self._below_since >= self._settings.inactivity_delay_s)
            self.phase = Phase.PHASE2 if quiet else Phase.PHASE1
        else:
            self.phase = Phase.IDLE
        if self.phase is not old:
            self.history.append(self.phase)
            return True
        return False

    @property
    def making_room(self) -> bool:
        """Writers wait for space in phase 1: what is flushed now is flushed prematurely
        (the elastic controller grows the next burst's volume by it)."""
        store = self._store
        return (self.phase is not Phase.PHASE2 and not self.deadline_due
                and not store.draining and store.space.waiters > 0)

    def allowed_flushes(self) -> int:
        """How many flushes may be in flight now."""
        store = self._store
        full = self._settings.flush_concurrency
        if store.dirty_count == 0:
            return 0
        # What takes the backend now: clients' writes past the cache, and on a disk the
        # cache shares with it, the cache's own ingest as well.
        busy = self.ingest_rate if self._shares_disk() else self.client_backend_rate
        # Room is made ahead of need only while that is nothing: a full cache sends the
        # burst's next writes to the backend, where a flush would only slow them down.
        ahead = store.dirty_bytes > _ROOM_FRACTION * store.space.capacity and busy == 0
        if (self.phase is Phase.PHASE2 or self.deadline_due or store.draining
                or store.space.waiters or store.any_urgent or ahead):
            return full
        bandwidth = self.bandwidth
        if bandwidth is None:
            spare = busy == 0
        else:
            spare = busy < (1 - self._settings.utilization_threshold) * bandwidth
        return 1 if spare else 0
