"""The providers of one store: membership, placement of chunks and records, elasticity.

Membership (every provider's id, path and state) is kept in ``members.json`` on every
provider, with an epoch that grows at each change; on open the highest epoch wins, so a
provider added while running is found again after a restart with the original spec.
New chunks go round-robin over the *active* providers from a random start per write,
passing over providers whose queue of writes is longer than the others'; standby
providers take data only once activated (by hand, or when ingest stays above the burst
threshold for the burst window).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.blobseer_like import format as fmt
from backends.blobseer_like.config import BlobseerConfig
from backends.blobseer_like.provider import Provider, ProviderError
from backends.core.base import ProviderInfo
from backends.core.blocking import run_blocking
from backends.files import read_small

log = logging.getLogger("squall.blobseer")
ACTIVE, STANDBY = "active", "standby"


@dataclass
class PoolStats:
    """Counters exported as metrics."""

    activations: int = 0  # standby providers activated by a write burst
    added: int = 0  # providers added while running
    ingest_bytes: int = 0
    ingest_rate: float = 0.0  # bytes/s over the last burst window


class ProviderPool:
    """Open, locked providers of one store; membership changes are serialised."""

    def __init__(self, config: BlobseerConfig, *, durable: bool) -> None:
        self.config = config
        self.durable = durable
        self.store_id = ""
        self.epoch = 0
        self.by_id: dict[str, Provider] = {}
        self.active: list[Provider] = []
        self.stats = PoolStats()
        self._change = asyncio.Lock()
        self._window_start = time.monotonic()
        self._window_bytes = 0
        self._over_since: float | None = None
        self._activating = False
        self._tasks: set[asyncio.Task[None]] = set()

    # -- open / close (blocking) -----------------------------------------------------

    def open(self) -> None:
        """Identify, format (new directories), lock and load membership; ProviderError."""
        cfg = self.config
        named = {**{p: ACTIVE for p in cfg.providers}, **{p: STANDBY for p in cfg.standby}}
        found = {path: Provider.identify(path) for path in named}
        stores = {ident[0] for ident in found.values() if ident is not None}
        if len(stores) > 1:
            raise ProviderError("the directories belong to different blobseer_like stores: "
                                + ", ".join(f"{p} ({i[0]})" for p, i in found.items() if i))
        self.store_id = stores.pop() if stores else fmt.new_id()
        members = self._load_members(p for p, i in found.items() if i is not None)
        for path, ident in found.items():
            if ident is None:
                provider_id = Provider.format(path, self.store_id, durable=self.durable)
                members[provider_id] = (str(path), named[path])
            elif ident[1] not in members:
                members[ident[1]] = (str(path), named[path])
            elif members[ident[1]][0] != str(path):
                # The same provider mounted elsewhere: take the path given now.
                members[ident[1]] = (str(path), members[ident[1]][1])
        try:
            for provider_id, (path_text, state) in sorted(members.items()):
                path = Path(path_text)
                ident = Provider.identify(path)
                if ident is None or ident != (self.store_id, provider_id):
                    raise ProviderError(
                        f"provider {provider_id} of this store is expected at {path}, but "
                        "that directory is missing or is another provider; mount it there "
                        "or name its new place in the backend spec")
                provider = Provider(path, provider_id, durable=self.durable, cap=cfg.cap,
                                    state=state)
                provider.lock()
                self.by_id[provider_id] = provider
                provider.clear_tmp()
        except BaseException:
            self.close()
            raise
        self.active = [p for p in self.by_id.values() if p.state == ACTIVE]
        if not self.active:
            raise ProviderError("the store has no active provider")
        self._save_members()

    def _load_members(self, paths: Iterable[Path]) -> dict[str, tuple[str, str]]:
        best: dict[str, Any] | None = None
        for path in paths:
            try:
                data = fmt.loads(read_small(Path(path) / fmt.MEMBERS), fmt.MEMBERS_MAGIC)
            except FileNotFoundError:
                continue
            except (OSError, fmt.FormatError) as exc:
                raise ProviderError(f"{path}: unreadable membership file: {exc}") from exc
            if best is None or int(data.get("epoch", 0)) > int(best.get("epoch", 0)):
                best = data
        if best is None:
            return {}
        self.epoch = int(best.get("epoch", 0))
        try:
            return {str(item["id"]): (str(item["path"]), str(item["state"]))
                    for item in best.get("providers", [])}
        except (KeyError, TypeError) as exc:
            raise ProviderError(f"malformed membership file: {exc}") from exc

    def _save_members(self) -> None:
        """Blocking: write the membership (epoch + 1) on every provider."""
        self.epoch += 1
        blob = fmt.dumps({"magic": fmt.MEMBERS_MAGIC, "v": fmt.VERSION, "store": self.store_id,
                          "epoch": self.epoch,
                          "providers": [{"id": p.id, "path": str(p.path), "state": p.state}
                                        for p in self.by_id.values()]})
        for provider in self.by_id.values():
            provider.write_file(provider.path / fmt.MEMBERS, blob)

    def close(self) -> None:
        for provider in self.by_id.values():
            provider.unlock()

    # -- placement ---------------------------------------------------------------------

    def start(self) -> int:
        """A random starting point for one write's round-robin placement."""
        return random.randrange(1 << 30)

    def place(self, start: int, index: int) -> Provider:
        """The provider of a write's ``index``-th chunk: round-robin from the write's
        start, except that a provider with a longer queue (counted in units of four
        chunks) is passed over, so a busy store steers new chunks to providers that keep
        up while a lone writer still stripes evenly."""
        active = self.active
        count = len(active)
        turn = (start + index) % count
        unit = 4 * self.config.chunk_size
        best = min(range(count), key=lambda i: (active[i].queued // unit, (i - turn) % count))
        return active[best]

    def replicas(self, name: str) -> list[Provider]:
        """The providers that keep record ``name`` (rendezvous hashing over active ones)."""
        def score(provider: Provider) -> bytes:
            return hashlib.blake2b(f"{provider.id}/{name}".encode(), digest_size=8).digest()
        ranked = sorted(self.active, key=score, reverse=True)
        return ranked[:max(1, min(self.config.replicas, len(ranked)))]

    def get(self, provider_id: str) -> Provider:
        provider = self.by_id.get(provider_id)
        if provider is None:
            raise ProviderError(f"provider {provider_id} is not a member of this store")
        return provider

    def fanout(self) -> int:
        return self.config.fanout or min(8, len(self.active))

    def infos(self) -> list[ProviderInfo]:
        return [ProviderInfo(p.id, str(p.path), p.state, p.cap) for p in self.by_id.values()]

    # -- elasticity --------------------------------------------------------------------

    async def add(self, path: Path, *, standby: bool = False) -> ProviderInfo:
        """Format and lock a new provider, then publish the new membership."""
        path = path.expanduser().absolute()  # noqa: ASYNC240  no I/O (getcwd only)
        async with self._change:
            if any(p.path == path for p in self.by_id.values()):
                raise ProviderError(f"{path} is already a provider of this store")
            provider = await run_blocking(self._format_new, path,
                                          STANDBY if standby else ACTIVE)
            self.by_id[provider.id] = provider
            await run_blocking(self._save_members)
            if not standby:
                self.active = [*self.active, provider]
            self.stats.added += 1
        log.info("provider %s added at %s (%s)", provider.id, path, provider.state)
        return ProviderInfo(provider.id, str(path), provider.state, provider.cap)

    def _format_new(self, path: Path, state: str) -> Provider:
        if Provider.identify(path) is not None:
            raise ProviderError(f"{path} is already a provider (of this or another store)")
        provider_id = Provider.format(path, self.store_id, durable=self.durable)
        provider = Provider(path, provider_id, durable=self.durable, cap=self.config.cap,
                            state=state)
        provider.lock()
        return provider

    async def activate(self, provider_id: str | None = None) -> ProviderInfo | None:
        """Make a standby provider (the first one, or ``provider_id``) active."""
        async with self._change:
            standby = [p for p in self.by_id.values() if p.state == STANDBY
                       and (provider_id is None or p.id == provider_id)]
            if not standby:
                return None
            provider = standby[0]
            provider.state = ACTIVE
            try:
                await run_blocking(self._save_members)
            except BaseException:
                provider.state = STANDBY
                raise
            self.active = [*self.active, provider]
        return ProviderInfo(provider.id, str(provider.path), provider.state, provider.cap)

    def note_ingest(self, nbytes: int) -> None:
        """Count written bytes; a burst above the threshold activates a standby provider."""
        self.stats.ingest_bytes += nbytes
        self._window_bytes += nbytes
        now = time.monotonic()
        elapsed = now - self._window_start
        window = self.config.burst_window
        if elapsed < min(window, 1.0):
            return
        rate = self._window_bytes / elapsed
        self.stats.ingest_rate = rate
        self._window_start, self._window_bytes = now, 0
        threshold = self.config.burst
        if threshold is None or rate <= threshold:
            self._over_since = None
            return
        if self._over_since is None:
            self._over_since = now - elapsed
        if now - self._over_since >= window and not self._activating:
            self._over_since = None
            self._activating = True
            task = asyncio.ensure_future(self._burst_activation(rate))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _burst_activation(self, rate: float) -> None:
        try:
            info = await self.activate()
            if info is not None:
                self.stats.activations += 1
                log.warning("write burst (%.0f MiB/s over the %s MiB/s threshold): standby "
                            "provider %s at %s activated", rate / 2**20,
                            f"{(self.config.burst or 0) / 2**20:.0f}", info.id, info.path)
        except Exception:  # logged: a failed activation must not fail the write that saw it
            log.exception("activating a standby provider failed")
        finally:
            self._activating = False

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
