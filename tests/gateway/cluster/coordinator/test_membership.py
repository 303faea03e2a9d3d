"""EtcdMembership against a real etcd server: registration, the watched ring, hand-over
barriers, fencing when etcd cannot be reached, taking a previous lease over, holding."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from backends.core.errors import ServiceUnavailable, SlowDown
from gateway.cluster.coordinator.keys import Registration
from gateway.cluster.coordinator.membership import EtcdMembership
from gateway.cluster.coordinator.settings import coordinator_settings
from tests.support.etcd import EtcdServer, etcd_available

pytestmark = pytest.mark.skipif(etcd_available() is not None, reason=str(etcd_available()))
TTL = 2
A, B = "http://169.254.9.1:9000", "http://169.254.9.2:9000"


class Members:
    """Members of one test's cluster (a prefix of its own), stopped at the end."""

    def __init__(self, etcd: EtcdServer, root: Path) -> None:
        self.settings = coordinator_settings(etcd.url, prefix=f"/t-{uuid.uuid4().hex}/",
                                             lease_ttl_s=TTL)
        self.root = root
        self.made: list[EtcdMembership] = []

    def member(self, url: str, *, replicas: int = 2, state: str | None = None
               ) -> EtcdMembership:
        state_file = self.root / (state or url.rsplit(":", 1)[0][-4:]) / "lease.json"
        made = EtcdMembership(self.settings, Registration(url, 0, 1, time.time()), replicas,
                              state_file=state_file)
        self.made.append(made)
        return made

    async def close(self) -> None:
        for member in self.made:
            await member.stop()


@pytest.fixture
async def members(etcd: EtcdServer, tmp_path: Path) -> AsyncIterator[Members]:
    made = Members(etcd, tmp_path)
    yield made
    await made.close()


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def key_of(member: EtcdMembership, name: str) -> str:
    return next(f"k{i}" for i in range(10_000) if member.view.owner("b", f"k{i}") == name)


async def test_members_see_each_other_and_keys_wait_for_their_hand_over(
        members: Members) -> None:
    a = members.member(A)
    await a.start()
    assert a.view.mine and list(a.view.members) == [A] and a.serving()
    assert not a.owned_since_settled("b", "k")  # nobody has synced the view yet
    waiting = asyncio.ensure_future(a.admit("b", "k"))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await a.synced(a.view.revision)
    await asyncio.wait_for(waiting, 5)
    await until(lambda: a.owned_since_settled("b", "k"))
    await a.admit("b", "k")
    b = members.member(B)
    await b.start()
    await until(lambda: set(a.view.members) == {A, B})
    assert a.view.revision == b.view.revision > 0
    moved = key_of(b, B)  # a key A owned, B owns now
    kept = key_of(b, A)
    await a.admit("b", kept)  # keys that do not move are served all along
    waiting = asyncio.ensure_future(b.admit("b", moved))
    await b.synced(b.view.revision)
    await asyncio.sleep(0.3)
    assert not waiting.done()  # A has not handed its keys over yet
    await a.synced(a.view.revision)
    await asyncio.wait_for(waiting, 5)
    with pytest.raises(ServiceUnavailable, match="owned by another"):
        await a.admit("b", moved)
    assert await a.quiescent() == a.view.revision


async def test_a_member_that_leaves_is_out_of_the_ring_at_once(members: Members) -> None:
    a, b = members.member(A), members.member(B)
    await a.start()
    await b.start()
    await until(lambda: len(a.view.members) == 2)
    await b.leave()
    await until(lambda: list(a.view.members) == [A], within=2)
    assert not b.serving()


async def test_a_restart_within_the_ttl_takes_the_previous_lease_over(
        members: Members) -> None:
    a = members.member(A, state="a")
    await a.start()
    lease = a.session.lease
    await a.stop()  # a crash: the lease stays until it expires
    fresh: list[bool] = []
    again = members.member(A, state="a")

    async def started_anew() -> None:
        fresh.append(True)
    again.on_fresh = started_anew
    await again.start()
    assert again.session.lease == lease and fresh == [] and again.serving()


@pytest.mark.slow
async def test_a_member_whose_lease_expired_starts_anew_unless_held(
        members: Members) -> None:
    a, b = members.member(A, state="a"), members.member(B)
    await a.start()
    await b.start()
    await a.stop()  # its lease expires: it leaves the ring
    await until(lambda: list(b.view.members) == [B], within=TTL + 3)
    fresh: list[bool] = []

    async def started_anew() -> None:
        fresh.append(True)
    again = members.member(A, state="a")
    again.on_fresh = started_anew
    await again.start()
    assert fresh == [True]  # its copies were taken over: what it held is older
    await again.hold()  # now it may hold the only copy of a write
    await again.stop()
    await until(lambda: b.view.members.get(A) is not None and b.view.members[A].held,
                within=TTL + 3)
    assert b.view.owner("b", key_of(b, A)) == A  # its keys wait for it
    third = members.member(A, state="a")
    third.on_fresh = started_anew
    await third.start()
    assert fresh == [True] and third.holding  # held: its records are still the newest
    await third.unhold()
    await until(lambda: not b.view.members[A].held)


@pytest.mark.slow
async def test_a_member_that_cannot_reach_etcd_stops_serving_before_its_lease_ends(
        tmp_path: Path) -> None:
    etcd = EtcdServer(tmp_path / "etcd").start()  # its own: it is killed here
    members = Members(etcd, tmp_path)
    a = members.member(A)
    await a.start()
    assert a.serving()
    etcd.kill()
    try:
        started = time.monotonic()
        await until(lambda: not a.serving(), within=TTL + 2)
        fenced_after = time.monotonic() - started
        assert fenced_after < TTL  # before etcd could expire the lease
        with pytest.raises(SlowDown, match="cannot renew its lease"):
            await a.admit("b", "k")
    finally:
        etcd.restart()
    try:
        await until(a.serving, within=3 * TTL + 5)  # the same lease, or a new one
    finally:
        await members.close()
        etcd.close()


@pytest.mark.slow
async def test_two_processes_cannot_register_one_name(members: Members) -> None:
    a = members.member(A, state="a")
    await a.start()
    twin = members.member(A, state="twin")  # another data directory: another process
    with pytest.raises(ServiceUnavailable, match="two members cannot have one URL"):
        await twin.start()


@pytest.mark.slow
async def test_a_member_started_before_etcd_waits_for_it(tmp_path: Path) -> None:
    etcd = EtcdServer(tmp_path / "etcd").start()
    etcd.kill()  # its ports stay this cluster's: etcd comes back on them
    members = Members(etcd, tmp_path)
    a = members.member(A)
    starting = asyncio.ensure_future(a.start())
    try:
        await asyncio.sleep(3)
        assert not starting.done()
        await asyncio.to_thread(etcd.restart)
        await asyncio.wait_for(starting, 30)
        assert a.serving() and list(a.view.members) == [a.name]
    finally:
        starting.cancel()
        await members.close()
        etcd.close()
