"""The shared port's view of the whole gateway: the admin routes answered for all workers.

A worker serves the shared port through :class:`WorkerFront`, in front of its own
application (the cluster layer, then the S3 dispatcher). Whichever worker the kernel
gave the connection to:

* ``GET /_squall/health`` asks every worker; 200 only when all are up.
* ``GET /_squall/status`` is this worker's status with ``"worker": {"id", "count",
  "pid"}`` and the whole gateway's backend throttle (each worker holds a 1/N share);
  ``?workers=all`` adds every worker's status (``"workers": [...]``).
* ``GET /_squall/metrics`` is every worker's metrics, each sample labelled
  ``worker="K"``, plus ``squall_worker_up``.
* ``POST /_squall/sync`` runs on every worker (each checks the client's signature) and
  reports the sum of their progress; flushed only when all are.
* ``GET /_squall/ui/data`` (the dashboard's) is every worker's, merged
  (gateway/dashboard/merge.py).
* ``GET /_squall/cluster`` describes one gateway (no members to route to: the workers
  share the port, a client cannot choose one), or in a cluster of hosts the hosts (a
  client routes to the key's host, which passes the request to the key's worker).
* A request from another host's member (a peer marker) goes to the worker it is signed
  for (:mod:`gateway.http.workers.relay`).

Status, metrics, cluster and dashboard views answer only what the status gate allows
(gateway/auth/status.py); requests between workers, on their Unix sockets, are trusted.

Everything else, S3 requests included, goes to the worker's application unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backends.core.errors import ServiceUnavailable
from gateway.auth.status import TRUSTED, StatusGate, is_status_path
from gateway.cluster.node import describe_single
from gateway.cluster.peer_api import request_body
from gateway.cluster.peerauth import HEADER_BYTES
from gateway.http.workers.dashboard import front_routes
from gateway.http.workers.handover import HandoverStats
from gateway.http.workers.host import HostWorkers
from gateway.http.workers.links import ERRORS, HOP_BY_HOP, Answer, WorkerLinks, describe
from gateway.http.workers.relay import WorkerRelay
from gateway.protocol.admin_errors import admin_error

HEALTH_TIMEOUT_S = 2.0
PROGRESS_INTERVAL_S = 0.5
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


class WorkerFront:
    """ASGI: the whole gateway's admin views; everything else goes to ``inner``."""

    def __init__(self, inner: ASGIApp, *, index: int, links: WorkerLinks,
                 status: Callable[[], dict[str, Any]], fan_out: bool = True,
                 gate: StatusGate | None = None,
                 relay: tuple[HostWorkers, WorkerRelay] | None = None,
                 ring_view: Callable[[], dict[str, Any]] = describe_single) -> None:
        """``fan_out=False``: the view on a worker's own Unix socket, where only the
        status is changed (it names the worker); the rest is the worker's own, and
        trusted (only the other workers reach that socket). ``gate``: who may read the
        status views on the shared port (docs/security.md). ``relay``: a cluster of
        hosts, whose peer requests go to the worker they are signed for; ``ring_view``:
        what ``/_squall/cluster`` tells clients (its hosts, in a cluster of hosts)."""
        self._inner = inner
        self._ring_view = ring_view
        self._relay = relay
        self._gate = gate
        self._index = index
        self._links = links
        self._status = status
        self._fan_out = fan_out
        self._routes: dict[tuple[str, str], Handler] = {}
        for method in ("GET", "HEAD"):
            self._routes[(method, "/_squall/status")] = self.status
            if fan_out:
                self._routes[(method, "/_squall/health")] = self.health
                self._routes[(method, "/_squall/metrics")] = self.metrics
                self._routes[(method, "/_squall/cluster")] = self.cluster
        if fan_out:
            self._routes[("POST", "/_squall/sync")] = self.sync
            self._routes[("POST", "/_squall/cluster/leave")] = self.leave
            self._routes.update(front_routes(links, index))  # /_squall/ui/data, merged

    #: this worker's connection hand-over counters, when hand-over is on
    handover: HandoverStats | None = None

    @property
    def identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = {"id": self._index, "count": self._links.count,
                                    "pid": os.getpid()}
        if self.handover is not None:
            identity["handover"] = dataclasses.asdict(self.handover)
        return identity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self._relay is not None and (marker := next(
                    (v for n, v in scope["headers"] if n == HEADER_BYTES), None)):
                host, relay = self._relay  # another host's member: not a client view
                worker = host.addressed(marker)
                if worker is None or worker == self._index:
                    await self._inner(scope, receive, send)
                else:
                    await relay(worker, scope, receive, send)
                return
            if not self._fan_out:
                scope = {**scope, TRUSTED: True}
            handler = self._routes.get((scope["method"], scope["path"]))
            if handler is not None:
                if self._gate is not None and is_status_path(scope["path"]):
                    await self._gate.serve(scope, receive, send, handler)
                    return
                await handler(scope, receive, send)
                return
        await self._inner(scope, receive, send)

    async def health(self, scope: Scope, receive: Receive, send: Send) -> None:
        answers = await self._links.get_all("/_squall/health", timeout_s=HEALTH_TIMEOUT_S)
        workers = [_health_of(w, a) for w, a in enumerate(answers)]
        up = all(w["status"] == "up" for w in workers)
        body: dict[str, Any] = {"status": "ok" if up else "degraded", "worker": self._index,
                                "workers": workers}
        reasons = [f"worker {w['worker']}: {w['reason']}" for w in workers if "reason" in w]
        if reasons:
            body["reason"] = "; ".join(reasons)
        await JSONResponse(body, status_code=200 if up else 503)(scope, receive, send)

    async def status(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = {**self._status(), "worker": self.identity}
        if self._fan_out and (throttle := body.get("backend_throttle")) is not None:
            body["backend_throttle"] = gateway_throttle(throttle, self._links.count)
        query = urllib.parse.parse_qs(scope["query_string"].decode("latin-1"))
        if query.get("workers") == ["all"]:
            answers = await self._links.get_all("/_squall/status")
            body["workers"] = [_status_of(w, a) for w, a in enumerate(answers)]
        await JSONResponse(body)(scope, receive, send)

    async def metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        answers = await self._links.get_all("/_squall/metrics")
        text = merge_metrics(answers)
        await Response(text, media_type="text/plain; version=0.0.4")(scope, receive, send)

    async def cluster(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = {**self._ring_view(), "worker": self.identity}
        await JSONResponse(body)(scope, receive, send)

    async def sync(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Every worker flushes; their NDJSON progress lines are summed."""
        async def answer(responses: list[aiohttp.ClientResponse]) -> Response:
            return StreamingResponse(sync_lines(responses), media_type="application/x-ndjson")
        await self._to_every_worker(scope, receive, send, answer)

    async def leave(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Every worker leaves the cluster (each is a member of its own)."""
        async def answer(responses: list[aiohttp.ClientResponse]) -> Response:
            views = [await r.json() for r in responses]
            return JSONResponse({**views[0], "workers": views})
        await self._to_every_worker(scope, receive, send, answer)

    async def _to_every_worker(
            self, scope: Scope, receive: Receive, send: Send,
            answer: Callable[[list[aiohttp.ClientResponse]], Awaitable[Response]]) -> None:
        """The request, body included, sent to every worker at once; the first refusal
        is the answer, else ``answer(responses)``."""
        body = b"".join([chunk async for chunk in request_body(receive)])
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in scope["headers"]
                   if n not in HOP_BY_HOP]
        opened = await asyncio.gather(*(self._open_sync(w, target, headers, body)
                                        for w in range(self._links.count)))
        try:
            failed = next((r for r in opened if not isinstance(r, aiohttp.ClientResponse)
                           or r.status != 200), None)
            if failed is not None:
                await _refusal(failed)(scope, receive, send)
                return
            responses = [r for r in opened if isinstance(r, aiohttp.ClientResponse)]
            await (await answer(responses))(scope, receive, send)
        finally:
            for response in opened:
                if isinstance(response, aiohttp.ClientResponse):
                    response.release()

    async def _open_sync(self, worker: int, target: str, headers: list[tuple[str, str]],
                         body: bytes) -> aiohttp.ClientResponse | str:
        try:
            return await self._links.session(worker).post(
                self._links.url(worker, target), headers=headers, data=body,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=None))
        except ERRORS as exc:
            return f"worker {worker} is unavailable ({describe(exc)})"


def _health_of(worker: int, answer: Answer) -> dict[str, Any]:
    if answer.status == 200:
        return {"worker": worker, "status": "up"}
    if answer.status:
        reason = None
        with contextlib.suppress(ValueError, AttributeError):
            reason = json.loads(answer.body).get("reason")
        if reason:  # up, but cannot acknowledge writes (a full index disk, ...)
            return {"worker": worker, "status": "unhealthy", "reason": reason}
        return {"worker": worker, "status": "starting"}
    return {"worker": worker, "status": "down", "error": answer.error}


def _status_of(worker: int, answer: Answer) -> dict[str, Any]:
    if answer.status == 200:
        with contextlib.suppress(ValueError):
            return dict(json.loads(answer.body))
    return {"worker": {"id": worker}, "error": answer.error or f"HTTP {answer.status}"}


def _refusal(failed: aiohttp.ClientResponse | str) -> Response:
    if isinstance(failed, str):
        return admin_error(ServiceUnavailable(failed, public=True))

    async def passed_on() -> AsyncIterator[bytes]:
        async for chunk in failed.content.iter_any():
            yield chunk
    return StreamingResponse(passed_on(), status_code=failed.status,
                             media_type=failed.headers.get("content-type"))


def gateway_throttle(share: dict[str, Any], count: int) -> dict[str, Any]:
    """The whole gateway's backend throttle from one worker's 1/``count`` share."""
    return {name: None if value is None else value * count for name, value in share.items()}


async def sync_lines(responses: Sequence[aiohttp.ClientResponse]) -> AsyncIterator[bytes]:
    """The workers' progress lines summed every half second, then the joint outcome."""
    progress = [{"done": 0, "total": 0} for _ in responses]
    outcomes: list[dict[str, Any] | None] = [None] * len(responses)

    async def pump(worker: int, response: aiohttp.ClientResponse) -> None:
        try:
            async for line in response.content:
                if not line.strip():
                    continue
                doc = json.loads(line)
                progress[worker] = {"done": int(doc.get("done", 0)),
                                    "total": int(doc.get("total", 0))}
                if "flushed" in doc:
                    outcomes[worker] = doc
        except (*ERRORS, ValueError) as exc:
            outcomes[worker] = {"flushed": False, "error": "ServiceUnavailable",
                                "message": f"worker {worker} broke off ({describe(exc)})"}

    tasks = [asyncio.ensure_future(pump(w, r)) for w, r in enumerate(responses)]
    try:
        while True:
            _, pending = await asyncio.wait(tasks, timeout=PROGRESS_INTERVAL_S)
            if not pending:
                break
            yield (json.dumps(_sum(progress)) + "\n").encode()
    finally:
        for task in tasks:
            task.cancel()
    failure = next(((w, o) for w, o in enumerate(outcomes)
                    if o is None or o.get("flushed") is not True), None)
    if failure is None:
        yield (json.dumps({"flushed": True, **_sum(progress)}) + "\n").encode()
        return
    worker, outcome = failure
    outcome = outcome or {"error": "ServiceUnavailable", "message": "no outcome"}
    joint = {"flushed": False, "error": outcome.get("error"),
             "message": f"worker {worker}: {outcome.get('message')}"}
    held = [q for o in outcomes if o for q in o.get("quarantined", [])]
    if held:  # every worker's refused flushes, not only the first failure's
        joint["quarantined"] = held[:100]
    yield (json.dumps(joint) + "\n").encode()


def _sum(progress: Iterable[dict[str, int]]) -> dict[str, int]:
    rows = list(progress)
    return {"done": sum(p["done"] for p in rows), "total": sum(p["total"] for p in rows)}


def merge_metrics(answers: Sequence[Answer]) -> bytes:
    """The workers' Prometheus expositions as one, every sample labelled with its worker
    (families kept whole, as the text format requires)."""
    families: dict[str, Metric] = {}
    up = GaugeMetricFamily("squall_worker_up", "1 if the worker answered this scrape",
                           labels=["worker"])
    for worker, answer in enumerate(answers):
        try:
            parsed = list(text_string_to_metric_families(answer.body.decode("utf-8"))) \
                if answer.status == 200 else None
        except ValueError:  # UnicodeDecodeError included
            parsed = None
        up.add_metric([str(worker)], 0.0 if parsed is None else 1.0)
        for family in parsed or ():
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(family.name, family.documentation,
                                                        family.type, family.unit)
            for sample in family.samples:
                merged.add_sample(sample.name, {**sample.labels, "worker": str(worker)},
                                  sample.value, sample.timestamp, sample.exemplar)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families([*families.values(), up]))
    return generate_latest(registry)


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families
