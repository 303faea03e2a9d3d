"""Background tasks end on stop, also one that loses a cancellation."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.background import BackgroundLoop


async def test_a_loop_that_loses_one_cancellation_still_stops() -> None:
    lost = 0

    async def body() -> None:
        nonlocal lost
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:  # as asyncio.wait_for < 3.12 may: dropped
                lost += 1
                if lost > 1:
                    raise
                with contextlib.suppress(Exception):
                    asyncio.current_task().uncancel()  # type: ignore[union-attr]

    loop = BackgroundLoop(body, "swallows-one")
    loop.start()
    await asyncio.sleep(0)
    await asyncio.wait_for(loop.stop(), 30)
    assert lost == 2 and not loop.running


async def test_stop_passes_on_what_the_task_raised_and_is_a_no_op_when_not_started() -> None:
    async def body() -> None:
        raise ValueError("broken")

    loop = BackgroundLoop(body, "broken")
    await loop.stop()
    loop.start()
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="broken"):
        await loop.stop()
