"""The mirror store: copies, epochs and keys acted for belong to one member list."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from backends.base import ObjectInfo
from gateway.cluster.mirror_store import MirrorStore


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _fill(store: MirrorStore) -> None:
    info = ObjectInfo(bucket="b", key="k", size=3, etag="e" * 32, last_modified=0.0)
    assert await store.put("b", "k", owner=1, epoch=4, seq=7, info=info, body=_body(b"abc"))
    await store.raise_epoch(1, 4)
    await store.note_acted(1, ("b", "other"))


def test_copies_are_kept_across_a_restart_with_the_same_list(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load("ring-a")
        await _fill(store)
        again = MirrorStore(tmp_path)
        await again.load("ring-a")
        assert set(again.records) == {("b", "k")} and again.epochs == {1: 4}
        assert again.acted == {1: {("b", "other")}}
    asyncio.run(scenario())


def test_a_new_member_list_drops_copies_epochs_and_keys_acted_for(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load("ring-a")
        await _fill(store)
        again = MirrorStore(tmp_path)
        await again.load("ring-b")  # node ids name other members now
        assert again.records == {} and again.epochs == {} and again.acted == {}
    asyncio.run(scenario())
    assert not list(tmp_path.glob("*.mir"))
    assert (tmp_path / "epochs.json").exists()  # not a new data directory


def test_clearing_without_a_new_list_keeps_the_epochs(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MirrorStore(tmp_path)
        await store.load("ring-a")
        await _fill(store)
        assert await store.clear() == 1
        assert store.records == {} and store.epochs == {1: 4}
        again = MirrorStore(tmp_path)
        await again.load("ring-a")
        assert again.records == {} and again.epochs == {1: 4}
    asyncio.run(scenario())
