"""``squall top`` frames from documents (no gateway): the optional sections."""

from __future__ import annotations

import io

from rich.console import Console

from gateway.commands.top import frame
from tests.gateway.dashboard.test_merge import worker


def render(doc: dict[str, object]) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(frame(doc, "http://gw:9000"))
    return console.export_text()


def test_qos_gears_appear_when_the_status_has_them() -> None:
    doc = worker("phase1", 10, ingest=5.0, errors=[])
    assert "QoS gears" not in render(doc)
    doc["qos"] = {"buckets": {"ckpt": {"gear": 3, "bandwidth_bytes_per_s": 800}}}
    out = render(doc)
    assert "QoS gears" in out and "ckpt" in out and "gear" in out and "800" in out


def test_no_cache_and_unreachable_backend() -> None:
    doc = {**worker("idle", 0, ingest=None, errors=[], reachable=False), "cache": None,
           "cost": None}
    out = render(doc)
    assert "none (requests go to the backend)" in out
    assert "unreachable: disk gone" in out and "no cost meter" in out
    assert "measuring" in out  # no rates yet
