"""The cluster layer's view of a member's cache (gateway/cache/cluster_view.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from backends.core.base import ObjectInfo
from backends.posix import PosixBackend
from gateway.cache.cluster_view import ClusterView
from tests.gateway.cache.conftest import BUCKET, META, Env, KiB, body, until


class StalledFlushes(PosixBackend):
    """Writes wait for ``go``: a flush started meanwhile leaves its record unflushed."""

    go: asyncio.Event

    async def put_object(self, *args: Any, **kwargs: Any) -> ObjectInfo:
        await self.go.wait()
        return await super().put_object(*args, **kwargs)


async def test_a_dirty_snapshot_lists_unflushed_records_and_tombstones_in_key_order(
        env: Env) -> None:
    tier = await env.tier()
    view = ClusterView(tier)
    for key in ["b/2", "a/1", "b/1"]:
        await tier.put_object(BUCKET, key, body(b"flushed"), meta=META)
    await tier.wait_flushed()
    env.break_bucket()  # nothing is flushed from now on
    for key in ["b/3", "a/2", "c"]:
        await tier.put_object(BUCKET, key, body(b"unflushed"), meta=META)
    await tier.delete_object(BUCKET, "b/1")
    assert [e.key for e in view.dirty_snapshot(BUCKET)] == ["a/2", "b/1", "b/3", "c"]
    assert [e.key for e in view.dirty_snapshot(BUCKET, "b/")] == ["b/1", "b/3"]
    assert [(e.key, e.deleted) for e in view.dirty_snapshot(BUCKET, "", "b/1")] == \
        [("b/3", False), ("c", False)]
    assert view.holds_objects(BUCKET)
    env.repair_bucket()


async def test_expedite_deletes_and_drop_clean_leave_unflushed_data_alone(env: Env) -> None:
    tier = await env.tier()
    store, view = tier.store, ClusterView(tier)
    for key in ["keep", "drop", "gone"]:
        await tier.put_object(BUCKET, key, body(key.encode()), meta=META)
    await tier.wait_flushed()
    env.break_bucket()
    await tier.put_object(BUCKET, "dirty", body(b"d"), meta=META)
    await tier.delete_object(BUCKET, "gone")
    assert view.expedite_deletes(BUCKET) == 1 and store.urgent_keys() == [(BUCKET, "gone")]
    assert not view.holds_objects("other") and view.holds_objects(BUCKET)
    assert await view.drop_clean(BUCKET, keep=lambda key: key == "keep") == 1
    assert sorted(store.entries_of(BUCKET)) == ["dirty", "gone", "keep"]
    env.repair_bucket()
    await view.wait_flushed(BUCKET)
    assert not view.holds_objects(BUCKET)


async def test_a_flush_in_flight_is_stopped_while_its_key_is_handed_over(env: Env) -> None:
    """The flush of a key being handed over is stopped (its record unflushed again) and
    none starts until the hand-over ends: a flush must not land after the new owner's."""
    inner = StalledFlushes(env.backend_root, min_part_size=4 * KiB)
    inner.go = go = asyncio.Event()
    tier = await env.tier(inner=inner)
    store, view = tier.store, ClusterView(tier)
    await tier.put_object(BUCKET, "moving", body(b"x"), meta=META)
    await tier.put_object(BUCKET, "staying", body(b"y"), meta=META)
    await until(lambda: store.get(BUCKET, "moving").state.value == "FLUSHING", "flushing")
    async with view.flushes_held_back(BUCKET, "moving"):
        assert store.get(BUCKET, "moving").dirty
        assert store.get(BUCKET, "moving").state.value == "DIRTY"
        go.set()  # the backend takes writes again: the other key flushes, this one not
        await until(lambda: not store.get(BUCKET, "staying").dirty, "flushed")
        await asyncio.sleep(0.2)
        assert store.get(BUCKET, "moving").state.value == "DIRTY"
        assert await view.discard(BUCKET, "moving")
    assert sorted(view.held_keys()) == [(BUCKET, "staying")]
    assert not (env.backend_root / BUCKET / "moving").exists()


async def test_everything_held_is_dropped_when_the_member_starts_anew(env: Env) -> None:
    inner = StalledFlushes(env.backend_root, min_part_size=4 * KiB)
    inner.go = asyncio.Event()  # nothing flushes
    tier = await env.tier(inner=inner)
    view = ClusterView(tier)
    for key in ("a", "b/c", "d"):
        await tier.put_object(BUCKET, key, body(key.encode()), meta=META)
    assert sorted(view.dirty_keys()) == [(BUCKET, "a"), (BUCKET, "b/c"), (BUCKET, "d")]
    assert await view.discard_all() == 3
    assert view.held_keys() == [] and tier.store.dirty_count == 0


async def test_a_flush_waiting_for_the_lease_is_stopped_when_the_member_starts_anew(
        env: Env) -> None:
    """A restarted member's flusher takes an old record before the member may flush (its
    pacer waits for the lease); the member then starts anew: that flush must not go on
    once the lease comes, since the new owner's newer version is on the backend."""
    tier = await env.tier()
    store, view = tier.store, ClusterView(tier)
    lease = asyncio.Event()
    waiting: list[str] = []

    async def gate(bucket: str, nbytes: int) -> None:  # as ClusterNode.gate_flushes
        waiting.append(bucket)
        await lease.wait()
    tier.pace_flushes(gate)
    await tier.put_object(BUCKET, "old", body(b"older than the new owner's"), meta=META)
    await until(lambda: bool(waiting), "a flush waits for the lease")
    assert store.get(BUCKET, "old").state.value == "FLUSHING"
    assert await view.discard_all() == 1
    lease.set()
    await tier.put_object(BUCKET, "later", body(b"flushed"), meta=META)
    await tier.wait_flushed()
    assert view.held_keys() == [(BUCKET, "later")]
    assert (env.backend_root / BUCKET / "later").exists()
    assert not (env.backend_root / BUCKET / "old").exists()


async def test_uploads_held_and_the_backend_uploads_to_hide(env: Env) -> None:
    inner = StalledFlushes(env.backend_root, min_part_size=4 * KiB)
    inner.go = asyncio.Event()  # nothing flushes: what is written stays held here
    tier = await env.tier(inner=inner)
    view = ClusterView(tier)
    upload = await tier.create_multipart_upload(BUCKET, "big/one", meta=META)
    await tier.create_multipart_upload(BUCKET, "other", meta=META)
    tier.store.add_flush_upload("backend-id", (BUCKET, "flushing"))
    held = view.uploads(BUCKET, "big/")
    assert [u.upload_id for u in held.uploads] == [upload.upload_id]
    assert held.hidden_ids == ["backend-id"] and held.hidden_keys == []
    tier.store.drop_flush_upload("backend-id")
    assert not view.holds_objects(BUCKET)  # uploads in progress do not keep a bucket
    await tier.put_object(BUCKET, "k", body(b"x"), meta=META)
    assert view.holds_objects(BUCKET)
    await view.abort_uploads(BUCKET)
    assert view.uploads(BUCKET, "").uploads == []
