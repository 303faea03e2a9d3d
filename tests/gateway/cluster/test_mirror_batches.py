"""Copies for one mirror queued while a request is out go together in the next one;
each caller gets its own copy's outcome; a failed request fails only its own copies."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from backends.core.errors import ServiceUnavailable, StorageError
from gateway.cluster.errors import ViewChanged
from gateway.cluster.mirror_batches import MAX_BATCH_COPIES, MirrorBatches
from gateway.cluster.wire import MirrorCopy


def copy(n: int, size: int = 4) -> MirrorCopy:
    return MirrorCopy("b", f"k{n}", 1, n, None, b"x" * size)


class Mirror:
    """A ``send`` that holds each request until the test releases it."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, list[str]]] = []
        self.gate = asyncio.Event()
        self.refuse: set[str] = set()  # keys answered with ViewChanged
        self.fail: Exception | None = None

    async def __call__(self, member: str, copies: Sequence[MirrorCopy]
                       ) -> list[StorageError | None]:
        self.requests.append((member, [c.key for c in copies]))
        await self.gate.wait()
        self.gate.clear()
        if self.fail is not None:
            raise self.fail
        return [ViewChanged("moved") if c.key in self.refuse else None for c in copies]


async def released(mirror: Mirror, count: int) -> None:
    """Let ``count`` requests answer, one after the other."""
    for _ in range(count):
        mirror.gate.set()
        await asyncio.sleep(0.01)  # taken by the request, and the next one sent


async def test_copies_queued_while_a_request_is_out_go_in_the_next_one() -> None:
    mirror = Mirror()
    batches = MirrorBatches(mirror)
    first = asyncio.ensure_future(batches.put("m1", copy(0)))
    await asyncio.sleep(0.01)  # out, alone
    rest = [asyncio.ensure_future(batches.put("m1", copy(n))) for n in range(1, 6)]
    other = asyncio.ensure_future(batches.put("m2", copy(9)))  # another member: its own
    await asyncio.sleep(0.01)
    assert not first.done()
    await released(mirror, 3)
    await asyncio.gather(first, *rest, other)
    assert mirror.requests == [("m1", ["k0"]), ("m2", ["k9"]),
                               ("m1", ["k1", "k2", "k3", "k4", "k5"])]
    assert (batches.requests, batches.copies) == (3, 7)


async def test_each_copy_gets_its_own_outcome() -> None:
    mirror = Mirror()
    mirror.refuse = {"k1"}
    batches = MirrorBatches(mirror)
    puts = [asyncio.ensure_future(batches.put("m1", copy(n))) for n in range(3)]
    await released(mirror, 1)
    await puts[0]
    await puts[2]
    with pytest.raises(ViewChanged):
        await puts[1]


async def test_a_failed_request_fails_its_copies_and_the_next_goes_on() -> None:
    mirror = Mirror()
    batches = MirrorBatches(mirror)
    mirror.fail = ServiceUnavailable("mirror gone")
    failing = asyncio.ensure_future(batches.put("m1", copy(0)))
    await asyncio.sleep(0.01)
    later = asyncio.ensure_future(batches.put("m1", copy(1)))
    await released(mirror, 1)
    with pytest.raises(ServiceUnavailable):
        await failing
    mirror.fail = None
    await released(mirror, 1)
    await later
    assert [keys for _, keys in mirror.requests] == [["k0"], ["k1"]]


async def test_a_request_carries_at_most_its_bound_of_copies() -> None:
    mirror = Mirror()
    batches = MirrorBatches(mirror)
    puts = [asyncio.ensure_future(batches.put("m1", copy(n)))
            for n in range(MAX_BATCH_COPIES + 3)]
    await released(mirror, 2)
    await asyncio.gather(*puts)
    assert [len(keys) for _, keys in mirror.requests] == [MAX_BATCH_COPIES, 3]
