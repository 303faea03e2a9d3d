"""The elastic cache's decisions (seed: adaptive caching, III-A.1 and III-A.3), pure.

:class:`ElasticMachine` is a state machine driven by :class:`Observation` values (ingest
measured every control interval, or one write asking to be admitted); it returns what to
do and never does I/O or reads a clock, so tests drive it with scripted ingest traces.
:mod:`gateway.cache.elastic_controller` performs its actions::

    IDLE --demand > UT*B--> ATTACHING --attached--> BURST (phase 1: writes are cached)
      ^                         |failed                 | ingest <= UT*B for ID
      |                         v                       v
    IDLE <--detached-- DETACHING <--volume clean-- DRAINING (phase 2: writes bypass the
                                                   cache, flushing at full speed)
                                   DRAINING --demand > UT*B--> BURST (the burst goes on)

*Demand* is the measured ingest rate, plus, for a write asking to be admitted, its
declared length spread over one control interval: at object granularity a write admitted
to the backend stays there until it ends, so the decision is taken when it arrives
(the seed, at block level, redirects the next block as soon as the cache is attached).
A large write (``burst_write_bytes``, 1 MiB, or more: a PUT, a part, a new multipart
upload) asking to be admitted is a burst whatever its rate: the rate of writes that
go around the cache is what the backend takes, so it can never exceed UT x B when B
overstates the backend, and a burst started on the backend would stay there.

Sizing from experience: the first burst gets ``initial_size``; each later one what the
previous burst *needed*: the most bytes one of its arrivals brought (clients' writes from
the attach, or from a resume, until the burst ended: cached or written around), plus what
was still unflushed on the volume when that arrival began, plus ``headroom``. What was
resident on the volume (its peak use) is not what the burst needed: writes the admission
rule sent past the volume by choice are missing from it, and a volume resumed by the next
checkpoint holds the last one's clean data. Only when no arrival was measured, the seed's
rule: the peak used, or the size grown by the bytes flushed prematurely or diverted past
a full volume. Sizes are clamped to [minimum, maximum] and rounded up to ``granularity``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field


class ElasticState(enum.Enum):
    IDLE = "idle"
    ATTACHING = "attaching"
    BURST = "burst"
    DRAINING = "draining"
    DETACHING = "detaching"


class Action(enum.Enum):
    NONE = "none"
    ATTACH = "attach"  # attach a volume of ``Decision.size`` bytes
    RETIRE = "retire"  # stop writing to the volume; flush it at full speed
    REACTIVATE = "reactivate"  # the burst goes on: write to the volume again
    DETACH = "detach"  # the volume is clean: detach it


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    size: int = 0


NOTHING = Decision(Action.NONE)


@dataclass(frozen=True, slots=True)
class Observation:
    """What the controller measured (or what one write asks for)."""

    now: float  # seconds, any monotonic origin
    ingest_rate: float  # bytes/s written by clients over the last interval
    threshold: float  # UT x B_b in bytes/s
    demand_bytes: int = 0  # declared length of a write asking to be admitted
    used_bytes: int = 0  # the most bytes used on the attached volume since the last one
    forced_bytes: int = 0  # cumulative bytes flushed prematurely or diverted past the cache
    detachable: bool = False  # nothing on the volume is needed any more
    ingest_bytes: int = 0  # cumulative bytes clients wrote (cached or written around)
    unflushed_bytes: int = 0  # dirty records and cached parts held by the cache now


@dataclass(frozen=True, slots=True)
class MachineSettings:
    initial_size: int
    minimum: int = 1 << 20
    maximum: int | None = None
    granularity: int = 1 << 20
    inactivity_delay_s: float = 30.0
    window_s: float = 0.5  # the control interval: demand is spread over it
    retry_s: float = 5.0
    burst_write_bytes: int = 1 << 20  # a write this large asking admission is a burst
    headroom: float = 1 / 64  # beyond an arrival's bytes: data-file headers, rounding


@dataclass(slots=True)
class BurstRecord:
    """One volume lifetime: what it was sized, used, and had to flush prematurely."""

    size_bytes: int
    attached_at: float
    ended_at: float | None = None  # end of the burst (switch to DRAINING)
    detached_at: float | None = None
    used_peak_bytes: int = 0
    forced_bytes: int = 0
    #: the most one arrival needed: its bytes plus what was unflushed when it began
    needed_bytes: int = 0
    #: seconds from the start of that arrival to its last byte
    arrival_s: float = 0.0
    forced_base: int = field(default=0, repr=False)
    arrival: Arrival | None = field(default=None, repr=False)


@dataclass(slots=True)
class Arrival:
    """One arrival of a burst: from the attach (or a resume) until the burst ends."""

    started_at: float
    ingest_base: int  # clients' cumulative ingest when it began
    unflushed: int  # bytes unflushed on the cache when it began
    last_at: float = 0.0  # when its last byte was measured
    seen: int = 0  # bytes it brought so far

    def observe(self, now: float, ingest_bytes: int) -> int:
        """What the arrival needs so far (its bytes and what it found unflushed)."""
        seen = max(0, ingest_bytes - self.ingest_base)
        if seen > self.seen:
            self.seen, self.last_at = seen, now
        return self.seen + self.unflushed


def next_size(size: int, used_peak: int, forced: int, *, minimum: int,
              maximum: int | None, granularity: int, needed: int = 0,
              headroom: float = 0.0) -> int:
    """III-A.3 from what the burst needed (``needed``: its largest arrival's bytes plus
    what that arrival found unflushed) with ``headroom``; without a measured arrival, the
    seed's rule: grow by what had to be flushed prematurely, else shrink to what was
    used."""
    if needed > 0:
        want = math.ceil(needed * (1 + headroom))
    else:
        want = size + forced if forced > 0 else used_peak
    want = max(minimum, want)
    if maximum is not None:
        want = min(maximum, want)
    rounded = math.ceil(want / granularity) * granularity
    return rounded if maximum is None or rounded <= maximum else maximum


class ElasticMachine:
    """The elastic controller's state and decisions (see the module docstring)."""

    def __init__(self, settings: MachineSettings, *, recovering: bool = False) -> None:
        self.settings = settings
        self.state = ElasticState.DRAINING if recovering else ElasticState.IDLE
        self.size = settings.initial_size  # the next volume's size
        self.override: int | None = None  # one-shot size for the next volume (calibration)
        self.current: BurstRecord | None = None
        self.history: list[BurstRecord] = []
        self._below_since: float | None = None
        self._retry_at = -math.inf

    def above(self, obs: Observation) -> bool:
        """Demand above UT x B_b (measured ingest plus the write asking to be admitted),
        or a large write asking to be admitted."""
        if obs.demand_bytes >= self.settings.burst_write_bytes:
            return True
        return obs.ingest_rate + obs.demand_bytes / self.settings.window_s > obs.threshold

    def next_volume_size(self) -> int:
        return self.override if self.override is not None else self.size

    def step(self, obs: Observation) -> Decision:
        """One decision from one observation (a control tick or an admission)."""
        above = self.above(obs)
        state = self.state
        if state is ElasticState.IDLE:
            if above and obs.now >= self._retry_at:
                self.state = ElasticState.ATTACHING
                return Decision(Action.ATTACH, self.next_volume_size())
        elif state is ElasticState.BURST:
            burst = self.current
            if burst is not None:
                burst.used_peak_bytes = max(burst.used_peak_bytes, obs.used_bytes)
                burst.forced_bytes = obs.forced_bytes - burst.forced_base
                self._measure_arrival(burst, obs)
            if above:
                self._below_since = None
            elif self._below_since is None:
                self._below_since = obs.now
            if (self._below_since is not None
                    and obs.now - self._below_since >= self.settings.inactivity_delay_s):
                self._end_burst(obs.now)
                self.state = ElasticState.DRAINING
                return Decision(Action.RETIRE)
        elif state is ElasticState.DRAINING:
            if above:
                self.state = ElasticState.BURST
                self._below_since = None
                if self.current is not None:
                    self.current.ended_at = None
                    self.current.arrival = Arrival(obs.now, obs.ingest_bytes,
                                                   obs.unflushed_bytes)
                return Decision(Action.REACTIVATE)
            if obs.detachable and not obs.demand_bytes:
                self.state = ElasticState.DETACHING
                return Decision(Action.DETACH)
        return NOTHING

    @staticmethod
    def _measure_arrival(burst: BurstRecord, obs: Observation) -> None:
        arrival = burst.arrival
        if arrival is None:
            return
        needed = arrival.observe(obs.now, obs.ingest_bytes)
        if needed > burst.needed_bytes:
            burst.needed_bytes = needed
            burst.arrival_s = arrival.last_at - arrival.started_at

    def _end_burst(self, now: float) -> None:
        burst = self.current
        if burst is None:
            return
        burst.ended_at = now
        burst.arrival = None
        s = self.settings
        self.size = next_size(burst.size_bytes, burst.used_peak_bytes, burst.forced_bytes,
                              minimum=s.minimum, maximum=s.maximum, granularity=s.granularity,
                              needed=burst.needed_bytes, headroom=s.headroom)

    # -- outcomes of the actions ----------------------------------------------------------
    def attached(self, size: int, now: float, forced_bytes: int, ingest_bytes: int = 0,
                 unflushed_bytes: int = 0) -> None:
        """The volume is attached: the burst, and its first arrival, begin."""
        self.state = ElasticState.BURST
        self.override = None
        self._below_since = None
        self.current = BurstRecord(size_bytes=size, attached_at=now, forced_base=forced_bytes,
                                   arrival=Arrival(now, ingest_bytes, unflushed_bytes))

    def attach_failed(self, now: float) -> None:
        self.state = ElasticState.IDLE
        self._retry_at = now + self.settings.retry_s

    def detached(self, now: float) -> None:
        self.state = ElasticState.IDLE
        if self.current is not None:
            self.current.detached_at = now
            self.history.append(self.current)
            del self.history[:-32]
            self.current = None

    def detach_refused(self) -> None:
        """The volume was not clean after all (a write slipped in): keep draining."""
        self.state = ElasticState.DRAINING
