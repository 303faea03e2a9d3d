"""The whole gateway's dashboard document from its workers'."""

from __future__ import annotations

from typing import Any

from gateway.dashboard.merge import merge


def worker(phase: str, dirty: int, *, ingest: float | None, errors: list[dict[str, Any]],
           cost: float = 1.0, reachable: bool = True) -> dict[str, Any]:
    return {
        "format": 1, "time": 1000.0, "ready": True, "uptime_s": 5.0, "workers": 1,
        "backend": {"kind": "posix", "reachable": reachable,
                    "reason": None if reachable else "disk gone"},
        "cache": {"mode": "static", "phase": phase, "used_bytes": dirty + 10,
                  "capacity_bytes": 100, "dirty_bytes": dirty, "dirty_objects": 1,
                  "oldest_dirty_age_s": dirty / 10, "flush_inflight": 0,
                  "quarantined_objects": 0, "uploads": 0, "ingest_bytes_total": 5,
                  "flush_bytes_total": 3, "writearound_bytes_total": 0,
                  "flush_errors_total": 0, "elastic_state": None,
                  "volumes": [{"id": "v", "provider": "static", "size_bytes": 100,
                               "used_bytes": dirty + 10, "state": "active"}]},
        "rates": {"ingest_bytes_per_s": ingest, "flush_bytes_per_s": None,
                  "writearound_bytes_per_s": 0.0},
        "cost": {"unit": "AGBs", "agbs": cost, "backend_agbs": cost, "cache_agbs": 0.0,
                 "elapsed_s": 5.0},
        "qos": None, "members": [], "errors": errors, "errors_total": len(errors),
        "slowdowns": 1,
    }


def error(t: float, key: str) -> dict[str, Any]:
    return {"time": t, "operation": "GetObject", "resource": f"/b/{key}",
            "code": "NoSuchKey", "status": 404}


def test_sums_and_the_busiest_phase() -> None:
    docs = [worker("idle", 0, ingest=None, errors=[error(1.0, "a")]),
            worker("phase1", 40, ingest=300.0, errors=[error(3.0, "b"), error(2.0, "c")],
                   reachable=False),
            None]
    merged = merge(docs, [None, None, "not running (connection refused)"], answering=1)
    assert merged["workers"] == 3 and merged["ready"] is False
    cache = merged["cache"]
    assert cache["phase"] == "phase1"
    assert cache["dirty_bytes"] == 40 and cache["capacity_bytes"] == 200
    assert cache["oldest_dirty_age_s"] == 4.0
    assert [v["worker"] for v in cache["volumes"]] == [0, 1]
    assert merged["rates"] == {"ingest_bytes_per_s": 300.0, "flush_bytes_per_s": None,
                               "writearound_bytes_per_s": 0.0}
    assert merged["cost"]["agbs"] == 2.0
    assert merged["backend"] == {"kind": "posix", "reachable": False, "reason": "disk gone"}
    assert [(e["resource"], e["worker"]) for e in merged["errors"]] == [
        ("/b/b", 1), ("/b/c", 1), ("/b/a", 0)]
    assert merged["errors_total"] == 3 and merged["slowdowns"] == 2
    members = merged["members"]
    assert [m["health"] for m in members] == ["up", "up", "down"]
    assert members[2]["error"] == "not running (connection refused)"
    assert [m["self"] for m in members] == [False, True, False]
    assert all(abs(m["key_share"] - 1 / 3) < 1e-9 for m in members)
    assert members[1]["dirty_bytes"] == 40 and members[1]["phase"] == "phase1"


def test_no_cache_anywhere() -> None:
    doc = {**worker("idle", 0, ingest=None, errors=[]), "cache": None, "cost": None}
    merged = merge([doc, doc], [None, None], answering=0)
    assert merged["cache"] is None and merged["cost"] is None
