"""Per-user fair shares (gateway/qos/shares.py) on a clock the tests move."""

from __future__ import annotations

import pytest

from backends.core.errors import SlowDown
from gateway.auth.users import User, UserLimits
from gateway.qos.shares import FairShares, ShareLimits


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def user(name: str, limits: UserLimits | None = None) -> User:
    return User(name, f"KEY{name}", "s" * 20, "0" * 64, limits=limits)


def test_a_user_past_its_share_waits_only_while_the_process_is_busy() -> None:
    shares = FairShares(ShareLimits(max_requests=2), process_max=10)
    mallory, bob = user("mallory"), user("bob")
    for _ in range(8):  # alone, mallory may use the process until a share is left
        shares.enter("m", mallory, 0)
    with pytest.raises(SlowDown) as refused:
        shares.enter("m", mallory, 0)
    assert refused.value.retry_after == 1 and refused.value.public
    shares.enter("b", bob, 0)  # bob's share is his
    shares.enter("b", bob, 0)
    shares.leave("m")
    with pytest.raises(SlowDown):  # still past her share, and the process is busy
        shares.enter("m", mallory, 0)
    assert shares.status() == {"in_flight": 9, "refused": 2, "users_in_flight": 2}
    assert shares.of_user("m") == {"in_flight": 7, "refused": 2}


def test_without_a_process_limit_the_share_is_a_cap() -> None:
    shares = FairShares(ShareLimits(max_requests=1), process_max=None)
    shares.enter("a", None, 0)
    with pytest.raises(SlowDown):
        shares.enter("a", None, 0)
    shares.leave("a")
    shares.enter("a", None, 0)


def test_request_rate_and_bandwidth_refill_with_time() -> None:
    clock = Clock()
    shares = FairShares(ShareLimits(max_requests=0, max_rate=2, max_bandwidth=1000),
                        process_max=None, clock=clock)
    u = user("u")
    shares.enter("u", u, 0)
    shares.enter("u", u, 0)
    with pytest.raises(SlowDown) as refused:
        shares.enter("u", u, 0)
    assert refused.value.retry_after == 1
    clock.now = 1.0
    shares.enter("u", u, 5000)  # a large upload is admitted, then repaid
    clock.now = 2.0
    with pytest.raises(SlowDown) as in_debt:
        shares.enter("u", u, 0)
    assert in_debt.value.retry_after == 3
    clock.now = 6.0
    shares.enter("u", u, 0)
    shares.charge("u", 10_000)  # a download's body: the next requests wait for it
    clock.now = 7.0
    with pytest.raises(SlowDown):
        shares.enter("u", u, 0)


def test_a_users_own_limits_take_precedence_and_zero_turns_one_off() -> None:
    shares = FairShares(ShareLimits(max_requests=1, max_rate=0), process_max=None)
    vip = user("vip", UserLimits(max_requests=0))
    for _ in range(5):
        shares.enter("v", vip, 0)
    capped = user("c", UserLimits(max_rate=1))
    shares.enter("c", capped, 0)
    with pytest.raises(SlowDown):
        shares.enter("c", capped, 0)  # its share is 1 and its rate 1/s
    # A changed user (a reload of users.json) gets its new limits, keeping its count.
    relaxed = user("c", UserLimits(max_requests=5))
    shares.enter("c", relaxed, 0)
    assert shares.of_user("c")["in_flight"] == 2
