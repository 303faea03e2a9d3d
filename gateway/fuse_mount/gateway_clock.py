"""The gateway's wall clock as this mount sees it: the times several mounts compare (the
writer leases of shared files) are read from it, so the mounts' own clocks need not agree.

Every response carries a ``Date`` in whole seconds (uvicorn refreshes it once a second).
Each one gives a sample of the offset of the gateway's clock from this machine's; the
offset used is the median of the last samples, and only beyond ``TOLERANCE`` seconds,
which is what those headers can tell apart from a clock in step: a mount whose clock is
minutes off still agrees with the others on a lease to within a couple of seconds.
"""

from __future__ import annotations

import email.utils
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable

#: offsets up to this many seconds are taken for clocks in step (not corrected)
TOLERANCE = 2.0
#: samples kept (the newest): a gateway whose clock is stepped is followed after half
SAMPLES = 15
#: a response slower than this says too little about when its Date was taken
MAX_ROUND_TRIP = 1.0


class GatewayClock:
    """Wall-clock time of the gateway, estimated from the ``Date`` of its responses."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: deque[float] = deque(maxlen=SAMPLES)
        self._offset = 0.0

    @property
    def offset(self) -> float:
        """Seconds to add to this machine's clock (0 while within ``TOLERANCE``)."""
        return self._offset

    def now(self) -> float:
        """The gateway's time now, as seconds since the epoch."""
        return self._clock() + self._offset

    def observe(self, sent: float, received: float, date: str | None) -> None:
        """A response with header ``Date: date`` to a request sent at ``sent`` and answered
        at ``received`` (this machine's clock)."""
        if date is None or not 0 <= received - sent <= MAX_ROUND_TRIP:
            return
        try:
            stamp = email.utils.parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            return
        # The Date was taken somewhere in that second, while the request was served.
        sample = stamp + 0.5 - (sent + received) / 2
        with self._lock:
            self._samples.append(sample)
            median = statistics.median(self._samples)
            self._offset = median if abs(median) > TOLERANCE else 0.0
