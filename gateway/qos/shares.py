"""Fair shares: per-user limits on requests in flight, request rate and bandwidth, so
that no user's requests take the whole process (docs/security.md, "Fair shares").

Accounting is one dict lookup and a few integer operations per request, no lock and no
await: admission happens once the request is authenticated, the release once its response
was sent. A request refused here is answered ``503 SlowDown`` with ``Retry-After`` at once,
so it holds nothing.

* In flight: a user always has ``max_requests`` requests admitted; beyond that, a further
  one is admitted only while the process keeps at least ``max_requests`` free (its
  ``max_requests`` setting), so that one user alone may use an idle gateway but leaves
  room for the others as soon as it is busy.
* Rate and bandwidth: token buckets holding one second; a request is refused while its
  user's bucket is empty (rate) or in debt (bandwidth: the declared body is taken at
  admission, a response's body once it is known, so the average stays at the limit).

They compose with the QoS classes (docs/qos.md): a request admitted here then waits for its
bucket's and user's gears, holding only its user's share while it waits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from backends.core.errors import SlowDown
from gateway.auth.users import User, UserLimits

#: retry-after of a request refused for its user's requests in flight
BUSY_RETRY_AFTER_S = 1


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The limits of one user (0 or None: none)."""

    max_requests: int = 64
    max_rate: float = 0.0
    max_bandwidth: float = 0.0

    def merged(self, own: UserLimits | None) -> ShareLimits:
        """These limits with a user's own ones (``own``) taking precedence."""
        if own is None:
            return self
        return ShareLimits(
            max_requests=self.max_requests if own.max_requests is None
            else int(own.max_requests),
            max_rate=self.max_rate if own.max_rate is None else float(own.max_rate),
            max_bandwidth=self.max_bandwidth if own.max_bandwidth is None
            else float(own.max_bandwidth))

    @property
    def paced(self) -> bool:
        return self.max_rate > 0 or self.max_bandwidth > 0


class _Account:
    """One user's requests in flight and token buckets."""

    __slots__ = ("bytes", "in_flight", "limits", "ops", "refused", "stamp", "user")

    def __init__(self, user: User | None, limits: ShareLimits, now: float) -> None:
        self.user = user  # the User these limits were computed for (a reload replaces it)
        self.limits = limits
        self.in_flight = 0
        self.ops = max(limits.max_rate, 1.0)  # tokens: one second of the rate
        self.bytes = limits.max_bandwidth
        self.stamp = now
        self.refused = 0

    def refill(self, now: float) -> None:
        elapsed = now - self.stamp
        self.stamp = now
        limits = self.limits
        if limits.max_rate > 0:
            self.ops = min(max(limits.max_rate, 1.0), self.ops + elapsed * limits.max_rate)
        if limits.max_bandwidth > 0:
            self.bytes = min(limits.max_bandwidth, self.bytes + elapsed * limits.max_bandwidth)


class FairShares:
    """The per-user accounts of one process."""

    def __init__(self, limits: ShareLimits, *, process_max: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``process_max``: the requests in flight the process admits (None: no limit);
        a user past its share is admitted only while that many minus the share are
        taken."""
        self._limits = limits
        self._process_max = process_max
        self._clock = clock
        self._accounts: dict[str, _Account] = {}
        self.in_flight = 0
        self.refused = 0

    def _account(self, key: str, user: User | None) -> _Account:
        account = self._accounts.get(key)
        if account is None or account.user is not user:
            limits = self._limits.merged(user.limits if user is not None else None)
            fresh = _Account(user, limits, self._clock())
            if account is not None:  # the user's limits changed: keep what is in flight
                fresh.in_flight = account.in_flight
            self._accounts[key] = account = fresh
        return account

    def enter(self, key: str, user: User | None, nbytes: int) -> None:
        """Admit a request of ``user`` (its access key ``key``; ``""`` anonymous) that
        declares ``nbytes`` of body, or raise SlowDown; every admitted request is
        :meth:`leave`-d once."""
        account = self._account(key, user)
        limits = account.limits
        share = limits.max_requests
        if share and account.in_flight >= share and (
                self._process_max is None or self._process_max - self.in_flight <= share):
            self._refuse(account, "Please reduce your request rate: your requests in "
                                  "flight are at your share of this gateway.",
                         BUSY_RETRY_AFTER_S)
        if limits.paced:
            now = self._clock()
            account.refill(now)
            if limits.max_rate > 0:
                if account.ops < 1.0:
                    self._refuse(account, "Please reduce your request rate.",
                                 (1.0 - account.ops) / limits.max_rate)
                account.ops -= 1.0
            if limits.max_bandwidth > 0:
                if account.bytes < 0:
                    self._refuse(account, "Please reduce your bandwidth.",
                                 -account.bytes / limits.max_bandwidth)
                account.bytes -= nbytes
        account.in_flight += 1
        self.in_flight += 1

    def charge(self, key: str, nbytes: int) -> None:
        """Take a response's ``nbytes`` from the user's bandwidth (the next requests
        wait for it)."""
        account = self._accounts.get(key)
        if account is not None and account.limits.max_bandwidth > 0:
            account.bytes -= nbytes

    def leave(self, key: str) -> None:
        """An admitted request is over (its response sent or abandoned)."""
        account = self._accounts.get(key)
        if account is not None and account.in_flight > 0:
            account.in_flight -= 1
        self.in_flight -= 1

    def _refuse(self, account: _Account, message: str, wait_s: float) -> None:
        account.refused += 1
        self.refused += 1
        raise SlowDown(message, retry_after=max(1, math.ceil(wait_s)), public=True)

    def status(self) -> dict[str, int]:
        """Figures of the process (no user names: the status is read by monitors)."""
        return {"in_flight": self.in_flight, "refused": self.refused,
                "users_in_flight": sum(1 for a in self._accounts.values() if a.in_flight)}

    def of_user(self, key: str) -> dict[str, int]:
        """One user's own figures."""
        account = self._accounts.get(key)
        if account is None:
            return {"in_flight": 0, "refused": 0}
        return {"in_flight": account.in_flight, "refused": account.refused}
