"""``squall calibrate``: measure B_M(x) and D_M(x) against a running gateway (III-C/D).

For every cache size M and data size x asked for, the command waits until the gateway is
quiet (nothing dirty, no elastic volume attached), sizes the next elastic volume M
(``POST /_squall/elastic/next-size``, signed), writes x bytes with ``writers`` parallel
writers (objects of ``object_size``, sent as UNSIGNED-PAYLOAD), and records

* B_M(x) = x / (time until the last write was acknowledged), in MB/s;
* D_M(x) = how long the volume(s) of that burst stayed attached, in seconds (from the
  gateway's ``elastic.bursts`` once it detached again; 0 without elastic capacity).

It then deletes what it wrote. A gateway without elastic capacity (static-slow or
static-fast) is measured once per x with ``cache_gb = 0``. The result is one
configuration of the calibration file that ``squall predict`` and ``squall advise`` read
(docs/cost-model.md); ``--append`` adds or replaces it in an existing file.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from gateway.client.credentials import Credentials
from gateway.client.failures import ClientFailure, Refused, json_of, reaching
from gateway.client.sigv4 import DEFAULT_REGION, Signer, object_path, query_string
from gateway.cost.calibration import FORMAT, VERSION, CalibrationPoint, parse_calibration
from gateway.cost.model import BYTES_PER_GB, BYTES_PER_MB


class CalibrationFailed(ClientFailure):
    """The gateway did not become quiet in time (a refusal is a ``Refused``, an
    unreachable gateway ``Unreachable``: :mod:`gateway.client.failures`)."""


class GatewayClient:
    """The few signed requests calibration needs (one ``httpx.Client`` per thread)."""

    def __init__(self, endpoint: str, credentials: Credentials, region: str = DEFAULT_REGION,
                 timeout: float = 300.0, *, verify: ssl.SSLContext | bool = True) -> None:
        self.endpoint = endpoint.rstrip("/")
        # The payload is not hashed (UNSIGNED-PAYLOAD, as SDKs do over TLS): calibration
        # measures the gateway, not the client's SHA-256.
        self._signer = Signer(credentials, region)
        self._timeout = timeout
        self._verify = verify
        self._local = threading.local()

    def _client(self) -> httpx.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(timeout=self._timeout,
                                                       verify=self._verify)
        return client

    def request(self, method: str, path: str, *, content: bytes = b"",
                params: dict[str, str] | None = None) -> httpx.Response:
        """A signed request; Refused for an error answer (but 409 to a CreateBucket: the
        bucket is there), Unreachable when the gateway cannot be reached."""
        query = query_string(params)
        url = f"{self.endpoint}{path}" + (f"?{query}" if query else "")
        with reaching(self.endpoint):
            response = self._client().request(method, url, content=content,
                                              headers=self._signer.sign(method, url))
        if response.status_code >= 300 and not (method == "PUT" and path.count("/") == 1
                                                and response.status_code == 409):
            raise Refused.of(response, what=f"{method} {path}")
        return response

    def status(self) -> dict[str, Any]:
        data = json_of(self.request("GET", "/_squall/status"))  # signed
        if not isinstance(data, dict):
            raise CalibrationFailed("/_squall/status did not return an object")
        return data


def elastic(status: dict[str, Any]) -> bool:
    return status.get("cache_mode") == "elastic"


def wait_quiet(gw: GatewayClient, timeout_s: float, poll_s: float = 0.2) -> dict[str, Any]:
    """Wait until nothing is dirty and no elastic volume is attached; the last status."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = gw.status()
        if not status.get("dirty_bytes") and not (
                elastic(status) and (status.get("cache_volumes")
                                     or status.get("elastic", {}).get("state") != "idle")):
            return status
        if time.monotonic() > deadline:
            raise CalibrationFailed(f"the gateway was not quiet after {timeout_s:g} s "
                                    f"(dirty {status.get('dirty_bytes')} bytes)")
        time.sleep(poll_s)


def write_dataset(gw: GatewayClient, bucket: str, prefix: str, total: int, *, writers: int,
                  object_size: int, on_bytes: Callable[[int], None] | None = None
                  ) -> tuple[float, list[str]]:
    """Write ``total`` bytes split among ``writers`` parallel writers, each one object at a
    time; return the seconds until the last write was acknowledged, and the keys."""
    share = [total // writers + (1 if i < total % writers else 0) for i in range(writers)]
    block = os.urandom(min(object_size, max(share)) or 1)
    keys: list[list[str]] = [[] for _ in range(writers)]

    def writer(i: int) -> None:
        left, n = share[i], 0
        while left > 0:
            size = min(object_size, left)
            key = f"{prefix}/w{i:03d}/{n:05d}"
            gw.request("PUT", object_path(bucket, key), content=block[:size])
            keys[i].append(key)
            left -= size
            n += 1
            if on_bytes is not None:
                on_bytes(size)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=writers) as pool:
        for future in [pool.submit(writer, i) for i in range(writers)]:
            future.result()
    return time.perf_counter() - started, [k for per in keys for k in per]


def attached_seconds(status: dict[str, Any], since_wall: float) -> float:
    """Seconds the gateway's elastic volumes stayed attached, for bursts since then."""
    total = 0.0
    for burst in status.get("elastic", {}).get("bursts", []):
        if burst.get("detached_at") is not None and burst["attached_at"] >= since_wall:
            total += burst["detached_at"] - burst["attached_at"]
    return total


@dataclass(frozen=True, slots=True)
class Plan:
    sizes: Sequence[int]  # x, bytes
    cache_sizes: Sequence[int]  # M, bytes
    writers: int = 4
    object_size: int = 8 << 20
    bucket: str = "squall-calibration"
    quiet_timeout_s: float = 600.0


def measure_point(gw: GatewayClient, plan: Plan, x: int, m: int | None,
                  on_bytes: Callable[[int], None] | None = None) -> CalibrationPoint:
    """One point: B_M(x) and D_M(x) (``m`` None: a gateway without elastic capacity)."""
    wait_quiet(gw, plan.quiet_timeout_s)
    if m is not None:
        gw.request("POST", "/_squall/elastic/next-size", params={"size": str(m)})
    since = time.time()
    seconds, keys = write_dataset(gw, plan.bucket, f"x{x}-m{m or 0}-{int(since)}", x,
                                  writers=plan.writers, object_size=plan.object_size,
                                  on_bytes=on_bytes)
    status = wait_quiet(gw, plan.quiet_timeout_s)
    attach = attached_seconds(status, since - 1.0) if m is not None else 0.0
    for key in keys:
        gw.request("DELETE", object_path(plan.bucket, key))
    return CalibrationPoint(cache_gb=(m or 0) / BYTES_PER_GB, dataset_gb=x / BYTES_PER_GB,
                            throughput_mb_s=x / BYTES_PER_MB / seconds, attach_s=attach)


def calibrate(gw: GatewayClient, plan: Plan, *, progress: Any = None) -> list[CalibrationPoint]:
    """Every point of ``plan`` (cache sizes are ignored without elastic capacity)."""
    if plan.writers < 1 or plan.object_size < 1:
        raise ValueError("writers and object size must be >= 1")
    if not plan.sizes or any(x <= 0 for x in plan.sizes):
        raise ValueError("data sizes must be > 0")
    status = gw.status()
    caches: list[int | None] = list(plan.cache_sizes) if elastic(status) else [None]
    if elastic(status) and (not caches or any(c is None or c <= 0 for c in caches)):
        raise ValueError("an elastic gateway needs --cache-sizes > 0")
    gw.request("PUT", object_path(plan.bucket))  # 409: already there
    lock = threading.Lock()

    def on_bytes(n: int) -> None:
        if progress is not None:
            with lock:
                progress.update(n)

    return [measure_point(gw, plan, x, m, on_bytes) for m in caches for x in plan.sizes]


def configuration(status: dict[str, Any], points: Sequence[CalibrationPoint], *, name: str,
                  providers: int, backend_bandwidth_mb_s: float | None,
                  backend_size_gb: float | None,
                  cache_bandwidth_mb_s: float | None) -> dict[str, Any]:
    """One configuration of the calibration file; gaps filled from the gateway status."""
    cost = status.get("cost") or {}
    throttle = status.get("backend_throttle") or {}
    b_b = backend_bandwidth_mb_s
    if b_b is None and cost.get("backend_bandwidth_mb_s"):  # the estimate, else the throttle
        b_b = float(cost["backend_bandwidth_mb_s"])
    if b_b is None and throttle.get("bandwidth_bytes_per_s"):
        b_b = throttle["bandwidth_bytes_per_s"] / BYTES_PER_MB
    if b_b is None:
        raise ValueError("the gateway reports no backend bandwidth: give "
                         "--backend-bandwidth-mb-s (B_b)")
    n = backend_size_gb if backend_size_gb is not None else cost.get("backend_size_gb")
    if n is None:
        raise ValueError("the gateway reports no backing store size: give --backend-size-gb")
    b_c = cache_bandwidth_mb_s if cache_bandwidth_mb_s is not None else \
        cost.get("cache_bandwidth_mb_s", 0.0)
    return {"name": name, "backend": (status.get("backend") or {}).get("kind", "posix"),
            "providers": providers, "backend_bandwidth_mb_s": b_b, "backend_size_gb": n,
            "cache_bandwidth_mb_s": b_c if elastic(status) else 0.0,
            "points": [asdict(p) for p in points]}


def save(path: Path, config: dict[str, Any], *, append: bool) -> None:
    """Write (or, with ``append``, merge by name into) a calibration file, validated."""
    configs: list[dict[str, Any]] = []
    if append and path.exists():
        doc = json.loads(path.read_text())
        parse_calibration(doc)
        configs = [c for c in doc["configurations"] if c.get("name") != config["name"]]
    doc = {"format": FORMAT, "version": VERSION, "configurations": [*configs, config]}
    parse_calibration(doc)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)
