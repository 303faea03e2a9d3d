"""A watched member list (``--peers-file PATH``): the file names the members, and the
cluster follows it with live membership changes (docs/cluster.md, "A watched member
list"; the Helm chart's StatefulSet writes it from its replica count).

* The file holds member URLs, separated by commas, spaces or new lines (``#`` starts a
  comment). At start it is the member list, as ``--peers`` would be.
* A member started from the file while other members already run without it (they
  report a member list it is not in) joins: its list is theirs, then itself, and it
  serves nothing until it is added. It looks again every round until then (the list
  may grow meanwhile).
* Every round (the health interval) each member reads the file; the *coordinator*, the
  member of the current list that stays in the file with the lowest node id among those
  that are up, turns one difference into a change: first a removal (the highest node id
  first), else an addition (in the file's order, once the member answers as joining).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.errors import StorageError
from gateway.background import BackgroundLoop
from gateway.cluster.health import Health
from gateway.cluster.ring import fingerprint
from gateway.cluster.settings import read_members

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode

log = logging.getLogger("squall.cluster")


class MemberFile:
    """Follows the member file: joining at start, changes by the coordinator."""

    def __init__(self, node: ClusterNode, path: Path, *, interval_s: float) -> None:
        self._node = node
        self.path = path
        self._interval = interval_s
        self._loop = BackgroundLoop(self._run, "cluster-member-file")
        self._complaint = ""  # the last problem logged (each one once)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    # -- start -------------------------------------------------------------------------
    async def find_cluster(self) -> None:
        """Before serving: if members already run without this one, join them."""
        running = await self._running_members()
        node = self._node
        me = node.ring.self_url
        if running is None or me in running:
            return  # the first members (or a restart): the file's list is the list
        log.warning("members %s run without this member: it joins them (it is added by "
                    "the member that coordinates the member file)", ", ".join(running))
        node.membership.joining = True
        node.membership.gate.clear()
        node.apply((*running, me), len(running))

    async def _running_members(self) -> tuple[str, ...] | None:
        """The member list the other members report (a stable one), None if none does."""
        node = self._node
        for index in range(len(node.ring.members)):
            if index == node.ring.self_index:
                continue
            view = await ring_view(node, index)
            if view is not None and view.get("membership") in ("stable", "changing"):
                return tuple(str(m["url"]) for m in view.get("members", []))
        return None

    # -- every round ---------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.follow()
            except Exception as exc:  # noqa: BLE001 - tried again at the next round
                self._complain(f"following the member file {self.path} failed: {exc}")

    async def follow(self) -> None:
        """One round: re-join (while joining), or one change towards the file's list."""
        membership = self._node.membership
        if membership.left or membership.pending is not None:
            return
        if membership.joining:
            await self._rejoin()
            return
        try:
            wanted = await asyncio.to_thread(read_members, self.path)
        except (OSError, ValueError) as exc:
            self._complain(f"the member file {self.path} cannot be read: {exc}")
            return
        current = self._node.ring.members
        if set(wanted) == set(current) or not self._coordinates(current, wanted):
            self._complaint = ""
            return
        gone = [m for m in current if m not in wanted]
        if gone:
            await self._change("remove", gone[-1])
            return
        for url in wanted:
            if url not in current:
                if await self._joining(current, url):
                    await self._change("add", url)
                else:
                    self._complain(f"member {url} of {self.path} does not answer as a "
                                   "joining member yet")
                return

    def _coordinates(self, current: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
        node = self._node
        me = node.ring.self_index
        for index, url in enumerate(current):
            if url not in wanted:
                continue
            if index == me:
                return True
            state = node.health.states.get(index)
            if state is not None and state.health is Health.UP:
                return False  # a member before this one coordinates
        return False

    async def _change(self, action: str, url: str) -> None:
        log.warning("member file %s: %s %s", self.path, action, url)
        view = await self._node.membership.change(action, url)
        log.warning("cluster membership %s: %s", view["version"],
                    ", ".join(view["members"]))
        self._complaint = ""

    async def _joining(self, current: tuple[str, ...], url: str) -> bool:
        """Whether ``url`` answers as a member waiting to join ``current``."""
        node = self._node
        new = (*current, url)
        node.transport.set_members(new, node.ring.self_index)
        view = await ring_view(node, len(current), ring_id=fingerprint(new))
        return view is not None and view.get("membership") == "joining" \
            and view.get("ring_id") == fingerprint(new)

    async def _rejoin(self) -> None:
        """Still waiting to be added: follow the list the members run now."""
        node = self._node
        running = await self._running_members()
        me = node.ring.self_url
        if running is None or me in running or (*running, me) == node.ring.members:
            return
        log.warning("the members run %s now: this member waits to join that list",
                    ", ".join(running))
        node.apply((*running, me), len(running))

    def _complain(self, message: str) -> None:
        if message != self._complaint:
            log.warning("%s", message)
            self._complaint = message


async def ring_view(node: ClusterNode, index: int, *, ring_id: str | None = None
                     ) -> dict[str, Any] | None:
    """``GET /_squall/cluster`` of member ``index``, None if it does not answer one."""
    transport = node.transport
    try:
        response = await transport.open(index, "GET", b"/_squall/cluster", timeout=2.0,
                                         ring_id=ring_id)
        try:
            body = b"".join([c async for c in transport.body(index, response)])
        finally:
            await response.aclose()
    except StorageError:
        return None
    if response.status != 200:
        return None
    try:
        view = json.loads(body)
    except ValueError:
        return None
    return view if isinstance(view, dict) else None
