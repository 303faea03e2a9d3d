"""A member removed while it is down (docs/cluster.md, "Removing a member that is down"):
how the coordinator confirms it is down, and what the member does when it comes back
and finds itself removed (it drops what it holds instead of flushing it)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from gateway.cluster.health import Health
from gateway.cluster.member_file import ring_view
from gateway.cluster.ring import normalize_url

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode

log = logging.getLogger("squall.cluster")


async def is_down(node: ClusterNode, member: str) -> bool:
    """Whether ``member`` is down: its health checks fail and a probe made now is
    refused or times out."""
    index = node.ring.members.index(member)
    state = node.health.states.get(index)
    if state is None or state.health is not Health.DOWN:
        return False
    return await node.health.probe(index) is Health.DOWN


async def removal_seen(node: ClusterNode, version: int, base_id: str
                       ) -> tuple[int, tuple[str, ...]] | None:
    """The ``(version, members)`` of a member list newer than ``version`` (and started
    from the same ``--peers``, ``base_id``) without this member that another member
    reports, if one does: this member was removed while it was away."""
    me = node.ring.self_url
    others = [i for i in range(len(node.ring.members)) if i != node.ring.self_index]
    for seen in await asyncio.gather(*(ring_view(node, i) for i in others)):
        if seen is None or seen.get("membership") not in ("stable", "changing") \
                or seen.get("membership_base") != base_id:
            continue
        newer = seen.get("membership_version")
        members = tuple(normalize_url(str(m.get("url"))) for m in seen.get("members", []))
        if isinstance(newer, int) and newer > version and me not in members:
            return newer, members
    return None


async def drop_stale(node: ClusterNode, version: int) -> None:
    """This member was removed while it was down (membership ``version``): the members
    that stayed flushed its acknowledged writes from their mirror copies (or gave them
    up, ``--force``), and may have written its keys since. What it still holds is
    older: dropped, never flushed."""
    cache = node.cache
    dropped = 0
    if cache is not None:
        for bucket in [b.name for b in await node.local.list_buckets()]:
            for entry in cache.dirty_snapshot(bucket):
                dropped += await cache.discard(entry.bucket, entry.key)
            await cache.drop_clean(bucket)
    log.error("cluster membership %d removed this member while it was down: %d "
              "unflushed records it held are dropped (the members that stayed took its "
              "writes over); it forwards client requests from now on", version, dropped)
