"""The whole gateway's dashboard document from its workers' (``squall serve --workers N``).

Byte counts, rates, costs and counters are summed; the flush phase is the busiest
worker's; errors are merged newest first; each worker becomes a member row with its own
health, key share and cache figures. A worker that did not answer is a member ``down``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.dashboard.snapshot import FORMAT, RATE_COUNTERS
from gateway.metrics import RECENT_ERRORS

_PHASES = ("phase1", "phase2", "idle")  # busiest first
_SUMMED_CACHE = ("used_bytes", "capacity_bytes", "dirty_bytes", "dirty_objects",
                 "flush_inflight", "quarantined_objects", "uploads", "ingest_bytes_total",
                 "flush_bytes_total", "writearound_bytes_total", "flush_errors_total")
_SUMMED_COST = ("agbs", "backend_agbs", "cache_agbs")


def merge(docs: Sequence[dict[str, Any] | None], errors: Sequence[str | None],
          *, answering: int) -> dict[str, Any]:
    """``docs[k]``: worker k's document, None when it did not answer (``errors[k]`` says
    why); ``answering``: the worker serving this request (its clock and identity)."""
    up = [d for d in docs if d is not None]
    base = docs[answering] or (up[0] if up else {})
    caches = [(k, d["cache"]) for k, d in enumerate(docs) if d and d.get("cache")]
    merged: dict[str, Any] = {
        "format": FORMAT,
        "time": base.get("time"),
        "ready": len(up) == len(docs) and all(d.get("ready") for d in up),
        "uptime_s": base.get("uptime_s", 0.0),
        "workers": len(docs),
        "backend": _backend(up),
        "cache": _cache(caches) if caches else None,
        "rates": {r: _sum(d.get("rates", {}).get(r) for d in up) for r in RATE_COUNTERS},
        "cost": _cost([d["cost"] for d in up if d.get("cost")]),
        "qos": base.get("qos"),
        "members": [_member(k, d, errors[k], len(docs), k == answering)
                    for k, d in enumerate(docs)],
        "errors": sorted(({**e, "worker": k} for k, d in enumerate(docs) if d
                          for e in d.get("errors", [])),
                         key=lambda e: -e["time"])[:RECENT_ERRORS],
        "errors_total": sum(int(d.get("errors_total", 0)) for d in up),
        "slowdowns": sum(int(d.get("slowdowns", 0)) for d in up),
    }
    return merged


def _sum(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _backend(up: list[dict[str, Any]]) -> dict[str, Any]:
    backends = [d.get("backend", {}) for d in up]
    broken = next((b for b in backends if not b.get("reachable", True)), None)
    first = backends[0] if backends else {}
    return {"kind": first.get("kind"), "reachable": broken is None,
            "reason": broken.get("reason") if broken else None}


def _cache(indexed: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    caches = [c for _, c in indexed]
    phases = {c.get("phase") for c in caches}
    states = sorted({c["elastic_state"] for c in caches if c.get("elastic_state")})
    return {
        "mode": caches[0].get("mode", "static"),
        "phase": next((p for p in _PHASES if p in phases), "idle"),
        **{name: sum(c.get(name) or 0 for c in caches) for name in _SUMMED_CACHE},
        "oldest_dirty_age_s": max(c.get("oldest_dirty_age_s") or 0.0 for c in caches),
        "elastic_state": ", ".join(states) if states else None,
        "volumes": [{**v, "worker": k} for k, c in indexed
                    for v in c.get("volumes", [])],
    }


def _cost(costs: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not costs:
        return None
    return {"unit": costs[0].get("unit"),
            **{name: sum(c.get(name) or 0.0 for c in costs) for name in _SUMMED_COST},
            "elapsed_s": max(c.get("elapsed_s") or 0.0 for c in costs)}


def _member(worker: int, doc: dict[str, Any] | None, error: str | None, count: int,
            answering: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"name": f"worker-{worker}", "self": answering,
                           "key_share": 1 / count}
    if doc is None:
        return {**row, "health": "down", "error": error}
    cache = doc.get("cache") or {}
    return {**row, "health": "up" if doc.get("ready") else "starting", "error": None,
            "phase": cache.get("phase"), "dirty_bytes": cache.get("dirty_bytes"),
            "used_bytes": cache.get("used_bytes"),
            "ingest_bytes_per_s": doc.get("rates", {}).get("ingest_bytes_per_s")}
